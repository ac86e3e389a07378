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
from ._engine_common import _buffer_bytes, _is_power_of_two
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
                port = edge.solo
                if port is not None:
                    self.deliver_solo(edge, port, staged)
                else:
                    self.deliver(edge, staged)
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

    def deliver_solo(self, edge: Edge, port: InPort, packets: list[Packet]) -> None:
        """``deliver`` for an edge with one plain consumer port and no subscribers."""
        n = len(packets)
        q = port.queue
        last = packets[-1]._ts
        b = last + 1 if TS_MIN <= last < TS_MAX else next_allowed(last)
        if b > port.bound:
            port.bound = b
        if b > edge.published:
            edge.published = b
        node = port.node
        claims = self.claims
        if n == 1 and not self.status.halted and takes_at_once(node, port):
            # ``schedule`` would pop the packet at once: hand it to the consumer directly.
            claims.out.append((node.executor, claims.task, claims.hand_over(node, port, packets[0], last)))
            return
        q.extend(packets)
        self.budget.add(packets)
        if len(q) > port.peak:
            port.new_peak(edge.name, self.budget.soft_limit)
        claims.schedule(node)

    def deliver(self, edge: Edge, packets: list[Packet]) -> None:
        """Fan ``packets`` out to pollers, observers and consumer queues."""
        for poller in edge.pollers:
            poller.push_many(packets)
        for fn in edge.observers:
            for p in packets:
                self.calls.append((fn, p))
        last = packets[-1]._ts
        b = last + 1 if TS_MIN <= last < TS_MAX else next_allowed(last)
        n = len(packets)
        budget = self.budget
        claims = self.claims
        nbytes = -1  # counted once, when a queue takes the packets
        for port in edge.consumers:
            q = port.queue
            node = port.node
            if n == 1 and not self.status.halted and takes_at_once(node, port):
                # ``schedule`` would pop the packet at once: hand it over (see ``Claims.hand_over``).
                if b > port.bound:
                    port.bound = b
                claims.out.append((node.executor, claims.task, claims.hand_over(node, port, packets[0], last)))
                continue
            if port.is_back:
                # A feedback register keeps only the newest value.
                if q:
                    port.overwritten += len(q)
                    budget.queued -= len(q)
                    q.clear()
                q.append(packets[-1])
                budget.queued += 1
            else:
                q.extend(packets)
                budget.queued += n
                if budget.limit_bytes:
                    if nbytes < 0:
                        nbytes = _buffer_bytes(packets)
                    budget.queued_bytes += nbytes
                if port.fixed:
                    self._drop_overflow(edge, port)
                if len(q) > port.peak:
                    port.new_peak(edge.name, budget.soft_limit)
                if b > port.bound:
                    port.bound = b
            claims.schedule(port.node)
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
