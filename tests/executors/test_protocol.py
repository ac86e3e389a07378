"""Every executor satisfies the one ``Executor`` protocol, and the engine only uses that.

The engine and diagnostics use an executor through what the protocol declares (``submit``,
``submit_background``, ``runs_on_caller``, ``backlog``, ``inbox``, ``set_on_submit``,
``stats``, ``start``, ``shutdown``); ``kind`` is for display. The last test greps the engine
and diagnostics sources so that a branch on ``kind`` or on an executor class cannot come back.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from flowplex.executors import DelegatingExecutor, Executor, InlineExecutor, TaskStats, ThreadPoolExecutor

SRC = Path(__file__).resolve().parents[2] / "src" / "flowplex"
WAIT_S = 10.0

Factory = Callable[[], Executor]
FACTORIES: dict[str, Factory] = {
    "inline": lambda: InlineExecutor("default"),
    "threads": lambda: ThreadPoolExecutor("pool", num_threads=2),
    "delegating": lambda: DelegatingExecutor("host"),
}


@pytest.fixture(params=sorted(FACTORIES))
def executor(request: pytest.FixtureRequest) -> Iterator[Executor]:
    ex = FACTORIES[request.param]()
    ex.start()
    yield ex
    ex.shutdown()


def _drain(ex: Executor) -> None:
    """Run what a delegating executor holds, as the engine's pump would on a host thread."""
    box = ex.inbox()
    while box:
        fn, arg = box.popleft()
        fn(arg)


def test_each_executor_satisfies_the_protocol(executor: Executor) -> None:
    assert isinstance(executor, Executor)
    assert isinstance(executor.name, str)
    assert executor.kind in ("inline", "threads", "delegating")
    assert isinstance(executor.runs_on_caller, bool)
    stats = executor.stats()
    assert isinstance(stats, TaskStats)
    assert (stats.kind, stats.threads, stats.queued, stats.running) == (executor.kind, executor.threads, 0, 0)


def test_something_else_is_not_an_executor() -> None:
    assert not isinstance(object(), Executor)


def test_submit_runs_each_task_once(executor: Executor) -> None:
    done: list[object] = []
    finished = threading.Event()

    def task(arg: object) -> None:
        done.append(arg)
        if len(done) == 3:
            finished.set()

    for i in range(3):
        executor.submit(task, i)
    _drain(executor)
    assert finished.wait(WAIT_S)
    assert sorted(done) == [0, 1, 2]  # type: ignore[type-var]


def test_runs_on_caller_only_for_inline() -> None:
    on_caller = {kind: make().runs_on_caller for kind, make in FACTORIES.items()}
    assert on_caller == {"inline": True, "threads": False, "delegating": False}


def test_inline_work_submitted_inside_a_task_runs_after_it_on_the_same_thread() -> None:
    ex = InlineExecutor()
    order: list[tuple[str, int | None]] = []

    def inner(arg: object) -> None:
        order.append(("inner", threading.get_ident()))

    def outer(arg: object) -> None:
        ex.submit(inner, None)
        order.append(("outer", threading.get_ident()))

    ex.submit(outer, None)
    me = threading.get_ident()
    assert order == [("outer", me), ("inner", me)]


def test_inline_backlog_inside_and_outside_a_task() -> None:
    ex = InlineExecutor()
    seen: list[int | None] = []

    def probe(arg: object) -> None:
        backlog = ex.backlog()
        seen.append(None if backlog is None else len(backlog))

    def outer(arg: object) -> None:
        probe(None)                    # nothing queued behind this task: empty
        ex.submit(probe, None)         # queued: runs after this task, when it is the last
        ex.submit(probe, None)
        probe(None)                    # two queued behind it now

    assert ex.backlog() is None        # outside a task
    ex.submit(outer, None)
    assert seen == [0, 2, 1, 0]
    assert ex.backlog() is None


