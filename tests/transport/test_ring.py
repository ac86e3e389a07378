"""Ring behaviour in one process: API, full policies, fragmentation, batches, errors, stats."""

from __future__ import annotations

import dataclasses
import os
import threading
import time
from collections.abc import Iterator

import numpy as np
import pytest

from flowplex.errors import BrokenError, ClosedError, EndOfStream, Timeout, UsageError, WouldBlock
from flowplex.transport import (
    FLAG_CONTINUES,
    FLAG_FIRST,
    FLAG_TEXT,
    PAYLOAD_SIZE,
    SLOT_DTYPE,
    AgentType,
    FullPolicy,
    Ring,
    RingStats,
    _ordering,
    make_batch,
    messages_from_rows,
)


@pytest.fixture
def ring() -> Iterator[Ring]:
    with Ring.create(capacity=8, max_producers=4) as r:
        yield r


# -- lifecycle ------------------------------------------------------------------------------------
def test_ring_is_not_constructed_directly() -> None:
    with pytest.raises(UsageError, match=r"use Ring.create\(capacity, \.\.\.\) or Ring.attach\(name\)"):
        Ring()


def test_create_attach_and_unlink_on_exit() -> None:
    with Ring.create(capacity=4, name="fpx-test-lifecycle") as ring:
        assert ring.name == "fpx-test-lifecycle"
        assert os.path.exists("/dev/shm/fpx-test-lifecycle")
        with Ring.attach(ring.name) as other:
            assert (other.capacity, other.max_producers, other.full_policy) == (4, 16, FullPolicy.REJECT)
            other.producer().send(b"from the attached handle")
        assert os.path.exists("/dev/shm/fpx-test-lifecycle")  # an attacher never unlinks on exit
        assert ring.consumer().recv(timeout=1).data == b"from the attached handle"
    assert not os.path.exists("/dev/shm/fpx-test-lifecycle")


def test_generated_names_are_unique_and_repr_is_informative() -> None:
    with Ring.create(capacity=2) as a, Ring.create(capacity=2) as b:
        assert a.name != b.name
        assert a.name.startswith("flowplex-ring-")
        assert repr(a) == f"<Ring {a.name!r} capacity=2 max_producers=16 full_policy='reject' open>"


@pytest.mark.parametrize("capacity", [0, 3, 6, -8, 1 << 21, 2.0, True, "8"])
def test_capacity_must_be_a_power_of_two(capacity: object) -> None:
    with pytest.raises(UsageError, match=r"Ring.create\(capacity=.*\): expected a power of two between 1 and"):
        Ring.create(capacity=capacity)  # type: ignore[arg-type]


def test_bad_policy_name_and_max_producers() -> None:
    with pytest.raises(UsageError, match=r"full_policy='drop'\): expected one of 'reject', 'block', 'drop_oldest'"):
        Ring.create(full_policy="drop")
    with pytest.raises(UsageError, match=r"max_producers=0\): expected an int in 1\.\.256"):
        Ring.create(max_producers=0)


@pytest.mark.parametrize("name", ["", "a/b", ".hidden", "-x", "x" * 201, "sp ace"])
def test_bad_names(name: str) -> None:
    with pytest.raises(UsageError, match=r"a ring name is 1-200 characters"):
        Ring.create(name=name)


def test_duplicate_name_and_missing_ring() -> None:
    dup = r"exists already; pass another name, or none for a unique one"
    with Ring.create(capacity=2, name="fpx-test-dup"), pytest.raises(UsageError, match=dup):
        Ring.create(capacity=2, name="fpx-test-dup")
    with pytest.raises(UsageError, match=r"Ring.attach\(name='fpx-test-dup'\): no such ring"):
        Ring.attach("fpx-test-dup")


def test_attach_refuses_a_segment_that_is_not_a_ring() -> None:
    path = "/dev/shm/fpx-test-notaring"
    with open(path, "wb") as f:
        f.write(b"\0" * 8192)
    os.chmod(path, 0o600)  # private, as attach requires: the magic check is what is tested here
    try:
        with pytest.raises(UsageError, match=r"is not a flowplex ring of layout version 1"):
            Ring.attach("fpx-test-notaring")
    finally:
        os.unlink(path)


