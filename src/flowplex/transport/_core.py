"""The state one process keeps for one mapped ring, and the registry of producers and consumer.

The registry is the cold part of the protocol: producers claim a lane, the consumer claims the
consumer role, a dead process's lane is reclaimed.

Every word of the segment may hold anything: the segment is shared memory that a buggy or
hostile process of the same user can write at will.  So counters wrap at 2**64 instead of
failing, positions far beyond what the protocol allows are reported as ``BrokenError``, and a
segment that loses pages under the mapping (truncated, or ``/dev/shm`` full) is caught by the C
fault guard where the extension is built (``_fastring.c``) and reported by
:meth:`RingCore.intact`.  A full ``/dev/shm`` is mostly prevented: the ring reserves
(``fallocate``) the pages of its headers when it is created, and a lane's pages when a producer
first claims it (a lane's every slot is written once ``capacity`` messages went through, so this
costs nothing that the lane would not use), so tmpfs never has to find memory at a first touch.

The registry updates run under the segment's cross-process lock (``Segment.locked``), which is
also a full memory barrier, and are rare enough that their cost does not matter.  The hot part
(publishing and releasing slots) is in ``_producer`` and ``_consumer`` and takes no lock.
"""

from __future__ import annotations

import errno
import logging
import os
import time
from typing import Final, final

from .._shm import SHM_DIR, Segment, free_bytes
from ..errors import BrokenError, UsageError
from . import _accel
from . import _layout as lay
from ._ordering import Words
from ._process import is_alive, start_time

log = logging.getLogger(__name__)

POLICY_NAMES: Final = {code: name for name, code in lay.FULL_POLICY_CODES.items()}
U64: Final = (1 << 64) - 1
MAX_POSITION: Final = (1 << 62) - 1
"""The largest slot position a lane reaches honestly (centuries at a billion slots a second);
anything above is a corrupt word.  It keeps positions inside the C side's signed 64 bits."""
_SIZE_CHECK_EVERY_S: Final = 0.05
_PID: list[int] = [0, 0]  # (pid, start time) of this process, refreshed after fork


def this_process() -> tuple[int, int]:
    """``(pid, start time)`` of the calling process (cached; correct after ``fork``)."""
    pid = os.getpid()
    if _PID[0] != pid:
        _PID[0] = pid
        _PID[1] = start_time(pid)
    return _PID[0], _PID[1]


def reserve(seg: Segment, spans: list[tuple[int, int]], what: str) -> None:
    """Give the ``(offset, length)`` spans of ``seg`` their memory now (holding its lock).

    Raises:
        OSError: ``ENOSPC``, with a message that says how full ``/dev/shm`` is and what to do.
    """
    try:
        for offset, length in spans:
            seg.reserve(offset, length)
    except OSError as exc:
        if exc.errno in (errno.EOPNOTSUPP, errno.ENOSYS):
            return  # no fallocate on this file system: pages get memory when touched (the guard's case)
        if exc.errno != errno.ENOSPC:
            raise
        msg = (
            f"ring {seg.name!r}: {SHM_DIR} is full ({max(0, free_bytes()) >> 20} MiB free), so {what} could not "
            f"get memory; free space in {SHM_DIR} (`flowplex shm clean` removes what dead flowplex processes "
            "left), or use a smaller capacity"
        )
        raise OSError(errno.ENOSPC, msg) from None


def header_spans(capacity: int, max_producers: int) -> list[tuple[int, int]]:
    """The spans a new ring reserves: the global header and every lane header (each process that
    opens the ring reads them all), or the whole segment when its lanes are small."""
    if lay.lane_size(capacity) <= lay.GLOBAL_HEADER_SIZE:
        return [(0, lay.segment_size(capacity, max_producers))]  # at most 1 MiB
    spans = [(0, lay.GLOBAL_HEADER_SIZE)]
    spans += [(lay.lane_offset(capacity, lane), lay.LANE_HEADER_SIZE) for lane in range(max_producers)]
    return spans


