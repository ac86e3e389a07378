"""A hypothesis state machine over a real ring: producers come and go, consumers hand over.

Every message carries its producer's serial number and a per-producer counter, so what the
consumer gets can be checked without a model of the lanes: per producer nothing is duplicated
or reordered; under ``reject`` and ``block`` nothing accepted is lost; under ``drop_oldest``
what is lost is exactly what ``stats().dropped`` counts once everything is read.  ``produced``,
``consumed`` and ``rejected`` match the machine's own counts after every step.  Both hot paths
(C and pure Python) run it.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import ClassVar

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

from flowplex.errors import EndOfStream, Timeout, UsageError, WouldBlock
from flowplex.transport import Message, Producer, Ring, _accel, messages_from_rows
from flowplex.transport._fragment import cut_points

TAG = struct.Struct("<II")  # producer serial, counter


@dataclass
class Sender:
    producer: Producer
    serial: int
    counter: int = 0
    unread: list[int] = field(default_factory=list)  # accepted counters not received yet, in order


lengths = st.sampled_from([0, 1, 100, 216, 217, 500, 1000])


class RingOverTime(RuleBasedStateMachine):
    """The machine; ``RingOverTime.steps`` collects the rule counts for the report."""

    steps: ClassVar[dict[str, int]] = {}

    @initialize(capacity=st.sampled_from([1, 2, 4, 8]), policy=st.sampled_from(["reject", "block", "drop_oldest"]))
    def setup(self, capacity: int, policy: str) -> None:
        self.policy = policy
        self.ring = Ring.create(capacity=capacity, full_policy=policy, max_producers=3)
        self.consumer = self.ring.consumer()
        self.senders: list[Sender] = []
        self.closed: list[Sender] = []
        self.serials = 0
        self.capacity = capacity
        self.accepted = self.received = self.refused = self.lost = 0
        self.last: dict[int, int] = {}  # serial -> last counter received
        self.open_producer()

    def teardown(self) -> None:
        if not hasattr(self, "ring"):
            return
        try:
            while self._recv_one():
                pass
            s = self.ring.stats()
            # Drained: the newest message of a lane is never overwritten, so nothing is left.
            assert all(not x.unread for x in self.senders + self.closed)
            assert s.dropped == self.lost, (s, self.lost)
            assert self.received + self.lost == self.accepted
            if self.policy != "drop_oldest":
                assert self.lost == 0
            for key, value in (("messages", self.received), ("dropped", self.lost), ("rejected", self.refused)):
                RingOverTime.steps[key] = RingOverTime.steps.get(key, 0) + value
        finally:
            self.ring.close()
            self.ring.unlink()

    def _count(self, rule_name: str) -> None:
        RingOverTime.steps[rule_name] = RingOverTime.steps.get(rule_name, 0) + 1

    # -- producers --------------------------------------------------------------------------
    @precondition(lambda self: len(self.senders) < 3)
    @rule()
    def open_producer(self) -> None:
        self._count("open_producer")
        try:
            producer = self.ring.producer()
        except UsageError as exc:  # closed producers' lanes are reused only once read
            assert "producer lanes are in use" in str(exc)
            return
        self.senders.append(Sender(producer, self.serials))
        self.serials += 1

    @precondition(lambda self: self.senders)
    @rule(i=st.integers(0, 2))
    def close_producer(self, i: int) -> None:
        self._count("close_producer")
        sender = self.senders.pop(i % len(self.senders))
        sender.producer.close()
        self.closed.append(sender)

    def _payload(self, sender: Sender, length: int) -> bytes:
        return TAG.pack(sender.serial, sender.counter) + bytes([sender.counter % 251]) * length

    def _fits(self, length: int) -> bool:
        """Whether a message of ``TAG.size + length`` bytes fits in one lane (else UsageError)."""
        return len(cut_points(b"x" * (TAG.size + length))) <= self.capacity

    @precondition(lambda self: self.senders)
    @rule(i=st.integers(0, 2), length=lengths)
    def send(self, i: int, length: int) -> None:
        self._count("send")
        if not self._fits(length):
            return
        sender = self.senders[i % len(self.senders)]
        try:
            ok = sender.producer.send(self._payload(sender, length), timeout=0)
        except Timeout:  # block, with no time to wait: refused and counted
            ok = False
        self._after_send(sender, ok)

    @precondition(lambda self: self.senders)
    @rule(i=st.integers(0, 2), n=st.integers(1, 5), length=lengths)
    def send_many(self, i: int, n: int, length: int) -> None:
        self._count("send_many")
        if not self._fits(length):
            return
        sender = self.senders[i % len(self.senders)]
        items = [TAG.pack(sender.serial, sender.counter + k) + b"m" * length for k in range(n)]
        try:
            sent = sender.producer.send_many(items, timeout=0)
        except Timeout:  # block: the item that timed out was refused; those before it went
            sent = self.ring.stats().produced - self.accepted
        # Items are sent one by one up to the first refused (counted); the rest are not tried.
        for k in range(min(sent + 1, n)):
            self._after_send(sender, k < sent)
        sender.counter += n - min(sent + 1, n)

    def _after_send(self, sender: Sender, ok: bool) -> None:
        if ok:
            sender.unread.append(sender.counter)
            self.accepted += 1
        else:
            self.refused += 1
        sender.counter += 1

    # -- consumers --------------------------------------------------------------------------
    def _got(self, m: Message) -> None:
        serial, counter = TAG.unpack_from(m.data)
        sender = next(x for x in self.senders + self.closed if x.serial == serial)
        assert counter > self.last.get(serial, -1), f"producer {serial}: {counter} after {self.last.get(serial)}"
        assert counter in sender.unread, f"producer {serial}: {counter} was never accepted, or came twice"
        skipped = sender.unread.index(counter)
        if self.policy != "drop_oldest":
            assert skipped == 0, f"producer {serial}: {sender.unread[:skipped]} lost before {counter}"
        del sender.unread[: skipped + 1]  # whatever was skipped is lost for good: overwritten
        self.lost += skipped
        self.last[serial] = counter
        self.received += 1

    def _recv_one(self) -> bool:
        try:
            self._got(self.consumer.recv_nowait() if self.received % 2 else self.consumer.recv(timeout=0))
        except (WouldBlock, EndOfStream, Timeout):
            return False
        return True

    @rule()
    def recv(self) -> None:
        self._count("recv")
        self._recv_one()

    @rule(n=st.integers(1, 8))
    def recv_many(self, n: int) -> None:
        self._count("recv_many")
        try:
            rows = self.consumer.recv_many(n, timeout=0)
        except (Timeout, EndOfStream):
            return
        for m in messages_from_rows(rows):
            self._got(m)

    @rule()
    def hand_over_the_consumer(self) -> None:
        self._count("hand_over")
        self.consumer.close()
        self.consumer = self.ring.consumer()

    @invariant()
    def counts_add_up(self) -> None:
        if not hasattr(self, "ring"):
            return
        s = self.ring.stats()
        assert (s.produced, s.consumed, s.rejected) == (self.accepted, self.received, self.refused), s


@pytest.mark.parametrize("impl", ["c", "python"])
def test_ring_over_time(impl: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if impl == "python":
        monkeypatch.setattr(_accel, "fast", None)
    elif _accel.fast is None:
        pytest.skip("the C extension flowplex.transport._fastring is not built")
    RingOverTime.steps = {}
    run_state_machine_as_test(RingOverTime, settings=settings(max_examples=60, stateful_step_count=50))
    print(f"{impl}: rule counts {RingOverTime.steps}")
    # The runs met what they are about: losses under drop_oldest, refusals, handovers.
    assert min(RingOverTime.steps.get(k, 0) for k in ("dropped", "rejected", "hand_over", "close_producer")) > 0
