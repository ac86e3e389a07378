"""The rules of node conditions and input timeouts, written once for YAML, hand-built specs and contracts.

A node's ``conditions`` come from its YAML (``nodes[1].conditions[0]``) and from its kernel's
``get_contract`` (``Contract.add_condition``); both are ``ConditionSpec`` and pass through the
same functions here: :func:`condition_problem` for one condition on its own,
:func:`conditions_problem` for a node's whole list, :func:`condition_names_problem` across the
graph. They return the first problem as data (a field path and a message) so that the plan, which
knows file lines, and ``merge_conditions``, which knows the contract, word the location their way.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from .._suggest import did_you_mean
from . import _ranges as ranges
from ._specs import CONDITION_KINDS, ConditionSpec, NodeSpec
from ._text import escape_controls

__all__ = [
    "ALIGNING_POLICIES",
    "CONTRACT_WHERE",
    "MAX_PERIOD_MS",
    "MAX_TIMEOUT_MS",
    "MIN_PERIOD_MS",
    "ConditionProblem",
    "condition_names_problem",
    "condition_problem",
    "conditions_problem",
    "kind_problem",
    "timeout_problem",
    "timeouts_problem",
]

CONTRACT_WHERE: Final = "get_contract"
"""``ConditionSpec.where`` of a condition a kernel declared in ``get_contract``."""

MIN_PERIOD_MS: Final = 1e3 / ranges.RATE_MAX_HZ
"""The shortest ``periodic`` period (1 ns), the period of the fastest ``rate``."""
MAX_PERIOD_MS: Final = ranges.MAX_DELAY_MS
"""The longest ``periodic`` period: one day, like every other millisecond duration."""
MAX_TIMEOUT_MS: Final = ranges.MAX_DELAY_MS
"""The longest input ``timeout_ms``: one day."""

ALIGNING_POLICIES: Final = ("sync", "sync_set", "batch")
"""The input policies under which a node waits to align its inputs, so a timeout means something."""

_NAME: Final = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")
"""A boolean or event name: it is typed on command lines (``flowplex notify go``) and shown in panes."""

_NAME_RULE: Final = "letters, digits, `_`, `-` and `.`, not starting with `-` or `.`, at most 128 characters"

FieldPath = tuple[str | int, ...]


@dataclass(frozen=True, slots=True)
class ConditionProblem:
    """The first broken rule of a list of conditions."""

    index: int
    """Which condition of the list (the later one, for a rule between two)."""
    field: FieldPath
    """Relative to that condition: ``()``, ``("count",)``, ``("periodic", "period_ms")``."""
    message: str


def _shown(value: object) -> str:
    if isinstance(value, float):
        return "NaN" if math.isnan(value) else f"{value:g}"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return f'string "{escape_controls(value[:60])}"'
    return f"a {type(value).__name__}"


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def kind_problem(kind: object) -> str | None:
    """The message for a condition kind that is not one of ``CONDITION_KINDS``, with a did-you-mean."""
    if kind in CONDITION_KINDS:
        return None
    text = kind if isinstance(kind, str) else _shown(kind)
    hint = did_you_mean(kind, CONDITION_KINDS) if isinstance(kind, str) else ""
    expected = ", ".join(f"`{k}`" for k in CONDITION_KINDS)
    return f"unknown condition `{escape_controls(text)}`{hint} (expected one of {expected})"


def _period_problem(period_ms: float) -> str | None:
    if not math.isfinite(period_ms) or period_ms <= 0:
        return f"period_ms must be a positive, finite number of milliseconds, got {_shown(period_ms)}"
    if not MIN_PERIOD_MS <= period_ms <= MAX_PERIOD_MS:
        return (f"period_ms must be in {MIN_PERIOD_MS:g}..{MAX_PERIOD_MS} ms (1 ns to one day), "
                f"got {_shown(period_ms)}")
    return None


def timeout_problem(timeout_ms: object) -> str | None:
    """What is wrong with an input port's ``timeout_ms`` value on its own (``None`` when it is fine)."""
    if isinstance(timeout_ms, bool) or not isinstance(timeout_ms, int | float):
        return f"timeout_ms must be a number of milliseconds, got {_shown(timeout_ms)}"
    if not math.isfinite(timeout_ms) or timeout_ms <= 0:
        return f"timeout_ms must be a positive, finite number of milliseconds, got {_shown(timeout_ms)}"
    if timeout_ms > MAX_TIMEOUT_MS:
        return f"timeout_ms must be at most {MAX_TIMEOUT_MS} ms (one day), got {_shown(timeout_ms)}"
    return None


def timeouts_problem(node: NodeSpec, kind: str) -> tuple[FieldPath, str] | None:
    """The first ``timeout_ms`` problem among ``node``'s ``input_ports`` or ``output_ports`` (``kind``).

    A timeout is a valid duration on a forward input of a node that waits to align its inputs
    (``ALIGNING_POLICIES``); 0 means none. Returns ``(field, message)``, ``field`` relative to the
    port list (``(1, "timeout_ms")``).
    """
    ports = node.input_ports if kind == "input_ports" else node.output_ports
    for k, port in enumerate(ports):
        if port.timeout_ms == 0:
            continue
        if kind != "input_ports":
            return (k,), "timeout_ms applies to input ports only (a node waits on its inputs, not its outputs)"
        at: FieldPath = (k, "timeout_ms")
        problem = timeout_problem(port.timeout_ms)
        if problem is not None:
            return at, problem
        if port.name in node.back_edges:
            return at, (f"timeout_ms does not apply to back edge `{escape_controls(port.name)}` (a back edge "
                        "holds its latest value; the node never waits for it)")
        policy = node.input_policy.type
        if policy not in ALIGNING_POLICIES:
            return at, (f"timeout_ms needs an input policy that waits to align inputs "
                        f"({', '.join(ALIGNING_POLICIES)}); this node's input_policy is `{policy}`, which never waits")
    return None


