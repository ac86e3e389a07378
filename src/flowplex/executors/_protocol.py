"""The one seam every executor implements, and the snapshot each one reports."""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Sized
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Protocol, runtime_checkable

if TYPE_CHECKING:
    from ..packets._packet import BufferAllocator
    from ..spec._specs import NodeSpec
    from ._invocation import Complete, Invocation, NodeRecipe, Spill

JOIN_S: Final = 0.25
"""How long an executor's ``shutdown`` waits for its threads to finish their tasks, in all: the
engine has already waited for the graph to drain (``Graph.close``) and warned about a call that
does not return; its thread, a daemon, is left to end by itself."""

Task = Callable[[object], None]
"""An engine callback applied to one argument (an invocation context)."""
Inbox = deque[tuple[Task, object]]
"""A FIFO of ``(fn, arg)`` that host threads drain (see ``Executor.inbox``)."""
FailureReport = Callable[[object, BaseException, str], None]
"""``report(arg, exc, where)``: an executor's own thread caught ``exc`` (see ``Executor``):
``arg`` is the argument of the task that raised (None outside a task), ``where`` names the
thread. The engine fails the graph with it, naming the node."""


def report_failure(report: FailureReport | None, arg: object, exc: BaseException, where: str,
                   log: logging.Logger) -> None:
    """Hand what escaped a task on an executor thread to the engine (``set_on_failure``); the
    thread must survive it, so a failing report is only logged (on the executor's ``log``)."""
    if report is None:
        log.error("%s: %s: %s (no engine to report it to)", where, type(exc).__name__, exc)
        return
    try:
        report(arg, exc, where)
    except Exception:
        log.exception("%s: reporting %r failed", where, exc)


@dataclass(frozen=True, slots=True)
class TaskStats:
    """What one executor holds now (``Executor.stats``); diagnostics format it."""

    kind: str
    """``inline``, ``threads``, ``delegating``, ``loopback`` or ``processes``: for display only,
    nothing branches on it."""
    threads: int
    """Worker threads it owns (0 for inline and delegating; a process pool's dispatcher)."""
    queued: int
    """Tasks submitted and not started yet."""
    running: int
    """Tasks it is executing now."""
    capacity: int
    """How many tasks it runs at once: ``threads`` for a pool, 1 for delegating, 0 (no fixed
    limit: every calling thread runs its own) for inline."""


@runtime_checkable
class Executor(Protocol):
    """Runs engine tasks. Tasks never raise: the engine records failures itself.

    This is everything the engine and diagnostics use: every capability is declared here, and
    the engine calls it without probing. It reads ``runs_on_caller`` and ``inbox()`` once, when
    it builds a graph, and never tests ``kind`` or a type.
    """

    name: str
    kind: str
    """``inline``, ``threads`` or ``delegating``: descriptive, for display only."""
    threads: int
    """Worker threads it owns (0 for inline and delegating)."""
    runs_on_caller: bool
    """Work submitted from inside one of its tasks runs on the submitting thread, after that
    task (the inline executor). Two hop nodes on such an executor are *chained*: the engine
    runs the second in its own loop when ``backlog()`` is empty (``port.chained``)."""
    hosts_kernels: bool
    """It runs kernels on instances of its own (another process, or the loopback codec): it
    is a ``KernelHostExecutor`` too, and the engine hands it invocations, not contexts."""
    kernels_in_process: bool
    """The kernels run in this interpreter (False for a process pool or Ray): a kernel class
    defined in a function works, and what a kernel writes to a list is what the host reads."""

    def submit(self, fn: Task, arg: object) -> None:
        """Run ``fn(arg)`` soon; never blocks on the task itself."""

    def submit_background(self, fn: Task, arg: object) -> None:
        """Like ``submit`` for work nobody is waiting on (sources, timer wakes)."""

    def backlog(self) -> Sized | None:
        """Tasks queued behind the one this thread runs now; None outside one of its tasks.

        Always None when ``runs_on_caller`` is False (the engine does not ask then). Empty
        means that work submitted now would run next, on this thread.
        """

    def inbox(self) -> Inbox | None:
        """The FIFO that host threads drain, for an executor that runs no task itself; or None.

        The engine appends its hand-overs to it directly (and wakes host waiters itself), and
        pops it in ``Graph.pump_step`` and the blocking host calls. The same object for the
        executor's whole life.
        """

    def set_on_submit(self, wake: Callable[[], None] | None) -> None:
        """Call ``wake()`` after each ``submit`` that queues work a host thread must run.

        The engine passes its host wake-up; an executor with threads of its own ignores it.
        """

    def set_on_failure(self, report: FailureReport | None) -> None:
        """Where its own threads report what reaches them (a task that raised after all, a
        failed affinity setting) instead of dying; the engine fails the graph with it. An
        executor without threads of its own ignores it."""

    def run_next(self) -> bool:
        """Run the next task queued behind the one this thread runs now; False when there is
        none (always False where ``runs_on_caller`` is False). A call held by the budget
        (``Spills.spill``) runs its own consumers this way."""

    def stats(self) -> TaskStats:
        """A snapshot of what it holds (safe from any thread, lock-free or briefly locked)."""

    def start(self) -> None:
        """Start threads, if any (called at ``Graph.start`` when a node uses the executor)."""

    def shutdown(self) -> None:
        """Stop and join threads; queued tasks are dropped."""


@runtime_checkable
class KernelHostExecutor(Executor, Protocol):
    """An executor that runs kernels on its own instances (``hosts_kernels`` is True).

    The engine calls ``host`` once per ``Graph.start`` with the nodes placed on it, then
    ``invoke`` for every ``open``, ``process`` and ``close`` of those nodes. An ``open`` comes
    from a task it submitted in the background (the executor's own thread); a ``process`` or
    ``close`` is handed over directly, on the thread that claimed it, outside the engine's lock
    (the engine's ``_handoff``: never through ``submit``). So ``invoke`` must not wait for a
    worker: it queues the call and returns. Nothing of the engine crosses: an ``Invocation``
    is plain data, and so is the ``Outcome`` handed back.
    """

    def host(self, recipes: list[NodeRecipe]) -> None:
        """Build (or keep, on a restart after ``reset``) a kernel instance per recipe."""

    def watch(self, stopped: Callable[[], bool]) -> None:
        """Before ``host``: ``stopped()`` tells when the graph has stopped, so that calls the
        executor queued of its own (Ray's batches) are dropped then. A no-op for the others."""

    def bound_start(self, deadline: float | None, stopped: Callable[[], bool] | None) -> None:
        """Before ``host``: a hosting that waits (workers loading kernels) gives up at
        ``deadline`` (``perf_counter`` seconds) or when ``stopped()``. A no-op where hosting
        does not wait."""

    def buffer_allocator(self) -> BufferAllocator | None:
        """Where a node that feeds this executor allocates its buffers (the process pool's
        shared-memory arena), or None for ordinary memory."""

    def calls_in_flight(self, spec: NodeSpec) -> int:
        """How many calls of a node the engine may claim before the first is answered (read at
        build: an executor that batches calls, Ray, says more than 1; a node with a back edge
        keeps one at a time)."""

    def invoke(self, invocation: Invocation, complete: Complete, spill: Spill | None = None) -> None:
        """Run one callback on the hosted instance; call ``complete(outcome)`` exactly once.

        ``spill``, when given, takes the partial outcomes of a long ``process`` call (see
        ``Spill``): an executor whose host can hold its kernel while it waits (the process pool)
        hands it each slice; one that cannot ignores it, and the call's output comes whole.
        """
