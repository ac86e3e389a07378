"""Per-node stats snapshots, stats levels, the watchdog and ``Graph.dump``."""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import flowplex
from flowplex.diagnostics import GraphStats, NodeStats

GATE = threading.Event()


@flowplex.kernel("StatsGate")
class StatsGate(flowplex.Kernel):
    """Forwards each packet once ``GATE`` is set (lets a test hold a node RUNNING)."""

    def process(self, cc: flowplex.Context) -> None:
        GATE.wait(10)
        cc.forward(0, 0)


@flowplex.kernel("StatsSleep")
class StatsSleep(flowplex.Kernel):
    def process(self, cc: flowplex.Context) -> None:
        time.sleep(cc.option_float("ms") / 1000)
        cc.forward(0, 0)


@flowplex.kernel("StatsFailOdd")
class StatsFailOdd(flowplex.Kernel):
    def process(self, cc: flowplex.Context) -> None:
        if (cc.input(0).as_int() or 0) % 2:
            msg = "odd value"
            raise ValueError(msg)
        cc.forward(0, 0)


@pytest.fixture(autouse=True)
def _open_gate() -> Iterator[None]:
    GATE.clear()
    yield
    GATE.set()


def run(yaml: str, sends: int = 5, port: str = "x") -> flowplex.Graph:
    g = flowplex.Graph.from_yaml(yaml)
    g.start()
    for i in range(sends):
        g.send(port, i, ts=i)
    g.close_all_inputs()
    g.wait_done(timeout=10)
    return g


def chain(stats: str, kernel: str = "PassThroughKernel", options: str = "{}") -> str:
    return f"""
stats: {stats}
nodes:
  - {{ name: a, kernel: {kernel}, input_ports: [x], output_ports: [y], options: {options} }}
  - {{ name: b, kernel: PassThroughKernel, input_ports: [y], output_ports: [z] }}
input_ports: [x]
output_ports: [z]
"""


def wait_for(predicate: Callable[[], bool], what: str, timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.005)


def test_basic_counts_throughput_but_not_time() -> None:
    with run(chain("basic")) as g:
        a, b = g.node_stats()
        assert (a.node_name, a.kernel_name, a.language, a.executor) == ("a", "PassThroughKernel", "Python", "default")
        assert (a.processed, a.packets_in, a.packets_out, a.errors) == (5, 5, 5, 0)
        assert (b.processed, b.packets_in, b.packets_out) == (5, 5, 5)
        assert a.peak_queue_depth >= 1 and a.queued == 0
        assert (a.total_process_us, a.max_process_us, a.running_for_us) == (0, 0, 0)
        assert (a.p50_us, a.p95_us, a.p99_us, a.latency_hist) == (None, None, None, ())
        assert a.avg_process_us is None
        assert a.state == b.state == "CLOSED" and not a.running
        assert g.stats().stats_level == "basic" and g.stats().state == "TERMINATED"


def test_off_reports_zeros_but_keeps_errors_and_state() -> None:
    yaml = """
stats: off
nodes:
  - { name: a, kernel: StatsFailOdd, input_ports: [x], output_ports: [y], on_error: skip }
input_ports: [x]
output_ports: [y]
"""
    with run(yaml) as g:
        (a,) = g.node_stats()
        assert (a.processed, a.packets_in, a.packets_out, a.peak_queue_depth) == (0, 0, 0, 0)
        assert a.ports[0].peak == 0
        assert a.errors == 2  # values 1 and 3 failed; errors are counted at every level
        assert a.state == "CLOSED" and a.latency_hist == ()
        assert g.stats().stats_level == "off"


def test_full_measures_process_time_and_percentiles() -> None:
    with run(chain("full", "StatsSleep", "{ ms: 2 }")) as g:
        a = g.stats().node("a")
        assert a.processed == 5 and sum(a.latency_hist) == 5 and len(a.latency_hist) == 32
        assert a.total_process_us >= 5 * 2000 and a.max_process_us >= 2000
        assert a.p50_us is not None and a.p95_us is not None and a.p99_us is not None
        assert 2048 <= a.p50_us <= a.p95_us <= a.p99_us
        avg = a.avg_process_us
        assert avg is not None and 2000 <= avg <= a.max_process_us


