"""``Engine.snapshot``: the engine's state in one lock pass, on real running graphs."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Iterator

import pytest

import flowplex
from flowplex._snapshot import EngineSnapshot, NodeSnapshot
from flowplex.diagnostics import Tracer

from .conftest import NO_RUN

RELEASE = threading.Event()


@flowplex.kernel("SnapHold")
class SnapHold(flowplex.Kernel):
    """Holds each packet until ``RELEASE`` is set (a slow consumer, on demand)."""

    def process(self, cc: flowplex.Context) -> None:
        RELEASE.wait(10)
        cc.forward(0, 0)


@flowplex.kernel("SnapFailAt")
class SnapFailAt(flowplex.Kernel):
    """Forwards, but raises for the input timestamp given in option `ts`."""

    def process(self, cc: flowplex.Context) -> None:
        if cc.input_timestamp == cc.option_int("ts", -1):
            msg = "kernel failed: [decoy] planted text"  # looks like a message a parser would misread
            raise ValueError(msg)
        cc.forward(0, 0)


@flowplex.kernel("SnapFailOpen")
class SnapFailOpen(flowplex.Kernel):
    def open(self, cc: flowplex.Context) -> None:
        msg = "no device"
        raise OSError(msg)


@pytest.fixture(autouse=True)
def _release() -> Iterator[None]:
    RELEASE.clear()
    yield
    RELEASE.set()


def snap(g: flowplex.Graph) -> EngineSnapshot:
    return g._engine.snapshot()


def node(s: EngineSnapshot, name: str) -> NodeSnapshot:
    return next(n for n in s.nodes if n.name == name)


def wait_for(predicate: Callable[[], bool], what: str, timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.002)


CHAIN = """
executors: [{ name: pool, type: ThreadPoolExecutor, num_threads: 2 }]
nodes:
  - { name: a, kernel: TDouble, input_ports: [x], output_ports: [y] }
  - { name: b, kernel: TDouble, executor: pool, input_ports: [y], output_ports: [z] }
input_ports: [x]
output_ports: [z]
"""


@pytest.mark.executors("inline", reason="checks the snapshot's executor list, whose default slot is inline")
def test_counts_match_what_was_sent() -> None:
    with flowplex.Graph.from_yaml(CHAIN) as g:
        before = snap(g)
        poller = g.add_poller("z")
        g.start()
        for i in range(25):
            g.send("x", i, ts=i)
        g.close_all_inputs()
        g.wait_done(timeout=10)
        s = snap(g)
        assert len(poller) == 25
    assert before.state is flowplex.GraphState.INITIALIZED and before.started_ns == 0
    assert s.state is flowplex.GraphState.TERMINATED
    assert s.started_ns > 0 and s.taken_ns >= s.started_ns
    assert s.error == "" and s.error_node is None and s.error_kernel is None and s.error_ts is None
    assert not s.cancelled and not s.paused and s.busy == 0
    for name in ("a", "b"):
        n = node(s, name)
        assert (n.processed, n.packets_in, n.packets_out, n.errors) == (25, 25, 25, 0)
        assert n.opened and n.closed and not n.in_flight and not n.blocked
        assert n.ports[0].closed and n.ports[0].queued == 0
    assert [n.name for n in s.nodes] == ["a", "b"] and node(s, "b").executor == "pool"
    assert node(s, "a").kernel == "TDouble" and node(s, "a").language == "Python"
    edges = {e.name: e for e in s.edges}
    assert list(edges) == ["x", "y", "z"]  # the plan's order: graph inputs first
    assert edges["x"].is_graph_input and edges["x"].producer is None and edges["x"].last_sent == 24
    assert edges["y"].producer == "a" and edges["y"].consumers == (("b", "y"),)
    assert all(e.closed and e.dropped == 0 for e in s.edges)
    (p,) = edges["z"].pollers
    assert (p.port, p.queued, p.capacity, p.overflow, p.dropped, p.closed) == ("z", 25, 0, "block", 0, True)
    assert s.queued == 25  # the poller's unread packets count against the watermark
    assert [(e.name, e.kind) for e in s.executors] == [("default", "inline"), ("pool", "threads")]
    assert s.executors[1].threads == 2 and s.executors[1].capacity == 2


def test_a_paused_graph_shows_its_backlog() -> None:
    yaml = """