def test_closed_ring_and_handles_raise_closed_error(ring: Ring) -> None:
    p, c = ring.producer(), ring.consumer()
    ring.close()
    assert p.closed and c.closed and ring.closed
    with pytest.raises(ClosedError, match=r"producer 0 of ring .* is closed"):
        p.send(b"x")
    with pytest.raises(ClosedError, match=r"the consumer of ring .* is closed"):
        c.recv(timeout=0)
    with pytest.raises(ClosedError, match=r"ring .* is closed"):
        ring.producer()
    ring.close()  # idempotent


# -- messages -------------------------------------------------------------------------------------
def test_message_fields_round_trip(ring: Ring) -> None:
    p, c = ring.producer(), ring.consumer()
    assert p.send("héllo", stream_id=7, agent_type=AgentType.ERROR, timestamp_ns=123)
    assert p.send(b"\x00\xff", stream_id=2**32 - 1)
    assert p.send(bytearray(b"ba"))
    m = c.recv(timeout=1)
    assert (m.data, m.text, m.stream_id, m.agent_type, m.timestamp_ns, m.seq, m.producer_id) == (
        "héllo".encode(),
        "héllo",
        7,
        AgentType.ERROR,
        123,
        0,
        0,
    )
    assert m.is_text and m.flags == FLAG_FIRST | FLAG_TEXT
    assert isinstance(m.agent_type, AgentType)
    before = time.time_ns()
    m2 = c.recv(timeout=1)
    assert (m2.data, m2.seq, m2.is_text, m2.stream_id) == (b"\x00\xff", 1, False, 2**32 - 1)
    assert m2.agent_type is AgentType.ASSISTANT
    assert 0 < m2.timestamp_ns <= before
    assert c.recv(timeout=1).data == b"ba"


@pytest.mark.parametrize(
    ("kwargs", "pattern"),
    [
        ({"stream_id": -1}, r"send\(stream_id=-1\): expected an int in 0\.\.2\*\*32-1"),
        ({"stream_id": 2**32}, r"send\(stream_id=4294967296\)"),
        ({"agent_type": 8}, r"send\(agent_type=8\): expected an AgentType \(0\.\.7\)"),
        ({"agent_type": -1}, r"send\(agent_type=-1\)"),
        ({"agent_type": "x"}, r"send\(agent_type='x'\)"),
        ({"timestamp_ns": -5}, r"send\(timestamp_ns=-5\): expected None or an int in 0\.\.2\*\*64-1"),
        ({"stream_id": "a"}, r"send\(stream_id='a'\)"),
    ],
)
def test_send_argument_errors_name_the_argument(ring: Ring, kwargs: dict[str, object], pattern: str) -> None:
    p = ring.producer()
    with pytest.raises(UsageError, match=pattern):
        p.send(b"x", **kwargs)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match=pattern):
        p.send(b"x" * 500, **kwargs)  # type: ignore[arg-type]
    assert ring.stats().produced == 0


def test_send_refuses_other_payload_types(ring: Ring) -> None:
    with pytest.raises(UsageError, match=r"send\(data=42\): expected bytes or str, got int"):
        ring.producer().send(42)  # type: ignore[arg-type]


def test_long_messages_are_fragmented_and_reassembled_exactly(ring: Ring) -> None:
    p, c = ring.producer(), ring.consumer()
    text = "agent says: " + "αβγ😀 " * 60  # multi-byte code points across fragment boundaries
    data = os.urandom(PAYLOAD_SIZE * 5)
    assert p.send(text, stream_id=1)
    m = c.recv(timeout=1)
    assert m.text == text and m.is_text and m.stream_id == 1
    assert p.send(data)
    assert c.recv(timeout=1).data == data
    s = ring.stats()
    assert (s.produced, s.consumed, s.fragmented, s.reassembled) == (2, 2, 2, 2)


def test_message_larger_than_the_lane_is_a_usage_error(ring: Ring) -> None:
    with pytest.raises(UsageError, match=r"needs 9 slots but ring .* has 8 per producer; create the ring"):
        ring.producer().send(b"x" * (PAYLOAD_SIZE * 8 + 1))


# -- full policies ----------------------------------------------------------------------------------
def test_reject_capacity_is_exact_and_every_refusal_counted(ring: Ring) -> None:
    p, c = ring.producer(), ring.consumer()
    assert all(p.send(b"%d" % i) for i in range(8))
    assert not p.send(b"8")
    assert not p.send(b"y" * 300)  # needs 2 slots
    assert ring.stats().rejected == 2
    assert ring.stats().high_water_mark == 8
    assert c.recv(timeout=1).data == b"0"
    assert p.send(b"8")
    assert not p.send(b"9")
    assert [c.recv(timeout=1).data for _ in range(8)] == [b"%d" % i for i in range(1, 9)]
    s = ring.stats()
    assert (s.produced, s.consumed, s.rejected, s.in_flight_slots) == (9, 9, 3, 0)


