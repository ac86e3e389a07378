"""``DispatchTasks``: how an executor that hosts kernels elsewhere runs the engine's tasks.

The engine hands such an executor's process and close calls to ``invoke`` itself
(``engine._handoff``); what it still submits (opens, sources, timer wakes: work nobody waits
on) runs on one dispatcher thread, so it never holds up the thread that asked for it. Shared
by the process pool and the Ray executor.
"""

from __future__ import annotations

from collections.abc import Callable, Sized
from typing import TYPE_CHECKING, final

from .._protocol import FailureReport, Inbox, Task
from .._threads import ThreadPoolExecutor

if TYPE_CHECKING:
    from ...packets._packet import BufferAllocator
    from ...spec._specs import NodeSpec

__all__ = ["DispatchTasks", "HostingDefaults", "OnDispatcherTasks"]


@final
class DispatchTasks:
    """Runs the tasks submitted to a hosting executor on its one dispatcher thread."""

    __slots__ = ("dispatcher",)

    def __init__(self, name: str) -> None:
        self.dispatcher = ThreadPoolExecutor(f"{name}-dispatch", 1)

    def submit(self, fn: Task, arg: object) -> None:
        """Queue ``fn(arg)`` for the dispatcher thread."""
        self.dispatcher.submit(fn, arg)

    @property
    def queued(self) -> int:
        """Tasks waiting for the dispatcher."""
        return self.dispatcher.stats().queued


class HostingDefaults:
    """The kernel-host capabilities of ``KernelHostExecutor`` in their plain form, for an
    executor to override where it does more (the pool bounds its start and has an arena; Ray
    watches for a stop and batches calls; the loopback needs none of it)."""

    def run_next(self) -> bool:
        """False: a hosted call is never held on the caller's thread with work queued behind it."""
        return False

    def watch(self, stopped: Callable[[], bool]) -> None:
        """Ignored unless the executor queues calls of its own (Ray overrides it)."""

    def bound_start(self, deadline: float | None, stopped: Callable[[], bool] | None) -> None:
        """Ignored unless hosting waits for workers (the process pool overrides it)."""

    def buffer_allocator(self) -> BufferAllocator | None:
        """None: ordinary memory, unless the executor has its own (the pool's arena)."""
        return None

    def calls_in_flight(self, spec: NodeSpec) -> int:
        """1: one call of a node at a time, unless the executor batches calls (Ray)."""
        return 1


class OnDispatcherTasks(HostingDefaults):
    """The task half of the ``Executor`` protocol for an executor that hosts kernels elsewhere
    (the process pool, Ray): its ``_tasks`` runs them on a dispatcher thread; no host thread
    has to."""

    _tasks: DispatchTasks

    def submit(self, fn: Task, arg: object) -> None:
        """Queue ``fn(arg)`` for the dispatcher thread. (The engine calls ``invoke`` for a
        hosted node's process and close calls on the claiming thread, not through here.)"""
        self._tasks.submit(fn, arg)

    def submit_background(self, fn: Task, arg: object) -> None:
        """Queue ``fn(arg)`` for the dispatcher thread (never on the caller)."""
        self._tasks.submit(fn, arg)

    def backlog(self) -> Sized | None:
        """None: no caller-thread loop."""
        return None

    def inbox(self) -> Inbox | None:
        """None: the dispatcher runs the tasks."""
        return None

    def set_on_submit(self, wake: Callable[[], None] | None) -> None:
        """Ignored: no host thread has to run its work."""

    def set_on_failure(self, report: FailureReport | None) -> None:
        """The dispatcher thread reports what reaches it, as a thread pool's workers do."""
        self._tasks.dispatcher.set_on_failure(report)

    def start(self) -> None:
        """Start the dispatcher thread (idempotent; workers or actors start in ``host``)."""
        self._tasks.dispatcher.start()