max_queued_packets: 100
nodes:
  - { name: z, kernel: TAddPair, input_ports: [a, b], output_ports: [s] }
input_ports: [a, b]
output_ports: [s]
"""
    with flowplex.Graph.from_yaml(yaml) as g:
        g.start()
        g.pause()
        for i in range(7):
            g.send("a", i, ts=i)
        g.send("b", 0, ts=0)
        s = snap(g)
        g.cancel()
    assert s.paused and s.state is flowplex.GraphState.RUNNING
    (n,) = s.nodes
    ports = {p.name: p for p in n.ports}
    assert (ports["a"].queued, ports["a"].peak, ports["b"].queued) == (7, 7, 1)
    assert ports["a"].edge == "a" and not ports["a"].closed
    assert (ports["a"].bound, ports["b"].bound) == (7, 1)  # the next timestamp each port may still receive
    assert s.queued == 8 and s.limit_packets == 100 and s.limit_bytes == 0
    assert n.processed == 0 and n.in_flight == 0


@pytest.mark.executors("threads", reason="both nodes are pinned to their own pool: the default slot holds no node")
def test_a_blocked_producer_and_its_full_consumer_queue() -> None:
    yaml = """
executors: [{ name: pool, type: ThreadPoolExecutor, num_threads: 2 }]
nodes:
  - { name: a, kernel: TForward, executor: pool, input_ports: [x], output_ports: [y] }
  - { name: hold, kernel: SnapHold, executor: pool, input_ports: [y], output_ports: [z],
      input_queues: { packets: 1 } }
input_ports: [x]
output_ports: [z]
"""
    with flowplex.Graph.from_yaml(yaml) as g:
        g.start()
        for i in range(4):
            g.send("x", i, ts=i)
        wait_for(lambda: node(snap(g), "a").blocked, "the producer to block on the full queue")
        s = snap(g)
        RELEASE.set()
        g.close_all_inputs()
        g.wait_done(timeout=10)
        done = snap(g)
    a, hold = node(s, "a"), node(s, "hold")
    assert a.blocked and a.block_events >= 1 and 0 < a.blocked_since_s <= s.taken_monotonic_s
    (port,) = hold.ports
    assert (port.capacity, port.queued, port.fixed) == (1, 1, 0)
    assert hold.in_flight == 1  # the held invocation
    assert s.busy >= 1 and s.queued >= 2
    assert not node(done, "a").blocked and node(done, "hold").processed == 4


def test_error_fields_come_from_the_kernel_error() -> None:
    name = "odd [node]: name"  # brackets and a colon: a message parser would split it wrongly
    yaml = f"""
nodes:
  - {{ name: "{name}", kernel: SnapFailAt, input_ports: [x], output_ports: [y], options: {{ ts: 7 }} }}
input_ports: [x]
output_ports: [y]
"""
    with flowplex.Graph.from_yaml(yaml) as g:
        g.start()
        with pytest.raises(flowplex.KernelError) as caught:
            for i in range(10):
                g.send("x", i, ts=i)
            g.close_all_inputs()
            g.wait_done(timeout=5)
        s = snap(g)
    assert (s.error_node, s.error_kernel, s.error_ts) == (name, "SnapFailAt", 7)
    assert (caught.value.node, caught.value.kernel, caught.value.ts) == (s.error_node, s.error_kernel, s.error_ts)
    assert s.error == f"kernel failed: [{name}] ValueError: kernel failed: [decoy] planted text"
    assert node(s, name).errors == 1


def test_an_open_failure_has_no_timestamp() -> None:
    yaml = """
