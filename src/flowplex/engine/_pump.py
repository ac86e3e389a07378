"""Host threads running delegated work: the inboxes of executors that run no task themselves.

A ``DelegatingExecutor``'s tasks wait in its ``inbox()`` until a host thread enters the engine
(``Graph.pump_step``, ``wait_done``, ``Poller.next``, a blocking ``send``) and pumps here. One
host thread at a time pumps (lm-flow's gate), so delegated kernels never run concurrently.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..executors._protocol import Inbox
    from ._loop import Scheduler
    from ._status import Status


class Pump:
    """Drains the inboxes round-robin on the calling host thread."""

    def __init__(self, status: Status, scheduler: Scheduler, inboxes: list[Inbox]) -> None:
        self.status = status
        self.scheduler = scheduler
        self.inboxes = inboxes
        """The FIFOs host threads drain: one per executor that runs no task itself."""
        self._gate = threading.Lock()
        self._cursor = 0

    def pump_step(self) -> bool:
        """Run at most one delegated task on this thread; False when there was nothing to do."""
        return self.pump(1) == 1

    def pump(self, max_steps: int = -1) -> int:
        """Run up to ``max_steps`` delegated tasks (all there are when negative); returns how many.

        Each step is what ``pump_step`` does: the oldest task of the next delegating executor
        in round-robin order (the cursor), so ``pump_steps(n)`` and a drain in ``wait_done``
        run the very tasks, in the very order, that as many single ``pump_step`` calls would.
        The gate is taken once for the whole run rather than once per task: another host
        thread finds it taken either way while a task runs, and gets False (lm-flow's gate).
        """
        inboxes = self.inboxes
        if not inboxes or max_steps == 0:
            return 0
        gate = self._gate
        if not gate.acquire(False):  # positional: a keyword argument costs a dict per call
            return 0
        ran = 0
        scheduler = self.scheduler
        run = scheduler.claims.task
        n = len(inboxes)
        try:
            while ran != max_steps:
                cursor = self._cursor
                tasks = None
                for i in range(n):
                    k = cursor + i
                    if k >= n:
                        k -= n
                    box = inboxes[k]
                    if box:
                        tasks = box
                        self._cursor = k + 1 if k + 1 < n else 0
                        break
                if tasks is None:
                    return ran
                try:
                    fn, arg = tasks.popleft()
                except IndexError:  # ``shutdown`` on another thread cleared it
                    return ran
                ran += 1
                if fn is run:
                    scheduler.run(arg)  # the common task: a direct call in the compiled build
                else:
                    fn(arg)
            return ran
        finally:
            gate.release()

    def pending(self) -> bool:
        """Whether any inbox holds tasks."""
        return any(self.inboxes)

    def idle(self) -> bool:
        """No invocation, close or wake in flight and no delegated task queued; lock held."""
        return self.status.busy == 0 and not self.pending()