def test_block_waits_for_the_consumer() -> None:
    with Ring.create(capacity=2, full_policy="block") as ring:
        p, c = ring.producer(), ring.consumer()
        p.send(b"a")
        p.send(b"b")
        got: list[bytes] = []
        reader = threading.Timer(0.1, lambda: got.append(c.recv(timeout=1).data))
        reader.start()
        t0 = time.monotonic()
        assert p.send(b"c", timeout=5)
        assert time.monotonic() - t0 >= 0.05
        reader.join()
        assert got == [b"a"]


def test_block_times_out_and_counts_the_refusal() -> None:
    with Ring.create(capacity=2, full_policy=FullPolicy.BLOCK) as ring:
        p = ring.producer()
        p.send(b"a")
        p.send(b"b")
        t0 = time.monotonic()
        with pytest.raises(Timeout, match=r"send: ring .* stayed full for 0.05 s \(producer 0\)"):
            p.send(b"c", timeout=0.05)
        assert 0.04 <= time.monotonic() - t0 < 1
        assert ring.stats().rejected == 1


def test_block_fails_when_the_consumer_closes() -> None:
    with Ring.create(capacity=1, full_policy="block") as ring:
        p, c = ring.producer(), ring.consumer()
        p.send(b"a")
        c.close()
        with pytest.raises(BrokenError, match=r"the consumer closed; nobody will free slots"):
            p.send(b"b", timeout=10)


def test_drop_oldest_overwrites_and_counts_every_loss() -> None:
    with Ring.create(capacity=4, full_policy="drop_oldest") as ring:
        p, c = ring.producer(), ring.consumer()
        for i in range(10):
            assert p.send(b"m%d" % i)
        assert [c.recv(timeout=1).data for _ in range(4)] == [b"m6", b"m7", b"m8", b"m9"]
        s = ring.stats()
        assert (s.produced, s.consumed, s.dropped) == (10, 4, 6)
        p.send(b"x" * 500)  # 3 fragments
        p.send(b"y" * 300)  # 2 more: overwrites the first fragment of x
        m = c.recv(timeout=1)
        assert m.data == b"y" * 300
        s = ring.stats()
        assert (s.produced, s.consumed, s.dropped) == (12, 5, 7)


# -- waiting and the end of the stream -------------------------------------------------------------
def test_recv_times_out_and_nowait_would_block(ring: Ring) -> None:
    ring.producer()
    c = ring.consumer()
    t0 = time.monotonic()
    with pytest.raises(Timeout, match=r"recv: no message on ring .* within 0.05 s"):
        c.recv(timeout=0.05)
    assert 0.04 <= time.monotonic() - t0 < 1
    with pytest.raises(WouldBlock, match=r"has no message ready"):
        c.recv_nowait()


def test_waiting_without_producers_times_out_instead_of_ending(ring: Ring) -> None:
    with pytest.raises(Timeout):
        ring.consumer().recv(timeout=0.02)


def test_end_of_stream_after_every_producer_closed_and_drained(ring: Ring) -> None:
    c = ring.consumer()
    with ring.producer() as p1, ring.producer() as p2:
        p1.send(b"1")
        p2.send(b"2")
    assert sorted(m.data for m in c) == [b"1", b"2"]
    with pytest.raises(EndOfStream):
        c.recv(timeout=0)
    p3 = ring.producer()  # a new producer reopens the stream
    p3.send(b"3")
    assert c.recv(timeout=1).data == b"3"
    assert p3.lane == 2  # free lanes first; closed ones are reused when none is left


def test_one_consumer_at_a_time(ring: Ring) -> None:
    c = ring.consumer()
    with pytest.raises(UsageError, match=r"already has a consumer \(pid \d+\); a ring has one consumer"):
        ring.consumer()
    c.close()
    ring.consumer()


def test_lanes_run_out_then_closed_ones_are_reused(ring: Ring) -> None:
    producers = [ring.producer() for _ in range(4)]
    with pytest.raises(UsageError, match=r"all 4 producer lanes are in use; close unused producers"):
        ring.producer()
    producers[2].close()
    assert ring.producer().lane == 2
    assert ring.stats().producers == 4


