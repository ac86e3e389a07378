"""Delivery and bounds: a finished invocation's staged output goes to queues, pollers, observers.

``flush`` delivers port by port (or refuses, leaving a blocked flush, when a lossless consumer
is full); ``deliver`` fans packets out and advances the consumer ports' bounds (lm-flow's bound
propagation); ``advance`` moves a bound with no packet. Every consumer that may now fire is
claimed through ``Claims``; observer calls wait in this part's outbox (``take_calls``) to run
once the lock is released.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Final

from .._timestamps import TS_MAX, TS_MIN, TS_POST_STREAM, TS_PRE_STREAM, next_allowed
from ..kernels._context import PHASE_CLOSE
from ..packets import Packet
from ._engine_common import _is_power_of_two
from ._nodes import takes_at_once

if TYPE_CHECKING:
    from ..kernels._context import Context
    from ._blocking import Blocking
    from ._budget import Budget
    from ._claims import Claims
    from ._engine_common import Calls
    from ._nodes import Edge, InPort, Node
    from ._status import Status

log = logging.getLogger("flowplex.graph")

NO_CALLS: Final[Calls] = []
"""What ``take_calls`` returns when no observer is due: shared, never appended to."""


class Delivery:
    """Flushes staged output into the graph; lock held for every call."""

    def __init__(self, status: Status, budget: Budget, blocking: Blocking, claims: Claims) -> None:
        self.status = status
        self.budget = budget
        self.blocking = blocking
        self.claims = claims
        self.calls: Calls = []
        """Observer calls due, made by whoever takes them once the lock is released."""

    def take_calls(self) -> Calls:
        """The observer calls due, leaving the outbox empty."""
        calls = self.calls
        if not calls:
            return NO_CALLS
        self.calls = []
        return calls

    def flush(self, node: Node, ctx: Context) -> bool:
        """Deliver a finished invocation's staging, port by port.

        Returns False (and delivers nothing) when a lossless consumer has no room: the
        invocation then waits as the node's blocked flush and no worker waits with it.
        """
        status = self.status
        if node.limited and not status.halted and ctx.phase != PHASE_CLOSE and not self.blocking.fits(node, ctx):
            return False
        discard = status.error is not None or status.cancelled  # after fits: it may record an error
        bounds = ctx.bounds
        if bounds is not None:
            ctx.bounds = None
        if ctx.in_done is not None:
            ctx.in_done = None
        in_ts = ctx.ts
        for o, staged in enumerate(ctx.out_packets):
            edge = node.out_edges[o]
            if staged and not discard:
                node.packets_out += len(staged)
                self.flush_port(edge, staged)
                staged.clear()
            else:
                staged.clear()
                if bounds is not None and o in bounds:
                    b = bounds[o]
                elif TS_PRE_STREAM <= in_ts <= TS_POST_STREAM:
                    b = next_allowed(in_ts)
                else:
                    continue
                self.advance(edge, b)
        return True

    def flush_port(self, edge: Edge, packets: list[Packet]) -> None:
        """Deliver the packets one output port (or a graph input) sends on ``edge``.

        The point every delivered packet passes: a tap or a recorder attaches here, as one of
        the edge's observers. The one shortcut past it, ``Scheduler._hop_land``, lands a packet
        with ``land`` on an edge that has no subscriber at all (``Edge.solo``, ``sole_poller``):
        attaching one turns the shortcut off for that edge.
        """
        port = edge.solo
        if port is not None:
            self.deliver_solo(edge, port, packets)
        else:
            self.deliver(edge, packets)

    def land(self, edge: Edge, port: InPort, p: Packet, ts: int, b: int) -> Context | None:
        """Take one packet (timestamp ``ts``, bound ``b`` after it) into input ``port``.

        The bound, then the readiness: hand ``p`` to an idle consumer that takes it at once
        (its claimed call comes back, for the caller to run or submit) or queue it (budget,
        ``fixed_size`` overflow, peak) and claim what is ready (``Claims.schedule``).
        """
        if b > port.bound:
            port.bound = b
        consumer = port.node
        if not self.status.halted and takes_at_once(consumer, port):
            return self.claims.hand_over(consumer, port, p, ts)
        q = port.queue
        q.append(p)
        budget = self.budget
        budget.add_one(p)
        if port.fixed:
            self._drop_overflow(edge, port)
        if len(q) > port.peak:
            port.new_peak(edge.name, budget.soft_limit)
        self.claims.schedule(consumer)
        return None

    def land_many(self, edge: Edge, port: InPort, packets: list[Packet], b: int, nbytes: int) -> int:
        """``land`` for several packets (never handed over): queue, budget, overflow, peak, bound, readiness.

        Returns their byte count (``nbytes``, measured here when it is -1), for the next port of a fan-out.
        """
        q = port.queue
        q.extend(packets)
        budget = self.budget
        nbytes = budget.add_again(packets, nbytes)
        if port.fixed:
            self._drop_overflow(edge, port)
        if len(q) > port.peak:
            port.new_peak(edge.name, budget.soft_limit)
        if b > port.bound:
            port.bound = b
        self.claims.schedule(port.node)
        return nbytes

    def deliver_solo(self, edge: Edge, port: InPort, packets: list[Packet]) -> None:
        """``deliver`` for an edge with one plain consumer port and no subscribers."""
        last = packets[-1]._ts
        b = last + 1 if TS_MIN <= last < TS_MAX else next_allowed(last)
        if b > edge.published:
            edge.published = b
        if len(packets) == 1:
            claimed = self.land(edge, port, packets[0], last, b)
            if claimed is not None:
                self.claims.submit(port.node, claimed)
        else:
            self.land_many(edge, port, packets, b, -1)

    def deliver(self, edge: Edge, packets: list[Packet]) -> None:
        """Fan ``packets`` out to pollers, observers and consumer queues."""
        for poller in edge.pollers:
            poller.push_many(packets)
        for fn in edge.observers:
            for p in packets:
                self.calls.append((fn, p))
        last = packets[-1]._ts
        b = last + 1 if TS_MIN <= last < TS_MAX else next_allowed(last)
        single = len(packets) == 1
        budget = self.budget
        claims = self.claims
        nbytes = -1  # counted once, when a queue takes the packets
        for port in edge.consumers:
            if port.is_back:
                # A feedback register keeps only the newest value.
                q = port.queue
                if q:
                    port.overwritten += len(q)
                    budget.add_uncounted(-len(q))
                    q.clear()
                q.append(packets[-1])
                budget.add_uncounted(1)
                claims.schedule(port.node)
            elif single:
                claimed = self.land(edge, port, packets[0], last, b)
                if claimed is not None:
                    claims.submit(port.node, claimed)
            else:
                nbytes = self.land_many(edge, port, packets, b, nbytes)
        if b > edge.published:
            self.publish(edge, b)

    def _drop_overflow(self, edge: Edge, port: InPort) -> None:
        """``fixed_size``: keep the newest ``port.fixed`` packets, count the rest as dropped."""
        q = port.queue
        while len(q) > port.fixed:
            self.budget.take_one(q.popleft())
            edge.dropped += 1
            if _is_power_of_two(edge.dropped):
                log.warning("edge `%s` has dropped %d packets total due to the fixed_size policy "
                            "(capacity %d)", edge.name, edge.dropped, port.fixed)

    def advance(self, edge: Edge, b: int) -> None:
        """Propagate a bound with no packet (rule 3 of lm-flow's bound propagation)."""
        for port in edge.consumers:
            if not port.is_back and b > port.bound:
                port.bound = b
                self.claims.schedule(port.node)
        self.publish(edge, b)

    def publish(self, edge: Edge, b: int) -> None:
        """Tell the edge's bound subscribers (pollers, observers) that ``b`` is its new bound."""
        if b <= edge.published:
            return
        edge.published = b
        if edge.bound_pollers or edge.bound_observers:
            for poller in edge.bound_pollers:
                poller.push_bound(b)
            for fn in edge.bound_observers:
                marker = Packet()
                marker._ts = b
                self.calls.append((fn, marker))
