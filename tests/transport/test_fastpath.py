"""The C hot paths (``_fastring``) against the pure-Python ones: same bytes in shared memory,
same messages out, same counters, same errors.

The pure-Python implementation is the reference; the extension must be indistinguishable from
it except in speed.  Rings are created under each implementation in turn and fed the same
calls, then their lanes are compared byte for byte.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flowplex.errors import BrokenError, ClosedError, UsageError
from flowplex.transport import Message, Ring, _accel
from flowplex.transport import _layout as lay
from flowplex.transport._fragment import cut_points


def _extension() -> ModuleType:
    try:
        from flowplex.transport import _fastring
    except ImportError:
        if os.environ.get("FLOWPLEX_REQUIRE_EXTRAS") == "1":
            raise
        pytest.skip("the C extension flowplex.transport._fastring is not built (no compiler at install)")
    return _fastring


@contextmanager
def implementation(module: ModuleType | None) -> Iterator[None]:
    """Make producers and consumers with the given hot path (None: pure Python)."""
    saved = _accel.fast
    _accel.fast = module
    try:
        yield
    finally:
        _accel.fast = saved


def lane_bytes(ring: Ring, lane: int) -> bytes:
    """The lane's header and slots, as they are in shared memory."""
    core = ring._core
    start = lay.lane_offset(core.capacity, lane)
    return bytes(core.mm[start : start + lay.lane_size(core.capacity)])


# Text that stresses the cut points: multi-byte code points and escape sequences of every kind.
_pieces = st.sampled_from(
    ["a", " ", "é", "€", "𝄞", "\x1b[31m", "\x1b[0m", "\x1b]0;title\x07", "\x1b]8;;x\x1b\\", "\x1b(B", "\x1b", "[", "\n"]
)
texts = st.lists(_pieces, max_size=400).map("".join)
payloads = st.one_of(texts, st.binary(max_size=1200), st.binary(min_size=220, max_size=230))
calls = st.lists(
    st.tuples(
        payloads,
        st.integers(0, 2**32 - 1),
        st.integers(0, 7),
        st.integers(0, 2**64 - 1),
    ),
    min_size=1,
    max_size=30,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(calls=calls, capacity=st.sampled_from([8, 64]))
def test_same_slots_messages_and_stats(calls: list[tuple[Any, int, int, int]], capacity: int) -> None:
    ext = _extension()
    lanes: list[bytes] = []
    received: list[list[Message]] = []
    stats = []
    accepted: list[list[bool]] = []
    for module in (None, ext):
        with implementation(module), Ring.create(capacity=capacity) as ring:
            p, c = ring.producer(), ring.consumer()
            if module is not None:  # the extension really is in use
                assert isinstance(getattr(p.send, "__self__", None), module.Writer)
            ok = [p.send(d, stream_id=s, agent_type=a, timestamp_ns=t) for d, s, a, t in calls]
            lanes.append(lane_bytes(ring, p.lane))
            msgs = []
            for _ in range(sum(ok)):
                msgs.append(c.recv(timeout=1))
            received.append(msgs)
            stats.append(ring.stats())
            accepted.append(ok)
            p.close()
            c.close()
    assert accepted[0] == accepted[1]
    assert lanes[0] == lanes[1]
    assert received[0] == received[1]
    assert stats[0] == stats[1]
    sent = [d for (d, *_), ok in zip(calls, accepted[0], strict=True) if ok]
    assert [m.text if isinstance(d, str) else m.data for m, d in zip(received[1], sent, strict=True)] == sent


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.one_of(texts.map(str.encode), st.binary(max_size=3000)))
def test_cut_points_match_the_reference(data: bytes) -> None:
    """The C port of ``cut_points``, observed through the fragment lengths it writes."""
    ext = _extension()
    with implementation(ext), Ring.create(capacity=32) as ring:
        p = ring.producer()
        assert p.send(data, timestamp_ns=0)
        raw = lane_bytes(ring, p.lane)[lay.LANE_HEADER_SIZE :]
        ends = cut_points(data)
        lengths = [int.from_bytes(raw[i * 256 + 8 : i * 256 + 12], "little") for i in range(len(ends))]
        assert lengths == [e - s for s, e in zip([0, *ends], ends, strict=False)]
        p.close()


def test_default_timestamp_is_the_wall_clock() -> None:
    ext = _extension()
    import time

    with implementation(ext), Ring.create(capacity=4) as ring:
        p, c = ring.producer(), ring.consumer()
        before = time.time_ns()
        p.send(b"x")
        after = time.time_ns()
        assert before <= c.recv(timeout=1).timestamp_ns <= after


