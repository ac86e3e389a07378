"""Engine-provided ``type: route`` nodes: send each packet to outputs chosen by predicates.

Predicates read the packet's metadata and timestamp (lm-flow's grammar: all / any / not /
timestamp / metadata with eq, ne, gt, gte, lt, lte, exists, contains).
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any, Final

from ..packets import Packet, clone_owned
from ..spec._specs import NodeSpec, PredicateSpec, RouteSpec
from ._context import Context
from ._registry import Kernel

_COMPARE: Final[dict[str, Callable[[Any, Any], Any]]] = {
    "eq": operator.eq, "ne": operator.ne, "gt": operator.gt,
    "gte": operator.ge, "lt": operator.lt, "lte": operator.le,
}


class RouteEvaluationError(ValueError):
    """A predicate compared values of incompatible types."""


def _kind(v: object) -> str:
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, int | float):
        return "number"
    if isinstance(v, str):
        return "str"
    return type(v).__name__


def evaluate(pred: PredicateSpec, packet: Packet, missing: list[int]) -> bool:
    """Evaluate ``pred`` on ``packet``; counts missing-metadata observations in ``missing[0]``."""
    kind = pred.kind
    if kind == "all":
        return all(evaluate(c, packet, missing) for c in pred.children)
    if kind == "any":
        return any(evaluate(c, packet, missing) for c in pred.children)
    if kind == "not":
        return not evaluate(pred.children[0], packet, missing)
    if kind == "timestamp":
        return bool(_COMPARE[pred.op](packet.timestamp, pred.value))
    if pred.op == "exists":
        return packet.has_metadata(pred.key)
    actual = packet.metadata(pred.key)
    if actual is None:
        missing[0] += 1
        return False
    if pred.op == "contains":
        if not isinstance(actual, str):
            msg = f"metadata `{pred.key}` is {_kind(actual)}; `contains` needs a string"
            raise RouteEvaluationError(msg)
        return str(pred.value) in actual
    if _kind(actual) != _kind(pred.value):
        msg = f"cannot compare metadata `{pred.key}` ({_kind(actual)}) with {pred.value!r} ({_kind(pred.value)})"
        raise RouteEvaluationError(msg)
    return bool(_COMPARE[pred.op](actual, pred.value))


def make_route_kernel(spec: NodeSpec) -> type[Kernel]:
    """A kernel class bound to one route node's rules."""
    route: RouteSpec = spec.route if spec.route is not None else RouteSpec()
    outputs = {p.name: i for i, p in enumerate(spec.output_ports)}
    rules = [(outputs[r.to], r.to, r.when) for r in route.rules if not r.default and r.when is not None]
    default = next((outputs[r.to] for r in route.rules if r.default), None)
    unmatched = route.unmatched
    first = route.mode == "first"
    name = spec.name

    class RouteKernel(Kernel):
        language = "Rust"  # lm-flow shows route nodes as engine (Rust) nodes; kept for DOT parity

        def process(self, cc: Context) -> None:
            packet = cc.input(0)
            if packet.is_empty:
                return
            missing = [0]
            matched = False
            for port, to, when in rules:
                if evaluate(when, packet, missing):
                    matched = True
                    cc.emit(port, clone_owned(packet))
                    cc.counter_add(f"route.{name}.matched.{to}")
                    cc.counter_add(f"route.{name}.emitted.{to}")
                    if first:
                        break
            if matched:
                return
            if default is not None:
                # lm-flow counts default deliveries apart from rule emissions.
                cc.emit(default, clone_owned(packet))
                cc.counter_add(f"route.{name}.default_emitted")
            elif unmatched == "drop":
                cc.counter_add(f"route.{name}.dropped")
            elif unmatched == "error":
                msg = "route packet did not match any rule"
                raise RouteEvaluationError(msg)
            else:
                cc.emit(outputs[unmatched], clone_owned(packet))
                cc.counter_add(f"route.{name}.emitted.{unmatched}")

    RouteKernel.__name__ = RouteKernel.__qualname__ = "RouteKernel"
    return RouteKernel
