"""make_mutable: in place when exclusively held, else one counted copy; host arrays are never written."""

from __future__ import annotations

import threading

import numpy as np
import numpy.typing as npt
import pytest

from flowplex.errors import UsageError
from flowplex.packets import (
    CowStats,
    Packet,
    _borrow,
    _buffers,
    _packet,
    _thread_cow_counts,
    clone_owned,
    cow_stats,
    new_buffer,
    to_packet,
)


def address(arr: npt.NDArray[np.generic]) -> int:
    return int(arr.__array_interface__["data"][0])


def packet_address(p: Packet) -> int:
    return address(p.as_numpy())  # the temporary view dies before make_mutable runs


@pytest.fixture
def copies() -> CowStats:
    """The counters before the test; compare with ``cow_stats()`` afterwards."""
    return cow_stats()


def delta(before: CowStats) -> tuple[int, int]:
    now = cow_stats()
    return now.copies - before.copies, now.bytes - before.bytes


def test_refcount_baselines_were_calibrated() -> None:
    # On CPython both self-tests succeed; -1 would mean "always copy" (still correct, just slower).
    # They are measured on first use (they need numpy), then kept.
    assert _packet.holder_refs_exclusive() > 0
    adopted, owned = _buffers.array_refs_exclusive()
    assert adopted > 0
    assert owned > 0
    assert _buffers.array_refs_exclusive() == (adopted, owned)


def test_exclusive_adopted_array_is_written_in_place(copies: CowStats) -> None:
    p = to_packet(np.zeros((2, 3), order="F"), ts=0)  # the host keeps no reference
    before = packet_address(p)
    strides = p.as_numpy().strides
    m = p.make_mutable()
    assert address(m) == before
    assert m.strides == strides  # adopted buffers keep their layout
    assert m.flags.writeable
    m[1, 2] = 5
    assert p.as_numpy()[1, 2] == 5
    assert delta(copies) == (0, 0)
    again = p.make_mutable()  # still this handle's own memory
    assert address(again) == before
    assert delta(copies) == (0, 0)


def test_host_held_array_is_copied_and_left_untouched(copies: CowStats) -> None:
    a = np.zeros(4, np.float32)
    p = to_packet(a, 0)
    m = p.make_mutable()
    assert address(m) != address(a)
    assert m.flags.c_contiguous and m.flags.writeable
    m[:] = 7
    assert not a.any()
    assert a.flags.writeable  # the copy replaced the last adoption, so the array is released
    assert packet_address(p) == address(m)
    assert delta(copies) == (1, 16)


def test_sibling_handles_keep_the_original(copies: CowStats) -> None:
    p = to_packet(np.arange(4, dtype=np.int64))
    q = clone_owned(p)
    original = packet_address(p)
    m = q.make_mutable()
    m[0] = 100
    assert address(m) != original
    assert packet_address(p) == original
    assert p.as_numpy()[0] == 0
    assert q.as_numpy()[0] == 100
    assert delta(copies) == (1, 32)
    # q now holds its own copy; p is alone with the original again and may write in place.
    assert address(p.make_mutable()) == original
    assert delta(copies) == (1, 32)


def test_clone_dropped_restores_exclusivity(copies: CowStats) -> None:
    p = to_packet(np.zeros(8, np.uint8))
    q = clone_owned(p)
    del q
    before = packet_address(p)
    assert address(p.make_mutable()) == before
    assert delta(copies) == (0, 0)


def test_view_of_a_bigger_array_is_never_written(copies: CowStats) -> None:
    big = np.zeros(10)
    p = to_packet(big[2:6])
    m = p.make_mutable()
    m[:] = 1
    assert not big.any()
    assert delta(copies) == (1, 32)
    # Even when nobody else holds the view, its memory belongs to a base array.
    q = to_packet(np.zeros(10)[::2])
    q.make_mutable()
    assert delta(copies) == (2, 72)


def test_originally_read_only_array_is_copied(copies: CowStats) -> None:
    a = np.zeros(3)
    a.flags.writeable = False
    p = to_packet(a)
    del a
    p.make_mutable()[:] = 1
    assert delta(copies) == (1, 24)


def test_array_adopted_twice_is_copied(copies: CowStats) -> None:
    a = np.zeros(3)
    p1, p2 = to_packet(a), to_packet(a)
    del a
    m = p1.make_mutable()
    m[:] = 1
    assert not p2.as_numpy().any()
    assert delta(copies) == (1, 24)


def test_outstanding_read_only_view_forces_a_copy(copies: CowStats) -> None:
    p = to_packet(np.zeros(3))
    view = p.as_numpy()
    p.make_mutable()[:] = 1
    assert not view.any()  # nobody's view changes under them
    assert delta(copies) == (1, 24)


def test_new_buffer_view_is_the_creators_writable_array(copies: CowStats) -> None:
    p, view = new_buffer(4, "u8")
    view[:] = 3
    assert p.make_mutable() is view
    q = clone_owned(p)
    m2 = q.make_mutable()
    assert address(m2) != address(view)
    assert delta(copies) == (1, 4)


def test_produced_buffer_is_written_in_place_downstream(copies: CowStats) -> None:
    def produce() -> Packet:
        p, view = new_buffer(4, "u8")  # inside a kernel: the view dies when it returns
        view[:] = 1
        return _borrow(p)

    emitted = produce()
    before = packet_address(emitted)
    taken = clone_owned(emitted)
    del emitted
    assert address(taken.make_mutable()) == before
    assert delta(copies) == (0, 0)


