"""asyncio: run_async and events() drive the graph without polling threads."""

from __future__ import annotations

import asyncio
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest

import flowplex

from .conftest import CHAIN


def test_events_yield_packets_bounds_and_done() -> None:
    async def main() -> list[flowplex.OutputEvent]:
        with flowplex.Graph.from_yaml(CHAIN) as g:
            events = g.events("z")
            g.start()
            g.send("x", 3, ts=4)
            g.close_all_inputs()
            return [e async for e in events]

    got = asyncio.run(main())
    assert isinstance(got[0], flowplex.PacketEvent) and got[0].packet.as_int() == 12 and got[0].timestamp == 4
    assert got[1] == flowplex.TimestampBoundEvent(5)
    assert got[-1] == flowplex.DoneEvent() and got[-1].timestamp == flowplex.TS_DONE


@pytest.mark.executors(
    "delegating",
    reason="about driving a DelegatingExecutor from asyncio: its one node is pinned to one",
)
def test_run_async_drives_a_delegating_graph() -> None:
    async def main() -> list[int]:
        with flowplex.Graph.from_yaml("""
executors: [{ name: host, type: DelegatingExecutor }]
nodes:
  - { name: d, executor: host, kernel: TDouble, input_ports: [x], output_ports: [y] }
input_ports: [x]
output_ports: [y]
""") as g:
            seen: list[int] = []
            g.observe("y", lambda p: seen.append(p.as_int()))
            g.start()
            for i in range(5):
                g.send("x", i, ts=i)
            g.close_all_inputs()
            await g.run_async(timeout=10)
            return seen

    assert asyncio.run(main()) == [0, 2, 4, 6, 8]


@pytest.mark.on_caller(
    reason="with the default cancel_grace=0 the nodes must close inside cancel(), on the caller's thread; elsewhere "
    "the closes run later and run_async warns that the grace expired, as documented",
)
def test_run_async_timeout_cancels_and_raises() -> None:
    async def main() -> None:
        with flowplex.Graph.from_yaml(CHAIN) as g:
            g.start()
            with pytest.raises(flowplex.Timeout, match="run_async timed out"):
                await g.run_async(timeout=0.05)
            with pytest.raises(ValueError):
                await g.run_async(timeout=-1)

    asyncio.run(main())


# -- cancellation and timeout with a kernel still running (issue 12) ------------------------------

SLEEPER = """
executors: [{ name: pool, type: ThreadPoolExecutor, num_threads: 1 }]
nodes:
  - { name: s, executor: pool, kernel: TAsyncSleeper, input_ports: [x], output_ports: [y], options: { s: %s } }
input_ports: [x]
output_ports: [y]
"""


ON_THE_SLEEPER_POOL = pytest.mark.executors(
    "threads",
    reason="SLEEPER pins its one node to a one-worker pool, so that the test thread can cancel while the kernel "
    "sleeps",
)
"""The sleeper tests are about a kernel running on a pool worker while the test thread acts."""


class Sleeps:
    """What the sleeper kernel did, seen from the test (set on the pool thread)."""

    started = threading.Event()
    finished = threading.Event()


@flowplex.kernel("TAsyncSleeper")
class TAsyncSleeper(flowplex.Kernel):
    """Sleeps option `s` seconds in `process` (not interruptible: cancel is not pre-emptive)."""

    def process(self, cc: flowplex.Context) -> None:
        Sleeps.started.set()
        time.sleep(cc.option_float("s", 1.0))
        Sleeps.finished.set()
        cc.forward(0, 0)


SleepingGraph = Callable[[float], flowplex.Graph]


@pytest.fixture
def sleeping_graph() -> Iterator[SleepingGraph]:
    """Build started graphs whose one pool kernel is about to sleep ``seconds``, inputs closed.

    The tests sleep 0.6 s: long enough to tell "returned at once" from "waited", and well under
    the idle second after which ``Graph.close`` abandons a call (a 1 s sleep raced it).

    Each test closes its graph itself (and checks the cleanup); teardown closes it again
    (idempotent) so that a failed assertion leaves no sleeping worker to the next test.
    """
    graphs: list[flowplex.Graph] = []

    def build(seconds: float) -> flowplex.Graph:
        Sleeps.started.clear()
        Sleeps.finished.clear()
        g = flowplex.Graph.from_yaml(SLEEPER % seconds)
        graphs.append(g)
        g.start()
        g.send("x", 0, ts=0)
        g.close_all_inputs()
        return g

    yield build
    for g in graphs:
        g.close()


async def _until_the_kernel_sleeps() -> None:
    deadline = time.monotonic() + 5
    while not Sleeps.started.is_set():
        assert time.monotonic() < deadline, "the kernel never started"
        await asyncio.sleep(0.002)


def _close_completes_cleanup(g: flowplex.Graph) -> None:
    t0 = time.monotonic()
    g.close()
    assert time.monotonic() - t0 < 3.0
    assert g.state == flowplex.GraphState.TERMINATED
    assert Sleeps.finished.is_set()
    assert not [t for t in threading.enumerate() if t.name.startswith("pool-")]


