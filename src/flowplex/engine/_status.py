"""The lowest part of the engine: its lock, lifecycle state, first error and host waits.

Every other part shares the one lock held here (one lock guards every queue, bound and counter
of a graph) and reads ``halted`` before claiming. Nothing here runs once per packet except the
``busy`` count and the wake-ups (``bump``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Final

from .._state import GraphState
from ..errors import FlowplexError, KernelError, Timeout

if TYPE_CHECKING:
    from ._nodes import Node

log = logging.getLogger("flowplex.graph")

# ``state`` is a plain int (an IntEnum compares slower in the compiled build); these are its
# values, derived from the one definition, ``GraphState``.
CREATED: Final = int(GraphState.CREATED)
INITIALIZED: Final = int(GraphState.INITIALIZED)
RUNNING: Final = int(GraphState.RUNNING)
DRAINING: Final = int(GraphState.DRAINING)
TERMINATED: Final = int(GraphState.TERMINATED)

WAIT_SLICE_S: Final = 0.05
"""Longest single condition wait: blocking calls wake this often (Ctrl-C, stall checks)."""


class Status:
    """The lock, the lifecycle state, the first error, pause/cancel flags and host wake-ups."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.changed = threading.Condition(self.lock)
        self.state = INITIALIZED
        self.error: KernelError | None = None
        self.error_text = ""
        self.cancelled = False
        self.paused = False
        self.halted = False
        """``error or cancelled or paused``: no new claims (one check on the hot path)."""
        self.waiters = 0
        """Host threads inside ``wait_change``; progress notifies only when some wait."""
        self.wakeup: Callable[[], None] | None = None
        """The host's wake-up callback (``Graph.set_wakeup_callback``, the asyncio driver)."""
        self.busy = 0
        """Claimed-but-unfinished invocations, pending wakes and running closes."""
        self.started_ns = 0
        """``perf_counter_ns`` at ``start`` (0 before): the diagnostics window origin."""
        self.broken = False
        """An engine thread caught an exception inside a task (``Engine.thread_failed``): the
        counts of what runs are unknown, so the host's waits end at the recorded error
        instead of waiting for the graph to drain."""

    def record_error(self, node: Node | None, exc: BaseException | None, text: str,
                     ts: int | None = None) -> None:
        """First error wins; later ones are logged. Caller holds the lock.

        ``ts`` is the input timestamp of the failed ``process`` call (``None`` for ``open``
        and ``close``). The error carries the node, its kernel and ``ts`` as attributes:
        diagnostics read them there, never from the message.
        """
        where = f"[{node.name}] " if node is not None else ""
        if self.error is not None:
            log.warning("(subsequent error, ignored) kernel failed: %s%s", where, text)
            return
        message = f"kernel failed: {where}{text}"
        if node is not None:
            err = KernelError(message, node=node.name, kernel=node.spec.kernel, ts=ts)
        else:
            err = KernelError(message)
        if exc is not None:
            err.__cause__ = exc
        self.error = err
        self.error_text = message
        self.halted = True
        log.error("%s", message)
        self.bump()

    def raise_if_failed(self) -> None:
        """Raise the recorded graph error (a fresh copy, cause chained), if any."""
        err = self.error
        if err is not None:
            raise _copy_error(err)

    def set_paused(self, paused: bool) -> None:
        """Pause or resume claiming; lock held."""
        self.paused = paused
        self.halted = paused or self.cancelled or self.error is not None

    def set_cancelled(self) -> None:
        """Stop claiming for good; lock held."""
        self.cancelled = True
        self.halted = True

    def bump(self) -> None:
        """Progress: wake host threads waiting in ``wait_change`` and the wake-up callback."""
        if self.waiters:
            self.changed.notify_all()
        cb = self.wakeup
        if cb is not None:
            cb()

    def wake_hosts(self) -> None:
        """``bump`` without the lock (a task queued for host threads): try it, never block.

        Only a waiting host needs the notify: ``waiters`` rises under the lock before a host
        waits, and a host that has not yet waited sees the queued task (or waits one slice at
        most, as when the try-acquire below fails).
        """
        cb = self.wakeup
        if cb is not None:
            cb()
        if self.waiters and self.lock.acquire(False):
            try:
                self.changed.notify_all()
            finally:
                self.lock.release()

    def wait_change(self, deadline: float | None, slice_s: float = WAIT_SLICE_S) -> None:
        """Wait (lock held) for activity, at most one slice; raises ``Timeout`` past deadline."""
        if deadline is not None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                msg = "timed out"
                raise Timeout(msg)
            slice_s = min(slice_s, remaining)
        self.waiters += 1
        try:
            self.changed.wait(slice_s)
        finally:
            self.waiters -= 1

    def clear(self) -> None:
        """Back to INITIALIZED with no error or flags (``Graph.reset``); lock held."""
        self.error = None
        self.error_text = ""
        self.cancelled = False
        self.set_paused(False)
        self.started_ns = 0
        self.broken = False
        self.state = INITIALIZED


def _copy_error(err: KernelError) -> FlowplexError:
    """A fresh ``KernelError`` to raise (each raise gets its own traceback), attributes kept."""
    fresh = KernelError(str(err), node=err.node, kernel=err.kernel, ts=err.ts)
    fresh.__cause__ = err.__cause__
    return fresh