def test_states_created_running_closed_and_running_for() -> None:
    yaml = """
stats: full
executors: [ { name: pool, type: ThreadPoolExecutor, num_threads: 1 } ]
nodes:
  - { name: gate, kernel: StatsGate, executor: pool, input_ports: [x], output_ports: [y] }
input_ports: [x]
output_ports: [y]
"""
    with flowplex.Graph.from_yaml(yaml) as g:
        assert g.stats().node("gate").state == "CREATED"
        assert g.stats().state == "INITIALIZED" and not g.stats().started
        g.start()
        assert g.stats().node("gate").state == "IDLE"
        g.send("x", 1, ts=0)
        g.send("x", 2, ts=1)
        wait_for(lambda: g.stats().node("gate").running_for_us > 1000, "a long-running callback")
        gate = g.stats().node("gate")
        assert gate.state == "RUNNING" and gate.running and gate.in_flight == 1 and gate.queued == 1
        assert gate.ports[0].queued == 1
        GATE.set()
        g.close_all_inputs()
        g.wait_done(timeout=10)
        gate = g.stats().node("gate")
        assert gate.state == "CLOSED" and gate.running_for_us == 0 and gate.processed == 2


def test_paced_source_waits() -> None:
    yaml = """
nodes:
  - { name: src, kernel: RangeSourceKernel, output_ports: [n], options: { count: 1000 }, rate: 2 }
output_ports: [n]
"""
    with flowplex.Graph.from_yaml(yaml) as g:
        g.start()
        wait_for(lambda: g.stats().node("src").state == "WAITING_SOURCE", "a waiting source")
        assert g.stats().node("src").is_source and g.stats().node("src").ports == ()


def test_failed_node_is_in_error() -> None:
    yaml = """
nodes:
  - { name: a, kernel: PassThroughKernel, input_ports: [x], output_ports: [y] }
  - { name: bad, kernel: StatsFailOdd, input_ports: [y], output_ports: [z] }
input_ports: [x]
output_ports: [z]
"""
    with flowplex.Graph.from_yaml(yaml) as g:
        g.start()
        g.send("x", 0, ts=0)
        with pytest.raises(flowplex.KernelError):
            g.send("x", 1, ts=1)
            g.close_all_inputs()
            g.wait_done(timeout=5)
        s = g.stats()
        assert s.node("bad").state == "ERROR" and s.node("bad").errors == 1
        assert s.node("a").state != "ERROR"
        assert s.error.startswith("kernel failed: [bad]") and s.errors == 1


def test_port_stats_capacities_drops_and_back_edges() -> None:
    yaml = """
executors: [ { name: host, type: DelegatingExecutor } ]
nodes:
  - { name: lossy, kernel: PassThroughKernel, executor: host, input_ports: [x], output_ports: [y],
      input_policy: { type: fixed_size, capacity: 2 } }
  - { name: bounded, kernel: PassThroughKernel, input_ports: [y], output_ports: [z],
      input_queues: { packets: 7 } }
  - { name: fb, kernel: FeedbackAddKernel, input_ports: [z, prev], output_ports: [s], back_edges: [prev] }
  - { name: loop, kernel: PassThroughKernel, input_ports: [s], output_ports: [prev] }
input_ports: [x]
output_ports: [s]
"""
    with flowplex.Graph.from_yaml(yaml) as g:
        g.start()
        for i in range(11):
            g.send("x", i, ts=i)
        s = g.stats()
        (x,) = s.node("lossy").ports
        assert (x.name, x.queued, x.capacity, x.fixed, x.dropped, x.back_edge) == ("x", 2, 0, 2, 8, False)
        assert s.node("bounded").ports[0].capacity == 7
        z, prev = s.node("fb").ports
        assert not z.back_edge and prev.back_edge
        assert s.dropped == 8 and s.queued == 2
        (edge_x,) = [e for e in s.edges if e.name == "x"]
        assert edge_x.is_graph_input and edge_x.consumers == (("lossy", "x"),) and edge_x.last_sent == "10"
        g.close_all_inputs()
        g.wait_done(timeout=5)


