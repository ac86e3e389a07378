"""Scheduler semantics on every executor: delivery, alignment, bounds, termination, errors."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable

import pytest

import flowplex
from flowplex import TS_DONE

from .conftest import CHAIN, NO_RUN

GraphFactory = Callable[[str], flowplex.Graph]


def drain(poller: flowplex.Poller) -> list[tuple[int, int | None]]:
    return [(p.timestamp, p.as_int()) for p in poller]


def test_chain_delivers_in_order(make_graph: GraphFactory) -> None:
    g = make_graph(CHAIN)
    out = g.add_poller("z")
    g.start()
    for i in range(20):
        g.send("x", i, ts=i * 10)
    g.close_all_inputs()
    assert drain(out) == [(i * 10, i * 4) for i in range(20)]
    g.wait_done()
    assert g.state == flowplex.GraphState.TERMINATED


def test_sync_join_pairs_timestamps(make_graph: GraphFactory) -> None:
    g = make_graph("""
nodes:
  - { name: j, kernel: TAddPair, input_ports: [a, b], output_ports: [y] }
input_ports: [a, b]
output_ports: [y]
""")
    out = g.add_poller("y")
    g.start()
    g.send("a", 1, ts=1)
    g.send("a", 2, ts=2)
    g.send("b", 7, ts=2)   # ts 1 on b is skipped: b's bound moves past 1
    g.send("b", 8, ts=3)
    g.close_all_inputs()
    assert drain(out) == [(1, 1000), (2, 2007), (3, 8)]
    g.wait_done()


def test_sync_waits_for_the_slower_port(make_graph: GraphFactory) -> None:
    g = make_graph("""
nodes:
  - { name: j, kernel: TAddPair, input_ports: [a, b], output_ports: [y] }
input_ports: [a, b]
output_ports: [y]
""")
    out = g.add_poller("y")
    g.start()
    g.send("a", 1, ts=0)
    g.wait_until_idle()
    assert out.try_next() is None          # b could still deliver ts 0
    g.send("b", 2, ts=0)
    p = out.next(timeout=5)
    assert p is not None and p.as_int() == 1002
    g.close_all_inputs()
    g.wait_done()


def test_immediate_does_not_wait(make_graph: GraphFactory) -> None:
    g = make_graph("""
nodes:
  - { name: j, kernel: TAddPair, input_ports: [a, b], output_ports: [y], input_policy: { type: immediate } }
input_ports: [a, b]
output_ports: [y]
""")
    out = g.add_poller("y")
    g.start()
    g.send("a", 1, ts=5)
    p = out.next(timeout=5)
    assert p is not None and (p.timestamp, p.as_int()) == (5, 1000)
    g.send("b", 2, ts=3)   # a smaller timestamp on another port still fires
    p = out.next(timeout=5)
    assert p is not None and (p.timestamp, p.as_int()) == (3, 2)
    g.close_all_inputs()
    g.wait_done()


def test_dropped_packets_still_advance_the_bound(make_graph: GraphFactory) -> None:
    g = make_graph("""
nodes:
  - { name: even, kernel: TEvenOnly, input_ports: [x], output_ports: [e] }
  - { name: j, kernel: TAddPair, input_ports: [e, x], output_ports: [y] }
input_ports: [x]
output_ports: [y]
""")
    out = g.add_poller("y")
    g.start()
    for i in range(4):
        g.send("x", i, ts=i)
    g.close_all_inputs()
    assert drain(out) == [(0, 0), (1, 1), (2, 2002), (3, 3)]
    g.wait_done()


def test_timestamp_bound_events() -> None:
    g = flowplex.Graph.from_yaml(CHAIN)
    with g:
        bounds = g.add_poller("z", observe_timestamp_bounds=True)
        plain = g.add_poller("z")
        g.start()
        g.send("x", 3, ts=4)
        g.close_all_inputs()
        g.wait_done()
        seen = [(p.is_empty, p.timestamp, p.as_int()) for p in bounds]
        assert seen == [(False, 4, 12), (True, 5, None), (True, TS_DONE, None)]
        assert [(p.timestamp, p.as_int()) for p in plain] == [(4, 12)]


def test_observer_sees_every_packet(make_graph: GraphFactory) -> None:
    g = make_graph(CHAIN)
    seen: list[int] = []
    g.observe("z", lambda p: seen.append(p.as_int()))
    g.start()
    for i in range(5):
        g.send("x", i, ts=i)
    g.close_all_inputs()
    g.wait_done()
    assert seen == [0, 4, 8, 12, 16]


def test_fan_out_delivers_to_every_consumer(make_graph: GraphFactory) -> None:
    g = make_graph("""
