"""``Ring``: a shared-memory ring of 256-byte slots that many producers feed and one consumer reads.

Design: one SPSC lane per producer, merged by the consumer.  The alternative, one shared
multi-producer ring, needs an atomic read-modify-write (``fetch_add`` or CAS) per message to
reserve a slot; from Python that is a C call through ``atomics``/ctypes costing about a
microsecond, more than everything else a send does.  With a lane per producer every word has a
single writer: the producer writes ``tail`` and the slots, the consumer writes ``head``; so a
release store and an acquire load (``_ordering``) are all the synchronisation needed, and on
x86-64 those are plain aligned loads and stores.  Per-producer FIFO order is then structural,
a dead producer can only ever stall its own lane, and "who owns this lane" is one registry
entry (pid + start time) that the consumer can check.  The price is memory (``max_producers``
lanes of ``capacity`` slots, untouched pages cost nothing on tmpfs) and no global order between
producers, which the Perdix use case (one ring per agent, one merger that owns the terminal)
never wanted.

Full/empty is decided from the two monotonic 64-bit counters, so the capacity is exact (no
margin, Perdix R4) and a zero-filled slot is never mistaken for a message (R3): a slot is
published only when ``tail`` passes it.

Memory ordering, for arm64: the producer writes slot bytes with plain stores, then
release-stores ``tail``; the consumer acquire-loads ``tail``, so the slot bytes it then reads
are the published ones; it release-stores ``head`` after copying, and the producer
acquire-loads ``head`` before overwriting, so the copy completed before the reuse.  On x86-64
TSO these orders hold for plain loads and stores (argument in ``_ordering``); elsewhere the
patomic atomics of the ``atomics`` package provide them.
"""

from __future__ import annotations

import enum
import logging
from typing import Final, final

from .._shm import Segment, check_name, new_name, reclaim_dead
from ..errors import BrokenError, ClosedError, UsageError
from . import _layout as lay
from ._consumer import Consumer
from ._core import RingCore, header_spans, reserve, this_process
from ._message import RingStats
from ._producer import Producer

log = logging.getLogger(__name__)


class FullPolicy(enum.StrEnum):
    """What ``send`` does when the producer's lane is full."""

    REJECT = "reject"
    """Return False at once and count the message in ``stats().rejected``.  If in doubt, use this."""
    BLOCK = "block"
    """Wait for room, up to the ``timeout`` given to ``send``."""
    DROP_OLDEST = "drop_oldest"
    """Overwrite the oldest unread messages; the consumer counts them in ``stats().dropped``."""


DEFAULT_MAX_PRODUCERS: Final = 16


def _check_capacity(capacity: object) -> int:
    if (
        not isinstance(capacity, int)
        or isinstance(capacity, bool)
        or not 1 <= capacity <= lay.MAX_CAPACITY
        or capacity & (capacity - 1)
    ):
        msg = (
            f"Ring.create(capacity={capacity!r}): expected a power of two between 1 and "
            f"{lay.MAX_CAPACITY} (slots per producer); if in doubt, use 4096"
        )
        raise UsageError(msg)
    return capacity


def _check_policy(full_policy: object) -> int:
    try:
        if not isinstance(full_policy, str):
            raise ValueError
        return lay.FULL_POLICY_CODES[FullPolicy(full_policy).value]
    except ValueError:
        choices = ", ".join(repr(p.value) for p in FullPolicy)
        msg = f"Ring.create(full_policy={full_policy!r}): expected one of {choices}"
        raise UsageError(msg) from None