@pytest.mark.parametrize("kind", ["threads", "delegating"])
def test_backlog_is_none_without_a_caller_loop(kind: str) -> None:
    ex = FACTORIES[kind]()
    ex.start()
    try:
        seen: list[object] = []
        ran = threading.Event()

        def probe(arg: object) -> None:
            seen.append(ex.backlog())
            ran.set()

        assert ex.backlog() is None
        ex.submit(probe, None)
        _drain(ex)
        assert ran.wait(WAIT_S)
        assert seen == [None]
    finally:
        ex.shutdown()


def test_inbox_only_for_delegating() -> None:
    d = DelegatingExecutor("host")
    assert d.inbox() is d.inbox()  # the same FIFO for its whole life: the engine keeps it
    assert InlineExecutor().inbox() is None
    assert ThreadPoolExecutor("pool").inbox() is None


def test_delegating_submit_queues_in_the_inbox_and_wakes() -> None:
    d = DelegatingExecutor("host")
    wakes: list[int] = []
    d.set_on_submit(lambda: wakes.append(len(d.inbox())))
    d.submit(print, 1)
    d.submit_background(print, 2)
    assert list(d.inbox()) == [(print, 1), (print, 2)]
    assert wakes == [1, 2]  # after each submission, once the task is queued
    assert d.stats().queued == 2
    d.shutdown()
    assert d.stats().queued == 0


@pytest.mark.parametrize("kind", ["inline", "threads"])
def test_executors_with_their_own_threads_ignore_the_wake(kind: str) -> None:
    ex = FACTORIES[kind]()
    wakes: list[None] = []
    ex.set_on_submit(lambda: wakes.append(None))
    ex.start()
    try:
        done = threading.Event()
        ex.submit(lambda _: done.set(), None)
        assert done.wait(WAIT_S)
        assert wakes == []
    finally:
        ex.shutdown()


def test_inline_stats_while_tasks_queue_and_run() -> None:
    ex = InlineExecutor()
    seen: list[TaskStats] = []

    def noop(arg: object) -> None:
        seen.append(ex.stats())

    def outer(arg: object) -> None:
        seen.append(ex.stats())
        ex.submit(noop, None)
        ex.submit(noop, None)
        seen.append(ex.stats())

    ex.submit(outer, None)
    assert [(s.queued, s.running) for s in seen] == [(0, 1), (2, 1), (1, 1), (0, 1)]
    assert (ex.stats().queued, ex.stats().running, ex.stats().capacity) == (0, 0, 0)


def test_inline_stats_count_background_work() -> None:
    ex = InlineExecutor("bg")
    release = threading.Event()
    started = threading.Event()

    def block(arg: object) -> None:
        started.set()
        release.wait(WAIT_S)

    ex.start()
    try:
        ex.submit_background(block, None)
        assert started.wait(WAIT_S)
        ex.submit_background(block, None)
        assert (ex.stats().queued, ex.stats().running) == (1, 1)
        release.set()
    finally:
        ex.shutdown()
    assert ex.stats().queued == 0


def test_thread_pool_stats_while_tasks_queue_and_run() -> None:
    ex = ThreadPoolExecutor("pool", num_threads=2)
    release = threading.Event()
    started = threading.Semaphore(0)

    def block(arg: object) -> None:
        started.release()
        release.wait(WAIT_S)

    ex.start()
    try:
        for _ in range(3):
            ex.submit(block, None)
        assert started.acquire(timeout=WAIT_S)
        assert started.acquire(timeout=WAIT_S)
        s = ex.stats()
        assert (s.kind, s.threads, s.queued, s.running, s.capacity) == ("threads", 2, 1, 2, 2)
        release.set()
        assert started.acquire(timeout=WAIT_S)
    finally:
        ex.shutdown()
    assert (ex.stats().queued, ex.stats().running) == (0, 0)


def test_delegating_stats_while_tasks_queue_and_run() -> None:
    d = DelegatingExecutor("host")
    seen: list[TaskStats] = []
    d.submit(lambda _: seen.append(d.stats()), None)
    d.submit(lambda _: seen.append(d.stats()), None)
    assert (d.stats().queued, d.stats().running, d.stats().capacity) == (2, 0, 1)
    assert d.run_one()
    assert d.run_one()
    assert not d.run_one()
    assert [(s.queued, s.running) for s in seen] == [(1, 1), (0, 1)]
    assert (d.stats().queued, d.stats().running) == (0, 0)


