"""Host-side endpoints: ``Input`` (send into a graph input) and ``Poller`` (pull from an output)."""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Iterator
from typing import TYPE_CHECKING, final

from ..errors import ConfigError, WouldBlock
from ..packets import Packet, to_packet
from ._args import check_timeout, check_ts
from ._engine_common import _buffer_bytes

if TYPE_CHECKING:
    from ._admission import Admission
    from ._budget import Budget
    from ._nodes import Edge
    from ._waiting import Waits

__all__ = ["Input", "Poller"]

log = logging.getLogger("flowplex.graph")


@final
class Input:
    """A graph input port: ``send`` packets into it, then ``close`` it.

    Get one with ``Graph.input(name)``; it stays valid for the graph's lifetime.
    """

    __slots__ = ("_admission", "_edge")

    def __init__(self, admission: Admission, edge: Edge) -> None:
        self._admission = admission
        self._edge = edge

    @property
    def name(self) -> str:
        """The port name."""
        return self._edge.name

    def send(self, value: object, ts: int | None = None, *, timeout: float | None = None) -> None:
        """Send one packet; with the default executor this also runs the nodes it feeds.

        ``value`` is a ``Packet`` or an int/float/bool/str/bytes/ndarray (adopted without a
        copy). Timestamps must strictly increase per port. When the graph is full (its packet
        watermark, or a blocking poller), waits for room — up to ``timeout`` seconds, then
        ``Timeout``; a graph that is full and can never drain raises ``DeadlockError``.
        Raises ``ClosedError`` after ``close``, ``UsageError`` (a ``ValueError``) for a missing
        or non-increasing timestamp, ``KernelError`` once the graph has failed.
        """
        admission = self._admission
        if type(ts) is not int:  # the common case costs one check; the helper names the mistake
            ts = check_ts(ts, "Input.send")
        if timeout is not None:
            timeout = check_timeout(timeout, "Input.send")
        work = admission.accept(self._edge, to_packet(value, ts, True), timeout=timeout)
        del value  # the graph now owns the value: a kernel may write into it in place
        admission.run_work(work)

    def send_nowait(self, value: object, ts: int | None = None) -> None:
        """Like ``send``, but raises ``WouldBlock`` instead of waiting when the graph is full."""
        admission = self._admission
        work = admission.accept(self._edge, to_packet(value, check_ts(ts, "Input.send_nowait"), True), wait=False)
        del value
        admission.run_work(work)

    def try_send(self, value: object, ts: int | None = None) -> bool:
        """Like ``send_nowait`` but returns False instead of raising when the graph is full."""
        admission = self._admission
        ts = check_ts(ts, "Input.try_send")
        try:
            work = admission.accept(self._edge, to_packet(value, ts, True), wait=False)
        except WouldBlock:
            return False
        del value
        admission.run_work(work)
        return True

    def close(self) -> None:
        """No more packets on this port; downstream nodes close once they drain."""
        self._admission.close_input(self._edge)


@final
class Poller:
    """Pulls the packets of one graph output, in order (an independent subscriber).

    ``next(timeout)`` blocks until a packet arrives, the stream ends (``None``) or the timeout
    passes (``Timeout``): it never returns ``None`` while the port can still deliver.
    """

    __slots__ = ("_budget", "_queue", "_waits", "blocks", "capacity", "closed", "dropped", "edge", "last_read",
                 "last_reader", "name", "observe_bounds", "overflow", "readers")

    OVERFLOW_POLICIES = ("block", "drop_oldest", "drop_newest", "latest")

    def __init__(self, waits: Waits, budget: Budget, edge: Edge, observe_bounds: bool, capacity: int = 0,
                 overflow: str = "block") -> None:
        name = edge.name
        if overflow not in self.OVERFLOW_POLICIES:
            choices = list(self.OVERFLOW_POLICIES)
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
        self._waits = waits
        self._budget = budget
        self.edge = edge
        self.name = name
        self.observe_bounds = observe_bounds
        self.capacity = capacity
        self.overflow = overflow
        self.blocks = capacity > 0 and overflow == "block"
        """Lossless and bounded: producers wait (cooperatively) for the host to read."""
        self.dropped = 0
        self._queue: deque[Packet] = deque()
        self.closed = False
        # Who reads this poller: a blocked ``send`` waits (rather than calling the graph
        # deadlocked) while another thread drains a poller that holds the backlog.
        self.readers = 0
        """Threads inside ``next()`` right now (lock held to change)."""
        self.last_read = 0.0
        """``time.monotonic()`` of the last packet taken (0.0: never)."""
        self.last_reader = 0
        """``threading.get_ident()`` of the thread that took it."""

    # engine side (lock held)
    def push_many(self, packets: list[Packet]) -> None:
        """Append delivered packets, applying the overflow policy of a bounded poller.

        Queued packets (and their buffer bytes) count toward the graph's limits, like packets
        in node queues: a host that reads slowly makes ``send`` wait instead of growing memory.
        """
        q = self._queue
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
                        self.overflow, self.capacity, len(self._queue), self.dropped)

    def push_bound(self, ts: int) -> None:
        """Append an empty packet announcing timestamp bound ``ts``."""
        marker = Packet()
        marker._ts = ts
        self._queue.append(marker)
        self._budget.queued += 1

    def reset(self) -> None:
        """Forget everything (``Graph.reset``)."""
        self._queue.clear()
        self.closed = False
        self.dropped = 0

    # host side
    def try_next(self) -> Packet | None:
        """The next packet if one is queued, else ``None``; raises the graph error if failed."""
        return self._waits.try_next(self)

    def next(self, timeout: float | None = None) -> Packet | None:
        """Block for the next packet; ``None`` at the end of the stream.

        Runs delegated work on this thread while waiting. Raises ``Timeout`` when ``timeout``
        seconds pass, ``KernelError`` if the graph failed (after the packets queued before the
        failure), ``DeadlockError`` if the graph stalled.
        """
        timeout = check_timeout(timeout, "Poller.next")
        deadline = None if timeout is None else time.monotonic() + max(0.0, float(timeout))
        return self._waits.next(self, deadline, timeout)

    def __iter__(self) -> Iterator[Packet]:
        """Iterate with ``next()`` until the end of the stream."""
        while True:
            p = self.next()
            if p is None:
                return
            yield p

    def __len__(self) -> int:
        """Packets queued right now."""
        return len(self._queue)

