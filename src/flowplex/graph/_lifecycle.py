"""The graph's lifecycle around the data path: states, the first error, waits, pause, cancel, stalls.

Split from ``_engine`` so that the scheduler core holds only the data path (claim → run → flush
→ deliver). What is here runs on host calls (``Graph.wait_done``, ``cancel``, ``pause``) or on
rare transitions, never once per packet. ``LifecycleMixin`` is one layer of ``Engine``
(see ``_engine_common.EngineState``), on the engine's own state and lock.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Final

from .._state import GraphState
from .._timestamps import ts_name
from ..errors import DeadlockError, FlowplexError, KernelError, Timeout
from ._engine_common import EngineState

if TYPE_CHECKING:
    from ._nodes import Node

log = logging.getLogger("flowplex.graph")

# The engine's ``state`` is a plain int (an IntEnum compares slower in the compiled build);
# these are its values, derived from the one definition, ``GraphState``.
CREATED: Final = int(GraphState.CREATED)
INITIALIZED: Final = int(GraphState.INITIALIZED)
RUNNING: Final = int(GraphState.RUNNING)
DRAINING: Final = int(GraphState.DRAINING)
TERMINATED: Final = int(GraphState.TERMINATED)

WAIT_SLICE_S: Final = 0.05
"""Longest single condition wait: blocking calls wake this often (Ctrl-C, stall checks)."""


class LifecycleMixin(EngineState):
    """Errors, waiting, pausing, cancelling and stall diagnosis of ``Engine`` (a layer of it)."""

    # -- errors -------------------------------------------------------------------------------

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
        self._bump()

    def raise_if_failed(self) -> None:
        """Raise the recorded graph error (a fresh copy, cause chained), if any."""
        err = self.error
        if err is not None:
            raise _copy_error(err)
    # -- waiting -----------------------------------------------------------------------------------

    def pump_step(self) -> bool:
        """Run at most one delegated task on this thread; False when there was nothing to do."""
        return self.pump(1) == 1

    def pump(self, max_steps: int = -1) -> int:
        """Run up to ``max_steps`` delegated tasks (all there are when negative); returns how many.

        Each step is what ``pump_step`` does: the oldest task of the next delegating executor
        in round-robin order (the cursor), so ``pump_steps(n)`` and a drain in ``wait_done``
        run the very tasks, in the very order, that as many single ``pump_step`` calls would.
        The pump gate is taken once for the whole run rather than once per task: another host
        thread finds it taken either way while a task runs, and gets False (lm-flow's gate).
        """
        inboxes = self.inboxes
        if not inboxes or max_steps == 0:
            return 0
        gate = self._pump_gate
        if not gate.acquire(False):  # positional: a keyword argument costs a dict per call
            return 0
        ran = 0
        run = self._run
        n = len(inboxes)
        try:
            while ran != max_steps:
                cursor = self._pump_cursor
                tasks = None
                for i in range(n):
                    k = cursor + i
                    if k >= n:
                        k -= n
                    box = inboxes[k]
                    if box:
                        tasks = box
                        self._pump_cursor = k + 1 if k + 1 < n else 0
                        break
                if tasks is None:
                    return ran
                try:
                    fn, arg = tasks.popleft()
                except IndexError:  # ``shutdown`` on another thread cleared it
                    return ran
                ran += 1
                if fn is run:
                    self.run(arg)  # the common task: a direct call in the compiled build
                else:
                    fn(arg)
            return ran
        finally:
            gate.release()

    def delegated_pending(self) -> bool:
        """Whether any inbox (a delegating executor's queue) holds tasks."""
        return any(self.inboxes)

    def idle(self) -> bool:
        """No invocation, close or wake in flight and no delegated task queued; lock held."""
        return self.busy == 0 and not self.delegated_pending()

    def wait_change(self, deadline: float | None) -> None:
        """Wait (lock held) for activity, at most one slice; raises ``Timeout`` past deadline."""
        slice_s = WAIT_SLICE_S
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

    # -- pausing, cancelling and stalls -----------------------------------------------------------

    def set_paused(self, paused: bool) -> None:
        """Pause or resume claiming; lock held."""
        self.paused = paused
        self.halted = paused or self.cancelled or self.error is not None

    def _bump(self) -> None:
        if self.waiters:
            self.changed.notify_all()
        cb = self.wakeup
        if cb is not None:
            cb()

    def _on_delegated(self) -> None:
        # Called after a submission to a delegating executor, possibly without the lock. Only a
        # waiting host needs the notify: ``waiters`` rises under the lock before a host waits,
        # and a host that has not yet waited sees the queued task (or waits one slice at most,
        # as when the try-acquire below fails).
        cb = self.wakeup
        if cb is not None:
            cb()
        if self.waiters and self.lock.acquire(False):
            try:
                self.changed.notify_all()
            finally:
                self.lock.release()

    def starving(self) -> list[str]:
        """Describe input ports that hold packets but cannot fire (for stall errors); lock held."""
        out = []
        for node in self.nodes:
            if node.closed:
                continue
            for p in node.inputs:
                state = "closed" if p.closed else f"open, bound {ts_name(p.bound)}"
                if p.queue:
                    out.append(f"{node.name}.{p.name} ({len(p.queue)} queued, {state})")
        return out

    def stall_error(self, what: str) -> DeadlockError:
        """A ``DeadlockError`` naming unclosed nodes and starving ports; lock held."""
        unclosed = [n.name for n in self.nodes if not n.closed]
        starving = self.starving()
        reason = f"; starving ports: [{', '.join(starving)}]" if starving else ""
        if self.blocked_nodes:
            blocked = ", ".join(sorted(n.name for n in self.blocked_nodes))
            reason += (f"; producers blocked by full downstream queues: [{blocked}] -- increase the input_queues "
                       "capacity, read the blocking pollers, or inspect downstream alignment")
        return DeadlockError(
            f"{what}: all inputs closed but the graph is idle and nodes are not closed: "
            f"[{', '.join(unclosed)}]{reason}. usually a kernel's close condition is unmet "
            "(a source that never calls source_done?)"
        )

    def cancel(self) -> None:
        """Stop claiming, drop pending wakes and close every node with reason CANCELLED."""
        with self.lock:
            if self.cancelled or self.state in (INITIALIZED, CREATED):
                self.cancelled = True
                self.halted = True
                return
            self.cancelled = True
            self.halted = True
            self._drop_blocked()
            for node in self.nodes:
                if node.waiting:
                    node.waiting = False
                    node.wake_gen += 1
                    self.busy -= 1
            self._bump()
        self.force_close_all()

    def shutdown(self) -> None:
        """Stop timers and executor threads."""
        if self._timers is not None:
            self._timers.stop()
            self._timers = None
        for ex in self.executors:
            ex.shutdown()


def _copy_error(err: KernelError) -> FlowplexError:
    """A fresh ``KernelError`` to raise (each raise gets its own traceback), attributes kept."""
    fresh = KernelError(str(err), node=err.node, kernel=err.kernel, ts=err.ts)
    fresh.__cause__ = err.__cause__
    return fresh