# -- the engine uses the protocol, not kinds or classes ----------------------------------------

_KINDS = r"""["'](?:inline|threads|delegating)["']"""
_BRANCHES = re.compile(
    rf"""\bkind\s*(?:[!=]=|\bin\b)\s*\(?{_KINDS}"""                  # kind == "inline", kind in ("threads", ...)
    rf"""|{_KINDS}\s*[!=]=\s*[\w.]*kind\b"""                          # "inline" == ex.kind
    r"""|isinstance\([^)]*\b(?:Inline|ThreadPool|Delegating)Executor\b"""  # testing an executor's class
    r"""|getattr\([^)]*["']kind["']"""                                  # reading kind by name
)


def _engine_sources() -> Iterator[Path]:
    for package in ("engine", "graph", "diagnostics"):
        yield from sorted((SRC / package).glob("*.py"))


_PROBES = re.compile(r"""(?:getattr|hasattr)\(\s*(?:[\w.]*executor|ex|host)\b""")
"""Asking an executor whether it has a capability, instead of calling what the protocol declares."""


def test_the_engine_calls_capabilities_the_protocol_declares_without_probing() -> None:
    found = []
    for path in _engine_sources():
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if _PROBES.search(line.split("#", 1)[0]):
                found.append(f"{path.relative_to(SRC)}:{n}: {line.strip()}")
    assert found == []
    for old in ('guard = getattr(ex, "set_on_failure", None)',
                'window = getattr(node.executor, "calls_in_flight", None)',
                'zeros = getattr(port.node.executor, "buffer_allocator", None)'):
        assert _PROBES.search(old), old


def test_every_executor_kind_has_every_capability_the_engine_calls() -> None:
    """The in-process kinds satisfy ``Executor``; the hosting kinds ``KernelHostExecutor`` (the
    protocols are runtime-checkable: a missing method fails here, not in a user's graph)."""
    from flowplex.executors._protocol import KernelHostExecutor
    from flowplex.executors.processes import ProcessPoolExecutor
    from flowplex.executors.ray import RayExecutor
    from flowplex.testing import LoopbackExecutor

    for factory in FACTORIES.values():
        ex = factory()
        assert isinstance(ex, Executor) and not isinstance(ex, KernelHostExecutor)
        assert ex.kernels_in_process and not ex.hosts_kernels
        assert ex.run_next() is False  # nothing waits behind a task on this thread
    hosting = [LoopbackExecutor(), ProcessPoolExecutor("pool", num_processes=1), RayExecutor("ray")]
    for ex in hosting:
        assert isinstance(ex, KernelHostExecutor), ex.kind
        assert ex.hosts_kernels and ex.run_next() is False
        assert ex.calls_in_flight.__doc__
    assert [ex.kernels_in_process for ex in hosting] == [True, False, False]


def test_the_engine_never_branches_on_an_executor_kind_or_class() -> None:
    found = []
    for path in _engine_sources():
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            code = line.split("#", 1)[0]
            if _BRANCHES.search(code):
                found.append(f"{path.relative_to(SRC)}:{n}: {line.strip()}")
    assert found == []


def test_the_grep_catches_the_old_branches() -> None:
    for line in ('and node.executor.kind == "inline")',
                 'if node.delegate is None and executor.kind == "inline"',
                 "if isinstance(node.executor, DelegatingExecutor):",
                 'capacity=threads if kind == "threads" else 1',
                 'kind = str(getattr(ex, "kind", "threads"))',
                 'if "inline" != ex.kind:', 'if ex.kind in ("threads", "delegating"):'):
        assert _BRANCHES.search(line), line
    assert not _BRANCHES.search('elif pred.kind == "not":')  # a routing condition, not an executor