nodes:
  - { name: a, kernel: TDouble, input_ports: [x], output_ports: [y1] }
  - { name: b, kernel: TForward, input_ports: [x], output_ports: [y2] }
input_ports: [x]
output_ports: [y1, y2, x]
""")
    p1, p2, px = g.add_poller("y1"), g.add_poller("y2"), g.add_poller("x")
    g.start()
    for i in range(3):
        g.send("x", i, ts=i)
    g.close_all_inputs()
    assert [p.as_int() for p in p1] == [0, 2, 4]
    assert [p.as_int() for p in p2] == [0, 1, 2]
    assert [p.as_int() for p in px] == [0, 1, 2]
    g.wait_done()


def test_wait_done_with_open_inputs_is_a_clear_error(make_graph: GraphFactory) -> None:
    g = make_graph(CHAIN)
    g.start()
    g.send("x", 1, ts=0)
    with pytest.raises(RuntimeError, match=r"graph input ports \[x\] still open"):
        g.wait_done(timeout=5)
    g.close_all_inputs()
    g.wait_done(timeout=5)


def test_kernel_error_names_node_and_chains_cause(make_graph: GraphFactory) -> None:
    g = make_graph("""
nodes:
  - { name: f, kernel: TFailOn, input_ports: [x], output_ports: [y], options: { bad: 2 } }
input_ports: [x]
output_ports: [y]
""")
    out = g.add_poller("y")
    g.start()
    g.send("x", 1, ts=0)
    g.send("x", 2, ts=1)
    with pytest.raises(flowplex.KernelError) as info:
        for _ in range(3):
            g.send("x", 3, ts=2)
            g.wait_until_idle(timeout=5)
    assert "[f]" in str(info.value) and "bad value 2" in str(info.value)
    # Packets queued before the failure are still delivered, then the error is raised.
    first = out.next(timeout=5)
    assert first is not None and first.as_int() == 1
    with pytest.raises(flowplex.KernelError) as again:
        out.next(timeout=5)
    assert isinstance(again.value.__cause__, ValueError)
    with pytest.raises(flowplex.KernelError, match=r"kernel failed: \[f\] ValueError: bad value 2"):
        g.wait_done(timeout=5)
    assert "bad value 2" in g.last_error()


def test_on_error_skip_counts_and_continues(make_graph: GraphFactory) -> None:
    g = make_graph("""
nodes:
  - { name: f, kernel: TFailOn, input_ports: [x], output_ports: [y], options: { bad: 2 }, on_error: skip }
  - { name: j, kernel: TAddPair, input_ports: [y, x], output_ports: [z] }
