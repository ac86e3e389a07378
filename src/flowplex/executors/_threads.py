"""``ThreadPoolExecutor``: a fixed set of worker threads fed by one FIFO."""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Sized
from typing import final

from ._protocol import JOIN_S, FailureReport, Inbox, Task, TaskStats, report_failure

log = logging.getLogger(__name__)


@final
class ThreadPoolExecutor:
    """``num_threads`` workers; optional CPU affinity and real-time priority (best effort)."""

    kind = "threads"
    runs_on_caller = False
    hosts_kernels = False
    kernels_in_process = True

    def __init__(
        self, name: str, num_threads: int = 1, affinity: tuple[int, ...] = (), priority: int = 0
    ) -> None:
        self.name = name
        self.threads = max(1, num_threads)
        self._affinity = affinity
        self._priority = priority
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._tasks: deque[tuple[Task, object]] = deque()
        self._workers: list[threading.Thread] = []
        self._stopping = False
        self._idle = 0
        self._running = 0
        self._on_failure: FailureReport | None = None

    def submit(self, fn: Task, arg: object) -> None:
        """Queue ``fn(arg)`` for the next free worker."""
        with self._lock:
            if self._stopping:
                return
            self._tasks.append((fn, arg))
            if self._idle:
                self._cond.notify()

    submit_background = submit

    def backlog(self) -> Sized | None:
        """None: its workers have no caller-thread loop."""
        return None

    def inbox(self) -> Inbox | None:
        """None: its workers run the tasks."""
        return None

    def set_on_submit(self, wake: Callable[[], None] | None) -> None:
        """Ignored: no host thread has to run its work."""

    def stats(self) -> TaskStats:
        """Tasks waiting for a worker, and workers running one."""
        with self._lock:
            return TaskStats(self.kind, self.threads, len(self._tasks), self._running, self.threads)

    def start(self) -> None:
        """Spawn the workers (idempotent; they live until ``shutdown``)."""
        with self._lock:
            self._stopping = False
            if self._workers:
                return
            for i in range(self.threads):
                t = threading.Thread(target=self._worker, args=(i,), name=f"{self.name}-{i}", daemon=True)
                self._workers.append(t)
                t.start()

    def run_next(self) -> bool:
        """False: its tasks run on its own threads, never queued behind a caller's."""
        return False

    def set_on_failure(self, report: FailureReport | None) -> None:
        """Call ``report(arg, exc, where)`` when a worker thread catches what should never reach
        it: a task that raised (``arg`` is its argument) or a failed ``affinity`` / ``priority``
        setting (``arg`` is None). The engine fails the graph; the worker goes on serving."""
        self._on_failure = report

    def _worker(self, i: int) -> None:
        # Nothing a task or a setting raises may end a worker: with the pool's only worker
        # gone, a graph would wait forever. What one catches it reports (the engine fails the
        # graph, naming the node), and it goes on serving, so the graph's closes still run.
        # (A ``try`` costs nothing per task until something raises.)
        where = f"worker thread `{threading.current_thread().name}` of executor `{self.name}`"
        try:
            self._pin(i)
        except BaseException as exc:  # e.g. an affinity the OS cannot even represent (OverflowError)
            report_failure(self._on_failure, None, exc, f"{where}, setting its affinity/priority", log)
        ran = 0  # 1 after a task: the count of running workers drops with the next lock take
        while True:
            with self._lock:
                self._running -= ran
                ran = 0
                while not self._tasks and not self._stopping:
                    self._idle += 1
                    self._cond.wait()
                    self._idle -= 1
                if self._stopping:
                    return
                fn, arg = self._tasks.popleft()
                self._running += 1
                ran = 1
            try:
                fn(arg)
            except BaseException as exc:
                report_failure(self._on_failure, arg, exc, where, log)


    def _pin(self, i: int) -> None:
        # Best effort, like lm-flow: silently keep the defaults without permission.
        if self._affinity and hasattr(os, "sched_setaffinity"):
            with contextlib.suppress(OSError, ValueError):
                os.sched_setaffinity(0, {self._affinity[i % len(self._affinity)]})
        if self._priority > 0 and hasattr(os, "sched_setscheduler"):
            prio = min(99, max(1, self._priority))
            with contextlib.suppress(OSError, ValueError, PermissionError):
                os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(prio))

    def shutdown(self) -> None:
        """Stop the workers after their current task and join them, for ``JOIN_S`` at most in all.

        A worker still in a task then (a kernel call that never returns: the engine has given
        up on it and warned) is left to end by itself; it is a daemon, so it does not keep the
        interpreter from exiting.
        """
        with self._lock:
            self._stopping = True
            self._tasks.clear()
            self._cond.notify_all()
            workers, self._workers = self._workers, []
        me = threading.current_thread()
        deadline = time.monotonic() + JOIN_S
        for t in workers:
            if t is not me:
                t.join(timeout=max(0.0, deadline - time.monotonic()))
        left = [t.name for t in workers if t.is_alive() and t is not me]
        if left:
            log.debug("executor.shutdown.left executor=%r threads=%r", self.name, left)
