"""Async output events (``Graph.events``): packets, timestamp bounds, the end."""

from __future__ import annotations

from dataclasses import dataclass

from ._timestamps import TS_DONE
from .packets import Packet

__all__ = ["DoneEvent", "OutputEvent", "PacketEvent", "TimestampBoundEvent"]


@dataclass(frozen=True, slots=True)
class OutputEvent:
    """Base of the events ``Graph.events(port)`` yields."""


@dataclass(frozen=True, slots=True)
class PacketEvent(OutputEvent):
    """A packet arrived on the port."""

    packet: Packet

    @property
    def timestamp(self) -> int:
        """The packet's timestamp."""
        return self.packet.timestamp


@dataclass(frozen=True, slots=True)
class TimestampBoundEvent(OutputEvent):
    """Nothing earlier than ``timestamp`` will arrive on the port."""

    timestamp: int


@dataclass(frozen=True, slots=True)
class DoneEvent(OutputEvent):
    """The port closed; the last event."""

    timestamp: int = TS_DONE
