"""Send admission: a packet sent on a graph input enters only under the graph's watermark.

``accept`` admits a send while the budget (``limit_packets`` / ``limit_bytes``) and the
blocking pollers have room, else it waits — running delegated work on this thread meanwhile —
or raises (``WouldBlock``, ``Timeout``, or ``DeadlockError`` when nothing can ever make room).
``accept`` is a hot path: keep it free of extra calls.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Final

from .._state import GraphState
from .._timestamps import TS_UNSET, ts_name
from ..errors import ClosedError, DeadlockError, GraphCancelled, StateError, Timeout, UsageError, WouldBlock
from ._status import RUNNING

if TYPE_CHECKING:
    from ..packets import Packet
    from ._budget import Budget
    from ._delivery import Delivery
    from ._engine_common import Work
    from ._loop import Scheduler
    from ._nodes import Edge
    from ._pump import Pump
    from ._status import Status

READER_GRACE_S: Final = 1.0
"""How long a blocked send waits for a poller to be read before calling the graph deadlocked."""


def has_room(budget: Budget, edge: Edge) -> bool:
    """Whether a graph-input send on ``edge`` may deliver now (watermark, blocking pollers)."""
    if not budget.under():
        return False
    if edge.blocking:
        return all(len(p) < p.capacity for p in edge.blocking)
    return True


class Admission:
    """Admits graph-input sends; the host's way into the data path."""

    def __init__(self, status: Status, budget: Budget, delivery: Delivery, scheduler: Scheduler, pump: Pump,
                 edges: dict[str, Edge]) -> None:
        self.status = status
        self.budget = budget
        self.delivery = delivery
        self.scheduler = scheduler
        self.pump = pump
        self.edges = edges

    def accept(self, edge: Edge, packet: Packet, *, wait: bool = True, timeout: float | None = None) -> Work:
        """Queue one packet sent on a graph input and claim what it makes ready.

        Waits (running delegated work on this thread meanwhile) while the graph is full;
        with ``wait=False`` raises ``WouldBlock`` instead. Returns the work to hand to
        ``run_work`` once the caller dropped its own references to the value: a linear
        pipeline can then write into the sent array in place.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        since = 0.0  # when this send started to wait
        status = self.status
        budget = self.budget
        while True:
            with status.lock:
                if status.state != RUNNING or status.halted or edge.closed:
                    self._check_can_send(edge)  # raises the precise error
                ts = packet._ts
                last_sent = edge.last_sent
                if ts <= last_sent or ts == TS_UNSET:
                    _check_ts(edge, ts, last_sent)
                if (
                    (not budget.limit_packets or budget.queued < budget.limit_packets)
                    and (not budget.limit_bytes or budget.queued_bytes < budget.limit_bytes)
                    and not edge.blocking
                ) or has_room(budget, edge):
                    edge.last_sent = ts
                    packet._owned = False
                    self.delivery.flush_port(edge, [packet])
                    self.scheduler.settle_locked()
                    return self.scheduler.take_work()
                if not wait:
                    msg = f"graph input `{edge.name}` would block: {budget.fullness()}"
                    raise WouldBlock(msg)
            if not since:
                since = time.monotonic()
            self._wait_for_room(edge, deadline, since)

    def close_input(self, edge: Edge) -> None:
        """Close one graph input port (idempotent); downstream nodes close once they drain."""
        with self.status.lock:
            self.scheduler.closing.close_input(edge)
            subs, calls = self.scheduler.take_work()
        self.scheduler.dispatch(subs, calls)

    def run_work(self, work: Work) -> None:
        """Run what ``accept`` claimed (inline work runs on this thread)."""
        subs, calls = work  # unpacked, not `*work`: compiled, a star call is a generic call
        self.scheduler.dispatch(subs, calls)

    def _wait_for_room(self, edge: Edge, deadline: float | None, since: float) -> None:
        """One step of a blocked send (waiting since ``since``): pump delegated work, or wait
        for progress; raise ``DeadlockError`` when nothing can ever make room."""
        if self.pump.pump_step():
            return
        status = self.status
        with status.lock:
            if has_room(self.budget, edge) or status.halted:
                return
            if self.pump.idle():
                stall = self._stall_reason(since)
                if stall:
                    msg = f"graph input `{edge.name}` blocked and nothing can drain the graph: {stall}"
                    raise DeadlockError(msg)
            try:
                status.wait_change(deadline)
            except Timeout:
                msg = f"send on `{edge.name}` timed out waiting for room: {self.budget.fullness()}"
                raise Timeout(msg) from None

    def _stall_reason(self, since: float) -> str:
        """Why a send blocked on an idle graph can never get room ("" while it still may); lock held.

        With nothing running, only the host can make room, by reading a poller that holds
        packets. The send waits while another thread reads one (inside ``next()``, or took a
        packet within the last ``READER_GRACE_S``), and for that long after it began to wait
        (a reader thread may be starting). A backlog held only in node queues cannot drain.
        """
        now = time.monotonic()
        me = threading.get_ident()
        fullness = self.budget.fullness()
        holding = [p for e in self.edges.values() for p in e.pollers if len(p)]
        for poller in holding:
            if poller.readers or (poller.last_reader != me and now - poller.last_read < READER_GRACE_S):
                return ""
        if not holding:
            return f"{fullness}; read your pollers (or use bounded ones) or raise max_queued_packets"
        if now - since < READER_GRACE_S:
            return ""
        held = ", ".join(f"`{p.name}` ({len(p)} packets)" for p in holding)
        return (f"{fullness}, held by the poller(s) on output {held} that no other thread has read for "
                f"{now - since:.1f} s; read them from another thread while sending, bound them "
                "(add_poller(port, capacity=N, overflow=...)), or raise max_queued_packets (0 = unlimited)")

    def _check_can_send(self, edge: Edge) -> None:
        status = self.status
        state = status.state
        if state < RUNNING:
            msg = (f"cannot send on `{edge.name}`: send requires the graph to be RUNNING (current "
                   f"{GraphState(state).name}); call Graph.start() first")
            raise StateError(msg)
        # A failure or a cancel explains more than "closed": report it first.
        if status.cancelled:
            msg = "the graph was cancelled"
            raise GraphCancelled(msg)
        status.raise_if_failed()
        if state != RUNNING:
            msg = f"cannot send on `{edge.name}`: the graph's inputs are closed ({GraphState(state).name})"
            raise ClosedError(msg)
        if edge.closed:
            msg = f"graph input port `{edge.name}` is closed"
            raise ClosedError(msg)


def _check_ts(edge: Edge, ts: int, last_sent: int) -> None:
    """Raise for a missing or non-increasing timestamp on a graph input."""
    if ts == TS_UNSET:
        msg = f"packets on a graph input port must carry an explicit timestamp (port `{edge.name}`)"
        raise UsageError(msg)
    if last_sent != TS_UNSET:
        msg = (f"graph input port `{edge.name}` timestamps must be strictly increasing: "
               f"previous {ts_name(last_sent)}, this one {ts_name(ts)}")
        raise UsageError(msg)
