"""Source kernels: source_done, source_yield without a worker, rate pacing, cancel and reset."""

from __future__ import annotations

import itertools
import math
import threading
import time
from typing import ClassVar

import pytest

import flowplex

from .conftest import NO_RUN


@flowplex.kernel("SrcCount")
class SrcCount(flowplex.Kernel):
    """Emits its invocation timestamp until `count`, then calls source_done; records start times."""

    starts: ClassVar[list[float]] = []
    closes: ClassVar[list[int]] = []

    def process(self, cc: flowplex.Context) -> None:
        SrcCount.starts.append(time.monotonic())
        time.sleep(cc.option_int("busy_ms", 0) / 1000)
        i = cc.input_timestamp
        if i >= cc.option_int("count", 5):
            cc.source_done()
            return
        cc.emit(0, i)

    def close(self, cc: flowplex.Context) -> None:
        SrcCount.closes.append(cc.close_reason)


@flowplex.kernel("SrcLazy")
class SrcLazy(flowplex.Kernel):
    """Yields `delay_ms` on its first call, emits once, then finishes."""

    calls: ClassVar[list[tuple[str, float]]] = []

    def process(self, cc: flowplex.Context) -> None:
        SrcLazy.calls.append((cc.node_name, time.monotonic()))
        i = cc.input_timestamp
        if i == 0:
            cc.source_yield(cc.option_int("delay_ms", 500) / 1000)
            return
        if i >= 2:
            cc.source_done()
            return
        cc.emit(0, i)


@flowplex.kernel("SrcBusy")
class SrcBusy(flowplex.Kernel):
    """Emits 0..count-1, yielding 1 ms after each; records when each call ran."""

    def process(self, cc: flowplex.Context) -> None:
        SrcLazy.calls.append((cc.node_name, time.monotonic()))
        i = cc.input_timestamp
        if i >= cc.option_int("count", 5):
            cc.source_done()
            return
        cc.emit(0, i)
        cc.source_yield(0.001)


@pytest.fixture(autouse=True)
def _clear_records() -> None:
    SrcCount.starts.clear()
    SrcCount.closes.clear()
    SrcLazy.calls.clear()


@pytest.mark.in_process(reason="SrcCount records its calls in class lists of this interpreter")
def test_source_done_closes_the_source_and_the_graph_terminates() -> None:
    with flowplex.Graph.from_yaml("""
nodes:
  - { name: s, kernel: SrcCount, output_ports: [n], options: { count: 4 } }
output_ports: [n]
""") as g:
        out = g.add_poller("n", observe_timestamp_bounds=True)
        g.start()
        g.wait_done(timeout=10)
        assert g.state == flowplex.GraphState.TERMINATED
        events = [(p.is_empty, p.timestamp) for p in out]
    # Source invocations are stamped with their sequence number; the done call emits nothing.
    assert [ts for empty, ts in events if not empty] == [0, 1, 2, 3]
    assert events[-1] == (True, flowplex.TS_DONE)
    assert len(SrcCount.starts) == 5  # no call after source_done
    assert SrcCount.closes == [flowplex.CloseReason.NORMAL]


@pytest.mark.executors("threads", reason="about a one-worker pool shared by two sources; both are pinned to it")
def test_source_yield_does_not_occupy_a_worker() -> None:
    # One worker, two sources: `lazy` yields for 500 ms on its first call. If that wait held
    # the worker, `busy` could not run again until it ended.
    with flowplex.Graph.from_yaml("""
executors: [{ name: one, type: ThreadPoolExecutor, num_threads: 1 }]
nodes:
  - { name: lazy, executor: one, kernel: SrcLazy, output_ports: [a], options: { delay_ms: 500 } }
  - { name: busy, executor: one, kernel: SrcBusy, output_ports: [b], options: { count: 5 } }
output_ports: [a, b]
""") as g:
        a, b = g.add_poller("a"), g.add_poller("b")
        t0 = time.monotonic()
        g.start()
        g.wait_done(timeout=10)
        assert [p.as_int() for p in a] == [1]
        assert [p.as_int() for p in b] == [0, 1, 2, 3, 4]
    lazy = [t - t0 for name, t in SrcLazy.calls if name == "lazy"]
    busy = [t - t0 for name, t in SrcLazy.calls if name == "busy"]
    assert len(busy) == 6 and len(lazy) == 3
    assert busy[-1] < 0.4, f"busy finished at {busy[-1]:.3f} s: the yielding source held the worker"
    assert lazy[1] - lazy[0] >= 0.45, "source_yield(0.5) resumed early"


