"""What every scheduler part shares: the shape of claimed work and the failure texts.

A leaf module (it imports no other engine module at run time), so that every part of the
engine (``_claims``, ``_delivery``, ``_closing``, ``_loop``...) can use it without a cycle.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Final

from ..packets import type_name

if TYPE_CHECKING:
    from ..executors import Executor
    from ..kernels._context import Context
    from ..packets import Packet
    from ._nodes import Node

Submission = tuple["Executor", Callable[[object], None], object]
"""One claimed task: ``executor.submit(task, arg)``, called once the engine lock is released."""
Calls = list[tuple[Callable[["Packet"], object], "Packet"]]
"""Observer calls collected under the lock, made after it is released."""
Work = tuple[list[Submission], Calls]
"""Claimed tasks and observer calls, to run outside the lock (``Admission.accept`` returns one)."""

_BUFFER: Final = 6
"""The type id of buffer payloads: the only packets whose bytes count toward ``limit_bytes``."""


def _buffer_bytes(packets: tuple[Packet, ...] | list[Packet]) -> int:
    """Bytes of buffer payloads (the only packets big enough to matter for memory)."""
    total = 0
    for p in packets:
        if p._tid == _BUFFER:
            total += p._value.nbytes()  # type: ignore[attr-defined]
    return total


def _is_power_of_two(n: int) -> bool:
    """Rate-limits repeated warnings: log the 1st, 2nd, 4th, 8th, ... occurrence."""
    return n > 0 and n & (n - 1) == 0


def input_type_error(node: Node, ctx: Context) -> str:
    """Why the claimed inputs break the node's declared input types ("" when they do not)."""
    for i, want in enumerate(node.in_types):
        p = ctx._in[i]
        if want and p is not None and p._tid != want:
            hint = " (packets of type id 0 only pass ports declared `any`)" if p._tid == 0 else ""
            return (f"input port `{node.inputs[i].name}` type mismatch: contract declares {type_name(want)}, "
                    f"actual {type_name(p._tid)}{hint}")
    return ""


def _output_type_error(node: Node, ctx: Context) -> str:
    """Why staged output breaks the node's declared output types ("" when it does not)."""
    for o, want in enumerate(node.out_types):
        if not want:
            continue
        for p in ctx._out[o]:
            if p._value is not None and p._tid != want:
                return (f"output port `{node.out_edges[o].name}` type mismatch: contract declares "
                        f"{type_name(want)}, emitted {type_name(p._tid)}")
    return ""
