"""``DelegatingExecutor``: no threads; host threads run its tasks when they enter the engine.

Tasks run inside ``pump_step`` and the blocking host calls (``wait_done``, ``Poller.next``,
``wait_until_idle``, a blocking ``send``). One host thread at a time runs delegated work, so
kernels on it never run concurrently and keep a deterministic order.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import final

from ._protocol import Task


@final
class DelegatingExecutor:
    """A queue of tasks drained by ``Graph.pump_step`` and host waits."""

    kind = "delegating"
    threads = 0

    def __init__(self, name: str, on_submit: object = None) -> None:
        self.name = name
        self._tasks: deque[tuple[Task, object]] = deque()
        self._lock = threading.Lock()
        self.on_submit = on_submit
        """Called (no arguments) after each submission, to wake host waiters."""

    def submit(self, fn: Task, arg: object) -> None:
        """Queue ``fn(arg)`` until a host thread pumps."""
        self._tasks.append((fn, arg))  # deque.append is atomic under the GIL
        cb = self.on_submit
        if cb is not None:
            cb()  # type: ignore[operator]

    submit_background = submit

    def pending(self) -> int:
        """Queued tasks."""
        return len(self._tasks)

    def run_one(self) -> bool:
        """Run the oldest queued task on this thread; False when there was none."""
        try:
            fn, arg = self._tasks.popleft()
        except IndexError:
            return False
        fn(arg)
        return True

    def start(self) -> None:
        """Nothing to start."""

    def shutdown(self) -> None:
        """Drop queued tasks."""
        self._tasks.clear()