@dataclass
class Seen:
    inner_cancelling: int = -1
    elapsed: float = -1.0


async def _run_and_record(g: flowplex.Graph, seen: Seen, **kwargs: float) -> None:
    try:
        await g.run_async(**kwargs)
    except asyncio.CancelledError:
        task = asyncio.current_task()
        assert task is not None
        seen.inner_cancelling = task.cancelling()
        raise


@ON_THE_SLEEPER_POOL
def test_cancelling_run_async_returns_at_once_and_warns_that_the_grace_expired(sleeping_graph: SleepingGraph) -> None:
    async def main() -> tuple[Seen, asyncio.Task[None]]:
        g = sleeping_graph(0.6)
        seen = Seen()
        task = asyncio.create_task(_run_and_record(g, seen))
        await _until_the_kernel_sleeps()
        t0 = time.monotonic()
        task.cancel()
        warned = pytest.warns(RuntimeWarning, match="run_async cancellation grace expired")
        with warned as record, pytest.raises(asyncio.CancelledError):
            await task
        seen.elapsed = time.monotonic() - t0
        assert "Graph.close() will complete synchronous cleanup" in str(record[0].message)
        assert record[0].filename == __file__  # attributed to the code awaiting run_async
        assert g.state != flowplex.GraphState.TERMINATED  # the kernel still sleeps
        _close_completes_cleanup(g)
        return seen, task

    seen, task = asyncio.run(main())
    assert seen.elapsed < 0.2  # the kernel sleeps 0.6 s
    assert seen.inner_cancelling == 1 and task.cancelling() == 1


@ON_THE_SLEEPER_POOL
def test_a_timeout_returns_at_once_and_warns_that_the_grace_expired(sleeping_graph: SleepingGraph) -> None:
    async def main() -> float:
        g = sleeping_graph(0.6)
        await _until_the_kernel_sleeps()
        t0 = time.monotonic()
        warned = pytest.warns(RuntimeWarning, match="run_async timeout grace expired before the graph terminated")
        with warned, pytest.raises(flowplex.Timeout, match=r"run_async timed out after 0\.05 seconds"):
            await g.run_async(timeout=0.05)
        elapsed = time.monotonic() - t0
        assert g.state != flowplex.GraphState.TERMINATED
        _close_completes_cleanup(g)
        return elapsed

    assert asyncio.run(main()) < 0.25  # 0.05 s timeout, no grace; the kernel sleeps 1 s


@ON_THE_SLEEPER_POOL
def test_a_second_cancellation_abandons_the_grace_and_is_not_counted(sleeping_graph: SleepingGraph) -> None:
    async def main() -> tuple[Seen, asyncio.Task[None]]:
        g = sleeping_graph(0.6)
        seen = Seen()
        task = asyncio.create_task(_run_and_record(g, seen, cancel_grace=5))
        await _until_the_kernel_sleeps()
        task.cancel()
        await asyncio.sleep(0.05)  # run_async is now waiting out its grace
        assert not task.done()
        t0 = time.monotonic()
        task.cancel()
        with warnings.catch_warnings(record=True) as record:
            warnings.simplefilter("always")
            with pytest.raises(asyncio.CancelledError):
                await task
        seen.elapsed = time.monotonic() - t0
        assert not record  # abandoned on request: no "grace expired" warning
        assert g.state != flowplex.GraphState.TERMINATED
        _close_completes_cleanup(g)
        return seen, task

    seen, task = asyncio.run(main())
    assert seen.elapsed < 0.2  # not the 5 s grace, nor the kernel's 0.6 s
    assert seen.inner_cancelling == 1  # inside the task, where CancelledError propagates
    assert task.cancelling() == 1  # and from outside


@ON_THE_SLEEPER_POOL
@pytest.mark.parametrize("how", ["cancel", "timeout"])
def test_a_grace_that_suffices_terminates_the_graph_without_a_warning(how: str, sleeping_graph: SleepingGraph) -> None:
    async def main() -> float:
        g = sleeping_graph(0.3)
        with warnings.catch_warnings(record=True) as record:
            warnings.simplefilter("always")
            t0 = time.monotonic()
            if how == "cancel":
                task = asyncio.create_task(g.run_async(cancel_grace=5))
                await _until_the_kernel_sleeps()
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task
                assert task.cancelling() == 1
            else:
                with pytest.raises(flowplex.Timeout):
                    await g.run_async(timeout=0.05, cancel_grace=5)
            elapsed = time.monotonic() - t0
        assert not [w for w in record if issubclass(w.category, RuntimeWarning)]
        assert g.state == flowplex.GraphState.TERMINATED and Sleeps.finished.is_set()
        _close_completes_cleanup(g)
        return elapsed

    assert asyncio.run(main()) < 2.0  # the kernel's 0.3 s, well inside the 5 s grace


def test_run_async_on_a_closed_graph_raises_instead_of_hanging() -> None:
    g = flowplex.Graph.from_yaml(CHAIN)
    g.close()

    async def main() -> None:
        with pytest.raises(flowplex.StateError, match=r"need an open graph: this one was closed"):
            await asyncio.wait_for(g.run_async(), timeout=5)

    asyncio.run(main())
