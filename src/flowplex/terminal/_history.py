"""One agent's bounded history in a detached server: what attached views read, each from its own cursor.

The history holds the agent's output (raw bytes, as the display was fed them) and its starts
and exits, in order; past its limit the oldest events go. A view keeps a :class:`Cursor`
(the next event, and the output bytes it has had), so a view that fell behind the history
learns how much it missed, and one that starts where the history was cut begins with CAN,
which ends an escape sequence the cut may have split.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any, Final, final

__all__ = ["CAN", "AgentLog", "Cursor"]

CAN: Final = b"\x18"
"""Cancels an escape sequence that a cut of the history split (the view starts mid-output)."""
EVENT_COST: Final = 64
"""What an event counts against the limit besides its bytes (a start or an exit holds none)."""


@dataclass(slots=True)
class _Event:
    """One entry of a history: a chunk of output, or a start or an exit with its fields."""

    kind: str
    """``output``, ``started`` or ``exited``."""
    data: bytes
    fields: dict[str, Any]
    end: int
    """The agent's output bytes up to and including this event."""


@dataclass(slots=True)
class Cursor:
    """Where one view is in one agent's history: the next event, and the bytes it has had."""

    seq: int
    offset: int
    cut: bool = False
    """The history was cut before ``seq``: the next output starts with :data:`CAN`."""


@final
class AgentLog:
    """One agent's history: its output and its starts and exits, in order, at most ``limit`` bytes."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.events: deque[_Event] = deque()
        self.first = 0
        """The sequence number of ``events[0]``."""
        self.pty = False
        """The agent's output comes from a PTY (``AgentInfo.pty``): a view feeds it so too."""
        self.size = 0
        self.total = 0
        """Output bytes ever added."""

    @property
    def next(self) -> int:
        """The sequence number the next event will get."""
        return self.first + len(self.events)

    def start(self) -> Cursor:
        """A cursor at the oldest event kept (a new view)."""
        offset = self.events[0].end - len(self.events[0].data) if self.events else self.total
        return Cursor(self.first, offset, cut=self.first > 0)

    def add(self, kind: str, data: bytes = b"", **fields: Any) -> None:
        """Append an event; the oldest go while the history is over its limit (the newest stays)."""
        self.total += len(data)
        self.events.append(_Event(kind, data, fields, self.total))
        self.size += len(data) + EVENT_COST
        while self.size > self.limit and len(self.events) > 1:
            old = self.events.popleft()
            self.size -= len(old.data) + EVENT_COST
            self.first += 1

    def take(self, cursor: Cursor, budget: int) -> tuple[list[tuple[str, Any]], int]:
        """The events after ``cursor`` (consecutive outputs joined, about ``budget`` bytes of them)
        and the output bytes the cursor missed because they left the history; moves the cursor."""
        lost = 0
        if cursor.seq < self.first:
            fresh = self.start()
            lost = fresh.offset - cursor.offset
            cursor.seq, cursor.offset, cursor.cut = fresh.seq, fresh.offset, True
        items: list[tuple[str, Any]] = []
        buf = bytearray()
        i = cursor.seq - self.first
        while i < len(self.events) and len(buf) < budget:
            event = self.events[i]
            if event.kind == "output":
                if not buf and cursor.cut:
                    buf += CAN
                    cursor.cut = False
                buf += event.data
            else:
                if buf:
                    items.append(("output", bytes(buf)))
                    buf = bytearray()
                items.append((event.kind, event.fields))
            cursor.offset = event.end
            i += 1
        if buf:
            items.append(("output", bytes(buf)))
        cursor.seq = self.first + i
        return items, lost
