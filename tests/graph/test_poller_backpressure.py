"""Packets waiting in poller queues count toward the graph's limits, and a slow reader is no deadlock.

A producer thread sends into a chain while another thread reads the output poller slowly: the
poller's queue is bounded by the same budget as node queues (the default 4096 packets / 64 MiB,
or ``max_queued_packets``), ``send`` waits for the reader instead of growing memory or calling
the graph deadlocked, and every packet arrives once, in order. ``DeadlockError`` stays for a
send into a full graph whose backlog nobody reads, and then comes within about a second.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import flowplex

MIB = 1024 * 1024


def chain(stages: int, head: str = "") -> str:
    nodes = "".join(f"  - {{ name: f{i}, kernel: PassThroughKernel, input_ports: [e{i}], "
                    f"output_ports: [e{i + 1}] }}\n" for i in range(stages))
    return head + f"nodes:\n{nodes}input_ports: [e0]\noutput_ports: [e{stages}]\n"


def in_flight_slack(g: flowplex.Graph, stages: int) -> int:
    """Claimed invocations, one per stage, that are queued nowhere yet and land on top of the watermark.

    Only where the sender does not run them itself (a pool's workers, or a host thread's pump).
    """
    return 0 if g._engine.executors[0].runs_on_caller else stages


class Reader:
    """Reads a poller on its own thread, sleeping after each packet; records what it saw."""

    def __init__(self, poller: flowplex.Poller, delay_s: float, graph: flowplex.Graph) -> None:
        self.poller = poller
        self.delay_s = delay_s
        self.graph = graph
        self.seen: list[tuple[int, int]] = []
        self.max_len = 0
        self.max_counted = 0
        self.max_bytes = 0
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            while True:
                self.max_len = max(self.max_len, len(self.poller))
                s = self.graph.stats()
                self.max_counted = max(self.max_counted, s.counted)
                self.max_bytes = max(self.max_bytes, s.counted_bytes)
                p = self.poller.next(timeout=20)
                if p is None:
                    return
                as_int = p.as_int()
                value = as_int if as_int is not None else int(p.as_numpy().flat[0])
                self.seen.append((p.timestamp, value))
                del p
                time.sleep(self.delay_s)
        except BaseException as exc:
            self.error = exc

    def join(self) -> None:
        self.thread.join(timeout=60)
        assert not self.thread.is_alive(), "the reader hung"
        if self.error is not None:
            raise self.error


def send_all(g: flowplex.Graph, values: list[int], make: Callable[[int], object]) -> None:
    for i in values:
        g.send("e0", make(i), ts=i)
    g.close_all_inputs()


@pytest.mark.self_running(
    reason="on delegating the claimed invocations waiting in the inbox (a frame per stage) count nowhere and land "
    "on top of the 64 MiB bound, and the reader pumps the chain itself, so the sender need not run ahead",
)
@pytest.mark.local_kernels(
    reason="its premise is a sender that runs ahead of the reader: on loopback each send pays four codec round "
    "trips of a 4 MiB frame and often does not",
)
def test_default_budget_bounds_frames_waiting_in_a_poller() -> None:
    frame_bytes = 4 * MIB
    frames = 40
    with flowplex.Graph.from_yaml(chain(4)) as g:
        out = g.add_poller("e4")
        g.start()
        reader = Reader(out, 0.003, g)

        def make(i: int) -> np.ndarray:
            return np.full((frame_bytes // 1024, 1, 1024), i & 255, np.uint8)

        producer = threading.Thread(target=send_all, args=(g, list(range(frames)), make))
        producer.start()
        producer.join(timeout=60)
        reader.join()
        g.wait_done(timeout=10)
        assert reader.seen == [(i, i & 255) for i in range(frames)]
        # 64 MiB of buffers at most (the send that crosses the bound is admitted while below it).
        assert reader.max_bytes <= 64 * MIB + frame_bytes
        assert reader.max_len <= 64 * MIB // frame_bytes + 1
        assert reader.max_len >= 2  # the sender did run ahead: the bound was what stopped it
        s = g.stats()
        assert (s.counted, s.counted_bytes, s.queue_bytes_limit) == (0, 0, 64 * MIB)


@pytest.mark.parametrize("kind", ["frames", "ints"])
def test_a_slow_reader_is_no_deadlock_under_max_queued_packets(kind: str) -> None:
    count = 32 if kind == "frames" else 200  # four and 25 times the bound of 8
    delay = 0.004 if kind == "frames" else 0.0005

    def make(i: int) -> object:
        return np.full((1080, 1920, 3), i & 255, np.uint8) if kind == "frames" else i & 255

    with flowplex.Graph.from_yaml(chain(4, "max_queued_packets: 8\n")) as g:
        out = g.add_poller("e4")
        g.start()
        reader = Reader(out, delay, g)
        errors: list[BaseException] = []

        def produce() -> None:
            try:
                send_all(g, list(range(count)), make)
            except BaseException as exc:
                errors.append(exc)

        producer = threading.Thread(target=produce)
        producer.start()
        producer.join(timeout=60)
        reader.join()
        assert errors == []
        assert reader.seen == [(i, i & 255) for i in range(count)]
        # The watermark admits sends; invocations in flight (one per stage) land on top of it.
        slack = in_flight_slack(g, 4)
        assert reader.max_counted <= 8 + slack
        assert reader.max_len <= 8 + slack
        g.wait_done(timeout=10)


@pytest.mark.self_running(
    reason="the reader drains with try_next and sleeps: after the last send nothing pumps the remaining packets",
)
def test_a_reader_waiting_inside_next_keeps_the_sender_waiting() -> None:
    # The reader blocks in next() for a while (a long timeout, nothing there yet), then drains
    # slowly with try_next: the blocked send waits for it all along.
    with flowplex.Graph.from_yaml(chain(1, "max_queued_packets: 4\n")) as g:
        out = g.add_poller("e1")
        g.start()
        got: list[int] = []

        def read() -> None:
            first = out.next(timeout=10)
            assert first is not None
            got.append(first.timestamp)
            while len(got) < 30:
                p = out.try_next()
                if p is None:
                    time.sleep(0.2 if len(got) == 10 else 0.002)  # one pause longer than a slice
                    continue
                got.append(p.timestamp)

        reader = threading.Thread(target=read)
        reader.start()
        time.sleep(0.1)  # the reader is inside next() before anything is sent
        send_all(g, list(range(30)), int)
        reader.join(timeout=30)
        assert got == list(range(30))
        g.wait_done(timeout=10)


NOBODY_READS = {"frames": "", "ints": "max_queued_packets: 8\n"}
"""The backlogs nobody reads: 6 MiB frames against the default 64 MiB, ints against 8 packets."""


def test_nobody_reads_the_backlog_is_a_deadlock_within_about_a_second() -> None:
    # Each backlog waits out the same second of grace, mostly asleep: the two run side by side,
    # each graph (built here, so on this test's kind) sent into by a thread of its own.
    def make(kind: str, i: int) -> object:
        return np.zeros((1080, 1920, 3), np.uint8) if kind == "frames" else i

    refused: dict[str, tuple[BaseException | None, float]] = {}

    def send_until_refused(g: flowplex.Graph, kind: str) -> None:
        t0 = time.monotonic()
        try:
            for i in range(1000):
                g.send("e0", make(kind, i), ts=i)
        except BaseException as exc:
            refused[kind] = (exc, time.monotonic() - t0)
        else:
            refused[kind] = (None, time.monotonic() - t0)

    with contextlib.ExitStack() as stack:
        graphs = {kind: stack.enter_context(flowplex.Graph.from_yaml(chain(2, head)))
                  for kind, head in NOBODY_READS.items()}
        outs = {kind: g.add_poller("e2") for kind, g in graphs.items()}
        for g in graphs.values():
            g.start()
        senders = [threading.Thread(target=send_until_refused, args=(g, kind), daemon=True)
                   for kind, g in graphs.items()]
        for sender in senders:
            sender.start()
        for sender in senders:
            sender.join(timeout=30)
        assert not any(sender.is_alive() for sender in senders), f"a send never returned nor raised: {refused}"
        for kind, (exc, waited) in refused.items():
            assert isinstance(exc, flowplex.DeadlockError), (kind, exc)
            assert 0.8 < waited < 3.0, (kind, waited)
            message = str(exc)
            assert "graph input `e0` blocked and nothing can drain the graph" in message, (kind, message)
            assert "held by the poller(s) on output `e2`" in message, (kind, message)
            assert "read them from another thread" in message, (kind, message)
            assert len(outs[kind]) >= 1, kind


def test_a_reader_on_another_poller_does_not_hide_the_deadlock() -> None:
    text = """max_queued_packets: 8
