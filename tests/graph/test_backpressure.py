"""Backpressure: bounded memory by default, the watermark, lossless capacities, bounded pollers."""

from __future__ import annotations

import logging
import threading
import time

import numpy as np
import pytest

import flowplex

from .conftest import NO_RUN


@flowplex.kernel("TSlowSink")
class TSlowSink(flowplex.Kernel):
    """Sleeps `ms` per packet and records the graph's queued bytes it observed."""

    def process(self, cc: flowplex.Context) -> None:
        time.sleep(cc.option_int("ms", 1) / 1000)


@flowplex.kernel("TBurst")
class TBurst(flowplex.Kernel):
    """Emits `n` packets per input (timestamps ts*100 + k)."""

    def process(self, cc: flowplex.Context) -> None:
        for k in range(cc.option_int("n", 1)):
            cc.emit(0, k, ts=cc.input_timestamp * 100 + k)


@pytest.mark.local_kernels(
    reason="its premise is a sender faster than the 1 ms sink: on loopback each send pays three codec round trips "
    "of a 1 MiB frame and often keeps pace, so the backlog it checks for need not build",
)
def test_memory_is_bounded_by_default_with_a_slow_consumer() -> None:
    frame_bytes = 1024 * 1024
    with flowplex.Graph.from_yaml("""
executors: [{ name: slow, type: ThreadPoolExecutor, num_threads: 1 }]
nodes:
  - { name: a, kernel: TForward, input_ports: [x], output_ports: [b] }
  - { name: b, kernel: TForward, input_ports: [b], output_ports: [c] }
  - { name: c, kernel: TForward, input_ports: [c], output_ports: [d] }
  - { name: sink, kernel: TSlowSink, executor: slow, input_ports: [d], options: { ms: 1 } }
input_ports: [x]
""") as g:
        engine = g._engine
        g.start()
        peak = 0
        for i in range(120):
            g.send("x", np.zeros(frame_bytes, dtype=np.uint8), ts=i)
            peak = max(peak, engine.budget.queued_bytes)
        g.close_all_inputs()
        g.wait_done(timeout=60)
    # 64 MiB default cap (+ the packet admitted at the edge of the limit).
    assert peak <= 64 * 1024 * 1024 + frame_bytes
    assert peak >= 32 * frame_bytes  # the slow consumer really did fall behind


@pytest.mark.executors(
    "delegating",
    reason="about the blocking send pumping delegated work: its one node is pinned to `host`",
)
def test_watermark_blocks_sends_and_nowait_variants_refuse() -> None:
    with flowplex.Graph.from_yaml("""
max_queued_packets: 3
executors: [{ name: host, type: DelegatingExecutor }]
nodes:
  - { name: d, kernel: TSlowSink, executor: host, input_ports: [x], options: { ms: 0 } }
input_ports: [x]
""") as g:
        g.start()
        for i in range(4):  # the first one is claimed at once (pop at claim): 3 stay queued
            g.send("x", i, ts=i)
        assert g.try_send("x", 4, ts=4) is False
        with pytest.raises(flowplex.WouldBlock, match=r"3 packets queued \(limit=3\)"):
            g.send_nowait("x", 4, ts=4)
        # A blocking send runs delegated work on this thread until there is room.
        g.send("x", 4, ts=4)
        g.close_all_inputs()
        g.wait_done(timeout=10)


def test_undrained_poller_under_a_watermark_is_a_clear_error_not_a_hang() -> None:
    with flowplex.Graph.from_yaml("""
max_queued_packets: 4
nodes:
  - { name: d, kernel: TForward, input_ports: [x], output_ports: [y] }
input_ports: [x]
output_ports: [y]
""") as g:
        g.add_poller("y")
        g.start()
        with pytest.raises(flowplex.DeadlockError, match="nothing can drain the graph"):
            for i in range(10):
                g.send("x", i, ts=i, timeout=10)


@pytest.mark.executors(
    "threads",
    reason="its one node is pinned to a one-worker pool, which holds the first packet while the test sends",
)
def test_send_timeout_while_full() -> None:
    release = threading.Event()

    @flowplex.kernel("TWaitForRelease")
    class TWaitForRelease(flowplex.Kernel):
        def process(self, cc: flowplex.Context) -> None:
            release.wait(10)

    with flowplex.Graph.from_yaml("""
max_queued_packets: 1
executors: [{ name: pool, type: ThreadPoolExecutor, num_threads: 1 }]
nodes:
  - { name: w, kernel: TWaitForRelease, executor: pool, input_ports: [x] }
input_ports: [x]
""") as g:
        g.start()
        g.send("x", 0, ts=0)  # claimed by the worker, which then waits
        time.sleep(0.05)
        g.send("x", 1, ts=1)  # queued: the graph is now full
        with pytest.raises(flowplex.Timeout, match="timed out waiting for room"):
            g.send("x", 2, ts=2, timeout=0.1)
        release.set()
        g.close_all_inputs()
        g.wait_done(timeout=10)