def test_snapshots_are_frozen_and_lookup_suggests() -> None:
    with run(chain("basic")) as g:
        s = g.stats()
        with pytest.raises(dataclasses.FrozenInstanceError):
            s.nodes[0].processed = 3  # type: ignore[misc]
        with pytest.raises(KeyError, match="no node named `bb`; did you mean `b`"):
            s.node("bb")
        assert isinstance(s, GraphStats) and all(isinstance(n, NodeStats) for n in s.nodes)
        assert [e.name for e in s.executors] == ["default"] and s.executors[0].kind == "inline"


def test_executor_stats_show_the_pool() -> None:
    yaml = """
executors:
  - { name: pool, type: ThreadPoolExecutor, num_threads: 3, affinity: [0] }
  - { name: host, type: DelegatingExecutor }
nodes:
  - { name: a, kernel: PassThroughKernel, executor: pool, input_ports: [x], output_ports: [y] }
  - { name: b, kernel: PassThroughKernel, executor: host, input_ports: [y], output_ports: [z] }
input_ports: [x]
output_ports: [z]
"""
    with flowplex.Graph.from_yaml(yaml) as g:
        default, pool, host = g.stats().executors
        assert (pool.kind, pool.threads, pool.capacity, pool.affinity) == ("threads", 3, 3, (0,))
        assert (host.kind, host.capacity) == ("delegating", 1)
        assert (default.kind, default.capacity) == ("inline", 0)


def test_watchdog_warns_and_forces_full(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="flowplex")
    yaml = chain("basic", "StatsSleep", "{ ms: 15 }").replace("stats: basic", "watchdog_ms: 5")
    with run(yaml, sends=1) as g:
        assert g.stats().stats_level == "full"
        assert g.stats().node("a").max_process_us >= 15_000
    assert any("exceeding watchdog 5 ms" in r.getMessage() and "node `a`" in r.getMessage() for r in caplog.records)


def test_dump_is_lm_flows_text_snapshot() -> None:
    with run(chain("full")) as g:
        text = g.dump()
    lines = text.splitlines()
    assert lines[0].startswith("graph state=TERMINATED stats=full nodes=2 edges=3 queued=0/")
    assert lines[1].split() == ["node", "state", "queued", "processed", "errors", "avg_us", "max_us"]
    assert lines[2].split()[:5] == ["a", "closed", "0", "5", "0"]
    assert "port a.x: capacity=unbounded queued=0 peak=1 blocked=no closed=yes" in lines
    assert "input x: closed=yes dropped=0 last_sent=4" in lines
    assert "edge z: closed=yes dropped=0" in lines


def test_dump_before_start_says_new() -> None:
    with flowplex.Graph.from_yaml(chain("basic")) as g:
        rows = g.dump().splitlines()[2:4]
    assert [r.split()[1] for r in rows] == ["new", "new"]


@settings(max_examples=25)
@given(depth=st.integers(1, 5), sends=st.integers(0, 30), level=st.sampled_from(["off", "basic", "full"]))
def test_counters_are_conserved_along_a_chain(depth: int, sends: int, level: str) -> None:
    """Lossless chain: what a node sends, its consumer receives; nothing stays queued."""
    nodes = "\n".join(
        f"  - {{ name: n{i}, kernel: PassThroughKernel, input_ports: [e{i}], output_ports: [e{i + 1}] }}"
        for i in range(depth)
    )
    yaml = f"stats: {level}\nnodes:\n{nodes}\ninput_ports: [e0]\noutput_ports: [e{depth}]\n"
    with run(yaml, sends=sends, port="e0") as g:
        s = g.stats()
    counted = 0 if level == "off" else sends
    assert [n.processed for n in s.nodes] == [counted] * depth
    assert all(n.packets_in == n.packets_out == counted for n in s.nodes)
    assert s.queued == 0 and s.dropped == 0 and s.errors == 0
    assert all(n.state == "CLOSED" for n in s.nodes)
    if level == "full":
        assert all(sum(n.latency_hist) == sends for n in s.nodes)