@final
class Ring:
    """A ring buffer in shared memory.  Make one with :meth:`create`, open it with :meth:`attach`.

    ``capacity`` slots of 256 bytes per producer (each producer writes its own lane, the consumer
    merges them), a 32-byte header per slot and 224 bytes of payload; longer messages are
    fragmented and reassembled.  A ring handle is a context manager: leaving the ``with`` block
    closes it, and the creating handle also unlinks the segment.

    >>> with Ring.create(capacity=8) as ring:
    ...     with ring.producer() as p:
    ...         p.send("hello")
    ...     ring.consumer().recv(timeout=1).text
    True
    'hello'
    """

    __slots__ = ("_children", "_core", "_owner")

    _core: RingCore
    _owner: bool
    _children: list[Producer | Consumer]

    def __init__(self, *args: object, **kwargs: object) -> None:
        msg = "Ring() is not constructed directly; use Ring.create(capacity, ...) or Ring.attach(name)"
        raise UsageError(msg)

    @classmethod
    def _from_segment(cls, seg: Segment, capacity: int, max_producers: int, policy: int) -> Ring:
        self = cls.__new__(cls)
        self._core = RingCore(seg, capacity, max_producers, policy)
        self._owner = seg.owner
        self._children = []
        return self

    @classmethod
    def create(
        cls,
        capacity: int = 4096,
        *,
        name: str | None = None,
        full_policy: str | FullPolicy = FullPolicy.REJECT,
        max_producers: int = DEFAULT_MAX_PRODUCERS,
    ) -> Ring:
        """Create a ring in a new shared-memory segment.

        Args:
            capacity: Slots per producer lane, a power of two.  4096 slots hold 4096 short
                messages (about 900 KiB of payload) per producer; if in doubt, use 4096.
            name: The segment name under ``/dev/shm``; if omitted (if in doubt, omit it), a
                unique, unguessable one is generated.  Either way the segment is created
                exclusively (``O_EXCL``) with mode 0600.
            full_policy: ``"reject"``, ``"block"`` or ``"drop_oldest"`` (see ``FullPolicy``).
            max_producers: Lanes, i.e. producers that can be registered at once.

        Raises:
            UsageError: a bad argument, or a segment of that name exists.
            OSError: the segment could not be created, or ``/dev/shm`` is too full for its
                headers (``ENOSPC``, saying how full).
        """
        capacity = _check_capacity(capacity)
        policy = _check_policy(full_policy)
        if not isinstance(max_producers, int) or not 1 <= max_producers <= lay.MAX_PRODUCERS:
            msg = f"Ring.create(max_producers={max_producers!r}): expected an int in 1..{lay.MAX_PRODUCERS}"
            raise UsageError(msg)
        name = new_name() if name is None else check_name(name)
        # Segments whose creator died with its resource tracker (a SIGKILL of the whole
        # process group) would stay in /dev/shm for good; the next ring created reclaims them.
        reclaim_dead(("ring",))
        seg = Segment.create(name, lay.segment_size(capacity, max_producers))
        try:
            with seg.locked():  # before the first write: a full /dev/shm is an error here, not a SIGBUS
                reserve(seg, header_spans(capacity, max_producers), "its headers")
            lay.GLOBAL_HEADER_STRUCT.pack_into(
                seg.mm, 0, lay.MAGIC, lay.VERSION, lay.SLOT_SIZE, capacity, max_producers, policy, this_process()[0]
            )
        except BaseException:
            seg.close()
            seg.unlink()
            raise
        log.debug("ring.create.ok name=%s capacity=%d producers=%d", name, capacity, max_producers)
        return cls._from_segment(seg, capacity, max_producers, policy)

    @classmethod
    def attach(cls, name: str, *, trust_foreign: bool = False) -> Ring:
        """Open an existing ring (from any process) by name.

        Only a segment that the calling user owns and that no other user can read or write is
        opened: anyone can create a file under a guessed name in ``/dev/shm``, and a consumer
        attached to an impostor's segment would show forged messages, a producer would hand
        every message to the impostor.

        Args:
            name: The ring's name (``Ring.name`` of the creating handle).
            trust_foreign: Also open a segment that belongs to another user or is open to other
                users; only for a segment shared between users on purpose (its creator must
                have widened its mode).  If in doubt, leave it False.

        Raises:
            UsageError: no ring of that name, the segment fails the trust check, or it is not
                a flowplex ring.
            BrokenError: the segment's header is corrupt or the segment is shorter than it says.
        """
        if not isinstance(trust_foreign, bool):
            msg = f"Ring.attach(trust_foreign={trust_foreign!r}): expected True or False"
            raise UsageError(msg)
        name = check_name(name)
        try:
            seg = Segment.attach(name, trust_foreign=trust_foreign, what="Ring.attach")
        except FileNotFoundError:
            msg = f"Ring.attach(name={name!r}): no such ring; was it created (and not yet unlinked)?"
            raise UsageError(msg) from None
        try:
            magic, version, slot, capacity, max_producers, policy, _pid = lay.GLOBAL_HEADER_STRUCT.unpack_from(
                seg.mm, 0
            )
            if magic != lay.MAGIC or version != lay.VERSION or slot != lay.SLOT_SIZE:
                msg = (
                    f"Ring.attach(name={name!r}): /dev/shm/{name} is not a flowplex ring of layout "
                    f"version {lay.VERSION} (magic {magic!r}, version {version})"
                )
                raise UsageError(msg)
            bad_geometry = (
                not 1 <= capacity <= lay.MAX_CAPACITY
                or capacity & (capacity - 1)
                or not 1 <= max_producers <= lay.MAX_PRODUCERS
                or policy not in lay.FULL_POLICY_CODES.values()
            )
            if bad_geometry:
                msg = (
                    f"Ring.attach(name={name!r}): the header of /dev/shm/{name} is corrupt "
                    f"(capacity {capacity}, max_producers {max_producers}, policy code {policy})"
                )
                raise BrokenError(msg)
            if len(seg.mm) < lay.segment_size(capacity, max_producers):
                msg = (
                    f"Ring.attach(name={name!r}): the segment is truncated ({len(seg.mm)} bytes, its "
                    f"header says {lay.segment_size(capacity, max_producers)})"
                )
                raise BrokenError(msg)
        except BaseException:
            seg.close()
            raise
        return cls._from_segment(seg, capacity, max_producers, policy)

    @property
    def name(self) -> str:
        """The segment name; pass it to :meth:`attach` in another process."""
        return self._core.name

    @property
    def capacity(self) -> int:
        """Slots per producer lane."""
        return self._core.capacity

    @property
    def max_producers(self) -> int:
        """Number of producer lanes."""
        return self._core.max_producers

    @property
    def full_policy(self) -> FullPolicy:
        """What ``send`` does when a lane is full."""
        return FullPolicy(self._core.policy_name())

    @property
    def closed(self) -> bool:
        """Whether this handle was closed."""
        return self._core.closed

    def producer(self) -> Producer:
        """Register a producer (one lane) for the calling thread.

        Raises:
            UsageError: every lane is taken by a live producer.
            ClosedError: this handle is closed.
            OSError: ``/dev/shm`` is too full for a lane never used before (``ENOSPC``, saying how
                full): its slots get their memory when it is first claimed.
        """
        self._check_open()
        p = Producer(self._core)
        self._children = [c for c in self._children if not c.closed]
        self._children.append(p)
        return p

    def consumer(self, *, expect_producers: int = 1) -> Consumer:
        """Register as the ring's consumer (there is one at a time, in any process).

        Args:
            expect_producers: ``recv`` raises ``EndOfStream`` only after at least this many
                producers have registered (since the ring was created) and all have closed.
                Producers register when they start, so with several processes starting at
                different times, pass their number; the default suits one producer.

        Raises:
            UsageError: another live consumer is registered, or a bad ``expect_producers``.
            ClosedError: this handle is closed.
        """
        self._check_open()
        if not isinstance(expect_producers, int) or expect_producers < 1:
            msg = f"consumer(expect_producers={expect_producers!r}): expected a positive int"
            raise UsageError(msg)
        c = Consumer(self._core, expect_producers)
        self._children.append(c)
        return c

    def _check_open(self) -> None:
        if self._core.closed:
            msg = f"ring {self.name!r} is closed"
            raise ClosedError(msg)

    def stats(self) -> RingStats:
        """A snapshot of the counters of every lane (readable from any handle, any process)."""
        self._check_open()
        core = self._core
        plain = core.words.plain

        def word(lane: int, w: int) -> int:
            return int(plain[core.lane_word(lane, w)])

        totals = dict.fromkeys(
            ("produced", "consumed", "rejected", "dropped", "fragmented", "reassembled", "in_flight", "producers"), 0
        )
        hwm = 0
        for lane in range(core.max_producers):
            state = word(lane, lay.L_STATE)
            if state == lay.LANE_FREE:
                continue
            tail, head = word(lane, lay.L_TAIL), word(lane, lay.L_HEAD)
            totals["producers"] += state == lay.LANE_ACTIVE
            totals["produced"] += tail - word(lane, lay.L_EXTRA_SLOTS)
            totals["consumed"] += head - word(lane, lay.L_CONSUMER_EXTRA) - word(lane, lay.L_SKIPPED_SLOTS)
            totals["rejected"] += word(lane, lay.L_REJECTED)
            totals["dropped"] += word(lane, lay.L_DROPPED)
            totals["fragmented"] += word(lane, lay.L_FRAGMENTED)
            totals["reassembled"] += word(lane, lay.L_REASSEMBLED)
            totals["in_flight"] += max(0, min(tail - head, core.capacity))
            hwm = max(hwm, word(lane, lay.L_PRODUCER_HWM), word(lane, lay.L_CONSUMER_HWM))
        return RingStats(
            capacity=core.capacity,
            max_producers=core.max_producers,
            producers=totals["producers"],
            produced=totals["produced"],
            consumed=totals["consumed"],
            rejected=totals["rejected"],
            dropped=totals["dropped"],
            fragmented=totals["fragmented"],
            reassembled=totals["reassembled"],
            high_water_mark=hwm,
            in_flight_slots=totals["in_flight"],
            dead_producers=int(plain[lay.W_DEAD_PRODUCERS]),
        )

    def close(self) -> None:
        """Close this handle's producers and consumer, then unmap; idempotent.  Does not unlink."""
        if self._core.closed:
            return
        for child in self._children:
            child.close()
        self._children.clear()
        self._core.close()

    def unlink(self) -> None:
        """Remove the segment's name; processes that have it open keep working.  Idempotent."""
        self._core.seg.unlink()

    def __enter__(self) -> Ring:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
        if self._owner:
            self.unlink()

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open"
        return (
            f"<Ring {self.name!r} capacity={self.capacity} max_producers={self.max_producers} "
            f"full_policy={self._core.policy_name()!r} {state}>"
        )