def test_a_kept_writable_view_is_never_written_downstream(copies: CowStats) -> None:
    # The host (or a kernel) keeps the array it filled after sending: downstream must copy.
    p, kept = new_buffer(4, "u8")
    kept[:] = 1
    emitted = _borrow(p)
    del p
    taken = clone_owned(emitted)
    del emitted
    taken.make_mutable()[:] = 9
    assert (kept == 1).all()
    assert delta(copies) == (1, 4)
    # The same for a writable array from make_mutable kept by an upstream kernel.
    upstream = to_packet(np.zeros(4, np.uint8))
    stash = upstream.make_mutable()
    downstream = clone_owned(_borrow(upstream))
    del upstream
    downstream.make_mutable()[:] = 9
    assert not stash.any()
    assert delta(copies) == (2, 8)


def test_repeated_make_mutable_returns_the_same_array(copies: CowStats) -> None:
    p = to_packet(np.zeros(6))
    m = p.make_mutable()
    part = m[2:]  # a view of the same memory, held by the same owner
    assert p.make_mutable() is m
    part[:] = 1
    assert p.as_numpy()[2:].tolist() == [1, 1, 1, 1]
    assert delta(copies) == (0, 0)


def test_linear_pipeline_never_copies(copies: CowStats) -> None:
    # What the engine does: adopt the host's temporary, share a borrowed handle, hand the kernel
    # an owned clone on take_input and drop its own handle, then re-send what the kernel emits.
    queue = [_borrow(to_packet(np.zeros(16, np.uint8), ts=0))]
    first = packet_address(queue[0])
    for stage in range(3):
        taken = clone_owned(queue.pop())  # ctx.take_input(i)
        m = taken.make_mutable()
        np.add(m, 1, out=m)
        del m
        queue.append(_borrow(to_packet(taken)))  # ctx.emit(0, taken)
        del taken
        assert packet_address(queue[0]) == first, f"stage {stage} copied"
    assert (queue[0].as_numpy() == 3).all()
    assert delta(copies) == (0, 0)


@pytest.mark.parametrize(
    ("packet", "pattern"),
    [
        (
            Packet.from_int(1),
            r"make_mutable works on buffer packets; this packet holds I64 \(read it with as_int\(\)\)",
        ),
        (Packet.from_str("s"), r"this packet holds Str \(read it with as_str\(\)\)"),
        (Packet(), r"make_mutable works on buffer packets; this packet is empty"),
    ],
)
def test_make_mutable_on_other_kinds(packet: Packet, pattern: str) -> None:
    with pytest.raises(ValueError, match=pattern):
        packet.make_mutable()


def test_make_mutable_on_borrowed_packet() -> None:
    p = _borrow(to_packet(np.zeros(2)))
    with pytest.raises(
        UsageError, match=r"make_mutable: packet is borrowed .* take it with ctx\.take_input\(i\) first"
    ):
        p.make_mutable()


def test_copies_are_counted_per_thread(copies: CowStats) -> None:
    mine = _thread_cow_counts()
    seen: list[tuple[int, int]] = []

    def worker() -> None:
        start = _thread_cow_counts()
        a = np.zeros(5, np.int16)
        to_packet(a).make_mutable()
        end = _thread_cow_counts()
        seen.append((end[0] - start[0], end[1] - start[1]))

    t = threading.Thread(target=worker)
    t.start()
    t.join()
    assert seen == [(1, 10)]
    assert _thread_cow_counts() == mine
    assert delta(copies) == (1, 10)


def test_cow_stats_is_a_frozen_snapshot() -> None:
    s = cow_stats()
    with pytest.raises(AttributeError):
        s.copies = 3  # type: ignore[misc]


# --- host hand-over of new_buffer packets (to_packet(..., host=True), as Graph.send does) ----------


def test_host_hand_over_discounts_the_hosts_handle_and_view(copies: CowStats) -> None:
    p, view = new_buffer(4, "u8")
    view[:] = 2
    engine = _borrow(to_packet(p, 0, True))
    assert engine is not p and p.timestamp == 0 and not view.flags.writeable
    taken = clone_owned(engine)  # ctx.take_input(i)
    del engine
    m = taken.make_mutable()
    assert address(m) == address(view) and m.flags.writeable
    m[:] = 3
    assert (p.as_numpy() == 3).all() and (view == 3).all()  # the host reads what the graph wrote
    assert delta(copies) == (0, 0)
    del m, taken
    assert not view.flags.writeable  # the host's packet still shares the buffer
    del p
    assert view.flags.writeable


@pytest.mark.parametrize("other", ["host copy of the packet", "view sent as an array", "sent twice"])
def test_host_hand_over_copies_when_something_else_shares_the_buffer(copies: CowStats, other: str) -> None:
    p, view = new_buffer(4, "u8")
    engine = _borrow(to_packet(p, 0, True))
    keep: object = None
    if other == "host copy of the packet":
        keep = clone_owned(p)
    elif other == "view sent as an array":
        keep = _borrow(to_packet(view, 1, True))  # adopts the (read-only) view a second time
    else:
        keep = _borrow(to_packet(p, 1, True))
    taken = clone_owned(engine)
    del engine
    taken.make_mutable()[:] = 9
    assert not view.any()
    assert delta(copies) == (1, 4)
    del keep, taken, p
    assert view.flags.writeable


def test_emit_hands_nothing_over() -> None:
    p, view = new_buffer(2, "u8")
    to_packet(p, 0)  # what ctx.emit does: the kernel's view stays as it is
    assert view.flags.writeable
