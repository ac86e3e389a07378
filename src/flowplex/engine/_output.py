"""The engine side of a graph output's poller: the queue the data path fills under the lock.

``OutputQueue`` is owned and written by the engine (``Delivery``, the hop shortcut, ``Closing``,
``Graph.reset``) and read by ``Waits`` for the host; the public ``Poller`` (``flowplex.graph``)
is the host's endpoint over one of these and never touches its packets itself.
"""

from __future__ import annotations

import logging
from collections import deque
from typing import TYPE_CHECKING, final

from ..errors import ConfigError
from ..packets import Packet
from ._engine_common import _buffer_bytes

if TYPE_CHECKING:
    from ._budget import Budget
    from ._nodes import Edge

__all__ = ["OVERFLOW_POLICIES", "OutputQueue"]

log = logging.getLogger("flowplex.graph")

OVERFLOW_POLICIES = ("block", "drop_oldest", "drop_newest", "latest")
"""What a bounded poller does when full: producers wait (``block``) or a packet is dropped, counted."""


@final
class OutputQueue:
    """The packets delivered to one poller of a graph output, in order (engine side; lock held).

    ``packets`` is written by the engine only; the host takes from it through ``Waits``.
    """

    __slots__ = ("_budget", "blocks", "capacity", "closed", "dropped", "edge", "last_read", "last_reader", "name",
                 "observe_bounds", "overflow", "packets", "readers")

    def __init__(self, budget: Budget, edge: Edge, observe_bounds: bool, capacity: int = 0,
                 overflow: str = "block") -> None:
        name = edge.name
        if overflow not in OVERFLOW_POLICIES:
            choices = list(OVERFLOW_POLICIES)
            msg = f"add_poller(`{name}`): unknown overflow policy {overflow!r}; use one of {choices}"
            raise ConfigError(msg)
        if capacity < 0 or (capacity == 0 and overflow != "block"):
            msg = f"add_poller(`{name}`): a bounded poller needs capacity >= 1 (got {capacity})"
            raise ConfigError(msg)
        if overflow == "latest" and capacity != 1:
            msg = f"add_poller(`{name}`): overflow='latest' keeps one packet; use capacity=1"
            raise ConfigError(msg)
        if capacity and observe_bounds:
            msg = f"add_poller(`{name}`): bounded pollers do not receive timestamp-bound events"
            raise ConfigError(msg)
        self._budget = budget
        self.edge = edge
        self.name = name
        self.observe_bounds = observe_bounds
        self.capacity = capacity
        self.overflow = overflow
        self.blocks = capacity > 0 and overflow == "block"
        """Lossless and bounded: producers wait (cooperatively) for the host to read."""
        self.dropped = 0
        self.packets: deque[Packet] = deque()
        """Delivered, not yet read: the engine appends (lock held), ``Waits`` takes for the host."""
        self.closed = False
        # Who reads this poller: a blocked ``send`` waits (rather than calling the graph
        # deadlocked) while another thread drains a poller that holds the backlog.
        self.readers = 0
        """Threads inside ``next()`` right now (lock held to change)."""
        self.last_read = 0.0
        """``time.monotonic()`` of the last packet taken (0.0: never)."""
        self.last_reader = 0
        """``threading.get_ident()`` of the thread that took it."""

    def push_many(self, packets: list[Packet]) -> None:
        """Append delivered packets, applying the overflow policy of a bounded poller.

        Queued packets (and their buffer bytes) count toward the graph's limits, like packets
        in node queues: a host that reads slowly makes ``send`` wait instead of growing memory.
        """
        q = self.packets
        budget = self._budget
        cap = self.capacity
        if not cap or self.blocks:
            q.extend(packets)
            budget.add(packets)
            return
        removed: list[Packet] = []  # queued packets pushed out by the newcomers
        if self.overflow == "drop_newest":
            room = max(0, cap - len(q))
            added, lost = packets[:room], packets[room:]
            q.extend(added)
        else:  # drop_oldest / latest: the newest win
            added = packets
            q.extend(packets)
            removed = lost = [q.popleft() for _ in range(max(0, len(q) - cap))]
        budget.queued += len(added) - len(removed)
        if budget.limit_bytes:
            budget.queued_bytes += _buffer_bytes(added) - _buffer_bytes(removed)
        self._count_drops(len(lost))

    def _count_drops(self, n: int) -> None:
        if n <= 0:
            return
        before = self.dropped
        self.dropped += n
        if (self.dropped & (self.dropped - 1)) == 0 or before.bit_length() != self.dropped.bit_length():
            log.warning("poller overflow: output `%s` policy=%s capacity=%d queued=%d dropped_total=%d", self.name,
                        self.overflow, self.capacity, len(self.packets), self.dropped)

    def push_bound(self, ts: int) -> None:
        """Append an empty packet announcing timestamp bound ``ts``."""
        marker = Packet()
        marker._ts = ts
        self.packets.append(marker)
        self._budget.queued += 1

    def reset(self) -> None:
        """Forget everything (``Graph.reset``)."""
        self.packets.clear()
        self.closed = False
        self.dropped = 0

    def __len__(self) -> int:
        """Packets queued right now."""
        return len(self.packets)