def test_dropped_producer_object_closes_its_lane(ring: Ring) -> None:
    c = ring.consumer()
    p = ring.producer()
    p.send(b"last words")
    del p
    ring._children.clear()  # the ring handle's own reference
    assert c.recv(timeout=1).data == b"last words"
    with pytest.raises(EndOfStream):
        c.recv(timeout=1)


# -- many producers ----------------------------------------------------------------------------------
def test_producer_threads_keep_their_own_order() -> None:
    n, writers = 3000, 4
    with Ring.create(capacity=64, full_policy="block") as ring:
        c = ring.consumer()

        def write(k: int) -> None:
            with ring.producer() as p:
                for i in range(n):
                    p.send(b"%d:%d" % (k, i), stream_id=k, timeout=10)

        threads = [threading.Thread(target=write, args=(k,)) for k in range(writers)]
        for t in threads:
            t.start()
        seen: dict[int, list[int]] = {k: [] for k in range(writers)}
        for m in c:
            k, i = m.data.split(b":")
            assert int(k) == m.stream_id
            seen[m.stream_id].append(int(i))
        for t in threads:
            t.join()
        assert all(seen[k] == list(range(n)) for k in range(writers))
        s = ring.stats()
        assert (s.produced, s.consumed, s.rejected, s.dropped) == (n * writers,) * 2 + (0, 0)


# -- batches ----------------------------------------------------------------------------------------
def test_send_many_and_recv_many_with_structured_arrays() -> None:
    with Ring.create(capacity=16) as ring:
        p, c = ring.producer(), ring.consumer()
        batch = make_batch([b"a", "bé", b"c" * 224], stream_id=5, agent_type=AgentType.USER, timestamp_ns=9)
        assert p.send_many(batch) == 3
        assert p.send_many([b"d", "e"]) == 2
        rows = c.recv_many(10, timeout=1)
        assert rows.dtype == SLOT_DTYPE
        assert rows["seq"].tolist() == [0, 1, 2, 3, 4]
        assert rows["msg_id"].tolist() == [0, 1, 2, 3, 4]
        assert rows["len"].tolist() == [1, 3, 224, 1, 1]
        assert rows["stream_id"][:3].tolist() == [5, 5, 5]
        assert rows["flags"].tolist() == [
            FLAG_FIRST,
            FLAG_FIRST | FLAG_TEXT,
            FLAG_FIRST,
            FLAG_FIRST,
            FLAG_FIRST | FLAG_TEXT,
        ]
        msgs = messages_from_rows(rows)
        assert [m.data for m in msgs] == [b"a", "bé".encode(), b"c" * 224, b"d", b"e"]
        assert msgs[1].agent_type is AgentType.USER and msgs[1].timestamp_ns == 9


def test_send_many_rejects_what_does_not_fit_and_wraps() -> None:
    with Ring.create(capacity=8) as ring:
        p, c = ring.producer(), ring.consumer()
        batch = make_batch([b"%d" % i for i in range(6)])
        assert p.send_many(batch) == 6
        assert len(c.recv_many(4, timeout=1)) == 4
        assert p.send_many(batch) == 6  # wraps around the end of the lane
        assert p.send_many(batch) == 0
        assert ring.stats().rejected == 6
        rows = c.recv_many(100, timeout=1)
        assert [bytes(r["payload"][: r["len"]]) for r in rows] == [b"4", b"5"] + [b"%d" % i for i in range(6)]


def test_recv_many_never_splits_a_message() -> None:
    with Ring.create(capacity=16) as ring:
        p, c = ring.producer(), ring.consumer()
        p.send(b"a")
        p.send(b"L" * 700)  # 4 slots
        p.send(b"b")
        first = c.recv_many(3, timeout=1)
        assert len(first) == 1  # 'a' only: the long message does not fit in the remaining 2
        long = c.recv_many(2, timeout=1)  # longer than max_items: comes back whole
        assert long["flags"].tolist() == [FLAG_FIRST | FLAG_CONTINUES, FLAG_CONTINUES, FLAG_CONTINUES, 0]
        assert [m.data for m in messages_from_rows(long)] == [b"L" * 700]
        assert messages_from_rows(c.recv_many(5, timeout=1))[0].data == b"b"
        s = ring.stats()
        assert (s.produced, s.consumed) == (3, 3)


def test_recv_many_merges_producers() -> None:
    with Ring.create(capacity=8) as ring:
        p1, p2, c = ring.producer(), ring.producer(), ring.consumer()
        p1.send_many(make_batch([b"1a", b"1b"]))
        p2.send_many(make_batch([b"2a"]))
        rows = c.recv_many(10, timeout=1)
        got = sorted((int(r["producer_id"]), bytes(r["payload"][: r["len"]])) for r in rows)
        assert got == [(0, b"1a"), (0, b"1b"), (1, b"2a")]


