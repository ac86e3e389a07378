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
from collections.abc import Callable, Sized
from typing import final

from ._protocol import JOIN_S, FailureReport, Inbox, Task, TaskStats, report_failure

log = logging.getLogger(__name__)


@final
class InlineExecutor:
    """Run-to-completion on the calling thread, trampolined so deep chains never recurse."""

    kind = "inline"
    threads = 0
    runs_on_caller = True
    hosts_kernels = False
    kernels_in_process = True

    def __init__(self, name: str = "default") -> None:
        self.name = name
        self._local = threading.local()
        self._bg_lock = threading.Lock()
        self._bg_cond = threading.Condition(self._bg_lock)
        self._bg_tasks: deque[tuple[Task, object]] = deque()
        self._bg_thread: threading.Thread | None = None
        self._stopping = False
        # Counted for ``stats`` only. Each update is one native step in the compiled build
        # (no thread switch inside it); in the sources, the GIL keeps ``+=`` whole on 3.11.
        self._queued = 0
        self._running = 0
        self._on_failure: FailureReport | None = None

    def submit(self, fn: Task, arg: object) -> None:
        """Run ``fn(arg)`` now on this thread, or after the task this thread is running."""
        local = self._local
        queue: deque[tuple[Task, object]] | None = getattr(local, "queue", None)
        if queue is not None:
            queue.append((fn, arg))
            self._queued += 1
            return
        queue = deque()
        local.queue = queue
        self._running += 1
        try:
            # This thread's run loop: each task may append more (downstream nodes).
            fn(arg)
            while queue:
                task, targ = queue.popleft()
                self._queued -= 1
                task(targ)
        finally:
            local.queue = None
            self._running -= 1
            if queue:
                # A task raised past the engine (the user's Ctrl-C): the work it left behind
                # (the cancel's closes, say) goes on on the background thread, or the graph
                # would wait for it forever.
                self._queued -= len(queue)
                while queue:
                    task, targ = queue.popleft()
                    self.submit_background(task, targ)

    def backlog(self) -> Sized | None:
        """The tasks waiting behind the one this thread runs now; None outside the run loop.

        Empty means that work submitted now would run next: the engine then runs a chain's
        next hop in its own loop instead of submitting it. The object is this thread's and
        stays the same for as long as the running task runs.
        """
        queue: deque[tuple[Task, object]] | None = getattr(self._local, "queue", None)
        return queue

    def run_next(self) -> bool:
        """Run the oldest task waiting behind the one this thread runs, now, nested in it;
        False when none waits (or outside the run loop).

        For a kernel that waits inside its call for room its own output must make (the
        engine's ``Spills.spill``): the consumers it fed wait in this very queue.
        """
        queue: deque[tuple[Task, object]] | None = getattr(self._local, "queue", None)
        if not queue:
            return False
        try:
            fn, arg = queue.popleft()  # (atomic: the background FIFO is appended to under its lock)
        except IndexError:
            return False
        self._queued -= 1
        fn(arg)
        return True

    def inbox(self) -> Inbox | None:
        """None: it runs its tasks itself, on the submitting or its background thread."""
        return None

    def set_on_submit(self, wake: Callable[[], None] | None) -> None:
        """Ignored: no host thread has to run its work."""

    def stats(self) -> TaskStats:
        """Tasks waiting in any thread's run loop or for the background thread, and threads
        running one of its tasks now."""
        return TaskStats(self.kind, 0, self._queued, self._running, 0)

    def submit_background(self, fn: Task, arg: object) -> None:
        """Queue ``fn(arg)`` for the graph's background thread (sources, wakes)."""
        with self._bg_lock:
            if self._stopping:
                return
            self._bg_tasks.append((fn, arg))
            self._queued += 1
            if self._bg_thread is None:
                self._bg_thread = threading.Thread(
                    target=self._background_loop, name=f"flowplex-{self.name}", daemon=True
                )
                self._bg_thread.start()
            else:
                self._bg_cond.notify()

    def set_on_failure(self, report: FailureReport | None) -> None:
        """Call ``report(arg, exc, where)`` when a task raises on the background thread (tasks
        never should); the thread goes on serving. On a caller's thread it propagates."""
        self._on_failure = report

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
                self._queued -= 1
                self._running += 1
            try:
                fn(arg)
            except BaseException as exc:  # no cost per task until one raises
                self._report(arg, exc)
            finally:
                self._running -= 1

    def _report(self, arg: object, exc: BaseException) -> None:
        """Hand what escaped a background task to the engine; the thread must not die of it."""
        where = f"background thread `{threading.current_thread().name}` of executor `{self.name}`"
        report_failure(self._on_failure, arg, exc, where, log)

    def start(self) -> None:
        """Nothing to start: the background thread starts with the first background task."""
        with self._bg_lock:
            self._stopping = False

    def shutdown(self) -> None:
        """Stop the background thread (after its current task) and join it."""
        with self._bg_lock:
            self._stopping = True
            self._queued -= len(self._bg_tasks)
            self._bg_tasks.clear()
            self._bg_cond.notify_all()
            thread, self._bg_thread = self._bg_thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=JOIN_S)