@final
class RingCore:
    """Geometry, mapping and registry operations of one mapped ring (one per ``Ring`` handle)."""

    __slots__ = (
        "_guard",
        "_size_checked",
        "capacity",
        "closed",
        "mask",
        "max_producers",
        "mm",
        "name",
        "policy",
        "seg",
        "words",
    )

    def __init__(self, seg: Segment, capacity: int, max_producers: int, policy: int) -> None:
        self.seg = seg
        self.mm = seg.mm
        self.name = seg.name
        self.capacity = capacity
        self.mask = capacity - 1
        self.max_producers = max_producers
        self.policy = policy
        self.words = Words(seg.mm)
        self.closed = False
        self._size_checked = 0.0
        guard = _accel.guard
        self._guard = -1 if guard is None else int(guard.guard_register(seg.mm))

    # -- a segment that can be written (or truncated) by anyone of this user ------------------
    def bump(self, word: int, n: int = 1) -> None:
        """Add ``n`` to a counter word, wrapping at 2**64 (a scribbled counter never fails)."""
        plain = self.words.plain
        plain[word] = (plain[word] + n) & U64

    @property
    def guard_token(self) -> int:
        """This mapping's fault-guard token (-1: unguarded), for the C writer's own check."""
        return self._guard

    def lost(self) -> BrokenError | None:
        """The error for a fault the guard absorbed in this mapping, or None (no system call).

        Cheap enough for every send: a producer whose stores faulted wrote to a private zero
        page that the consumer never sees, so it must not report the message as sent.
        """
        guard = _accel.guard
        if guard is not None and self._guard >= 0 and guard.guard_tripped(self._guard):
            msg = (
                f"ring {self.name!r}: the shared-memory segment lost pages under its mapping "
                "(another process truncated it, or /dev/shm is full); its contents are gone"
            )
            return BrokenError(msg)
        return None

    def intact(self) -> BrokenError | None:
        """Describe how the segment lost pages (truncated or unbacked), or None while it is whole.

        Reads the fault guard's mark (a C call, no system call) and, at most every 50 ms, the
        file's size; callers are the slow paths, never the per-message ones.
        """
        lost = self.lost()
        if lost is not None:
            return lost
        now = time.monotonic()
        if now - self._size_checked >= _SIZE_CHECK_EVERY_S:
            self._size_checked = now
            size = self.seg.file_size()
            if size < len(self.mm):
                msg = (
                    f"ring {self.name!r}: the shared-memory segment was truncated to {size} bytes "
                    f"under its {len(self.mm)}-byte mapping"
                )
                return BrokenError(msg)
        return None

    def corrupt(self, what: str) -> BrokenError:
        """The error for a word that breaks the protocol (a lost page explains it first)."""
        lost = self.intact()
        if lost is not None:
            return lost
        msg = f"ring {self.name!r}: {what}; the segment is corrupt (written by something other than flowplex?)"
        return BrokenError(msg)

    # -- addressing -------------------------------------------------------------------------
    def lane_word(self, lane: int, word: int) -> int:
        """Word index of ``word`` (an ``L_*`` constant) in lane ``lane``'s header."""
        return (lay.lane_offset(self.capacity, lane) >> 3) + word

    def slots_offset(self, lane: int) -> int:
        """Byte offset of lane ``lane``'s slot 0."""
        return lay.lane_offset(self.capacity, lane) + lay.LANE_HEADER_SIZE

    def policy_name(self) -> str:
        """``"reject"``, ``"block"`` or ``"drop_oldest"``."""
        return POLICY_NAMES[self.policy]

    # -- producers ----------------------------------------------------------------------------
    def _lane_drained(self, lane: int) -> bool:
        load = self.words.load
        return load(self.lane_word(lane, lay.L_TAIL)) == load(self.lane_word(lane, lay.L_HEAD))

    def claim_lane(self) -> int:
        """Register the calling process as a producer; return its lane.

        Prefers a free lane, then a closed and drained one, then one whose producer died
        (after the consumer had everything it published).

        Raises:
            UsageError: every lane is in use.
        """
        pid, started = this_process()
        w = self.words
        with self.seg.locked():
            states = [w.load(self.lane_word(i, lay.L_STATE)) for i in range(self.max_producers)]
            choice = next((i for i, s in enumerate(states) if s == lay.LANE_FREE), -1)
            if choice < 0:
                choice = next((i for i, s in enumerate(states) if s == lay.LANE_CLOSED and self._lane_drained(i)), -1)
            if choice < 0:
                for i, s in enumerate(states):
                    if s == lay.LANE_ACTIVE and self._lane_drained(i) and not self._lane_owner_alive(i):
                        choice = i
                        self.bump(lay.W_DEAD_PRODUCERS)
                        break
            if choice < 0:
                msg = (
                    f"ring {self.name!r}: all {self.max_producers} producer lanes are in use; "
                    "close unused producers or create the ring with a larger max_producers"
                )
                raise UsageError(msg)
            if states[choice] == lay.LANE_FREE:
                # First use of the lane: reserve its slots (reserving again would be slow on tmpfs,
                # and a lane that was used has its memory already).
                span = (lay.lane_offset(self.capacity, choice), lay.lane_size(self.capacity))
                reserve(self.seg, [span], f"producer lane {choice} ({span[1] >> 10} KiB)")
            w.store(self.lane_word(choice, lay.L_PID), pid)
            w.store(self.lane_word(choice, lay.L_START), started)
            w.store(self.lane_word(choice, lay.L_STATE), lay.LANE_ACTIVE)
            self.bump(lay.W_PRODUCERS_EVER)
            self.bump(lay.W_REGISTRY_GEN)
        log.debug("ring.producer.registered ring=%s lane=%d pid=%d", self.name, choice, pid)
        return choice

    def _lane_owner_alive(self, lane: int) -> bool:
        load = self.words.load
        alive, _ = is_alive(load(self.lane_word(lane, lay.L_PID)), load(self.lane_word(lane, lay.L_START)))
        return alive

    def close_lane(self, lane: int) -> None:
        """Mark the calling producer's lane closed (after its last publish)."""
        w = self.words
        with self.seg.locked():
            if w.load(self.lane_word(lane, lay.L_STATE)) == lay.LANE_ACTIVE:
                w.store(self.lane_word(lane, lay.L_STATE), lay.LANE_CLOSED)
                self.bump(lay.W_REGISTRY_GEN)
        log.debug("ring.producer.closed ring=%s lane=%d", self.name, lane)

    def reap_dead_lane(self, lane: int) -> BrokenError | None:
        """If lane ``lane``'s producer process died, close the lane and describe the death.

        Returns:
            The ``BrokenError`` to raise (cause chained), or None while the producer lives.
        """
        w = self.words
        pid = w.load(self.lane_word(lane, lay.L_PID))
        alive, cause = is_alive(pid, w.load(self.lane_word(lane, lay.L_START)))
        if alive:
            return None
        with self.seg.locked():
            if (
                w.load(self.lane_word(lane, lay.L_STATE)) != lay.LANE_ACTIVE
                or w.load(self.lane_word(lane, lay.L_PID)) != pid
            ):
                return None
            w.store(self.lane_word(lane, lay.L_STATE), lay.LANE_CLOSED)
            self.bump(lay.W_DEAD_PRODUCERS)
            self.bump(lay.W_REGISTRY_GEN)
        log.warning("ring.producer.dead ring=%s lane=%d pid=%d", self.name, lane, pid)
        msg = (
            f"ring {self.name!r}: producer {lane} (pid {pid}) died without closing; "
            "everything it had published was delivered"
        )
        err = BrokenError(msg)
        err.__cause__ = cause
        return err

    # -- consumer -----------------------------------------------------------------------------
    def claim_consumer(self) -> None:
        """Register the calling process as the ring's only consumer.

        Raises:
            UsageError: another live consumer is registered.
        """
        pid, started = this_process()
        w = self.words
        with self.seg.locked():
            if w.load(lay.W_CONSUMER_STATE) == lay.CONSUMER_ATTACHED:
                other = w.load(lay.W_CONSUMER_PID)
                alive, _ = is_alive(other, w.load(lay.W_CONSUMER_START))
                if alive:
                    msg = (
                        f"ring {self.name!r} already has a consumer (pid {other}); a ring has one "
                        "consumer, which merges every producer's lane"
                    )
                    raise UsageError(msg)
            w.store(lay.W_CONSUMER_PID, pid)
            w.store(lay.W_CONSUMER_START, started)
            w.store(lay.W_CONSUMER_STATE, lay.CONSUMER_ATTACHED)

    def release_consumer(self) -> None:
        """Mark the consumer role closed (blocked producers then get ``BrokenError``)."""
        pid, _ = this_process()
        w = self.words
        with self.seg.locked():
            if w.load(lay.W_CONSUMER_STATE) == lay.CONSUMER_ATTACHED and w.load(lay.W_CONSUMER_PID) == pid:
                w.store(lay.W_CONSUMER_STATE, lay.CONSUMER_CLOSED)

    def consumer_gone(self) -> BrokenError | None:
        """Describe why no consumer will ever free slots, or None while one may still come."""
        w = self.words
        state = w.load(lay.W_CONSUMER_STATE)
        if state == lay.CONSUMER_CLOSED:
            msg = f"ring {self.name!r}: the consumer closed; nobody will free slots"
            return BrokenError(msg)
        if state == lay.CONSUMER_ATTACHED:
            pid = w.load(lay.W_CONSUMER_PID)
            alive, cause = is_alive(pid, w.load(lay.W_CONSUMER_START))
            if not alive:
                msg = f"ring {self.name!r}: the consumer (pid {pid}) died; nobody will free slots"
                err = BrokenError(msg)
                err.__cause__ = cause
                return err
        return None

    def close(self) -> None:
        """Release the word views and unmap; the handle's producers/consumer must be closed."""
        if self.closed:
            return
        self.closed = True
        guard = _accel.guard
        if guard is not None and self._guard >= 0:
            guard.guard_unregister(self._guard)  # before the unmap: the range may be reused
            self._guard = -1
        self.words.release()
        self.seg.close()
