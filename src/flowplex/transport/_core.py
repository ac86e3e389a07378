"""The state one process keeps for one mapped ring, and the registry of producers and consumer.

The registry is the cold part of the protocol: producers claim a lane, the consumer claims the
consumer role, a dead process's lane is reclaimed.  All of it runs under the segment's
cross-process lock (``Segment.locked``), which is also a full memory barrier, and is rare enough
that its cost does not matter.  The hot part (publishing and releasing slots) is in
``_producer`` and ``_consumer`` and takes no lock.
"""

from __future__ import annotations

import logging
import os
from typing import Final, final

from .._shm import Segment
from ..errors import BrokenError, UsageError
from . import _layout as lay
from ._ordering import Words
from ._process import is_alive, start_time

log = logging.getLogger(__name__)

POLICY_NAMES: Final = {code: name for name, code in lay.FULL_POLICY_CODES.items()}
_PID: list[int] = [0, 0]  # (pid, start time) of this process, refreshed after fork


def this_process() -> tuple[int, int]:
    """``(pid, start time)`` of the calling process (cached; correct after ``fork``)."""
    pid = os.getpid()
    if _PID[0] != pid:
        _PID[0] = pid
        _PID[1] = start_time(pid)
    return _PID[0], _PID[1]


@final
class RingCore:
    """Geometry, mapping and registry operations of one mapped ring (one per ``Ring`` handle)."""

    __slots__ = (
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
                        w.store(lay.W_DEAD_PRODUCERS, w.load(lay.W_DEAD_PRODUCERS) + 1)
                        break
            if choice < 0:
                msg = (
                    f"ring {self.name!r}: all {self.max_producers} producer lanes are in use; "
                    "close unused producers or create the ring with a larger max_producers"
                )
                raise UsageError(msg)
            w.store(self.lane_word(choice, lay.L_PID), pid)
            w.store(self.lane_word(choice, lay.L_START), started)
            w.store(self.lane_word(choice, lay.L_STATE), lay.LANE_ACTIVE)
            w.store(lay.W_PRODUCERS_EVER, w.load(lay.W_PRODUCERS_EVER) + 1)
            w.store(lay.W_REGISTRY_GEN, w.load(lay.W_REGISTRY_GEN) + 1)
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
                w.store(lay.W_REGISTRY_GEN, w.load(lay.W_REGISTRY_GEN) + 1)
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
            w.store(lay.W_DEAD_PRODUCERS, w.load(lay.W_DEAD_PRODUCERS) + 1)
            w.store(lay.W_REGISTRY_GEN, w.load(lay.W_REGISTRY_GEN) + 1)
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
        self.words.release()
        self.seg.close()
