"""``CallerTasks``: how an executor that hosts kernels elsewhere runs the engine's tasks.

Such a task only turns a claim into a message and queues it (``invoke``), so it runs at once on
the thread that submitted it: a thread hop would be most of a small invocation's cost. A task
submitted from inside another (a call that failed at once, completing on the spot), or one
nobody waits on, goes to one dispatcher thread instead, so that failures cannot recurse.
Shared by the process pool and the Ray executor.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sized
from typing import Final, final

from .._protocol import Inbox, Task
from .._threads import ThreadPoolExecutor

__all__ = ["CallerTasks", "OnCallerTasks"]

_in_task: Final = threading.local()
"""``busy`` while this thread runs a task of such an executor."""


@final
class CallerTasks:
    """Runs tasks on the caller, nested and background ones on a dispatcher thread."""

    __slots__ = ("dispatcher",)

    def __init__(self, name: str) -> None:
        self.dispatcher = ThreadPoolExecutor(f"{name}-dispatch", 1)

    def submit(self, fn: Task, arg: object) -> None:
        """Run ``fn(arg)`` now on this thread, or on the dispatcher when called from a task."""
        local = _in_task
        if getattr(local, "busy", False):
            self.dispatcher.submit(fn, arg)
            return
        local.busy = True
        try:
            fn(arg)
        finally:
            local.busy = False

    def submit_background(self, fn: Task, arg: object) -> None:
        """Queue ``fn(arg)`` for the dispatcher thread (never on the caller)."""
        self.dispatcher.submit(fn, arg)

    @property
    def queued(self) -> int:
        """Tasks waiting for the dispatcher."""
        return self.dispatcher.stats().queued


class OnCallerTasks:
    """The task half of the ``Executor`` protocol for an executor that hosts kernels elsewhere
    (the process pool, Ray): its ``_tasks`` runs them; no host thread has to."""

    _tasks: CallerTasks

    def submit(self, fn: Task, arg: object) -> None:
        """Run ``fn(arg)`` now, on the calling thread: it ends in ``invoke``, which only queues
        a message and never waits for a worker."""
        self._tasks.submit(fn, arg)

    def submit_background(self, fn: Task, arg: object) -> None:
        """Queue ``fn(arg)`` for the dispatcher thread (never on the caller)."""
        self._tasks.submit_background(fn, arg)

    def backlog(self) -> Sized | None:
        """None: no caller-thread loop."""
        return None

    def inbox(self) -> Inbox | None:
        """None: the dispatcher runs the tasks."""
        return None

    def set_on_submit(self, wake: Callable[[], None] | None) -> None:
        """Ignored: no host thread has to run its work."""

    def start(self) -> None:
        """Start the dispatcher thread (idempotent; workers or actors start in ``host``)."""
        self._tasks.dispatcher.start()