input_ports: [x]
output_ports: [z]
""")
    out = g.add_poller("z")
    g.start()
    for i in range(4):
        g.send("x", i, ts=i)
    g.close_all_inputs()
    assert drain(out) == [(0, 0), (1, 1001), (2, 2), (3, 3003)]
    g.wait_done()


def test_misuse_gets_clear_exceptions() -> None:
    with flowplex.Graph.from_yaml(CHAIN) as g:
        with pytest.raises(RuntimeError, match=r"requires the graph to be RUNNING.*Graph\.start"):
            g.send("x", 1, ts=0)
        with pytest.raises(KeyError, match="graph input port `nope` does not exist"):
            g.input("nope")
        with pytest.raises(KeyError, match="graph output port `y` does not exist"):
            g.add_poller("y")
        g.start()
        with pytest.raises(RuntimeError, match="add_poller"):
            g.add_poller("z")
        with pytest.raises(ValueError, match="explicit timestamp"):
            g.send("x", 1)
        g.send("x", 1, ts=5)
        with pytest.raises(ValueError, match=r"strictly increasing: previous 5, this one 5"):
            g.send("x", 1, ts=5)
        with pytest.raises(TypeError, match="can only send"):
            g.send("x", object(), ts=6)
        g.close_input("x")
        with pytest.raises(RuntimeError, match="closed"):
            g.send("x", 1, ts=7)
        g.wait_done()
        with pytest.raises(RuntimeError, match="start"):
            g.start()


def test_poller_next_times_out_instead_of_returning_none() -> None:
    with flowplex.Graph.from_yaml(CHAIN) as g:
        out = g.add_poller("z")
        g.start()
        with pytest.raises(flowplex.Timeout, match="timed out"):
            out.next(timeout=0.05)
        with pytest.raises(TimeoutError):
            out.next(timeout=0.01)
        g.close_all_inputs()
        assert out.next(timeout=5) is None


def test_poller_blocks_until_another_thread_sends() -> None:
    with flowplex.Graph.from_yaml(CHAIN) as g:
        out = g.add_poller("z")
        g.start()

        def later() -> None:
            g.send("x", 5, ts=1)
            g.close_all_inputs()

        t = threading.Timer(0.1, later)
        t.start()
        p = out.next(timeout=10)
        t.join()
        assert p is not None and p.as_int() == 20
        assert out.next(timeout=10) is None
        g.wait_done()


def test_cancel_then_wait_done_raises_cancelled(make_graph: GraphFactory) -> None:
    g = make_graph(CHAIN)
    g.start()
    g.send("x", 1, ts=0)
    g.cancel()
    with pytest.raises(flowplex.GraphCancelled):
        g.wait_done(timeout=5)
    with pytest.raises(RuntimeError):
        g.send("x", 2, ts=1)


@pytest.mark.in_process(reason="TRecorder records its calls in a class list of this interpreter")
def test_lifecycle_order_and_close_reason() -> None:
    from .conftest import TRecorder

    TRecorder.events.clear()
    with flowplex.Graph.from_yaml("""
nodes:
  - { name: r, kernel: TRecorder, input_ports: [x], output_ports: [y] }
input_ports: [x]
output_ports: [y]
""") as g:
        g.start()
        g.send("x", 1, ts=3)
        g.close_all_inputs()
        g.wait_done()
    kinds = [e[0] for e in TRecorder.events]
    assert kinds == ["open", "process", "close"]
    assert TRecorder.events[0][2] == flowplex.TS_PRE_STREAM - 1  # UNSTARTED during open
    assert TRecorder.events[1][2] == 3
    assert TRecorder.events[2][2] == flowplex.CloseReason.NORMAL


@pytest.mark.on_caller(reason="about running kernels on the sending thread (the inline executor's way)")
def test_default_executor_runs_kernels_on_the_sending_thread() -> None:
    from .conftest import TRecorder

    TRecorder.events.clear()
    with flowplex.Graph.from_yaml("""
nodes:
  - { name: r, kernel: TRecorder, input_ports: [x], output_ports: [y] }
input_ports: [x]
output_ports: [y]
""") as g:
        out = g.add_poller("y")
        g.start()
        g.send("x", 1, ts=0)
        # No wait needed: `send` itself drove the graph on this thread.
        assert out.try_next() is not None
        g.close_all_inputs()
        g.wait_done()
    assert ("process", threading.current_thread().name, 0) in TRecorder.events


@pytest.mark.executors("delegating", reason="about the DelegatingExecutor: its one node is pinned to one in the YAML")
def test_delegating_executor_runs_only_when_pumped() -> None:
    with flowplex.Graph.from_yaml("""
executors: [{ name: host, type: DelegatingExecutor }]
nodes:
  - { name: d, kernel: TDouble, executor: host, input_ports: [x], output_ports: [y] }
