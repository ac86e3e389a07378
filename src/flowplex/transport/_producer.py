"""The producing side of a ring: one lane, written by one thread of one process.

Publishing (the argument for weakly ordered machines is in ``_ordering``)::

    write header + payload of slots tail .. tail+k-1     plain stores (struct.pack_into)
    store_release(lane.tail, tail + k)                    the publish; k = fragments of one message

Because a message's fragments are published by one release store, a consumer never sees part
of a message.  Full is decided from the producer's cached copy of the consumer's ``head`` and
re-read (acquire) only when the cache says the lane is full, so the hot path reads no shared
word at all.  Nothing but the tail is written per message: the statistics are derived from the
tail and from counters that only the slow paths (fragmenting, rejecting) touch.

A dead consumer is noticed on the slow paths, whatever the policy: ``block`` while it waits,
``reject`` when the lane is full (instead of rejecting forever), ``drop_oldest`` (all of whose
sends are slow) at most every 50 ms.  ``send`` then raises ``BrokenError``, so no producer keeps
"sending" into a ring that nobody will read again.
"""

from __future__ import annotations

import mmap
import struct
import time
import weakref
from collections.abc import Iterable
from typing import TYPE_CHECKING, Final, Protocol, final

import numpy as np

from ..errors import BrokenError, ClosedError, Timeout, UsageError
from . import _accel
from . import _layout as lay
from ._core import MAX_POSITION, U64, RingCore
from ._format import AgentType
from ._fragment import cut_points
from ._wait import Backoff

if TYPE_CHECKING:
    from numpy.typing import NDArray

_FIRST: Final = lay.FLAG_FIRST
_FIRST_TEXT: Final = lay.FLAG_FIRST | lay.FLAG_TEXT
_U32: Final = 0xFFFFFFFF
_U64: Final = (1 << 64) - 1
_DROP_OLDEST: Final = lay.FULL_POLICY_CODES["drop_oldest"]
_now = time.time_ns
_PEER_CHECK_EVERY_S: Final = 0.05


def _close_lane(core: RingCore, lane: int) -> None:
    if not core.closed:
        core.close_lane(lane)