nodes:
  - { name: a, kernel: PassThroughKernel, input_ports: [x], output_ports: [read] }
  - { name: b, kernel: PassThroughKernel, input_ports: [x], output_ports: [unread] }
input_ports: [x]
output_ports: [read, unread]
"""
    with flowplex.Graph.from_yaml(text) as g:
        read, unread = g.add_poller("read"), g.add_poller("unread")
        g.start()
        got: list[int] = []

        def drain() -> None:
            for p in read:
                got.append(p.timestamp)

        reader = threading.Thread(target=drain, daemon=True)
        reader.start()
        with pytest.raises(flowplex.DeadlockError, match=r"poller\(s\) on output `unread` \(\d+ packets\)"):
            for i in range(100):
                g.send("x", i, ts=i)
        assert len(unread) >= 4
        g.cancel()
        reader.join(timeout=10)


def test_the_same_thread_reading_earlier_is_no_reader() -> None:
    with flowplex.Graph.from_yaml(chain(1, "max_queued_packets: 2\n")) as g:
        out = g.add_poller("e1")
        g.start()
        g.send("e0", 0, ts=0)
        assert out.next(timeout=1) is not None  # read by this thread, then it only sends
        t0 = time.monotonic()
        with pytest.raises(flowplex.DeadlockError, match="no other thread has read"):
            for i in range(1, 100):
                g.send("e0", i, ts=i)
        assert time.monotonic() - t0 < 3.0


@pytest.mark.on_caller(
    reason="an invocation claimed but not yet run (on a pool worker or in the delegating inbox) is counted nowhere, "
    "so those kinds admit a third packet: the slack of in_flight_slack",
)
def test_send_timeout_is_honoured_while_nobody_reads() -> None:
    with flowplex.Graph.from_yaml(chain(1, "max_queued_packets: 2\n")) as g:
        g.add_poller("e1")
        g.start()
        g.send("e0", 0, ts=0)
        g.send("e0", 1, ts=1)
        t0 = time.monotonic()
        with pytest.raises(flowplex.Timeout, match=r"send on `e0` timed out waiting for room: 2 packets queued"):
            g.send("e0", 2, ts=2, timeout=0.3)
        assert 0.25 < time.monotonic() - t0 < 1.0
        with pytest.raises(flowplex.WouldBlock):
            g.send_nowait("e0", 2, ts=2)
        assert g.try_send("e0", 2, ts=2) is False


def test_send_timeout_with_a_slow_reader_sends_everything() -> None:
    with flowplex.Graph.from_yaml(chain(2, "max_queued_packets: 3\n")) as g:
        out = g.add_poller("e2")
        g.start()
        reader = Reader(out, 0.01, g)
        for i in range(20):  # most of them (all but the first 3 + slack) wait for room
            g.send("e0", i, ts=i, timeout=5)  # each wait is short: the reader frees room every 10 ms
        g.close_all_inputs()
        reader.join()
        assert [ts for ts, _ in reader.seen] == list(range(20))


@pytest.mark.on_caller(reason="reads the counts right after the sends, with nothing waited for")
def test_drop_policies_keep_the_count_exact() -> None:
    for overflow, capacity in (("drop_oldest", 3), ("drop_newest", 3), ("latest", 1)):
        with flowplex.Graph.from_yaml(chain(1)) as g:
            out = g.add_poller("e1", capacity=capacity, overflow=overflow)
            g.start()
            for i in range(20):
                g.send("e0", np.full((4, 4), i, np.uint8), ts=i)
            s = g.stats()
            assert (s.counted, s.counted_bytes) == (capacity, capacity * 16)
            assert out.dropped == 20 - capacity
            g.close_all_inputs()
            list(out)
            s = g.stats()
            assert (s.counted, s.counted_bytes) == (0, 0)
            g.wait_done(timeout=5)


@settings(max_examples=20, deadline=None)
@given(limit=st.integers(1, 6), count=st.integers(1, 120), stages=st.integers(1, 3), delay_us=st.integers(0, 300))
def test_property_no_loss_no_duplicate_order_kept_bound_respected(limit: int, count: int, stages: int,
                                                                  delay_us: int) -> None:
    with flowplex.Graph.from_yaml(chain(stages, f"max_queued_packets: {limit}\n")) as g:
        out = g.add_poller(f"e{stages}")
        g.start()
        reader = Reader(out, delay_us / 1e6, g)
        send_all(g, list(range(count)), int)
        reader.join()
        assert reader.seen == [(i, i) for i in range(count)]
        slack = in_flight_slack(g, stages)
        assert reader.max_len <= limit + slack
        assert reader.max_counted <= limit + slack
        g.wait_done(timeout=10)