def condition_problem(cond: ConditionSpec) -> tuple[FieldPath, str] | None:
    """The first problem of one condition on its own: its kind, period, count or name.

    Returns:
        ``(field, message)`` with ``field`` relative to the condition (``("periodic", "period_ms")``),
        or ``None`` when the condition is valid on its own.
    """
    problem = kind_problem(cond.kind)
    if problem is not None:
        return (), problem
    kind = cond.kind
    if kind == "periodic":
        if not _is_number(cond.period_s):
            return (kind, "period_ms"), f"period_ms must be a number of milliseconds, got {_shown(cond.period_s)}"
        problem = _period_problem(cond.period_s * 1e3)
        return None if problem is None else ((kind, "period_ms"), problem)
    if kind == "count":
        if isinstance(cond.count, bool) or not isinstance(cond.count, int):
            return (kind,), f"count must be an integer (how many times the node runs), got {_shown(cond.count)}"
        if cond.count < 1:
            return (kind,), f"count must be >= 1 (how many times the node runs), got {cond.count}"
        return None
    if not isinstance(cond.name, str):
        return (kind, "name"), f"{kind} condition name must be a string, got {_shown(cond.name)}"
    if not cond.name:
        api = "Graph.set_condition" if kind == "boolean" else "Graph.notify"
        return (kind, "name"), f"{kind} condition needs a non-empty `name` (the name `{api}` uses)"
    if _NAME.fullmatch(cond.name) is None:
        shown = escape_controls(cond.name if len(cond.name) <= 60 else cond.name[:60] + "...")
        return (kind, "name"), f"condition name `{shown}` is not a plain name (use {_NAME_RULE})"
    if kind == "boolean" and not isinstance(cond.initial, bool):
        return (kind, "initial"), f"initial must be true or false, got {_shown(cond.initial)}"
    return None


def _described(cond: ConditionSpec, index: int) -> str:
    if cond.where == CONTRACT_WHERE:
        return "declared by the kernel's get_contract"
    return f"at {cond.where}" if cond.where else f"conditions[{index}]"


def conditions_problem(node: NodeSpec, conditions: Sequence[ConditionSpec]) -> ConditionProblem | None:
    """The first problem of ``conditions`` as the conditions of ``node``.

    Each condition alone (:func:`condition_problem`), then the rules between them and the node:
    at most one condition of each kind; ``count`` only on a node without input ports (a node with
    inputs runs once per input, so a number of runs is a source's notion); not ``periodic`` and
    ``rate`` together (both pace the node).
    """
    first: dict[str, int] = {}
    for index, cond in enumerate(conditions):
        alone = condition_problem(cond)
        if alone is not None:
            return ConditionProblem(index, *alone)
        earlier = first.setdefault(cond.kind, index)
        if earlier != index:
            msg = (f"a second `{cond.kind}` condition (the first is {_described(conditions[earlier], earlier)}); "
                   "a node takes at most one condition of each kind")
            return ConditionProblem(index, (), msg)
        if cond.kind == "count" and node.input_ports:
            msg = (f"`count` is only for source-like nodes (nodes without input ports), and this node has "
                   f"{len(node.input_ports)} input port(s); a node with inputs runs once per input")
            return ConditionProblem(index, ("count",), msg)
        if cond.kind == "periodic" and node.rate:
            msg = ("`periodic` and `rate` both pace the node; pick one (drop `rate`, or this condition: "
                   f"`rate: {node.rate:g}` is a period of {1e3 / node.rate:g} ms)")
            return ConditionProblem(index, ("periodic",), msg)
    return None


def condition_names_problem(
    conditions: Sequence[Sequence[ConditionSpec]], names: Sequence[str]
) -> tuple[int, int, str] | None:
    """A name used by a boolean condition and by an event condition (a name is one or the other).

    Args:
        conditions: The conditions of each node, in node order.
        names: The name of each node, for the message.

    Returns:
        ``(node position, condition index, message)`` for the later of the two uses, or ``None``.
    """
    seen: dict[str, tuple[str, int, ConditionSpec, int]] = {}
    for n, node_conditions in enumerate(conditions):
        for index, cond in enumerate(node_conditions):
            if cond.kind not in ("boolean", "event"):
                continue
            other = seen.setdefault(cond.name, (cond.kind, n, cond, index))
            if other[0] == cond.kind:
                continue
            kind, m, first, first_index = other
            article = "an" if kind == "event" else "a"
            msg = (f"`{escape_controls(cond.name)}` is already the name of {article} {kind} condition (node "
                   f"`{escape_controls(names[m])}`, {_described(first, first_index)}); a name is either a "
                   "boolean or an event across the graph")
            return n, index, msg
    return None
