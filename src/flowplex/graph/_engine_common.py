"""Small pieces every scheduler module shares: the shape of claimed work and failure text.

A leaf module (it imports no other engine module) so that ``_engine`` and its mixins
(``_backpressure``, ``_closing``, ``_lifecycle``) can all use it without an import cycle.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ..packets import type_name

if TYPE_CHECKING:
    from ..executors import Executor
    from ..kernels._context import Context
    from ..packets import Packet
    from ._nodes import Node

Submission = tuple["Executor", Callable[[object], None], object]
"""One claimed task: ``executor.submit(task, arg)``, called once the engine lock is released."""
Work = tuple[list[Submission], list[tuple[Callable[["Packet"], object], "Packet"]]]
"""Claimed tasks and observer calls, to run outside the lock (``Engine.accept`` returns one)."""


def _is_power_of_two(n: int) -> bool:
    """Rate-limits repeated warnings: log the 1st, 2nd, 4th, 8th, ... occurrence."""
    return n > 0 and n & (n - 1) == 0


def _describe(exc: BaseException, ctx: Context) -> str:
    """``Type: message`` of a kernel failure (the context's error text when the message is empty)."""
    text = str(exc)
    if not text and ctx._error_text:
        text = ctx._error_text
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


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
