"""The ``check-config`` report: a configuration-only preflight of a YAML graph file.

Parses, runs the graph's ``imports`` (so that one that fails is reported), resolves includes,
expands subgraphs and plans the graph without creating kernels or executors or starting threads
(so unknown kernel names are fine; a ``kernel: module:Class`` reference is imported and checked,
as an ``imports`` entry is). The report renders to
lm-flow's ``check-config --json`` object and to its text lines; the CLI only prints them.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Final, final

from .._types import PathLike
from ..errors import ConfigError
from ..spec._plan import GraphPlan
from ..spec._specs import DEFAULT_EXECUTOR, NodeSpec, PredicateSpec, RouteSpec

__all__ = ["CheckReport", "check_config", "describe_predicate"]

INVALID_ARGUMENT: Final = 1
"""lm-flow's numeric status for a configuration error (``InvalidArg``), used in failure JSON."""


def describe_predicate(pred: PredicateSpec) -> str:
    """A one-line summary of a route condition, as lm-flow prints it.

    >>> describe_predicate(PredicateSpec(kind="metadata", key="confidence", op="gte", value=0.8))
    'confidence gte 0.8'
    >>> exists = PredicateSpec(kind="metadata", key="k", op="exists")
    >>> describe_predicate(PredicateSpec(kind="not", children=(exists,)))
    'not(k exists)'
    """
    if pred.kind in ("all", "any", "not"):
        return f"{pred.kind}({', '.join(describe_predicate(c) for c in pred.children)})"
    subject = "timestamp" if pred.kind == "timestamp" else pred.key
    if pred.value is None:
        return f"{subject} {pred.op}"
    return f"{subject} {pred.op} {_literal(pred.value)}"


def _literal(value: bool | int | float | str) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    return repr(value)


def _route_json(route: RouteSpec) -> dict[str, object]:
    return {
        "mode": route.mode,
        "unmatched": route.unmatched,
        "rules": [
            {
                "to": rule.to,
                "default": rule.default,
                "when": None if rule.when is None else describe_predicate(rule.when),
            }
            for rule in route.rules
        ],
    }


def _node_json(node: NodeSpec) -> dict[str, object]:
    return {
        "name": node.name,
        "kernel": node.kernel,
        "type": "route" if node.route is not None else "",
        "route": None if node.route is None else _route_json(node.route),
        "executor": node.executor or DEFAULT_EXECUTOR,
        "inputs": [p.name for p in node.input_ports],
        "outputs": [p.name for p in node.output_ports],
        "input_policy": node.input_policy.type,
        "max_in_flight": node.max_in_flight,
        "rate_hz": node.rate,
        "input_queue_packets": node.input_queues.packets,
    }


@final
@dataclass(frozen=True, slots=True)
class CheckReport:
    """The outcome of ``check_config``: a plan, or the configuration error that stopped it.

    Build it with ``check_config``; render it with ``to_json`` / ``to_text``.
    """

    path: str
    """The graph file as the caller named it."""
    plan: GraphPlan | None = None
    """The checked plan; ``None`` when the configuration is invalid."""
    error: str | None = None
    """The configuration error message; ``None`` when the configuration is valid."""

    @property
    def ok(self) -> bool:
        """Whether the configuration is valid (static findings do not make it invalid)."""
        return self.plan is not None

    @property
    def exit_code(self) -> int:
        """What ``flowplex check-config`` exits with: 0 clean, 1 invalid or with findings."""
        return 0 if self.plan is not None and not self.plan.diagnostics else 1

    def to_json(self) -> dict[str, object]:
        """lm-flow's ``check-config --json`` object (success or failure form)."""
        if self.plan is None:
            return {
                "ok": False,
                "path": self.path,
                "diagnostics": [{"message": self.error or "", "code": INVALID_ARGUMENT}],
            }
        plan = self.plan
        spec = plan.spec
        return {
            "ok": True,
            "path": self.path,
            "nodes": [_node_json(node) for node in spec.nodes],
            "diagnostics": [{"code": d.code, "message": d.message} for d in plan.diagnostics],
            "executors": [
                {
                    "name": ex.name,
                    "type": ex.type,
                    "threads": ex.num_threads,
                    "affinity": list(ex.affinity),
                    "priority": ex.priority,
                    **({"processes": ex.num_processes} if ex.type == "ProcessPoolExecutor" else {}),
                }
                for ex in plan.executors
            ],
            "graph_inputs": list(plan.graph_inputs),
            "graph_outputs": list(plan.graph_outputs),
            "edges": [
                {
                    "name": edge.name,
                    "producer": "graph" if edge.producer is None else f"nodes[{edge.producer}]",
                    "consumers": [f"nodes[{node}]" for node, _ in edge.consumers],
                }
                for edge in plan.edges.values()
            ],
            "subgraphs_expanded": True,
            "stats": "full" if spec.watchdog_ms > 0 else spec.stats,
        }

    def to_text(self) -> str:
        """The text-mode lines (no trailing newline); a failure is one ``check-config:`` line."""
        if self.plan is None:
            return f"check-config: {self.error}"
        plan = self.plan
        nodes = plan.spec.nodes
        lines = [
            f"ok: {self.path}",
            f"nodes: {len(nodes)} | executors: {len(plan.executors)} | "
            f"graph inputs: {len(plan.graph_inputs)} | graph outputs: {len(plan.graph_outputs)}",
        ]
        for edge in plan.edges.values():
            producer = "graph" if edge.producer is None else f"nodes[{edge.producer}]"
            lines.append(f"edge {edge.name}: producer={producer} consumers={len(edge.consumers)}")
        for i, node in enumerate(nodes):
            lines.append(
                f"node[{i}] {node.name or '<unnamed>'}: kernel={node.kernel} "
                f"executor={node.executor or DEFAULT_EXECUTOR} "
                f"inputs={len(node.input_ports)} outputs={len(node.output_ports)}"
            )
        lines.extend(f"warning: {d.code}: {d.message}" for d in plan.diagnostics)
        lines.append("configuration only: no executors or kernels were created")
        return "\n".join(lines)


def check_config(path: PathLike) -> CheckReport:
    """Check a YAML graph file without loading kernels or starting threads.

    Args:
        path: The graph file; its ``include`` files are resolved relative to it.

    Returns:
        A report; an invalid configuration is reported, not raised.
    """
    from ..config._load import load_plan_file  # the config layer sits above diagnostics

    shown = os.fspath(path)
    try:
        plan = load_plan_file(path)
    except ConfigError as exc:
        return CheckReport(path=shown, error=str(exc))
    return CheckReport(path=shown, plan=plan)
