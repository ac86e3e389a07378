"""``DelegatingExecutor``: no threads; host threads run its tasks when they enter the engine.

Tasks run inside ``pump_step`` and the blocking host calls (``wait_done``, ``Poller.next``,
``wait_until_idle``, a blocking ``send``). One host thread at a time runs delegated work, so
kernels on it never run concurrently and keep a deterministic order. The engine drains the
``inbox()`` itself (``engine._pump.Pump``): this class is only the queue and its wake-up.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sized
from typing import final

from ._protocol import FailureReport, Inbox, Task, TaskStats


@final
class DelegatingExecutor:
    """A FIFO of tasks drained by ``Graph.pump_step`` and host waits."""

    kind = "delegating"
    threads = 0
    runs_on_caller = False
    hosts_kernels = False
    kernels_in_process = True

    def __init__(self, name: str, on_submit: Callable[[], None] | None = None) -> None:
        self.name = name
        self.tasks: Inbox = deque()
        """Queued ``(fn, arg)``, oldest first; only the host thread holding the pump gate pops."""
        self.on_submit = on_submit
        """Called (no arguments) after each submission, to wake host waiters."""
        self._running = 0

    def submit(self, fn: Task, arg: object) -> None:
        """Queue ``fn(arg)`` until a host thread pumps."""
        self.tasks.append((fn, arg))  # deque.append is atomic under the GIL
        cb = self.on_submit
        if cb is not None:
            cb()

    def submit_background(self, fn: Task, arg: object) -> None:
        """Same as ``submit``: delegated work always waits for a host thread."""
        self.submit(fn, arg)

    def backlog(self) -> Sized | None:
        """None: its tasks run on host threads, not in a loop of the submitting thread."""
        return None

    def inbox(self) -> Inbox:
        """``tasks``: the engine appends hand-overs there and host threads pop them."""
        return self.tasks

    def set_on_submit(self, wake: Callable[[], None] | None) -> None:
        """Set ``on_submit``, the wake-up called after each ``submit``."""
        self.on_submit = wake

    def stats(self) -> TaskStats:
        """Queued tasks; running counts ``run_one`` calls only (the engine's pump pops the
        inbox itself, and the graph's node stats show what it runs)."""
        return TaskStats(self.kind, 0, len(self.tasks), self._running, 1)

    def pending(self) -> int:
        """Queued tasks."""
        return len(self.tasks)

    def run_one(self) -> bool:
        """Run the oldest queued task on this thread; False when there was none."""
        try:
            fn, arg = self.tasks.popleft()
        except IndexError:
            return False
        self._running += 1
        try:
            fn(arg)
        finally:
            self._running -= 1
        return True

    def run_next(self) -> bool:
        """False: host threads run its tasks from its inbox (``run_one``), not behind a caller's."""
        return False

    def set_on_failure(self, report: FailureReport | None) -> None:
        """Ignored: it has no threads of its own; the host threads that run its tasks report."""

    def start(self) -> None:
        """Nothing to start."""

    def shutdown(self) -> None:
        """Drop queued tasks."""
        self.tasks.clear()