@final
class Producer:
    """Sends messages into its own lane of a ring.  Get one from ``Ring.producer()``.

    A producer belongs to one thread; give each thread (or process) its own.  Closing it (or
    leaving its ``with`` block) tells the consumer that this producer is done; when every
    producer is done and everything is read, the consumer's ``recv`` raises ``EndOfStream``.
    """

    __slots__ = (
        "__weakref__",
        "_base",
        "_closed",
        "_peer_checked",
        "_core",
        "_finalizer",
        "_head_i",
        "_hot",
        "_lane_w",
        "_mask",
        "_mm",
        "_pack",
        "_store",
        "_tail_i",
        "lane",
        "send",
    )

    send: SendFn
    """Send one message; see :class:`SendFn`.  The C ``Writer.send`` where the extension is
    built (it hands every case but a plain one-slot message to the Python closure), else the
    Python closure, which reads no attributes on its hot path."""

    def __init__(self, core: RingCore) -> None:
        self._core = core
        self.lane = core.claim_lane()
        """The lane index, reported as ``Message.producer_id`` on the consuming side."""
        w = core.words
        self._mm = core.mm
        self._pack = lay.SLOT_STRUCT.pack_into
        self._store = w.store
        self._mask = core.mask
        self._base = core.slots_offset(self.lane)
        self._lane_w = core.lane_word(self.lane, 0)
        self._tail_i = core.lane_word(self.lane, lay.L_TAIL)
        self._head_i = core.lane_word(self.lane, lay.L_HEAD)
        tail = w.load(self._tail_i)
        if tail > MAX_POSITION:
            core.close_lane(self.lane)
            what = f"lane {self.lane}'s tail word holds {tail}"
            raise core.corrupt(what)
        # msg_id continues the lane's message count, so the consumer can count gaps.
        msg = (tail - w.load(core.lane_word(self.lane, lay.L_EXTRA_SLOTS))) & _U32
        # tail, limit (cached head + capacity), extra slots of fragmented messages so far; the
        # next msg_id is tail - extra, which saves the hot path a counter update.  The C writer
        # and the Python closure share this state, so either may run any call.
        fast = _accel.fast
        writer = (
            None
            if fast is None
            else fast.Writer(self._mm, self._base, 8 * self._tail_i, 8 * self._lane_w, self._mask, self.lane)
        )
        hot: _HotState = _PyHotState() if writer is None else writer
        hot.tail, hot.limit, hot.extra = tail, -1, tail - msg
        if writer is not None:
            writer.guard = core.guard_token  # C checks the fault mark after each write
        self._hot = hot
        self._closed = False
        self._peer_checked = 0.0
        try:
            self._refresh_limit()
        except BrokenError:
            core.close_lane(self.lane)
            raise
        py_send = _make_send(self)
        if writer is None:
            self.send = py_send
        else:
            writer.bind(py_send)
            self.send = writer.send
        self._finalizer = weakref.finalize(self, _close_lane, core, self.lane)

    @property
    def _msg(self) -> int:
        """The msg_id of the next message: messages sent through this lane so far."""
        return (self._hot.tail - self._hot.extra) & _U32

    def _refresh_limit(self) -> int:
        """Re-read the consumer's head; return the lane occupancy.  Drop_oldest never limits."""
        if self._core.policy == lay.FULL_POLICY_CODES["drop_oldest"]:
            self._hot.limit = -1  # every send takes the seqlock path
            return self._hot.tail - self._core.words.load(self._head_i)
        head = self._load_head()
        self._hot.limit = head + self._core.capacity
        return self._hot.tail - head

    def _load_head(self) -> int:
        """The consumer's head (acquire), checked: under reject and block it is never ahead of
        our tail nor more than a lane behind it.

        Raises:
            BrokenError: the word holds something else (a corrupt or hostile segment).
        """
        head = self._core.words.load(self._head_i)
        tail = self._hot.tail
        if not tail - self._core.capacity <= head <= tail:
            msg = f"producer {self.lane}: the consumer's head {head} is impossible (tail {tail})"
            raise self._core.corrupt(msg)
        return head

    def _send_slow(
        self,
        data: bytes,
        flags: int,
        stream_id: int,
        agent_type: int,
        timestamp_ns: int | None,
        timeout: float | None,
    ) -> bool:
        if self._closed or self._core.closed:
            msg = f"producer {self.lane} of ring {self._core.name!r} is closed"
            raise ClosedError(msg)
        self._raise_if_lost()
        if (
            type(stream_id) is not int
            or type(agent_type) not in (int, AgentType)
            or not (0 <= stream_id <= _U32 and 0 <= agent_type < 8)
            or not (timestamp_ns is None or (type(timestamp_ns) is int and 0 <= timestamp_ns <= _U64))
        ):
            raise _arg_error(stream_id, agent_type, timestamp_ns)
        ts = _now() if timestamp_ns is None else timestamp_ns
        n = len(data)
        ends = [n] if n <= lay.PAYLOAD_SIZE else cut_points(data)
        k = len(ends)
        core = self._core
        if k > core.capacity:
            msg = (
                f"send(data=<{n} bytes>): the message needs {k} slots but ring {core.name!r} has "
                f"{core.capacity} per producer; create the ring with capacity >= {k}"
            )
            raise UsageError(msg)
        if core.policy == _DROP_OLDEST:
            self._check_consumer()
            self._write_overwriting(data, ends, flags, stream_id, agent_type, ts)
        else:
            if self._hot.tail + k > self._hot.limit:
                self._note_hwm(self._refresh_limit())
            if self._hot.tail + k > self._hot.limit:
                if core.policy == lay.FULL_POLICY_CODES["reject"]:
                    self._check_consumer()
                    self._count(lay.L_REJECTED)
                    return False
                try:
                    self._wait_for_room(k, Backoff(timeout), timeout)
                except BaseException:
                    self._count(lay.L_REJECTED)
                    raise
            self._write(data, ends, flags, stream_id, agent_type, ts)
        self._note_hwm(self._hot.tail - core.words.load(self._head_i))
        return True

    def _raise_if_lost(self) -> None:
        """Raise ``BrokenError`` once the segment lost pages under this process's mapping.

        Called before and after each slow-path write (the hot paths check the same mark): a
        truncated segment's pages are replaced by private zero pages (``_fastring``'s fault
        guard), so a write after the truncation reaches nobody, and ``send`` must not say True.
        """
        lost = self._core.lost()
        if lost is not None:
            self._hot.limit = -1  # every later send comes here too
            raise lost

    def _check_consumer(self) -> None:
        """Raise ``BrokenError`` if the consumer closed or died (checked at most every 50 ms).

        A consumer that has not registered yet is no failure: it may still come.
        """
        now = time.monotonic()
        if now - self._peer_checked < _PEER_CHECK_EVERY_S:
            return
        self._peer_checked = now
        core = self._core
        err = core.consumer_gone() or core.intact()
        if err is not None:
            raise err

    def _wait_for_room(self, k: int, backoff: Backoff, timeout: float | None) -> None:
        """Poll the consumer's head until ``k`` slots are free (``block`` policy).

        Once the lane was full, wait for an eighth of it (at least ``k`` slots) before going on:
        resuming at the first free slot would make producer and consumer take turns on the
        ``head`` cache line for every message while the lane stays full.  The first poll
        accepts ``k`` slots so a nearly idle consumer costs no extra latency.
        """
        core = self._core
        polls = 0
        hysteresis = max(k, core.capacity >> 3)
        while self._hot.tail + (k if polls == 0 else hysteresis) > self._hot.limit:
            if not backoff.pause():
                msg = f"send: ring {core.name!r} stayed full for {timeout} s (producer {self.lane})"
                raise Timeout(msg)
            polls += 1
            if polls % 256 == 0:
                gone = core.consumer_gone()
                if gone is not None:
                    raise gone
            self._hot.limit = self._load_head() + core.capacity

    def _write(self, data: bytes, ends: list[int], flags: int, sid: int, agent: int, ts: int) -> None:
        pack, mm, mask, base, lane = self._pack, self._mm, self._mask, self._base, self.lane
        t = self._hot.tail
        msg_id = self._msg
        start = 0
        last = len(ends) - 1
        for i, end in enumerate(ends):
            f = flags if i == last else flags | lay.FLAG_CONTINUES
            off = base + (((t + i) & mask) << 8)
            pack(mm, off, t + i, end - start, f, agent, lane, sid, msg_id, ts, data[start:end])
            if i == 0:
                flags &= ~lay.FLAG_FIRST
            start = end
        if last:
            self._count(lay.L_EXTRA_SLOTS, last)
            self._count(lay.L_FRAGMENTED)
        self._hot.extra += len(ends) - 1
        self._hot.tail = t + len(ends)
        self._store(self._tail_i, self._hot.tail)  # release: publishes every fragment at once
        self._raise_if_lost()

    def _write_overwriting(self, data: bytes, ends: list[int], flags: int, sid: int, agent: int, ts: int) -> None:
        """drop_oldest: overwrite whatever is there, seqlock-style, so a reader can tell.

        Per slot: ``seq := BUSY`` with a full fence, then header and payload (with seq BUSY),
        then ``seq := position`` (release).  A reader that copied a slot and then reads the
        same position back in ``seq`` knows that no byte of its copy came from a newer write.
        """
        pack, mm, mask, base = self._pack, self._mm, self._mask, self._base
        w = self._core.words
        t = self._hot.tail
        start = 0
        last = len(ends) - 1
        for i, end in enumerate(ends):
            f = flags if i == last else flags | lay.FLAG_CONTINUES
            off = base + (((t + i) & mask) << 8)
            w.store_fence(off >> 3, lay.SEQ_BUSY)
            pack(mm, off, lay.SEQ_BUSY, end - start, f, agent, self.lane, sid, self._msg, ts, data[start:end])
            w.store(off >> 3, t + i)
            if i == 0:
                flags &= ~lay.FLAG_FIRST
            start = end
        if last:
            self._count(lay.L_EXTRA_SLOTS, last)
            self._count(lay.L_FRAGMENTED)
        self._hot.extra += len(ends) - 1
        self._hot.tail = t + len(ends)
        self._store(self._tail_i, self._hot.tail)
        self._raise_if_lost()

    @property
    def slot_memory(self) -> tuple[mmap.mmap, int, int]:
        """Where this lane's slots are, for a writer that fills them itself (``GpuFormatter``):
        the ring's mapping, the offset of the lane's slot 0 in it, and the slot index mask
        (slot ``i`` of the lane is at ``offset + ((i & mask) << 8)``)."""
        return self._mm, self._base, self._mask

    def reserve_batch(self, slots: int, timeout: float | None) -> tuple[int, int]:
        """Wait until the lane has room for ``slots`` more slots, whatever the full policy.

        For a writer that fills slots itself (``GpuFormatter``), then calls ``publish_batch``:
        nothing is overwritten, so a ``drop_oldest`` reader's seqlock check stays valid.

        Returns:
            The position of the batch's first slot (the tail) and its first msg_id.

        Raises:
            Timeout: the lane did not have room within ``timeout`` seconds.
            BrokenError: the consumer went away while waiting.
        """
        hot = self._hot
        if hot.tail + slots > hot.limit:
            self._refresh_limit()
        if hot.tail + slots > hot.limit:
            self._wait_for_room(slots, Backoff(timeout), timeout)
        return hot.tail, self._msg

    def publish_batch(self, slots: int, messages: int, fragmented: int) -> None:
        """Publish the ``slots`` slots written after ``reserve_batch``: ``messages`` messages,
        ``fragmented`` of them over several slots (counted in the lane's statistics)."""
        extra = slots - messages
        if extra:
            self._count(lay.L_EXTRA_SLOTS, extra)
            self._count(lay.L_FRAGMENTED, fragmented)
        hot = self._hot
        hot.extra += extra
        hot.tail = hot.tail + slots
        self._store(self._tail_i, hot.tail)  # release: publishes the whole batch

    def _count(self, word: int, n: int = 1) -> None:
        # Producer-owned statistics word: single writer, no ordering needed.
        plain = self._core.words.plain
        i = self._lane_w + word
        plain[i] = (plain[i] + n) & U64

    def _note_hwm(self, occupancy: int) -> None:
        plain = self._core.words.plain
        i = self._lane_w + lay.L_PRODUCER_HWM
        if occupancy > plain[i]:
            plain[i] = min(occupancy, self._core.capacity)

    def send_many(
        self,
        items: NDArray[np.void] | Iterable[bytes | str],
        *,
        timeout: float | None = None,
    ) -> int:
        """Send a batch; an array of ``SLOT_DTYPE`` rows goes in with one bulk copy per wrap.

        For an array, each row is a slot: ``len``, ``agent_type``, ``stream_id``,
        ``timestamp_ns``, ``payload`` and the ``FLAG_TEXT`` bit are taken from the row, ``seq``
        and ``msg_id`` are set here.  Without ``FLAG_CONTINUES`` anywhere, every row is one
        message.  With it, the rows are fragments (``make_batch`` splits long payloads that
        way, and ``recv_many`` returns them that way): ``FLAG_FIRST`` starts a message and
        ``FLAG_CONTINUES`` says another row follows.  A message is published whole or not at
        all.  Any other iterable is sent item by item with :meth:`send` defaults.

        Args:
            items: A ``SLOT_DTYPE`` array (see ``make_batch``) or an iterable of ``bytes``/``str``.
            timeout: Under the ``block`` policy, seconds to wait for room for the whole batch.

        Returns:
            How many messages were published, from the front of the batch.  Under ``reject``
            that is as many as fit (the rest are counted as rejected).

        Raises:
            UsageError: a row's ``len`` exceeds 224 or its ``agent_type`` 7, or fragment flags
                that do not form whole messages.
            Timeout, BrokenError, ClosedError: as for :meth:`send`.
        """
        if not isinstance(items, np.ndarray):
            sent = 0
            for item in items:
                if not self.send(item, timeout=timeout):
                    break
                sent += 1
            return sent
        return self._send_array(items, timeout)

    def _send_array(self, rows: NDArray[np.void], timeout: float | None) -> int:
        core = self._core
        if rows.dtype != lay.SLOT_DTYPE or rows.ndim != 1:
            msg = f"send_many(items=<array {rows.dtype} shape {rows.shape}>): expected a 1-d SLOT_DTYPE array"
            raise UsageError(msg)
        if self._closed or core.closed:
            msg = f"producer {self.lane} of ring {core.name!r} is closed"
            raise ClosedError(msg)
        self._raise_if_lost()
        total = len(rows)
        if total == 0:
            return 0
        width = int(rows["len"].max())
        if width > lay.PAYLOAD_SIZE or int(rows["agent_type"].max()) > 7:
            msg = "send_many(items=...): every row needs len <= 224 and agent_type <= 7"
            raise UsageError(msg)
        ends = _message_ends(rows, core.capacity)  # None: one row per message (the fast case)
        if core.policy == lay.FULL_POLICY_CODES["drop_oldest"]:
            return self._send_array_overwriting(rows)
        backoff = Backoff(timeout)
        sent = 0
        while sent < total:
            k = self._rows_that_fit(sent, total, ends)
            if k <= 0:
                self._note_hwm(self._refresh_limit())
                k = self._rows_that_fit(sent, total, ends)
            if k <= 0:
                unsent = total - sent if ends is None else len(ends) - int(np.searchsorted(ends, sent, side="right"))
                if core.policy == lay.FULL_POLICY_CODES["reject"]:
                    self._check_consumer()
                    self._count(lay.L_REJECTED, unsent)
                    break
                try:
                    need = 1 if ends is None else int(ends[np.searchsorted(ends, sent, side="right")]) - sent
                    self._wait_for_room(need, backoff, timeout)
                except BaseException:
                    self._count(lay.L_REJECTED, unsent)
                    raise
                continue
            self._copy_rows(rows[sent : sent + k], ends is not None, width)
            sent += k
            self._store(self._tail_i, self._hot.tail)  # release: publishes the k rows at once
            self._raise_if_lost()
        if ends is None:
            return sent
        return int(np.searchsorted(ends, sent, side="right"))

    def _rows_that_fit(self, sent: int, total: int, ends: NDArray[np.intp] | None) -> int:
        """How many rows from ``sent`` fit in the room known now, ending on a message boundary."""
        k = min(self._hot.limit - self._hot.tail, total - sent)
        if ends is not None and k > 0:
            j = int(np.searchsorted(ends, sent + k, side="right")) - 1
            k = int(ends[j]) - sent if j >= 0 and ends[j] > sent else 0
        return k

    def _copy_rows(self, rows: NDArray[np.void], fragments: bool, width: int) -> None:
        """Copy rows into the slots at the tail (wrapping), stamping seq, msg_id, flags and lane.

        The headers are stamped in a small scratch block (32 bytes a row, stays in cache) and
        copied with the payloads through ``uint8`` views: NumPy copies a structured dtype field
        by field, about four times slower than the memcpy of the same bytes.  Only the first
        ``width`` payload bytes of each row (the longest ``len``) are copied; the slot bytes
        past them keep older data, which the consumer never hands out.
        """
        k = len(rows)
        cap = self._core.capacity
        raw = np.ndarray((cap, lay.SLOT_SIZE), dtype=np.uint8, buffer=self._mm, offset=self._base)
        src = np.ascontiguousarray(rows).view(np.uint8).reshape(k, lay.SLOT_SIZE)
        head = np.ascontiguousarray(src[:, : lay.SLOT_HEADER_SIZE])
        hdr = head.view(lay.HEADER_DTYPE).reshape(k)
        t = self._hot.tail
        flags = hdr["flags"]
        if fragments:
            flags &= lay.FLAG_TEXT | lay.FLAG_FIRST | lay.FLAG_CONTINUES
            starts = (flags & lay.FLAG_FIRST) != 0
            hdr["msg_id"] = (np.cumsum(starts, dtype=np.uint64) - 1 + self._msg) & _U32
            messages = int(np.count_nonzero(starts))
            long = int(np.count_nonzero(starts & ((flags & lay.FLAG_CONTINUES) != 0)))
        else:
            flags &= lay.FLAG_TEXT
            flags |= lay.FLAG_FIRST
            hdr["msg_id"] = (np.arange(k, dtype=np.uint64) + self._msg) & _U32
            messages, long = k, 0
        hdr["seq"] = np.arange(t, t + k, dtype=np.uint64)
        hdr["producer_id"] = self.lane
        i = t & self._mask
        first = min(k, cap - i)
        end = lay.SLOT_HEADER_SIZE + width
        for lo, hi, at in ((0, first, i), (first, k, 0)):
            if hi > lo:
                raw[at : at + hi - lo, : lay.SLOT_HEADER_SIZE] = head[lo:hi]
                raw[at : at + hi - lo, lay.SLOT_HEADER_SIZE : end] = src[lo:hi, lay.SLOT_HEADER_SIZE : end]
        if long:
            self._count(lay.L_EXTRA_SLOTS, k - messages)
            self._count(lay.L_FRAGMENTED, long)
        self._hot.extra += k - messages
        self._hot.tail = t + k

    def _send_array_overwriting(self, rows: NDArray[np.void]) -> int:
        from ._batch import messages_from_rows

        self._check_consumer()
        sent = 0
        for m in messages_from_rows(rows):
            ends = [len(m.data)] if len(m.data) <= lay.PAYLOAD_SIZE else cut_points(m.data)
            flags = (m.flags & lay.FLAG_TEXT) | lay.FLAG_FIRST
            self._write_overwriting(m.data, ends, flags, m.stream_id, int(m.agent_type), m.timestamp_ns)
            sent += 1
        return sent

    def close(self) -> None:
        """Tell the consumer this producer is done; idempotent.  Sending afterwards raises."""
        if self._closed:
            return
        self._closed = True
        self._hot.limit = -1
        if self._finalizer.detach() is not None and not self._core.closed:
            self._core.close_lane(self.lane)

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` ran (or the ring was closed)."""
        return self._closed or self._core.closed

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open"
        return f"<Producer lane={self.lane} ring={self._core.name!r} {state}>"


class _HotState(Protocol):
    """What ``send`` shares with the rest of the producer (the C ``Writer`` has the same fields)."""

    tail: int
    """Slots published."""
    limit: int
    """Cached consumer head + capacity; -1 sends every call down the slow path."""
    extra: int
    """Extra slots of fragmented messages so far (the next msg_id is ``tail - extra``)."""


@final
class _PyHotState:
    """The pure-Python ``_HotState``."""

    __slots__ = ("extra", "limit", "tail")

    def __init__(self) -> None:
        self.tail = self.limit = self.extra = 0


class SendFn(Protocol):
    """The signature of ``Producer.send``."""

    def __call__(
        self,
        data: bytes | str,
        *,
        stream_id: int = 0,
        agent_type: int = AgentType.ASSISTANT,
        timestamp_ns: int | None = None,
        timeout: float | None = None,
    ) -> bool:
        """Send one message; fragments it when it is longer than one slot's 224-byte payload.

        Blocks only under the ``block`` full policy, while the lane is full.

        Args:
            data: The payload; a ``str`` is sent as UTF-8 and flagged as text.
            stream_id: Any u32 the application uses to tell streams apart.
            agent_type: Selects the label/colour when the message is formatted.
            timestamp_ns: Defaults to ``time.time_ns()`` at the call.
            timeout: Seconds to wait for room under the ``block`` policy (``None``: no limit).

        Returns:
            True when the message was published; False when the ``reject`` policy refused it
            because the lane was full (counted in ``stats().rejected``).

        Raises:
            UsageError: a bad argument, or a message needing more slots than the capacity.
            Timeout: the ``block`` policy waited ``timeout`` seconds (counted as rejected).
            BrokenError: the consumer closed or died (noticed on the slow paths), or the
                segment lost pages under the mapping (truncated): the message reached nobody.
            ClosedError: the producer or its ring was closed.
        """
        ...


def _make_send(producer: Producer) -> SendFn:
    """Build the pure-Python ``send``: the hot path as a closure over locals."""
    st = producer._hot
    pack = producer._pack
    mm = producer._mm
    base = producer._base
    mask = producer._mask
    ordered = producer._core.words.ordered
    tail_i = producer._tail_i
    lane = producer.lane
    # A weak reference: a strong one would make a cycle and delay the finalizer that closes
    # the lane of a producer dropped without close().
    slow = weakref.WeakMethod(producer._send_slow)
    now = _now
    # The fault guard's mark, read after each write: a truncated segment's pages are private
    # zero pages by then, and the message reached nobody (one C call, about 40 ns).
    guard = _accel.guard
    token = producer._core.guard_token
    tripped = guard.guard_tripped if guard is not None and token >= 0 else None

    def send(
        data: bytes | str,
        *,
        stream_id: int = 0,
        agent_type: int = AgentType.ASSISTANT,
        timestamp_ns: int | None = None,
        timeout: float | None = None,
    ) -> bool:
        """Send one message (documented on ``SendFn.__call__``)."""
        if type(data) is bytes:
            flags = _FIRST
        elif type(data) is str:
            data = data.encode()
            flags = _FIRST_TEXT
        else:
            data, flags = _coerce(data)
        n = len(data)
        t = st.tail
        try:
            fast = t < st.limit and n <= 224 and agent_type < 8
        except TypeError:
            raise _arg_error(stream_id, agent_type, timestamp_ns) from None
        if fast:
            # Hot path: one slot, room known from the cached head.  msg_id = tail - extra.
            try:
                pack(
                    mm,
                    base + ((t & mask) << 8),
                    t,
                    n,
                    flags,
                    agent_type,
                    lane,
                    stream_id,
                    (t - st.extra) & 0xFFFFFFFF,
                    now() if timestamp_ns is None else timestamp_ns,
                    data,
                )
            except (struct.error, TypeError):
                raise _arg_error(stream_id, agent_type, timestamp_ns) from None
            t += 1
            st.tail = t
            ordered[tail_i] = t  # release store: publishes the slot written above
            if tripped is None or not tripped(token):
                return True
            st.limit = -1  # lost pages: the slow path raises BrokenError, for this send and later ones
        method = slow()
        if method is None:
            msg = "send: the producer was garbage-collected"
            raise ClosedError(msg)
        return method(data, flags, stream_id, agent_type, timestamp_ns, timeout)

    return send


def _message_ends(rows: NDArray[np.void], capacity: int) -> NDArray[np.intp] | None:
    """Row index after each message when rows carry fragments; None when every row is one.

    Raises:
        UsageError: the FIRST/CONTINUES flags do not describe whole messages, or a message
            needs more slots than a lane has.
    """
    cont = (rows["flags"] & lay.FLAG_CONTINUES) != 0
    if not cont.any():
        return None
    first = (rows["flags"] & lay.FLAG_FIRST) != 0
    expected = np.empty_like(first)
    expected[0] = True
    expected[1:] = ~cont[:-1]
    if cont[-1] or not np.array_equal(first, expected):
        msg = (
            "send_many(items=...): rows with FLAG_CONTINUES must form whole messages: FLAG_FIRST on "
            "each first fragment, FLAG_CONTINUES on all but each last (make_batch builds them)"
        )
        raise UsageError(msg)
    ends = np.flatnonzero(~cont) + 1
    longest = int(np.max(np.diff(ends, prepend=0)))
    if longest > capacity:
        msg = f"send_many(items=...): a message needs {longest} slots but a lane has {capacity}"
        raise UsageError(msg)
    return ends


def _coerce(data: object) -> tuple[bytes, int]:
    if isinstance(data, bytes | bytearray | memoryview):
        return bytes(data), _FIRST
    if isinstance(data, str):
        return data.encode(), _FIRST_TEXT
    msg = f"send(data={data!r:.40}): expected bytes or str, got {type(data).__name__}"
    raise UsageError(msg)


def _arg_error(stream_id: object, agent_type: object, timestamp_ns: object) -> UsageError:
    """The error naming the first bad argument of a ``send`` call."""
    msg = ""
    if not isinstance(agent_type, int) or not 0 <= agent_type < 8:
        msg = f"send(agent_type={agent_type!r}): expected an AgentType (0..7)"
    elif not isinstance(stream_id, int) or not 0 <= stream_id <= _U32:
        msg = f"send(stream_id={stream_id!r}): expected an int in 0..2**32-1"
    elif timestamp_ns is not None and (not isinstance(timestamp_ns, int) or not 0 <= timestamp_ns <= _U64):
        msg = f"send(timestamp_ns={timestamp_ns!r}): expected None or an int in 0..2**64-1"
    else:
        msg = "send: invalid argument"
    return UsageError(msg)