def test_batch_errors() -> None:
    with Ring.create(capacity=8) as ring:
        p, c = ring.producer(), ring.consumer()
        with pytest.raises(UsageError, match=r"make_batch\(payloads\[0\]=1\): expected bytes or str"):
            make_batch([1])  # type: ignore[list-item]
        bad = np.zeros(2, dtype=SLOT_DTYPE)
        bad["len"][1] = 300
        with pytest.raises(UsageError, match=r"every row needs len <= 224 and agent_type <= 7"):
            p.send_many(bad)
        with pytest.raises(UsageError, match=r"expected a 1-d SLOT_DTYPE array"):
            p.send_many(np.zeros(3, dtype=np.int64))
        with pytest.raises(UsageError, match=r"recv_many\(max_items=0\): expected a positive int"):
            c.recv_many(0)
        with pytest.raises(UsageError, match=r"expected a SLOT_DTYPE array"):
            messages_from_rows(np.zeros(2))


# -- stats, memory models ----------------------------------------------------------------------------
def test_stats_is_a_frozen_snapshot(ring: Ring) -> None:
    s = ring.stats()
    assert isinstance(s, RingStats)
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.produced = 1  # type: ignore[misc]
    assert s == RingStats(8, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)


@pytest.mark.parametrize("policy", ["reject", "drop_oldest"])
def test_weak_memory_model_path_round_trips(policy: str) -> None:
    """The patomic (arm64) accessors, forced on this machine, run the same protocol."""
    _ordering.set_memory_model("weak")
    try:
        with Ring.create(capacity=4, full_policy=policy) as ring:
            p, c = ring.producer(), ring.consumer()
            for i in range(10):
                if policy == "reject":
                    assert p.send(b"%d" % i)
                    assert c.recv(timeout=1).data == b"%d" % i
                else:
                    p.send(b"%d" % i + b"z" * 300)
            if policy == "drop_oldest":
                assert [c.recv(timeout=1).data[:1] for _ in range(2)] == [b"8", b"9"]
                assert ring.stats().dropped == 8
    finally:
        _ordering.set_memory_model(None)
    with pytest.raises(ValueError, match=r"expected 'tso', 'weak' or None"):
        _ordering.set_memory_model("arm")  # type: ignore[arg-type]


def test_batches_carry_long_messages_as_fragment_rows() -> None:
    with Ring.create(capacity=8) as ring, Ring.create(capacity=8) as relay:
        p, c = ring.producer(), ring.consumer()
        long = os.urandom(700)  # 4 rows
        batch = make_batch([b"a", long, "z"])
        assert len(batch) == 6
        assert p.send_many(batch) == 3
        s = ring.stats()
        assert (s.produced, s.fragmented) == (3, 1)
        rows = c.recv_many(8, timeout=1)
        assert [m.data for m in messages_from_rows(rows)] == [b"a", long, b"z"]
        # recv_many rows can be forwarded as they are
        rp, rc = relay.producer(), relay.consumer()
        assert rp.send_many(rows) == 3
        assert [m.data for m in messages_from_rows(rc.recv_many(8, timeout=1))] == [b"a", long, b"z"]
        assert ring.stats().consumed == 3


def test_fragment_batches_are_rejected_whole_messages_at_a_time() -> None:
    with Ring.create(capacity=8) as ring:
        p, c = ring.producer(), ring.consumer()
        batch = make_batch([b"x" * 600, b"y" * 600, b"z" * 600])  # 3 + 3 + 3 rows
        assert p.send_many(batch) == 2  # the third does not fit in the 2 slots left
        assert ring.stats().rejected == 1
        assert [m.data[:1] for m in messages_from_rows(c.recv_many(8, timeout=1))] == [b"x", b"y"]


def test_malformed_fragment_rows_are_refused() -> None:
    with Ring.create(capacity=8) as ring:
        p = ring.producer()
        rows = make_batch([b"x" * 600])
        rows["flags"][1] |= FLAG_FIRST
        with pytest.raises(UsageError, match=r"rows with FLAG_CONTINUES must form whole messages"):
            p.send_many(rows)
        with pytest.raises(UsageError, match=r"a message needs 9 slots but a lane has 8"):
            p.send_many(make_batch([b"x" * 224 * 9]))