@flowplex.kernel("SrcYieldingFilter")
class SrcYieldingFilter(flowplex.Kernel):
    def process(self, cc: flowplex.Context) -> None:
        cc.source_yield(0.01)


def test_source_yield_from_a_non_source_fails_the_invocation() -> None:
    with flowplex.Graph.from_yaml("""
nodes: [{ name: f, kernel: SrcYieldingFilter, input_ports: [x] }]
input_ports: [x]
""") as g:
        g.start()
        g.send("x", 1, ts=0)
        g.close_all_inputs()
        with pytest.raises(flowplex.KernelError, match=r"\[f\].*source_yield is only valid for source nodes"):
            g.wait_done(timeout=10)


@flowplex.kernel("SrcBadYield")
class SrcBadYield(flowplex.Kernel):
    """Yields ``float(option delay)``, a string so that YAML carries nan and inf as they are."""

    def process(self, cc: flowplex.Context) -> None:
        cc.source_yield(float(cc.option_str("delay")))


@pytest.mark.parametrize("delay", [-0.5, math.nan, math.inf])
def test_source_yield_rejects_bad_delays(delay: float) -> None:
    with flowplex.Graph.from_yaml(f"nodes: [{{ name: s, kernel: SrcBadYield, output_ports: [y], "
                                  f"options: {{ delay: '{delay}' }} }}]\n") as g:
        g.start()
        expected = r"\[s\] ValueError: source_yield: delay must be finite and >= 0"
        with pytest.raises(flowplex.KernelError, match=expected):
            g.wait_done(timeout=10)


@pytest.mark.parametrize(("rate", "at_least_s", "at_most_s"), [("rate: 100, ", 0.070, None), ("", None, 0.050)])
def test_rate_paces_a_source(rate: str, at_least_s: float | None, at_most_s: float | None) -> None:
    with flowplex.Graph.from_yaml(f"""
nodes:
  - {{ name: s, {rate}kernel: SrcCount, output_ports: [n], options: {{ count: 10 }} }}
output_ports: [n]
""") as g:
        out = g.add_poller("n")
        g.start()  # on a process pool, starts the workers: not part of the run
        t0 = time.monotonic()
        g.wait_done(timeout=10)
        elapsed = time.monotonic() - t0
        assert [p.as_int() for p in out] == list(range(10))
    if at_least_s is not None:
        assert elapsed >= at_least_s
    if at_most_s is not None:
        assert elapsed < at_most_s


@pytest.mark.in_process(reason="SrcCount records its call starts in a class list of this interpreter")
def test_rate_counts_from_call_starts_and_does_not_drift() -> None:
    # 50 Hz with 15 ms of work per call: paced from start to start the ten calls span 9 periods
    # (180 ms); pacing from the end of each call would drift to 9 x 35 ms = 315 ms.
    with flowplex.Graph.from_yaml("""
nodes:
  - { name: s, rate: 50, kernel: SrcCount, output_ports: [n], options: { count: 9, busy_ms: 15 } }
output_ports: [n]
""") as g:
        g.start()
        g.wait_done(timeout=10)
    starts = SrcCount.starts
    assert len(starts) == 10
    span = starts[-1] - starts[0]
    assert 0.170 <= span < 0.260, f"{span:.3f} s for 9 periods of 20 ms"


@flowplex.kernel("SrcNamed")
class SrcNamed(flowplex.Kernel):
    """Like SrcCount, but records (node, start time) so sources sharing a pool can be told apart."""

    def process(self, cc: flowplex.Context) -> None:
        SrcLazy.calls.append((cc.node_name, time.monotonic()))
        time.sleep(cc.option_int("busy_ms", 0) / 1000)
        if cc.input_timestamp >= cc.option_int("count", 5):
            cc.source_done()
            return
        cc.emit(0, cc.input_timestamp)


