"""What every scheduler module shares: the engine's state, the shape of claimed work, failure text.

A leaf module (it imports no other engine module at run time) so that ``_engine`` and its
base classes (``_backpressure``, ``_closing``, ``_lifecycle``) can all use it without an
import cycle.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Final

from ..packets import type_name

if TYPE_CHECKING:
    from ..errors import KernelError
    from ..executors import Executor
    from ..executors._protocol import Inbox
    from ..kernels._context import Context
    from ..packets import Packet
    from ._nodes import Edge, InPort, Node
    from ._timers import Timers

Submission = tuple["Executor", Callable[[object], None], object]
"""One claimed task: ``executor.submit(task, arg)``, called once the engine lock is released."""
Calls = list[tuple[Callable[["Packet"], object], "Packet"]]
"""Observer calls collected under the lock, made after it is released."""
Work = tuple[list[Submission], Calls]
"""Claimed tasks and observer calls, to run outside the lock (``Engine.accept`` returns one)."""


class EngineState:
    """The state of one graph's scheduler, and the data-path methods its layers call.

    ``Engine`` is built in layers, one concern per module, each a subclass of the one below:
    ``EngineState`` → ``LifecycleMixin`` → ``ClosingMixin`` → ``BackpressureMixin`` →
    ``Engine``. A chain rather than mixins side by side, because the compiled build (mypyc,
    see ``setup.py``) supports single inheritance only. ``Engine.__init__`` sets every
    attribute declared here; the methods below are the ones a lower layer calls on a higher
    one, and ``Engine`` defines them all.
    """

    lock: threading.Lock
    changed: threading.Condition
    nodes: list[Node]
    edges: dict[str, Edge]
    graph_inputs: list[Edge]
    executors: list[Executor]
    inboxes: list[Inbox]
    _pump_gate: threading.Lock
    _pump_cursor: int
    state: int
    error: KernelError | None
    error_text: str
    cancelled: bool
    paused: bool
    halted: bool
    waiters: int
    _run: Callable[[object], None]
    stats_level: str
    started_ns: int
    timed: bool
    watchdog_ns: int
    tracer: Callable[[str, str, int, int, int], None] | None
    busy: int
    queued: int
    queued_bytes: int
    limit_packets: int
    limit_bytes: int
    soft_limit: int
    blocked_nodes: set[Node]
    _retry: list[Node]
    wakeup: Callable[[], None] | None
    _timers: Timers | None

    def run(self, arg: object) -> None:
        raise NotImplementedError

    def schedule(self, node: Node, out: list[Submission]) -> None:
        raise NotImplementedError

    def _timed_call(self, node: Node, ctx: Context, fn: Callable[[Context], None]) -> tuple[Exception | None, str]:
        raise NotImplementedError

    def _flush(self, node: Node, ctx: Context, subs: list[Submission], calls: Calls) -> bool:
        raise NotImplementedError

    def _deliver_solo(self, edge: Edge, port: InPort, packets: list[Packet], subs: list[Submission]) -> None:
        raise NotImplementedError

    def _deliver(self, edge: Edge, packets: list[Packet], subs: list[Submission], calls: Calls) -> None:
        raise NotImplementedError

    def _publish(self, edge: Edge, b: int, calls: Calls) -> None:
        raise NotImplementedError

    def _dispatch(self, subs: list[Submission], calls: Calls) -> None:
        raise NotImplementedError

    def _drop_blocked(self) -> None:
        raise NotImplementedError

    def force_close_all(self) -> None:
        raise NotImplementedError


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
