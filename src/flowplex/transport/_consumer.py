"""The consuming side of a ring: merges every producer's lane, in order per producer.

Per lane the consumer acquire-loads the producer's ``tail`` only when its cached copy is used
up, reads the slots below it, and release-stores ``head`` after each message so that the
producer may reuse those slots (the release keeps the slot reads before the store that frees
the slot).  Lanes are visited round-robin, one cached batch per visit, so a busy producer cannot
starve the others.  Under ``drop_oldest`` the producer does not wait for ``head``; the consumer
then validates every slot seqlock-style (see ``Producer._write_overwriting``) and counts what was
overwritten.

Every word read from the segment is read once into a local, checked, and only the local is used:
the segment is shared memory that another process may rewrite at any moment.  A slot or tail
that breaks the protocol is counted and skipped with a ``BrokenError``, never trusted.
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Final, Protocol, final

import numpy as np

from ..errors import BrokenError, ClosedError, EndOfStream, Timeout, UsageError, WouldBlock
from . import _accel
from . import _layout as lay
from ._batch import rows_from_messages
from ._core import MAX_POSITION, U64, RingCore, this_process
from ._format import AGENT_TYPES
from ._fragment import cut_points
from ._message import Message
from ._wait import Backoff

if TYPE_CHECKING:
    from numpy.typing import NDArray

_new = tuple.__new__
_U32: Final = 0xFFFFFFFF
_REAP_EVERY_S: Final = 0.05
_SKIPS_BEFORE_CLOCK: Final = 64  # overwritten messages skipped in one recv before it checks its deadline


@final
class _Lane:
    """The consumer's private view of one producer lane (the C ``Lane`` has the same fields)."""

    __slots__ = ("avail", "base", "head", "head_i", "index", "next_msg", "slots", "tail_i", "words")

    def __init__(self) -> None:
        self.index = self.words = self.base = self.tail_i = self.head_i = 0
        self.head = 0
        self.avail = 0  # cached tail; messages in [head, avail) are published
        self.next_msg = 0
        self.slots: NDArray[np.uint8] | None = None  # (capacity, 256) bytes, made on first use


def _new_lane(core: RingCore, index: int) -> _Lane:
    """A lane view, of the C type when the extension is in use (its ``recv`` reads the fields)."""
    fast = _accel.fast
    lane: _Lane = _Lane() if fast is None else fast.Lane()
    w = core.words
    lane.index = index
    lane.words = core.lane_word(index, 0)  # word index of the lane header
    lane.base = core.slots_offset(index)
    lane.tail_i = core.lane_word(index, lay.L_TAIL)
    lane.head_i = core.lane_word(index, lay.L_HEAD)
    head = w.load(lane.head_i)
    if head > MAX_POSITION:
        msg = f"lane {index}'s head word holds {head}"
        raise core.corrupt(msg)
    lane.head = lane.avail = head
    consumed = lane.head - w.plain[core.lane_word(index, lay.L_CONSUMER_EXTRA)]
    consumed -= w.plain[core.lane_word(index, lay.L_SKIPPED_SLOTS)]
    lane.next_msg = (consumed + w.plain[core.lane_word(index, lay.L_DROPPED)]) & _U32
    return lane


class _HotState(Protocol):
    """What ``recv`` shares with the rest of the consumer (the C ``Reader`` has the same fields)."""

    cur: _Lane
    """The lane ``recv`` reads first."""
    solo: bool
    """Only one producer is registered: ``recv`` re-reads its tail inline."""


@final
class _PyHotState:
    """The pure-Python ``_HotState``."""

    __slots__ = ("cur", "solo")

    def __init__(self, lane: _Lane) -> None:
        self.cur = lane
        self.solo = False


