"""Specs: the frozen description of a graph, and the checked plan derived from it.

A leaf of the package: ``config`` builds these from YAML, ``graph`` runs them, ``kernels`` and
``diagnostics`` read them, and this package imports none of those (only ``errors`` and the
shared ``_types``), so that they never import each other in a circle. ``build_plan`` checks a
``GraphSpec`` (every semantic rule of the YAML format) and returns its ``GraphPlan``.
"""

from ._plan import Diagnostic as Diagnostic
from ._plan import EdgePlan as EdgePlan
from ._plan import GraphPlan as GraphPlan
from ._plan import build_plan as build_plan
from ._specs import CONDITION_KINDS as CONDITION_KINDS
from ._specs import ConditionSpec as ConditionSpec
from ._specs import ExecutorSpec as ExecutorSpec
from ._specs import GraphSpec as GraphSpec
from ._specs import InputPolicySpec as InputPolicySpec
from ._specs import InputQueuesSpec as InputQueuesSpec
from ._specs import NodeSpec as NodeSpec
from ._specs import PortSpec as PortSpec
from ._specs import PredicateSpec as PredicateSpec
from ._specs import RouteRuleSpec as RouteRuleSpec
from ._specs import RouteSpec as RouteSpec

__all__ = [
    "CONDITION_KINDS",
    "ConditionSpec",
    "Diagnostic",
    "EdgePlan",
    "ExecutorSpec",
    "GraphPlan",
    "GraphSpec",
    "InputPolicySpec",
    "InputQueuesSpec",
    "NodeSpec",
    "PortSpec",
    "PredicateSpec",
    "RouteRuleSpec",
    "RouteSpec",
    "build_plan",
]
