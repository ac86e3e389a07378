"""The graph's memory budget: packets and payload bytes queued in node inputs and pollers.

Graph-input sends are admitted only under the watermark (``limit_packets`` / ``limit_bytes``);
every queue that takes or gives packets books them here, under the engine lock. Every payload
kind that holds memory counts toward ``limit_bytes`` (``payload_bytes``: buffers, bytes, str),
so the bound holds whatever the packets carry. Queue peaks warn at the soft limit.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ._engine_common import _BYTES, _STR, _buffer_bytes, payload_bytes

if TYPE_CHECKING:
    from ..packets import Packet

log = logging.getLogger("flowplex.graph")


class Budget:
    """Counts what waits in queues, against the graph's limits; lock held for every change."""

    def __init__(self) -> None:
        self.queued = 0
        """Packets waiting in node input queues and poller queues."""
        self.queued_bytes = 0
        """Payload bytes in those queues (buffers, bytes, str: ``payload_bytes``); tracked only
        while ``limit_bytes`` is set."""
        self.limit_packets = 0
        """Global watermark checked by graph-input sends; 0 = unlimited."""
        self.limit_bytes = 0
        self.soft_limit = 100
        """A queue deeper than this logs a warning (then at each doubling)."""

    def add(self, packets: tuple[Packet, ...] | list[Packet]) -> None:
        """Book packets entering a queue."""
        self.queued += len(packets)
        if self.limit_bytes:
            self.queued_bytes += _buffer_bytes(packets)

    def add_one(self, p: Packet) -> None:
        """Book one packet entering a queue (the hot path's form of ``add``)."""
        self.queued += 1
        if self.limit_bytes:
            tid = p._tid
            if tid >= _STR or tid == _BYTES:  # ``holds_bytes``, inline: the scalars skip the call
                self.queued_bytes += payload_bytes(p)

    def take(self, packets: tuple[Packet, ...] | list[Packet]) -> None:
        """Book packets leaving a queue."""
        self.queued -= len(packets)
        if self.limit_bytes:
            self.queued_bytes -= _buffer_bytes(packets)

    def take_one(self, p: Packet) -> None:
        """Book one packet leaving a queue."""
        self.queued -= 1
        if self.limit_bytes:
            tid = p._tid
            if tid >= _STR or tid == _BYTES:
                self.queued_bytes -= payload_bytes(p)

    def add_again(self, packets: list[Packet], nbytes: int) -> int:
        """Book ``packets`` entering one more queue (a fan-out); returns their byte count.

        ``nbytes`` is that count when an earlier queue of the same fan-out measured it, -1 if
        none did yet: a fan-out to many queues sizes its payloads once.
        """
        self.queued += len(packets)
        if self.limit_bytes:
            if nbytes < 0:
                nbytes = _buffer_bytes(packets)
            self.queued_bytes += nbytes
        return nbytes

    def replace(self, added: list[Packet], removed: list[Packet]) -> None:
        """Book a lossy queue taking ``added`` and pushing ``removed`` out (a bounded poller)."""
        self.queued += len(added) - len(removed)
        if self.limit_bytes:
            self.queued_bytes += _buffer_bytes(added) - _buffer_bytes(removed)

    def add_uncounted(self, n: int) -> None:
        """Book ``n`` packets whose bytes are not counted entering (negative: leaving) a queue.

        Feedback registers (they keep one value each) and a poller's bound markers (no payload).
        """
        self.queued += n

    def under(self) -> bool:
        """Below both watermarks (ignoring blocking pollers)."""
        return ((not self.limit_packets or self.queued < self.limit_packets)
                and (not self.limit_bytes or self.queued_bytes < self.limit_bytes))

    def fullness(self) -> str:
        """What fills the graph, for errors."""
        limit = f"limit={self.limit_packets}" if self.limit_packets else "no packet limit"
        extra = f", {self.queued_bytes} payload bytes (limit={self.limit_bytes})" if self.limit_bytes else ""
        return f"{self.queued} packets queued ({limit}){extra}"

    def clear(self) -> None:
        """Nothing queued any more (``Graph.reset``)."""
        self.queued = 0
        self.queued_bytes = 0