@flowplex.kernel("SrcHog")
class SrcHog(flowplex.Kernel):
    """Holds its worker for `busy_ms` once, then finishes."""

    def process(self, cc: flowplex.Context) -> None:
        if cc.input_timestamp == 0:
            time.sleep(cc.option_int("busy_ms", 35) / 1000)
            cc.emit(0, 0)
        else:
            cc.source_done()


@pytest.mark.executors("threads", reason="about a one-worker pool shared by two sources; both are pinned to it")
def test_rate_is_a_minimum_interval_between_process_starts_on_a_shared_pool() -> None:
    # One worker. `paced` (50 Hz) runs at 0 ms, then `hog` holds the worker until 35 ms, so the
    # wake due at 20 ms starts at 35 ms. The next start must come 20 ms after that one (55 ms),
    # not 20 ms after the wake was claimed (40 ms). lm-lmflow keeps every gap >= 20 ms.
    with flowplex.Graph.from_yaml("""
executors: [{ name: one, type: ThreadPoolExecutor, num_threads: 1 }]
nodes:
  - { name: paced, executor: one, rate: 50, kernel: SrcNamed, output_ports: [a], options: { count: 3 } }
  - { name: hog, executor: one, kernel: SrcHog, output_ports: [b], options: { busy_ms: 35 } }
output_ports: [a, b]
""") as g:
        g.start()
        g.wait_done(timeout=10)
    starts = [t for name, t in SrcLazy.calls if name == "paced"]
    gaps = [b - a for a, b in itertools.pairwise(starts)]
    assert len(starts) == 4
    assert min(gaps) >= 0.0195, f"process starts closer than the 20 ms period: {[round(x, 4) for x in gaps]}"


@pytest.mark.self_running(reason="starts the source and sleeps 50 ms for its first call to run and yield")
@pytest.mark.in_process(reason="SrcLazy records its calls in a class list of this interpreter")
def test_cancel_drops_a_pending_source_wake() -> None:
    with flowplex.Graph.from_yaml("""
nodes:
  - { name: s, kernel: SrcLazy, output_ports: [a], options: { delay_ms: 10000 } }
output_ports: [a]
""") as g:
        g.start()
        time.sleep(0.05)
        t0 = time.monotonic()
        g.cancel()
        with pytest.raises(flowplex.GraphCancelled):
            g.wait_done(timeout=5)
        assert time.monotonic() - t0 < 1.0
        assert g.state == flowplex.GraphState.TERMINATED
    assert len(SrcLazy.calls) == 1  # the stale wake never ran the source again


@flowplex.kernel("SrcTick")
class SrcTick(flowplex.Kernel):
    """Emits, then yields 50 ms, forever."""

    def process(self, cc: flowplex.Context) -> None:
        cc.emit(0, cc.input_timestamp)
        cc.source_yield(0.05)


def test_a_cancelled_paced_source_can_be_reset_and_rerun() -> None:
    with flowplex.Graph.from_yaml("nodes: [{ name: s, kernel: SrcTick, output_ports: [y] }]\noutput_ports: [y]\n") as g:
        out = g.add_poller("y")
        g.start()
        first = out.next(timeout=5)
        assert first is not None
        g.cancel()  # the source is waiting for its 50 ms wake
        with pytest.raises(flowplex.GraphCancelled):
            g.wait_done(timeout=5)
        time.sleep(0.1)  # the cancelled wake's deadline passes
        g.wait_until_idle(timeout=1)
        g.reset()
        g.start()
        p = out.next(timeout=5)
        assert p is not None and p.timestamp == 0
        g.cancel()


