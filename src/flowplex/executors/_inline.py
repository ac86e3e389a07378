"""The default executor: run work on the thread that made it ready.

lm-lmflow's default is a thread pool; with Python kernels every hop then pays GIL hand-offs
(about 20 µs of CPU per hop against 1.3 µs on the host thread). flowplex's default runs an
invocation on the thread whose action made it ready: ``send`` drives the graph on the caller's
thread, a source's output is processed on the source's thread. Work that nobody's action
triggers (sources, timer wakes) goes to one background thread per graph, started lazily.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Sized
from typing import final

from ._protocol import Task

log = logging.getLogger(__name__)


@final
class InlineExecutor:
    """Run-to-completion on the calling thread, trampolined so deep chains never recurse."""

    kind = "inline"
    threads = 0

    def __init__(self, name: str = "default") -> None:
        self.name = name
        self._local = threading.local()
        self._bg_lock = threading.Lock()
        self._bg_cond = threading.Condition(self._bg_lock)
        self._bg_tasks: deque[tuple[Task, object]] = deque()
        self._bg_thread: threading.Thread | None = None
        self._stopping = False

    def submit(self, fn: Task, arg: object) -> None:
        """Run ``fn(arg)`` now on this thread, or after the task this thread is running."""
        local = self._local
        queue: deque[tuple[Task, object]] | None = getattr(local, "queue", None)
        if queue is not None:
            queue.append((fn, arg))
            return
        queue = deque(((fn, arg),))
        local.queue = queue
        try:
            # This thread's run loop: each task may append more (downstream nodes).
            while queue:
                task, targ = queue.popleft()
                task(targ)
        finally:
            local.queue = None

    def backlog(self) -> Sized | None:
        """The tasks waiting behind the one this thread runs now; None outside the run loop.

        Empty means that work submitted now would run next: the engine then runs a chain's
        next hop in its own loop instead of submitting it. The object is this thread's and
        stays the same for as long as the running task runs.
        """
        queue: deque[tuple[Task, object]] | None = getattr(self._local, "queue", None)
        return queue

    def submit_background(self, fn: Task, arg: object) -> None:
        """Queue ``fn(arg)`` for the graph's background thread (sources, wakes)."""
        with self._bg_lock:
            if self._stopping:
                return
            self._bg_tasks.append((fn, arg))
            if self._bg_thread is None:
                self._bg_thread = threading.Thread(
                    target=self._background_loop, name=f"flowplex-{self.name}", daemon=True
                )
                self._bg_thread.start()
            else:
                self._bg_cond.notify()

    def _background_loop(self) -> None:
        # Work this thread triggers joins the same FIFO as new background work, so an endless
        # source cannot starve a second source or timer wakes.
        tasks = self._bg_tasks
        self._local.queue = tasks
        while True:
            with self._bg_lock:
                while not tasks and not self._stopping:
                    self._bg_cond.wait()
                if self._stopping:
                    return
                fn, arg = tasks.popleft()
            fn(arg)

    def start(self) -> None:
        """Nothing to start: the background thread starts with the first background task."""
        with self._bg_lock:
            self._stopping = False

    def shutdown(self) -> None:
        """Stop the background thread (after its current task) and join it."""
        with self._bg_lock:
            self._stopping = True
            self._bg_tasks.clear()
            self._bg_cond.notify_all()
            thread, self._bg_thread = self._bg_thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=10.0)
