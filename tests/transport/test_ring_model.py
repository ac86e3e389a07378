"""A hypothesis state machine drives a real ring against a model of per-producer lanes.

Checks FIFO per producer, exact capacity, fragment reassembly, wrap-around (small lanes are
lapped many times), and that every message is accounted for: consumed, rejected or dropped.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from flowplex.errors import EndOfStream, Timeout, UsageError
from flowplex.transport import PAYLOAD_SIZE, Producer, Ring, make_batch, messages_from_rows
from flowplex.transport._fragment import cut_points


@dataclass
class Lane:
    producer: Producer
    queue: deque[tuple[bytes, int]] = field(default_factory=deque)  # (data, first slot position)
    tail: int = 0  # slots published
    head: int = 0  # slots the consumer released (model view)
    counter: int = 0


lengths = st.one_of(
    st.integers(0, 40), st.integers(PAYLOAD_SIZE - 2, PAYLOAD_SIZE + 2), st.integers(0, 3 * PAYLOAD_SIZE)
)


class RingMachine(RuleBasedStateMachine):
    ring: Ring

    @initialize(
        capacity=st.sampled_from([1, 2, 4, 8]),
        policy=st.sampled_from(["reject", "block", "drop_oldest"]),
        producers=st.integers(1, 3),
    )
    def setup(self, capacity: int, policy: str, producers: int) -> None:
        self.capacity, self.policy = capacity, policy
        self.ring = Ring.create(capacity=capacity, full_policy=policy, max_producers=producers)
        self.consumer = self.ring.consumer(expect_producers=producers)
        self.lanes = [Lane(self.ring.producer()) for _ in range(producers)]
        self.produced = self.consumed = self.rejected = self.dropped = 0
        self.fragmented = 0

    def teardown(self) -> None:
        if hasattr(self, "ring"):
            self.ring.close()
            self.ring.unlink()

    def _payload(self, k: int, length: int, text: bool) -> bytes | str:
        lane = self.lanes[k]
        lane.counter += 1
        stamp = f"{k}.{lane.counter}:"
        if text:
            body = (stamp + "é" * length)[: max(len(stamp), length // 2)]
            return body
        return (stamp.encode() + bytes(range(256)) * 13)[: max(len(stamp), length)]

    @rule(k=st.integers(0, 2), length=lengths, text=st.booleans())
    def send(self, k: int, length: int, text: bool) -> None:
        k %= len(self.lanes)
        lane = self.lanes[k]
        payload = self._payload(k, length, text)
        data = payload.encode() if isinstance(payload, str) else payload
        slots = len(cut_points(data))
        if slots > self.capacity:
            with pytest.raises(UsageError, match=r"needs \d+ slots"):
                lane.producer.send(payload, stream_id=k)
            return
        full = lane.tail + slots - lane.head > self.capacity
        if self.policy == "reject" and full:
            assert lane.producer.send(payload, stream_id=k) is False
            self.rejected += 1
            return
        if self.policy == "block" and full:
            with pytest.raises(Timeout):
                lane.producer.send(payload, stream_id=k, timeout=0)
            self.rejected += 1
            return
        assert lane.producer.send(payload, stream_id=k, timeout=0) is True
        lane.queue.append((data, lane.tail))
        lane.tail += slots
        self.produced += 1
        self.fragmented += slots > 1
        if self.policy == "drop_oldest":
            # Messages that started before tail - capacity are (at least partly) overwritten.
            while lane.queue and lane.queue[0][1] < lane.tail - self.capacity:
                lane.queue.popleft()
                self.dropped += 1
            lane.head = max(lane.head, lane.tail - self.capacity)

    @precondition(lambda self: self.policy != "block")
    @rule(k=st.integers(0, 2), sizes=st.lists(lengths, min_size=1, max_size=6))
    def send_batch(self, k: int, sizes: list[int]) -> None:
        """send_many with SLOT_DTYPE rows: whole messages, in order, as many as fit."""
        k %= len(self.lanes)
        lane = self.lanes[k]
        datas = [self._payload(k, n, False) for n in sizes]
        assert all(isinstance(d, bytes) for d in datas)
        slots = [len(cut_points(d)) for d in datas]  # type: ignore[arg-type]
        if max(slots) > self.capacity:
            with pytest.raises(UsageError, match=r"a message needs \d+ slots"):
                lane.producer.send_many(make_batch(datas, stream_id=k))
            return
        sent = lane.producer.send_many(make_batch(datas, stream_id=k))
        expected = 0
        for data, n in zip(datas, slots, strict=True):
            if self.policy == "reject" and lane.tail + n - lane.head > self.capacity:
                break
            lane.queue.append((data, lane.tail))  # type: ignore[arg-type]
            lane.tail += n
            self.fragmented += n > 1
            expected += 1
            if self.policy == "drop_oldest":
                while lane.queue and lane.queue[0][1] < lane.tail - self.capacity:
                    lane.queue.popleft()
                    self.dropped += 1
                lane.head = max(lane.head, lane.tail - self.capacity)
        assert sent == expected
        self.produced += sent
        self.rejected += len(datas) - sent

    def _deliver(self, producer_id: int, stream_id: int, data: bytes) -> None:
        lanes = [lane for lane in self.lanes if lane.producer.lane == producer_id]
        assert len(lanes) == 1 and self.lanes.index(lanes[0]) == stream_id
        lane = lanes[0]
        assert lane.queue, "received a message the model does not have"
        expected, start = lane.queue.popleft()
        assert data == expected  # FIFO per producer, fragments reassembled exactly
        lane.head = start + len(cut_points(data))
        self.consumed += 1

    @rule()
    def recv(self) -> None:
        if not any(lane.queue for lane in self.lanes):
            with pytest.raises(Timeout):
                self.consumer.recv(timeout=0)
            return
        m = self.consumer.recv(timeout=0)
        self._deliver(m.producer_id, m.stream_id, m.data)

    @rule(max_items=st.integers(1, 12))
    def recv_many(self, max_items: int) -> None:
        if not any(lane.queue for lane in self.lanes):
            with pytest.raises(Timeout):
                self.consumer.recv_many(max_items, timeout=0)
            return
        for m in messages_from_rows(self.consumer.recv_many(max_items, timeout=0)):
            self._deliver(m.producer_id, m.stream_id, m.data)

    @rule(k=st.integers(0, 2))
    def fill_then_drain(self, k: int) -> None:
        """Lap the lane: fill it exactly to capacity, check the refusal, read everything back."""
        k %= len(self.lanes)
        while any(lane.queue for lane in self.lanes):
            self.recv()
        for _ in range(self.capacity):
            self.send(k, 5, False)
        if self.policy == "reject":
            assert self.lanes[k].producer.send(b"one too many") is False
            self.rejected += 1
            assert self.ring.stats().high_water_mark == self.capacity
        while any(lane.queue for lane in self.lanes):
            self.recv()

    @invariant()
    def counters_match_the_model(self) -> None:
        if not hasattr(self, "ring"):
            return
        s = self.ring.stats()
        assert (s.produced, s.consumed, s.rejected, s.fragmented) == (
            self.produced,
            self.consumed,
            self.rejected,
            self.fragmented,
        )
        assert s.dropped <= self.dropped
        assert 0 <= s.high_water_mark <= self.capacity
        assert s.in_flight_slots <= self.capacity * len(self.lanes)

    @precondition(lambda self: hasattr(self, "ring"))
    @rule()
    def close_all_and_drain(self) -> None:
        """Everything sent is consumed or counted as dropped, then the stream ends."""
        for lane in self.lanes:
            lane.producer.close()
        while any(lane.queue for lane in self.lanes):
            self.recv()
        with pytest.raises(EndOfStream):
            self.consumer.recv(timeout=0)
        s = self.ring.stats()
        assert s.produced == s.consumed + s.dropped
        assert s.dropped == self.dropped
        assert s.in_flight_slots == 0
        self.lanes = [Lane(self.ring.producer()) for _ in self.lanes]
        self.consumer.close()
        self.consumer = self.ring.consumer(expect_producers=len(self.lanes))
        for lane in self.lanes:  # the new producers continue the reused lanes' positions
            lane.tail = lane.head = self.ring._core.words.load(self.ring._core.lane_word(lane.producer.lane, 0))


def test_ring_matches_the_model(ring_impl: str) -> None:
    """Runs on both hot paths (the ``ring_impl`` fixture picks the C or the Python one)."""
    run_state_machine_as_test(RingMachine, settings=settings(stateful_step_count=40, deadline=None))