@pytest.mark.self_running(reason="waits on an Event for the source to start: no host call runs it")
@pytest.mark.in_process(reason="its kernel, defined in the test, sets an Event of the test")
def test_a_source_that_never_finishes_runs_until_cancel() -> None:
    started = threading.Event()

    @flowplex.kernel("SrcForever")
    class SrcForever(flowplex.Kernel):
        def process(self, cc: flowplex.Context) -> None:
            started.set()
            cc.source_yield(0.001)

        def close(self, cc: flowplex.Context) -> None:
            SrcCount.closes.append(cc.close_reason)

    with flowplex.Graph.from_yaml("nodes: [{ name: s, kernel: SrcForever, output_ports: [y] }]\n") as g:
        g.start()
        assert started.wait(5)
        with pytest.raises(flowplex.Timeout):
            g.wait_done(timeout=0.1)
        g.cancel()
        with pytest.raises(flowplex.GraphCancelled):
            g.wait_done(timeout=5)
    assert SrcCount.closes == [flowplex.CloseReason.CANCELLED]


def test_source_sequence_restarts_after_reset() -> None:
    with flowplex.Graph.from_yaml("""
nodes:
  - { name: s, rate: 1000, kernel: SrcCount, output_ports: [n], options: { count: 3 } }
output_ports: [n]
""") as g:
        out = g.add_poller("n")
        runs = []
        for _ in range(2):
            g.start()
            g.wait_done(timeout=10)
            runs.append([p.timestamp for p in out])
            g.reset()
    assert runs == [[0, 1, 2], [0, 1, 2]]


@NO_RUN
def test_sources_may_not_run_on_a_delegating_executor() -> None:
    with pytest.raises(flowplex.ConfigError, match=r"source nodes cannot run on DelegatingExecutor"):
        flowplex.Graph.from_yaml("""
executors: [{ name: host, type: DelegatingExecutor }]
nodes: [{ name: s, executor: host, kernel: SrcCount, output_ports: [n] }]
""")


@flowplex.kernel("SrcLenientArgs")
class SrcLenientArgs(flowplex.Kernel):
    def process(self, cc: flowplex.Context) -> None:
        cc.counter_add("hits", 2.0)
        cc.log(flowplex.LogLevel.INFO, 42)
        cc.set_error(404)
        if cc.input_timestamp == 0:
            cc.source_yield("0.001")
            return
        cc.source_yield("abc")


def test_context_helpers_convert_like_the_python_builtins() -> None:
    # These arguments go through int()/float()/str(), as documented, in the compiled build too
    # (where annotated parameters are checked on entry): a float delta, an IntEnum level, a
    # non-str message, a numeric string delay, and "abc" as a delay is a ValueError.
    with flowplex.Graph.from_yaml("nodes: [{ name: s, kernel: SrcLenientArgs, output_ports: [y] }]\n") as g:
        g.start()
        with pytest.raises(flowplex.KernelError, match=r"\[s\] ValueError: source_yield: delay must be a number"):
            g.wait_done(timeout=10)
        assert g.counter_value("hits") == 4


@flowplex.kernel("SrcYieldsLate")
class SrcYieldsLate(flowplex.Kernel):
    """A source whose first call is still running when the graph is cancelled, then yields."""

    entered: ClassVar[threading.Event] = threading.Event()

    def process(self, cc: flowplex.Context) -> None:
        self.entered.set()
        time.sleep(0.2)
        cc.source_yield(10.0)


@pytest.mark.self_running(reason="the source runs while the test thread cancels")
@pytest.mark.in_process(reason="SrcYieldsLate sets an Event of this interpreter")
def test_a_yield_that_ends_after_cancel_parks_nothing() -> None:
    # lm-flow would park the source for the whole delay; a cancelled graph must end at once.
    SrcYieldsLate.entered.clear()
    with flowplex.Graph.from_yaml("nodes: [{ name: s, kernel: SrcYieldsLate, output_ports: [a] }]\n"
                                  "output_ports: [a]\n") as g:
        g.start()
        assert SrcYieldsLate.entered.wait(5)
        g.cancel()
        t0 = time.monotonic()
        with pytest.raises(flowplex.GraphCancelled):
            g.wait_done(timeout=3)
        assert time.monotonic() - t0 < 1.0