input_ports: [x]
output_ports: [y]
""") as g:
        out = g.add_poller("y")
        g.start()
        for i in range(5):
            g.send("x", i, ts=i)
        assert out.try_next() is None
        assert g.pump_steps(2) == 2
        assert len(out) == 2
        assert g.pump_steps(16) == 3
        assert [p.as_int() for p in [out.try_next() for _ in range(5)] if p] == [0, 2, 4, 6, 8]
        with pytest.raises(ValueError):
            g.pump_steps(-1)
        g.close_all_inputs()
        g.wait_done()


@pytest.mark.executors(
    "threads",
    reason="about the pool: its one node is pinned to `cpu` and the test checks the worker names",
)
def test_thread_pool_runs_on_its_workers() -> None:
    from .conftest import TRecorder

    TRecorder.events.clear()
    with flowplex.Graph.from_yaml("""
executors: [{ name: cpu, type: ThreadPoolExecutor, num_threads: 2 }]
nodes:
  - { name: r, kernel: TRecorder, executor: cpu, input_ports: [x], output_ports: [y] }
input_ports: [x]
output_ports: [y]
""") as g:
        g.start()
        for i in range(10):
            g.send("x", i, ts=i)
        g.close_all_inputs()
        g.wait_done()
        assert g.executor_names() == ["default", "cpu"]
    threads = {e[1] for e in TRecorder.events if e[0] == "process"}
    assert threads and all(re.fullmatch(r"cpu-\d", t) for t in threads)


@pytest.mark.executors("threads", reason="max_in_flight needs a multi-thread pool: its one node is pinned to `cpu`")
def test_max_in_flight_keeps_output_order() -> None:
    with flowplex.Graph.from_yaml("""
executors: [{ name: cpu, type: ThreadPoolExecutor, num_threads: 2 }]
nodes:
  - { name: s, kernel: TSleepy, executor: cpu, max_in_flight: 2, input_ports: [x], output_ports: [y],
      options: { ms: 12 } }
input_ports: [x]
output_ports: [y]
""") as g:
        out = g.add_poller("y")
        g.start()
        for i in range(12):
            g.send("x", i, ts=i)
        g.close_all_inputs()
        assert [p.timestamp for p in out] == list(range(12))
        g.wait_done()


def test_source_runs_without_inputs() -> None:
    with flowplex.Graph.from_yaml("""
nodes:
  - { name: src, kernel: TCount, output_ports: [n], options: { count: 6 } }
  - { name: d, kernel: TDouble, input_ports: [n], output_ports: [y] }
output_ports: [y]
""") as g:
        out = g.add_poller("y")
        g.start()
        assert drain(out) == [(i, i * 2) for i in range(6)]
        g.wait_done(timeout=10)


@flowplex.kernel("TNeedsCalib")
class TNeedsCalib(flowplex.Kernel):
    @staticmethod
    def get_contract(c: flowplex.Contract) -> None:
        c.require_side_packet("calib")

    def process(self, cc: flowplex.Context) -> None:
        cc.emit(0, cc.input(0).as_int() + cc.side_packet("calib").as_int())


def test_required_side_packet_is_checked_at_start() -> None:
    text = """
nodes:
  - { name: n, kernel: TNeedsCalib, input_ports: [x], output_ports: [y] }
input_ports: [x]
output_ports: [y]
"""
    missing = r"missing required side packet `calib`.*node `n`"
    with flowplex.Graph.from_yaml(text) as g, pytest.raises(ValueError, match=missing):
        g.start()
    with flowplex.Graph.from_yaml(text) as g:
        g.set_side_packet("calib", 100)
        out = g.add_poller("y")
        g.start()
        g.send("x", 1, ts=0)
        g.close_all_inputs()
        assert [p.as_int() for p in out] == [101]
        g.wait_done()


@flowplex.kernel("TBadOpen")
class TBadOpen(flowplex.Kernel):
    def open(self, cc: flowplex.Context) -> None:
        raise OSError("camera missing")

    def process(self, cc: flowplex.Context) -> None:
        pass


def test_open_failure_fails_start() -> None:
    with flowplex.Graph.from_yaml("""
nodes:
  - { name: cam, kernel: TBadOpen, input_ports: [x], output_ports: [y] }