@final
class Consumer:
    """Receives every producer's messages.  Get it from ``Ring.consumer()``; one per ring.

    Blocking calls poll with a short spin and then an exponential back-off capped at 1 ms
    (see ``_wait``), and each takes a ``timeout``.  The consumer belongs to one thread.
    """

    __slots__ = (
        "__weakref__",
        "_hot",
        "_closed",
        "_core",
        "_drop",
        "_expect",
        "_gen",
        "_last_reap",
        "_lanes",
        "_load",
        "_mask",
        "_mm",
        "_order",
        "_pid",
        "_rr",
        "_store",
        "_unpack",
        "recv",
    )

    recv: RecvFn
    """Receive the next message; see :class:`RecvFn`.  The C ``Reader.recv`` where the extension
    is built (it hands every case but a published one-slot message to the Python closure), else
    the Python closure."""

    def __init__(self, core: RingCore, expect_producers: int = 1) -> None:
        core.claim_consumer()
        self._expect = expect_producers
        self._core = core
        self._mm = core.mm
        self._mask = core.mask
        self._unpack = lay.SLOT_HEADER_STRUCT.unpack_from
        self._store = core.words.store
        self._load = core.words.load
        self._drop = core.policy == lay.FULL_POLICY_CODES["drop_oldest"]
        self._lanes = [_new_lane(core, i) for i in range(core.max_producers)]
        self._order: list[_Lane] = []
        self._rr = 0
        self._gen = -1
        # State shared with recv: the current lane, and whether it is the only one in use
        # (then recv re-reads its tail inline; with several, _find keeps it fair).  The
        # placeholder lane has nothing cached, so the first recv scans.
        fast = _accel.fast
        placeholder = _new_lane(core, 0)
        reader = None if fast is None else fast.Reader(self._mm, self._mask, Message, tuple(AGENT_TYPES), placeholder)
        hot: _HotState = _PyHotState(placeholder) if reader is None else reader
        self._hot = hot
        self._closed = False
        self._last_reap = 0.0
        self._pid = this_process()[0]
        py_recv = _make_recv(self)
        if reader is None:
            self.recv = py_recv
        else:
            reader.bind(py_recv)
            self.recv = reader.recv

    # -- receiving one message ------------------------------------------------------------------
    def recv_nowait(self) -> Message:
        """Like :meth:`recv`, but raise ``WouldBlock`` instead of waiting."""
        return self._recv_slow(0.0, True)

    def __iter__(self) -> Iterator[Message]:
        """Yield messages until ``EndOfStream`` (each wait is unbounded)."""
        while True:
            try:
                yield self.recv()
            except EndOfStream:
                return

    def _recv_slow(self, timeout: float | None, nowait: bool) -> Message:
        backoff: Backoff | None = None
        skips = 0
        while True:
            lane = self._wait_for_lane(backoff, timeout, nowait)
            if lane is None:
                if backoff is None:  # the deadline starts at the first miss (keeps the hot path lean)
                    backoff = Backoff(timeout)
                continue
            msg = self._take_checked(lane) if self._drop else self._take(lane)
            if msg is not None:
                return msg
            # drop_oldest skipped an overwritten message.  A producer lapping us keeps this
            # loop going, so after a while the deadline counts here too.
            skips += 1
            if skips % _SKIPS_BEFORE_CLOCK == 0:
                if backoff is None:
                    backoff = Backoff(timeout)
                if nowait or backoff.expired():
                    msg_ = f"recv: only overwritten messages on ring {self._core.name!r} within {timeout} s"
                    raise (WouldBlock if nowait else Timeout)(msg_)

    def _wait_for_lane(self, backoff: Backoff | None, timeout: float | None, nowait: bool) -> _Lane | None:
        """One poll: a lane with published data, or None after pausing (raises when done)."""
        if self._closed or self._core.closed:
            msg = f"the consumer of ring {self._core.name!r} is closed"
            raise ClosedError(msg)
        lane = self._find()
        if lane is not None:
            return lane
        if self._sync_registry():
            lane = self._find()
            if lane is not None:
                return lane
        if self._ended():
            raise EndOfStream
        err = self._reap()
        if err is not None:
            raise err
        if nowait:
            msg = f"ring {self._core.name!r} has no message ready"
            raise WouldBlock(msg)
        if backoff is None:
            return None
        if not backoff.pause():
            msg = f"recv: no message on ring {self._core.name!r} within {timeout} s"
            raise Timeout(msg)
        return None

    def _find(self) -> _Lane | None:
        """The next lane, round-robin, whose producer published beyond our head."""
        if self._load(lay.W_REGISTRY_GEN) != self._gen:
            self._sync_registry()
        order = self._order
        n = len(order)
        load = self._load
        for j in range(n):
            k = (self._rr + j) % n
            lane = order[k]
            tail = load(lane.tail_i)
            if tail > lane.head:
                if tail > MAX_POSITION or (tail - lane.head > self._core.capacity and not self._drop):
                    # Under reject and block a producer never runs more than a lane ahead.
                    self._rr = k + 1
                    msg = f"producer {lane.index}'s tail {tail} is impossible (head {lane.head})"
                    raise self._core.corrupt(msg)
                self._rr = k + 1
                self._note_hwm(lane, tail - lane.head)
                lane.avail = tail
                if not self._drop:  # drop_oldest reads only through _take_checked
                    self._hot.cur = lane
                return lane
        return None

    def _take(self, lane: _Lane) -> Message:
        """Read the message at ``lane.head`` (one slot or several fragments) and release it."""
        h = lane.head
        mm, mask, unpack = self._mm, self._mask, self._unpack
        if lane.avail - h > self._core.capacity or lane.avail > MAX_POSITION:
            msg = f"producer {lane.index}'s tail {lane.avail} is impossible (head {h})"
            lane.avail = h  # forget it: the next call reads the tail again
            raise self._core.corrupt(msg)
        parts: list[bytes] = []
        pos = h
        first: tuple[int, int, int, int, int, int, int] | None = None
        while True:
            off = lane.base + ((pos & mask) << 8)
            hdr = unpack(mm, off)  # the one read of this header; only these locals are used
            seq, n, flags, agent, _sid, _mid, _ts = hdr
            bad = n > lay.PAYLOAD_SIZE or agent > 7 or bool(flags & lay.FLAG_FIRST) != (first is None) or seq != pos
            if bad or pos >= lane.avail:
                self._skip_corrupt(lane, pos, hdr)
            if first is None:
                first = hdr
            parts.append(mm[off + 32 : off + 32 + n])
            pos += 1
            if not flags & lay.FLAG_CONTINUES:
                break
        if len(parts) > 1:
            self._count(lane, lay.L_CONSUMER_EXTRA, len(parts) - 1)
            self._count(lane, lay.L_REASSEMBLED)
        lane.head = pos
        self._store(lane.head_i, pos)
        seq, _, flags, agent, sid, mid, ts = first
        lane.next_msg = (mid + 1) & _U32
        data = parts[0] if len(parts) == 1 else b"".join(parts)
        return _new(Message, (data, seq, sid, AGENT_TYPES[agent], ts, lane.index, flags))

    def _skip_corrupt(self, lane: _Lane, pos: int, hdr: tuple[int, ...]) -> None:
        """Step over a slot that breaks the protocol (never wait on it forever, Perdix R10)."""
        self._count(lane, lay.L_SKIPPED_SLOTS, pos + 1 - lane.head)
        self._count(lane, lay.L_DROPPED)
        lane.head = pos + 1
        lane.avail = max(lane.avail, lane.head)
        self._store(lane.head_i, lane.head)
        lost = self._core.intact()
        if lost is not None:
            raise lost
        msg = (
            f"ring {self._core.name!r}: producer {lane.index} slot {pos} breaks the protocol "
            f"(seq={hdr[0]}, len={hdr[1]}, flags={hdr[2]:#x}, agent_type={hdr[3]}); skipped it"
        )
        raise BrokenError(msg)

    def _take_checked(self, lane: _Lane) -> Message | None:
        """drop_oldest: read the oldest message that is still intact, or None if it was overwritten.

        Every slot is read seqlock-style: ``seq`` (acquire), copy, ``seq`` again (ordered after
        the copy); equal to the expected position means no byte came from a newer write.  A
        position that fails is gone for good (its slot now holds a newer position), so the
        consumer skips past it and the caller polls again: progress is guaranteed even when
        the producer died in the middle of a write.
        """
        cap = self._core.capacity
        w = self._core.words
        mm, mask, unpack = self._mm, self._mask, self._unpack
        tail = lane.avail
        h = lane.head
        if tail - h > cap:
            self._count(lane, lay.L_SKIPPED_SLOTS, tail - cap - h)
            h = tail - cap
        parts: list[bytes] = []
        first: tuple[int, int, int, int, int, int, int] | None = None
        pos = h
        while pos < tail:
            off = lane.base + ((pos & mask) << 8)
            ok = w.load(off >> 3) == pos
            hdr = unpack(mm, off)
            payload = mm[off + 32 : off + 32 + min(hdr[1], lay.PAYLOAD_SIZE)]
            ok = ok and w.load_after(off >> 3) == pos
            flags = hdr[2]
            if not ok or (first is None) != bool(flags & lay.FLAG_FIRST) or hdr[3] > 7:
                # Overwritten (or a fragment whose first part was): everything up to pos is lost.
                self._count(lane, lay.L_SKIPPED_SLOTS, pos + 1 - h)
                lane.head = pos + 1
                self._store(lane.head_i, lane.head)
                return None
            if first is None:
                first = hdr
            parts.append(payload)
            pos += 1
            if not flags & lay.FLAG_CONTINUES:
                break
        else:
            # The tail ended inside a message (cannot happen: messages are published whole);
            # step over it rather than wait on it.
            self._count(lane, lay.L_SKIPPED_SLOTS, pos - h)
            lane.head = pos
            self._store(lane.head_i, pos)
            return None
        assert first is not None
        seq, _, flags, agent, sid, mid, ts = first
        lost = (mid - lane.next_msg) & _U32
        if lost:
            self._count(lane, lay.L_DROPPED, lost)
        lane.next_msg = (mid + 1) & _U32
        if len(parts) > 1:
            self._count(lane, lay.L_CONSUMER_EXTRA, len(parts) - 1)
            self._count(lane, lay.L_REASSEMBLED)
        lane.head = pos
        self._store(lane.head_i, pos)
        data = parts[0] if len(parts) == 1 else b"".join(parts)
        return _new(Message, (data, seq, sid, AGENT_TYPES[agent], ts, lane.index, flags))

    # -- batches ----------------------------------------------------------------------------------
    def recv_many(self, max_items: int, timeout: float | None = None) -> NDArray[np.void]:
        """Receive up to ``max_items`` slots as one ``SLOT_DTYPE`` array (one bulk copy per lane).

        Waits like :meth:`recv` for the first message, then takes whatever is published, from
        several producers if needed, without waiting again.  Each row is one slot; a message
        longer than 224 bytes spans consecutive rows (``FLAG_CONTINUES`` on all but its last;
        ``messages_from_rows`` joins them).  Messages are never split between calls, so a single
        message longer than ``max_items`` slots comes back whole.  ``producer_id`` holds the lane.

        Raises:
            UsageError: ``max_items`` is not a positive int.
            Timeout, EndOfStream, BrokenError, ClosedError: as for :meth:`recv`.
        """
        if not isinstance(max_items, int) or max_items < 1:
            msg = f"recv_many(max_items={max_items!r}): expected a positive int"
            raise UsageError(msg)
        if self._drop:
            return self._recv_many_checked(max_items, timeout)
        backoff: Backoff | None = None
        lane = None
        while lane is None:
            lane = self._wait_for_lane(backoff, timeout, False)
            if lane is None and backoff is None:
                backoff = Backoff(timeout)
        chunks = [self._take_rows(lane, max_items, True)]
        got = len(chunks[0])
        for other in self._order:
            if got >= max_items:
                break
            if other is lane:
                continue
            tail = self._load(other.tail_i)
            cap = self._core.capacity
            if other.head < tail <= MAX_POSITION and (tail - other.head <= cap or self._drop):
                other.avail = tail  # (a corrupt tail is left for _find, in a later call, to report)
                rows = self._take_rows(other, max_items - got, False)
                if len(rows):
                    chunks.append(rows)
                    got += len(rows)
        return chunks[0] if len(chunks) == 1 else np.concatenate(chunks)

    def _take_rows(self, lane: _Lane, limit: int, whole: bool) -> NDArray[np.void]:
        """Copy up to ``limit`` published rows of ``lane`` (whole messages) and release them.

        Copies through ``uint8`` views (a structured copy is about four times slower), and only
        the header plus the longest payload of the batch; the rest of each row is zeroed.
        """
        cap = self._core.capacity
        if lane.slots is None:
            lane.slots = np.ndarray((cap, lay.SLOT_SIZE), dtype=np.uint8, buffer=self._mm, offset=lane.base)
        raw = lane.slots
        hdrs = raw[:, : lay.SLOT_HEADER_SIZE].view(lay.HEADER_DTYPE)[:, 0]
        h = lane.head
        k = min(lane.avail - h, limit)
        i = h & self._mask
        first = min(k, cap - i)
        last = (h + k - 1) & self._mask
        if k and hdrs["flags"][last] & lay.FLAG_CONTINUES:  # end on a message boundary
            flags = np.concatenate((hdrs["flags"][i : i + first], hdrs["flags"][: k - first]))
            ends = np.flatnonzero((flags & lay.FLAG_CONTINUES) == 0)
            if len(ends):
                k = int(ends[-1]) + 1
            elif whole:  # a single message longer than ``limit`` slots: return it whole
                k = self._message_end(lane, h) - h
            else:
                k = 0
            first = min(k, cap - i)
            last = (h + k - 1) & self._mask
        if k == 0:
            return np.zeros(0, dtype=lay.SLOT_DTYPE)
        if not self._rows_valid(hdrs, h, i, first, k):
            # A slot that breaks the protocol: the one-message path skips and reports it, as
            # the first lane of a call (a later one waits for the next call, so that no rows
            # already taken are lost with the error).
            return rows_from_messages([self._take(lane)]) if whole else np.zeros(0, dtype=lay.SLOT_DTYPE)
        width = int(max(hdrs["len"][i : i + first].max(), hdrs["len"][: k - first].max(initial=0)))
        end = lay.SLOT_HEADER_SIZE + min(width, lay.PAYLOAD_SIZE)
        out = np.empty((k, lay.SLOT_SIZE), dtype=np.uint8)
        out[:first, :end] = raw[i : i + first, :end]
        out[first:, :end] = raw[: k - first, :end]
        out[:, end:] = 0
        # Messages are numbered consecutively per lane and row 0 starts one, so the count
        # needs no scan of the rows.
        messages = (int(hdrs["msg_id"][last]) + 1 - int(hdrs["msg_id"][i])) & _U32
        if k > messages:
            self._count(lane, lay.L_CONSUMER_EXTRA, k - messages)
        lane.head = h + k
        self._store(lane.head_i, lane.head)
        return out.view(lay.SLOT_DTYPE).reshape(k)

    @staticmethod
    def _rows_valid(hdrs: NDArray[np.void], h: int, i: int, first: int, k: int) -> bool:
        """Whether the ``k`` slot headers from position ``h`` (index ``i``, wrapping) are sound.

        Read once into a copy, so that what is checked is what is then returned.
        """
        got = np.concatenate((hdrs[i : i + first], hdrs[: k - first]))
        return bool(
            (got["len"] <= lay.PAYLOAD_SIZE).all()
            and (got["agent_type"] <= 7).all()
            and (got["seq"] == np.arange(h, h + k, dtype=np.uint64)).all()
        )

    def _message_end(self, lane: _Lane, pos: int) -> int:
        while pos < lane.avail:
            flags = self._unpack(self._mm, lane.base + ((pos & self._mask) << 8))[2]
            pos += 1
            if not flags & lay.FLAG_CONTINUES:
                return pos
        return pos

    def _recv_many_checked(self, max_items: int, timeout: float | None) -> NDArray[np.void]:
        msgs = [self.recv(timeout)]
        rows = len(cut_points(msgs[0].data))
        while rows < max_items:
            try:
                m = self.recv_nowait()
            except (WouldBlock, EndOfStream):
                break
            msgs.append(m)
            rows += len(cut_points(m.data))
        return rows_from_messages(msgs)

    # -- registry, end of stream, dead producers ------------------------------------------------
    def _sync_registry(self) -> bool:
        """Re-read the lane table if a producer registered or closed; True if it changed."""
        core = self._core
        gen = self._load(lay.W_REGISTRY_GEN)
        if gen == self._gen:
            return False
        self._gen = gen
        load = self._load
        self._order = [lane for lane in self._lanes if load(core.lane_word(lane.index, lay.L_STATE)) != lay.LANE_FREE]
        self._rr = 0
        self._hot.solo = len(self._order) == 1 and not self._drop
        if self._hot.solo:
            self._hot.cur = self._order[0]
        return True

    def _ended(self) -> bool:
        load = self._load
        if load(lay.W_PRODUCERS_EVER) < self._expect:
            return False
        core = self._core
        for lane in self._order:
            if load(core.lane_word(lane.index, lay.L_STATE)) != lay.LANE_CLOSED or load(lane.tail_i) > lane.head:
                return False
        return self._load(lay.W_REGISTRY_GEN) == self._gen

    def _reap(self) -> BrokenError | None:
        now = time.monotonic()
        if now - self._last_reap < _REAP_EVERY_S:
            return None
        self._last_reap = now
        core = self._core
        lost = core.intact()
        if lost is not None:
            return lost
        load = self._load
        for lane in self._order:
            if load(core.lane_word(lane.index, lay.L_STATE)) != lay.LANE_ACTIVE:
                continue
            if load(core.lane_word(lane.index, lay.L_PID)) == self._pid or load(lane.tail_i) > lane.head:
                continue
            err = core.reap_dead_lane(lane.index)
            if err is not None:
                self._sync_registry()
                return err
        return None

    # -- bookkeeping ----------------------------------------------------------------------------
    def _count(self, lane: _Lane, word: int, n: int = 1) -> None:
        plain = self._core.words.plain
        i = lane.words + word
        plain[i] = (plain[i] + n) & U64

    def _note_hwm(self, lane: _Lane, occupancy: int) -> None:
        plain = self._core.words.plain
        i = lane.words + lay.L_CONSUMER_HWM
        if occupancy > plain[i]:
            plain[i] = min(occupancy, self._core.capacity)

    def close(self) -> None:
        """Give up the consumer role; idempotent.  Blocked ``block``-policy producers then fail."""
        if self._closed:
            return
        self._closed = True
        self._hot.solo = False  # recv must reach the slow path, which raises ClosedError
        for lane in self._lanes:
            lane.slots = None
            lane.avail = lane.head
        self._hot.cur.avail = self._hot.cur.head
        if not self._core.closed:
            self._core.release_consumer()

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` ran (or the ring was closed)."""
        return self._closed or self._core.closed

    def __enter__(self) -> Consumer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open"
        return f"<Consumer ring={self._core.name!r} {state}>"


class RecvFn(Protocol):
    """The signature of ``Consumer.recv``."""

    def __call__(self, timeout: float | None = None) -> Message: ...


def _make_recv(consumer: Consumer) -> RecvFn:
    """Build the pure-Python ``recv``: the hot path as a closure over locals."""
    hot = consumer._hot
    unpack = consumer._unpack
    mm = consumer._mm
    mask = consumer._mask
    cap = consumer._core.capacity
    ordered = consumer._core.words.ordered
    agents = AGENT_TYPES
    take = weakref.WeakMethod(consumer._take)
    slow = weakref.WeakMethod(consumer._recv_slow)

    def recv(timeout: float | None = None) -> Message:
        """Receive the next message from any producer; waits up to ``timeout`` seconds.

        Args:
            timeout: Seconds to wait; ``None`` waits until a message, the end or a failure.

        Returns:
            The next message; per producer, messages come in the order they were sent.

        Raises:
            Timeout: nothing arrived in time.
            EndOfStream: every producer closed and everything was received.
            BrokenError: a producer process died (raised once, after what it published).
            ClosedError: the consumer or its ring was closed.
        """
        lane = hot.cur
        h = lane.head
        if h >= lane.avail and hot.solo:
            # One producer: re-read its tail right here (no fairness to keep), so a consumer
            # that keeps up with its producer stays on this path instead of the scan.
            tail = ordered[lane.tail_i]  # acquire load
            if tail <= MAX_POSITION:  # else the scan (_find, via the slow path) reports the corrupt tail
                lane.avail = tail
        ahead = lane.avail - h
        if ahead > 0:
            # Hot path: a published single-slot message in the current lane.  The header is
            # read once (unpack); only those locals are checked and used.
            off = lane.base + ((h & mask) << 8)
            seq, n, flags, agent, sid, _mid, ts = unpack(mm, off)
            if flags & 3 != 2 or n > 224 or agent > 7 or seq != h or ahead > cap:  # fragments, or corrupt
                return _call(take)(lane)
            off += 32
            msg = _new(Message, (mm[off : off + n], seq, sid, agents[agent], ts, lane.index, flags))
            h += 1
            lane.head = h
            ordered[lane.head_i] = h  # release store: frees the slot after it was read
            return msg
        return _call(slow)(timeout, False)

    return recv


def _call(ref: weakref.WeakMethod[Callable[..., Message]]) -> Callable[..., Message]:
    method = ref()
    if method is None:
        msg = "recv: the consumer was garbage-collected"
        raise ClosedError(msg)
    return method
