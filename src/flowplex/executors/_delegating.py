"""``DelegatingExecutor``: no threads; host threads run its tasks when they enter the engine.

Tasks run inside ``pump_step`` and the blocking host calls (``wait_done``, ``Poller.next``,
``wait_until_idle``, a blocking ``send``). One host thread at a time runs delegated work, so
kernels on it never run concurrently and keep a deterministic order. The engine drains
``tasks`` itself (``LifecycleMixin.pump``): this class is only the queue and its wake-up.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import final

from ._protocol import Task


@final
class DelegatingExecutor:
    """A FIFO of tasks drained by ``Graph.pump_step`` and host waits."""

    kind = "delegating"
    threads = 0

    def __init__(self, name: str, on_submit: Callable[[], None] | None = None) -> None:
        self.name = name
        self.tasks: deque[tuple[Task, object]] = deque()
        """Queued ``(fn, arg)``, oldest first; only the host thread holding the pump gate pops."""
        self.on_submit = on_submit
        """Called (no arguments) after each submission, to wake host waiters."""

    def submit(self, fn: Task, arg: object) -> None:
        """Queue ``fn(arg)`` until a host thread pumps."""
        self.tasks.append((fn, arg))  # deque.append is atomic under the GIL
        cb = self.on_submit
        if cb is not None:
            cb()

    def submit_background(self, fn: Task, arg: object) -> None:
        """Same as ``submit``: delegated work always waits for a host thread."""
        self.submit(fn, arg)

    def push(self, fn: Task, arg: object) -> None:
        """``submit`` without the wake-up: the engine's hop path calls its own right after."""
        self.tasks.append((fn, arg))

    def pending(self) -> int:
        """Queued tasks."""
        return len(self.tasks)

    def run_one(self) -> bool:
        """Run the oldest queued task on this thread; False when there was none."""
        try:
            fn, arg = self.tasks.popleft()
        except IndexError:
            return False
        fn(arg)
        return True

    def start(self) -> None:
        """Nothing to start."""

    def shutdown(self) -> None:
        """Drop queued tasks."""
        self.tasks.clear()