input_ports: [x]
output_ports: [y]
""") as g:
        with pytest.raises(flowplex.KernelError, match=r"\[cam\] open failed: OSError: camera missing"):
            g.start()
        assert g.state == flowplex.GraphState.INITIALIZED


@flowplex.kernel("TIntOnly")
class TIntOnly(flowplex.Kernel):
    @staticmethod
    def get_contract(c: flowplex.Contract) -> None:
        c.input_set_type(0, 2)
        c.output_set_type(0, 2)

    def process(self, cc: flowplex.Context) -> None:
        cc.forward(0, 0)


@flowplex.kernel("TStrOut")
class TStrOut(flowplex.Kernel):
    @staticmethod
    def get_contract(c: flowplex.Contract) -> None:
        c.output_set_type(0, 5)

    def process(self, cc: flowplex.Context) -> None:
        cc.emit(0, "s")


def test_typed_ports_are_checked_at_build_and_runtime() -> None:
    with pytest.raises(ValueError, match=r"type mismatch on edge `m`.*declares Str.*declares I64"):
        flowplex.Graph.from_yaml("""
nodes:
  - { name: s, kernel: TStrOut, input_ports: [x], output_ports: [m] }
  - { name: i, kernel: TIntOnly, input_ports: [m], output_ports: [y] }
input_ports: [x]
output_ports: [y]
""")
    with flowplex.Graph.from_yaml("""
nodes:
  - { name: i, kernel: TIntOnly, input_ports: [x], output_ports: [y] }
input_ports: [x]
output_ports: [y]
""") as g:
        g.start()
        g.send("x", "not an int", ts=0)
        g.close_all_inputs()
        expected = r"input port `x` type mismatch: contract declares I64, actual Str"
        with pytest.raises(flowplex.KernelError, match=expected):
            g.wait_done(timeout=5)


@NO_RUN
def test_contract_index_out_of_range_fails_the_build() -> None:
    @flowplex.kernel("TBadContract")
    class TBadContract(flowplex.Kernel):
        @staticmethod
        def get_contract(c: flowplex.Contract) -> None:
            c.input_set_type(1, 2)

        def process(self, cc: flowplex.Context) -> None:
            pass

    with pytest.raises(ValueError, match=r"nodes\[0\]\.kernel \(node `n`\): input port index 1 is out of range"):
        flowplex.Graph.from_yaml("""
nodes:
  - { name: n, kernel: TBadContract, input_ports: [x], output_ports: [y] }
input_ports: [x]
""")


@NO_RUN
def test_unknown_kernel_is_a_key_error_with_suggestion() -> None:
    with pytest.raises(KeyError) as info:
        flowplex.Graph.from_yaml("""
nodes:
  - { name: n, kernel: TDoubel, input_ports: [x], output_ports: [y] }
input_ports: [x]
""")
    text = str(info.value)
    assert "kernel `TDoubel` not registered" in text and "did you mean `TDouble`" in text
    assert not text.startswith("'")


@pytest.mark.in_process(reason="its kernel, defined in the test, appends to a list of the test")
def test_counters_and_reset_reuse_opened_kernels() -> None:
    opens: list[str] = []

    @flowplex.kernel("TCounting")
    class TCounting(flowplex.Kernel):
        def open(self, cc: flowplex.Context) -> None:
            opens.append(cc.node_name)

        def process(self, cc: flowplex.Context) -> None:
            cc.counter_add("seen")
            cc.forward(0, 0)

    with flowplex.Graph.from_yaml("""
nodes:
  - { name: c, kernel: TCounting, input_ports: [x], output_ports: [y] }
input_ports: [x]
output_ports: [y]
""") as g:
        out = g.add_poller("y")
        for run in range(2):
            g.start()
            for i in range(3):
                g.send("x", i + run, ts=i)
            g.close_all_inputs()
            assert [p.as_int() for p in out] == [run, run + 1, run + 2]
            g.wait_done()
            assert g.counter_value("seen") == 3
            g.reset()
            assert g.state == flowplex.GraphState.INITIALIZED
        assert opens == ["c"]