@pytest.mark.executors(
    "threads",
    reason="both nodes are pinned to their own one-worker pools (a fast producer, a slow consumer)",
)
def test_lossless_input_capacity_bounds_the_queue_and_loses_nothing() -> None:
    with flowplex.Graph.from_yaml("""
executors:
  - { name: fast, type: ThreadPoolExecutor, num_threads: 1 }
  - { name: slow, type: ThreadPoolExecutor, num_threads: 1 }
nodes:
  - { name: p, kernel: TBurst, executor: fast, input_ports: [x], output_ports: [m], options: { n: 2 } }
  - { name: c, kernel: TSleepy, executor: slow, input_ports: [m], output_ports: [y], options: { ms: 1 },
      input_queues: { packets: 4 } }
input_ports: [x]
output_ports: [y]
""") as g:
        out = g.add_poller("y")
        g.start()
        for i in range(40):
            g.send("x", i, ts=i)
        g.close_all_inputs()
        got = [p.timestamp for p in out]
        g.wait_done(timeout=30)
        port = g._engine.nodes[1].inputs[0]
        assert port.peak <= 4
    assert got == [i * 100 + k for i in range(40) for k in range(2)]


def test_batch_larger_than_capacity_is_an_error() -> None:
    with flowplex.Graph.from_yaml("""
nodes:
  - { name: p, kernel: TBurst, input_ports: [x], output_ports: [m], options: { n: 3 } }
  - { name: c, kernel: TForward, input_ports: [m], output_ports: [y], input_queues: { packets: 2 } }
input_ports: [x]
output_ports: [y]
""") as g:
        g.start()
        g.send("x", 0, ts=0)
        g.close_all_inputs()
        with pytest.raises(flowplex.KernelError, match=r"emits a batch of 3 packets.*capacity 2"):
            g.wait_done(timeout=10)


@pytest.mark.parametrize(
    ("overflow", "capacity", "expected", "dropped"),
    [("drop_oldest", 3, [7, 8, 9], 7), ("drop_newest", 3, [0, 1, 2], 7), ("latest", 1, [9], 9)],
)
def test_lossy_pollers_count_every_drop(overflow: str, capacity: int, expected: list[int], dropped: int) -> None:
    with flowplex.Graph.from_yaml("""
nodes:
  - { name: d, kernel: TForward, input_ports: [x], output_ports: [y] }
input_ports: [x]
output_ports: [y]
""") as g:
        poller = g.add_poller("y", capacity=capacity, overflow=overflow)
        g.start()
        for i in range(10):
            g.send("x", i, ts=i)
        g.close_all_inputs()
        g.wait_done(timeout=10)
        assert [p.as_int() for p in poller] == expected
        assert poller.dropped == dropped


@pytest.mark.executors("threads", reason="its one node is pinned to a one-worker pool")
def test_blocking_poller_is_lossless_with_a_concurrent_reader() -> None:
    with flowplex.Graph.from_yaml("""
executors: [{ name: pool, type: ThreadPoolExecutor, num_threads: 1 }]
nodes:
  - { name: d, kernel: TForward, executor: pool, input_ports: [x], output_ports: [y] }
input_ports: [x]
output_ports: [y]
""") as g:
        poller = g.add_poller("y", capacity=2)
        g.start()
        got: list[int] = []
        reader = threading.Thread(target=lambda: got.extend(p.as_int() for p in poller))
        reader.start()
        for i in range(200):
            g.send("x", i, ts=i)
        g.close_all_inputs()
        reader.join(timeout=30)
        g.wait_done(timeout=30)
        assert got == list(range(200)) and poller.dropped == 0
        assert len(poller) == 0


@pytest.mark.executors("threads", reason="its one node is pinned to a one-worker pool")
def test_unread_blocking_poller_is_reported_as_a_stall() -> None:
    with flowplex.Graph.from_yaml("""
executors: [{ name: pool, type: ThreadPoolExecutor, num_threads: 1 }]
nodes:
  - { name: d, kernel: TForward, executor: pool, input_ports: [x], output_ports: [y] }
input_ports: [x]
output_ports: [y]
""") as g:
        g.add_poller("y", capacity=1)
        g.start()
        for i in range(3):
            g.send("x", i, ts=i)
        g.close_all_inputs()
        with pytest.raises(flowplex.DeadlockError, match=r"blocked by full downstream queues: \[d\]"):
            g.wait_done(timeout=10)


@NO_RUN
def test_bad_poller_options_are_config_errors() -> None:
    with flowplex.Graph.from_yaml("""
nodes:
  - { name: d, kernel: TForward, input_ports: [x], output_ports: [y] }
input_ports: [x]
output_ports: [y]
""") as g:
        with pytest.raises(ValueError, match="unknown overflow policy 'newest'"):
            g.add_poller("y", capacity=2, overflow="newest")
        with pytest.raises(ValueError, match="capacity=1"):
            g.add_poller("y", capacity=2, overflow="latest")
        with pytest.raises(ValueError, match="do not receive timestamp-bound events"):
            g.add_poller("y", capacity=2, observe_timestamp_bounds=True)


@pytest.mark.executors("delegating", reason="its one node is pinned to `host`, so the backlog grows until pumped")
def test_soft_limit_warnings_back_off_exponentially(caplog: pytest.LogCaptureFixture) -> None:
    with flowplex.Graph.from_yaml("""
max_queue_size: 4
executors: [{ name: host, type: DelegatingExecutor }]
nodes:
  - { name: d, kernel: TSlowSink, executor: host, input_ports: [x], options: { ms: 0 } }
input_ports: [x]
""") as g, caplog.at_level(logging.WARNING, logger="flowplex"):
        g.start()
        for i in range(40):
            g.send("x", i, ts=i)
        warnings = [r.getMessage() for r in caplog.records if "backlogged" in r.getMessage()]
        # Depth 5, 9, 17, 33: one warning per doubling, not one per packet (lm-flow's quirk).
        assert len(warnings) == 4
        g.close_all_inputs()
        g.wait_done(timeout=10)
