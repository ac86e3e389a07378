"""What a consumer receives (:class:`Message`) and what a ring reports (:class:`RingStats`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from ._format import AgentType
from ._layout import FLAG_TEXT


class Message(NamedTuple):
    """One message as received from a ring.

    A lean tuple: the consumer builds one per message on the hot path, and tuples are the
    cheapest object CPython can make.  Fragmented messages arrive whole.
    """

    data: bytes
    """The payload, exactly as sent (a ``str`` was sent as its UTF-8 encoding)."""
    seq: int
    """Position of the message's first slot in its producer's lane; increases per producer."""
    stream_id: int
    """The ``stream_id`` given to ``send`` (u32)."""
    agent_type: AgentType
    """The ``agent_type`` given to ``send``."""
    timestamp_ns: int
    """The ``timestamp_ns`` given to ``send``, or the producer's ``time.time_ns()`` at send."""
    producer_id: int
    """The lane of the producer that sent it; FIFO order holds per ``producer_id``."""
    flags: int
    """Slot flags of the first fragment (``FLAG_TEXT`` when a ``str`` was sent)."""

    @property
    def text(self) -> str:
        """The payload decoded as UTF-8 (raises ``UnicodeDecodeError`` for binary payloads)."""
        return self.data.decode()

    @property
    def is_text(self) -> bool:
        """Whether the producer sent a ``str``."""
        return bool(self.flags & FLAG_TEXT)


@dataclass(frozen=True, slots=True)
class RingStats:
    """A snapshot of a ring's counters, summed over its producer lanes.

    Every message sent is eventually counted exactly once as ``consumed``, ``dropped`` or still
    ``in_flight`` (or ``rejected`` at the door); nothing disappears uncounted.
    """

    capacity: int
    """Slots per producer lane (each producer has its own lane of this size)."""
    max_producers: int
    """Lanes in the segment."""
    producers: int
    """Producers registered now (active lanes)."""
    produced: int
    """Messages accepted by ``send``/``send_many``."""
    consumed: int
    """Messages delivered by ``recv``/``recv_many``."""
    rejected: int
    """Messages refused because the lane was full (``reject`` policy, or ``block`` timing out)."""
    dropped: int
    """Messages overwritten before the consumer read them (``drop_oldest``), or lost with a
    producer that died in the middle of them."""
    fragmented: int
    """Messages longer than one slot, sent as several fragments."""
    reassembled: int
    """Fragmented messages the consumer put back together."""
    high_water_mark: int
    """Most slots seen occupied in one lane at once (by the producer after a send, by the
    consumer when it looked)."""
    in_flight_slots: int
    """Slots published and not yet released by the consumer, summed over lanes."""
    dead_producers: int
    """Producers found dead (their process exited without closing)."""
