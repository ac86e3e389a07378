"""The queue bound holds for sources that emit many packets per call (``CommandSource`` does).

Before, the bound was checked only for graph-input sends: a source emitting 8 x 64 KB per call
into a slower consumer grew its consumer's queue without limit (2 GB in 8 s). Now a source is
not called again while the graph holds as many packets as the bound allows, so each source
exceeds it by at most one call's packets.
"""

from __future__ import annotations

import threading
import time

import pytest

import flowplex
from flowplex.testing import default_executor

from . import engine_kernels as engine_kernels  # registers the kernels (a pool's workers import them)

LIMIT = 64
PER_CALL = 8
IMPORTS = "imports: [tests.hostile.engine_kernels]\n"


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


def _burst_into_slow(calls: int, extra: str = "") -> str:
    return f"""{IMPORTS}max_queued_packets: {LIMIT}
{extra}nodes:
  - {{ name: src, kernel: HostileBurst, output_ports: [chunks], options: {{ per_call: {PER_CALL}, calls: {calls} }} }}
  - {{ name: slow, kernel: HostileSlow, input_ports: [chunks], output_ports: [n], options: {{ sleep_us: 300 }} }}
"""


@pytest.mark.parametrize("kind", ["inline", "threads", "processes"])
def test_a_source_emitting_8_chunks_per_call_stays_within_the_bound(kind: str) -> None:
    # 400 calls x 8 x 64 KB = 200 MB if the bound did not hold; held, the queue keeps 64 + 8.
    calls = 400
    rss_before = _rss_bytes()
    with default_executor(kind), flowplex.Graph.from_yaml(_burst_into_slow(calls)) as g:
        g.start()
        peak = 0
        deadline = time.monotonic() + 0.6
        while time.monotonic() < deadline:
            peak = max(peak, g.stats().counted)
            time.sleep(0.005)
        grown = _rss_bytes() - rss_before
        depth = next(n.peak_queue_depth for n in g.node_stats() if n.node_name == "slow")
        g.cancel()
    assert depth > LIMIT // 2, "the test must reach the bound to show it holds"
    assert depth <= LIMIT + PER_CALL - 1, f"queue of `slow` reached {depth} (bound {LIMIT}, {PER_CALL} per call)"
    assert peak <= LIMIT + PER_CALL
    assert grown < 64 * 1024 * 1024, f"RSS grew by {grown / 2**20:.0f} MiB"


@pytest.mark.parametrize("kind", ["inline", "threads"])
def test_a_bounded_source_delivers_everything_in_order(kind: str) -> None:
    calls = 60
    with default_executor(kind), flowplex.Graph.from_yaml(f"""{IMPORTS}max_queued_packets: 16
nodes:
  - {{ name: src, kernel: HostileCount, output_ports: [a], options: {{ calls: {calls} }} }}
  - {{ name: slow, kernel: HostileSlow, input_ports: [a], output_ports: [b], options: {{ sleep_us: 200 }} }}
  - {{ name: fwd, kernel: HostileRaise, input_ports: [a], output_ports: [y], options: {{ phase: none }} }}
output_ports: [y]
""") as g:
        out = g.add_poller("y")
        g.start()
        got = []
        while (p := out.next(timeout=10)) is not None:
            got.append(p.as_int())
        g.wait_done(timeout=10)
    assert got == list(range(calls))


def test_a_source_held_by_a_poller_read_slowly_from_another_thread_finishes() -> None:
    calls = 120
    with flowplex.Graph.from_yaml(f"""{IMPORTS}max_queued_packets: 8
nodes:
  - {{ name: src, kernel: HostileCount, output_ports: [y], options: {{ calls: {calls} }} }}
output_ports: [y]
""") as g:
        out = g.add_poller("y")
        got: list[int | None] = []
        peak = [0]

        def read() -> None:
            while (p := out.next(timeout=10)) is not None:
                peak[0] = max(peak[0], len(out) + 1)
                got.append(p.as_int())
                time.sleep(0.0005)

        reader = threading.Thread(target=read)
        g.start()
        reader.start()
        g.wait_done(timeout=20)
        reader.join(timeout=10)
    assert got == list(range(calls))
    assert peak[0] <= 8 + 1  # a one-packet-per-call source keeps exactly to the bound


def _burst_to_output(calls: int) -> str:
    return f"""{IMPORTS}max_queued_packets: 8
nodes:
  - {{ name: src, kernel: HostileBurst, output_ports: [y], options: {{ per_call: 3, calls: {calls}, size: 10 }} }}
output_ports: [y]
"""


def test_a_host_that_waits_for_the_end_before_reading_gets_every_packet_at_once() -> None:
    # lm-flow's programs run a graph to the end, then read its outputs: with nobody reading the
    # poller, the bound does not hold the source (lm-flow's sources are never held), and the
    # wait does not sit out a reader's grace period either.
    with flowplex.Graph.from_yaml(_burst_to_output(1000)) as g:
        out = g.add_poller("y")
        g.start()
        began = time.monotonic()
        g.wait_done(timeout=15)
        assert time.monotonic() - began < 0.9  # under READER_GRACE_S: no reader was waited for
        assert len(out) == 3000
        assert [out.next(timeout=1).as_str() for _ in range(3000)] == ["x" * 10] * 3000


def test_a_host_that_read_some_outputs_then_waits_for_the_end_gets_the_rest() -> None:
    with flowplex.Graph.from_yaml(_burst_to_output(1000)) as g:
        out = g.add_poller("y")
        g.start()
        first = [out.next(timeout=5) for _ in range(20)]
        assert all(p is not None for p in first)
        time.sleep(0.2)
        assert len(out) <= 8 + 2  # held at the bound while this thread reads: one call's 3 over, at most
        g.wait_done(timeout=15)  # this thread was the reader, and now waits: the source runs on
        assert len(out) == 3000 - 20


def test_a_source_held_for_a_reader_that_went_away_runs_on_once_another_thread_waits() -> None:
    with flowplex.Graph.from_yaml(_burst_to_output(2000)) as g:
        out = g.add_poller("y")
        g.start()
        assert out.next(timeout=5) is not None
        waiter = threading.Thread(target=g.wait_done, kwargs={"timeout": 20})
        time.sleep(1.5)  # the reader paused past the grace period: nothing holds the source now
        waiter.start()
        waiter.join(timeout=20)
        assert not waiter.is_alive()
        assert len(out) == 6000 - 1


@pytest.mark.parametrize("kind", ["inline", "threads"])
def test_two_sources_joined_at_different_rates_do_not_deadlock_on_the_bound(kind: str) -> None:
    # `fast` fills the bound with packets the join cannot use until `paced` catches up: the
    # bound yields when nothing else runs, instead of stalling both sources for good.
    calls = 40
    with default_executor(kind), flowplex.Graph.from_yaml(f"""{IMPORTS}max_queued_packets: 4
nodes:
  - {{ name: fast, kernel: HostileCount, output_ports: [a], options: {{ calls: {calls} }} }}
  - {{ name: paced, kernel: HostileCount, output_ports: [b], options: {{ calls: {calls}, yield_ms: 2 }} }}
  - {{ name: join, kernel: HostilePair, input_ports: [a, b], output_ports: [y] }}
output_ports: [y]
""") as g:
        out = g.add_poller("y")
        g.start()
        got = []
        while (p := out.next(timeout=20)) is not None:
            got.append(p.as_int())
        g.wait_done(timeout=20)
    assert got == [1000 * i + i for i in range(calls)]