def test_everything_unusual_goes_to_the_python_path() -> None:
    """Bad arguments, other payload types and a full lane behave exactly as in pure Python."""
    ext = _extension()
    with implementation(ext), Ring.create(capacity=2) as ring:
        p, c = ring.producer(), ring.consumer()
        with pytest.raises(UsageError, match=r"send\(agent_type=8\)"):
            p.send(b"x", agent_type=8)
        with pytest.raises(UsageError, match=r"send\(stream_id=-1\)"):
            p.send(b"x", stream_id=-1)
        with pytest.raises(UsageError, match=r"send\(timestamp_ns='now'\)"):
            p.send(b"x", timestamp_ns="now")  # type: ignore[arg-type]
        with pytest.raises(UsageError, match=r"expected bytes or str, got int"):
            p.send(5)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="unexpected keyword argument 'stream'"):
            p.send(b"x", stream=1)  # type: ignore[call-arg]
        with pytest.raises(TypeError):
            p.send(b"x", 1)  # type: ignore[misc]
        assert p.send(bytearray(b"ba"))
        assert p.send(memoryview(b"mv"))
        assert not p.send(b"full")  # reject policy, counted
        with pytest.raises(UnicodeEncodeError):
            p.send("\ud800")
        assert ring.stats().rejected == 1
        assert [c.recv(timeout=1).data for _ in range(2)] == [b"ba", b"mv"]
        with pytest.raises(UsageError, match="needs 3 slots"):
            p.send(b"y" * 500)
        p.close()
        with pytest.raises(ClosedError, match="is closed"):
            p.send(b"after close")
        c.close()
        with pytest.raises(ClosedError, match="is closed"):
            c.recv(timeout=0)


def test_closed_mapping_never_crashes() -> None:
    """The C path borrows the mapping per call, so a closed ring is an error, not a segfault."""
    ext = _extension()
    with implementation(ext):
        ring = Ring.create(capacity=4)
        p, c = ring.producer(), ring.consumer()
        p.send(b"before")
        send, recv = p.send, c.recv
        ring.close()
        ring.unlink()
        with pytest.raises(ClosedError):
            send(b"after")
        with pytest.raises(ClosedError):
            recv(timeout=0)


def test_corrupt_slot_is_reported_by_the_c_path() -> None:
    ext = _extension()
    with implementation(ext), Ring.create(capacity=4) as ring:
        p, c = ring.producer(), ring.consumer()
        p.send(b"ok")
        p.send(b"bad")
        off = lay.lane_offset(4, p.lane) + lay.LANE_HEADER_SIZE + 256
        ring._core.mm[off + 14] = 9  # agent_type out of range in the second slot
        assert c.recv(timeout=1).data == b"ok"
        with pytest.raises(BrokenError, match="breaks the protocol"):
            c.recv(timeout=1)
        assert ring.stats().dropped == 1
        p.close()
        c.close()


def test_stale_extension_is_refused() -> None:
    ext = _extension()
    assert _accel.layout_mismatches(ext) == []

    class Stale:
        SLOT_SIZE = 128

    assert any(w.startswith("SLOT_SIZE=128") for w in _accel.layout_mismatches(Stale))  # type: ignore[arg-type]


def test_signatures_match_the_python_path() -> None:
    """help() and inspect see the same parameters (and equal defaults) on both paths."""
    import inspect

    ext = _extension()
    sigs = []
    for module in (None, ext):
        with implementation(module), Ring.create(capacity=4) as ring:
            p, c = ring.producer(), ring.consumer()
            sigs.append([inspect.signature(p.send), inspect.signature(c.recv)])
            p.close()
            c.close()
    for py, cext in zip(*sigs, strict=True):
        assert [(q.name, q.kind, q.default) for q in py.parameters.values()] == [
            (q.name, q.kind, q.default) for q in cext.parameters.values()
        ]


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    garbage=st.lists(st.tuples(st.integers(0, 8 * 256 - 1), st.binary(min_size=1, max_size=64)), max_size=12),
    tail=st.one_of(st.none(), st.integers(0, 2**63 - 1)),
    sends=st.integers(0, 6),
)
def test_garbage_in_shared_memory_is_reported_never_a_crash(
    ring_impl: str, garbage: list[tuple[int, bytes]], tail: int | None, sends: int
) -> None:
    """Whatever another process scribbles into the slots or the tail word, recv returns
    messages or raises the library's own errors; it never crashes, hangs or reads out of range."""
    from flowplex.errors import FlowplexError

    with Ring.create(capacity=8) as ring:
        p, c = ring.producer(), ring.consumer()
        for i in range(sends):
            p.send(b"m%d" % i + b"x" * (i * 100))
        base = lay.lane_offset(8, p.lane)
        for offset, data in garbage:  # anywhere in the slots
            start = base + lay.LANE_HEADER_SIZE + offset
            end = min(start + len(data), base + lay.lane_size(8))
            ring._core.mm[start:end] = data[: end - start]
        if tail is not None:
            ring._core.words.store(ring._core.lane_word(p.lane, lay.L_TAIL), tail)
        for _ in range(40):
            try:
                m = c.recv(timeout=0)
            except FlowplexError:
                continue
            assert isinstance(m, Message)
        p.close()
        c.close()