nodes:
  - { name: dev, kernel: SnapFailOpen, input_ports: [x], output_ports: [y] }
input_ports: [x]
output_ports: [y]
"""
    with flowplex.Graph.from_yaml(yaml) as g:
        with pytest.raises(flowplex.KernelError):
            g.start()
        s = snap(g)
    assert (s.error_node, s.error_kernel, s.error_ts) == ("dev", "SnapFailOpen", None)
    assert "open failed: OSError: no device" in s.error


@NO_RUN
def test_tracing_shows_in_the_snapshot() -> None:
    with flowplex.Graph.from_yaml(CHAIN) as g:
        assert snap(g).tracer is None and snap(g).stats_level == "basic"
        g.enable_tracing(16)
        s = snap(g)
    assert isinstance(s.tracer, Tracer) and s.tracer.capacity == 16 and s.stats_level == "full"


@NO_RUN
def test_a_snapshot_is_frozen_plain_data() -> None:
    with flowplex.Graph.from_yaml(CHAIN) as g:
        s = snap(g)
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.queued = 1  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.nodes[0].ports[0].queued = 1  # type: ignore[misc]
    assert not hasattr(s, "__dict__") and not hasattr(s.nodes[0], "__dict__")  # slotted
    assert isinstance(s.nodes, tuple) and isinstance(s.nodes[0].hist, tuple)


@pytest.mark.executors(
    "threads", reason="the YAML pins every node to its own thread pool: the default slot holds no node, so "
                      "every kind would run the same graph (about 10 s each under load)")
def test_snapshots_from_another_thread_while_the_graph_runs_are_consistent() -> None:
    """One lock pass: every snapshot's watermark count equals the queues it shows."""
    yaml = """
executors: [{ name: pool, type: ThreadPoolExecutor, num_threads: 3 }]
nodes:
  - { name: a, kernel: TDouble, executor: pool, input_ports: [x], output_ports: [y] }
  - { name: b, kernel: TForward, executor: pool, input_ports: [y], output_ports: [z],
      input_queues: { packets: 4 } }
  - { name: c, kernel: TSleepy, executor: pool, input_ports: [z], output_ports: [w], options: { ms: 0 } }
input_ports: [x]
output_ports: [w]
"""
    taken: list[EngineSnapshot] = []
    failures: list[BaseException] = []
    stop = threading.Event()

    def watch(g: flowplex.Graph) -> None:
        try:
            while not stop.is_set():
                taken.append(snap(g))
        except BaseException as exc:  # reported by the main thread
            failures.append(exc)

    with flowplex.Graph.from_yaml(yaml) as g:
        poller = g.add_poller("w")
        watcher = threading.Thread(target=watch, args=(g,), name="snapshot-watcher")
        g.start()
        watcher.start()
        try:
            for i in range(600):
                g.send("x", i, ts=i)
                if i % 50 == 0:
                    while poller.try_next() is not None:
                        pass
            g.close_all_inputs()
            g.wait_done(timeout=30)
        finally:
            stop.set()
            watcher.join(10)
        final = snap(g)
    assert failures == [] and not watcher.is_alive()
    assert len(taken) > 10
    last = {"a": 0, "b": 0, "c": 0}
    for s in taken:
        in_ports = sum(p.queued for n in s.nodes for p in n.ports)
        in_pollers = sum(p.queued for e in s.edges for p in e.pollers)
        assert s.queued == in_ports + in_pollers
        for n in s.nodes:
            assert n.processed >= last[n.name]  # counters never go backwards
            last[n.name] = n.processed
            assert n.packets_in >= n.processed and n.ports[0].queued <= max(n.ports[0].peak, 0)
        assert node(s, "b").ports[0].queued <= 4  # the lossless capacity holds in every snapshot
    assert [node(final, name).processed for name in ("a", "b", "c")] == [600, 600, 600]
