"""Backpressure: graph limits, send admission, blocked flushes and their retry, queue peaks.

Split from ``_engine`` because it is one mechanism seen from both ends. At a graph input,
``accept`` admits a send only under the global watermark (``limit_packets`` /
``limit_bytes``) and while blocking pollers have room, else it waits or raises. Inside the
graph, a finished invocation whose lossless consumer is full becomes its node's *blocked
flush* (``_fits`` / ``_block``): no worker waits with it, and when a consumer makes room
(``_retry_later``, ``poller_popped``) ``_settle`` flushes it and claims again. Queue peaks warn
at the soft limit. ``BackpressureMixin`` is one layer of ``Engine`` (see
``_engine_common.EngineState``), on the engine's own state and lock. ``accept`` is a hot path:
keep it free of extra calls.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING, Final

from .._state import GraphState
from .._timestamps import TS_UNSET, ts_name
from ..errors import ClosedError, DeadlockError, GraphCancelled, StateError, Timeout, UsageError, WouldBlock
from ._closing import ClosingMixin
from ._engine_common import _is_power_of_two
from ._lifecycle import RUNNING

if TYPE_CHECKING:
    from ..kernels._context import Context
    from ..packets import Packet
    from ._engine_common import Calls, Submission, Work
    from ._nodes import Edge, InPort, Node

log = logging.getLogger("flowplex.graph")

READER_GRACE_S: Final = 1.0
"""How long a blocked send waits for a poller to be read before calling the graph deadlocked."""


class BackpressureMixin(ClosingMixin):
    """Limits, admission and blocked flushes of ``Engine`` (a layer of it)."""

    # -- blocked flushes ------------------------------------------------------------------------

    def _retry_later(self, port: InPort) -> None:
        """A capacity-limited port made room: its producer's blocked flush may go on."""
        edge = port.edge
        producer = edge.producer if edge is not None else None
        if producer is not None and producer.blocked:
            self._retry.append(producer)

    def _fits(self, node: Node, ctx: Context) -> bool:
        """Whether every lossless consumer of ``ctx``'s staging has room; lock held.

        A batch larger than a consumer's whole capacity can never fit: that is a graph error.
        """
        for o, staged in enumerate(ctx._out):
            if not staged:
                continue
            n = len(staged)
            edge = node.out_edges[o]
            for port in edge.consumers:
                cap = port.capacity
                if cap and len(port.queue) + n > cap:
                    if n > cap:
                        self.record_error(node, None, (
                            f"node `{node.name}` emits a batch of {n} packets to edge `{edge.name}`, exceeding "
                            f"consumer `{port.node.name}` input port `{port.name}` effective packet capacity {cap}; "
                            "set a larger input_queues capacity"), ctx._ts)
                        return True  # flushed as discarded: the graph failed
                    return self._block(node, f"consumer `{port.node.name}` input `{port.name}` (capacity={cap}, "
                                             f"queued={len(port.queue)}, incoming={n})")
            for poller in edge.pollers:
                if poller.blocks and len(poller) + n > poller.capacity:
                    return self._block(node, f"poller on output port `{edge.name}` (capacity={poller.capacity})")
        return True

    def _block(self, node: Node, where: str) -> bool:
        node.blocked = True
        node.blocked_since = time.monotonic()
        node.block_events += 1
        self.blocked_nodes.add(node)
        if _is_power_of_two(node.block_events):
            log.warning("internal backpressure #%d: producer `%s` paused by %s; the worker was released and "
                        "will resume after dequeue", node.block_events, node.name, where)
        return False

    def _flush_pending(self, node: Node, subs: list[Submission], calls: Calls) -> None:
        """Flush finished invocations strictly in claim order, stopping at a blocked one."""
        pending = node.pending
        while node.next_flush in pending:
            ctx = pending[node.next_flush]
            if not self._flush(node, ctx, subs, calls):
                return
            del pending[node.next_flush]
            node.contexts.append(ctx)
            node.next_flush += 1
        if node.blocked:
            node.blocked = False
            self.blocked_nodes.discard(node)
            log.info("internal backpressure cleared: producer `%s` resumed after %.0f us", node.name,
                     (time.monotonic() - node.blocked_since) * 1e6)

    def _settle(self, subs: list[Submission], calls: Calls) -> None:
        """Retry blocked flushes whose consumers made room; lock held."""
        retry = self._retry
        while retry:
            node = retry.pop()
            if not node.blocked:
                continue
            self._flush_pending(node, subs, calls)
            if not node.blocked:
                self.schedule(node, subs)
                self._try_close(node, subs)

    def _drop_blocked(self) -> None:
        """After an error or cancel: discard blocked flushes so their nodes can close."""
        for node in list(self.blocked_nodes):
            for ctx in node.pending.values():
                for staged in ctx._out:
                    staged.clear()
                node.contexts.append(ctx)
            node.pending.clear()
            node.blocked = False
        self.blocked_nodes.clear()

    def poller_popped(self, name: str) -> None:
        """A blocking poller made room: wake senders and retry its producer; lock held."""
        edge = self.edges[name]
        producer = edge.producer
        if producer is not None and producer.blocked:
            self._retry.append(producer)
        self._bump()

    def has_retry(self) -> bool:
        """Whether blocked flushes wait to be retried (a cheap unlocked peek)."""
        return bool(self._retry)

    def settle(self) -> None:
        """Retry blocked flushes now, then run what they made ready (outside the lock)."""
        subs: list[Submission] = []
        calls: Calls = []
        with self.lock:
            self._settle(subs, calls)
            self._bump()
        self._dispatch(subs, calls)

    def has_room(self, edge: Edge) -> bool:
        """Whether a graph-input send may deliver now (watermark, blocking pollers); lock held."""
        if self.limit_packets and self.queued >= self.limit_packets:
            return False
        if self.limit_bytes and self.queued_bytes >= self.limit_bytes:
            return False
        if edge.blocking:
            return all(len(p) < p.capacity for p in edge.blocking)
        return True

    # -- queue peaks ------------------------------------------------------------------------------

    def _new_peak(self, edge: Edge, port: InPort) -> None:
        """Record a queue's new peak; warn at the soft limit, then at each doubling of it."""
        depth = len(port.queue)
        port.peak = depth
        limit = self.soft_limit
        if limit and depth > max(port.warn_at, limit):
            port.warn_at = max(port.warn_at, limit) * 2
            log.warning("edge `%s` has %d packets backlogged at `%s.%s` (soft limit %d)", edge.name, depth,
                        port.node.name, port.name, limit)

    # -- send admission ---------------------------------------------------------------------------

    def accept(self, edge: Edge, packet: Packet, *, wait: bool = True, timeout: float | None = None) -> Work:
        """Queue one packet sent on a graph input and claim what it makes ready.

        Waits (running delegated work on this thread meanwhile) while the graph is full;
        with ``wait=False`` raises ``WouldBlock`` instead. Returns the work to hand to
        ``run_work`` once the caller dropped its own references to the value: a linear
        pipeline can then write into the sent array in place.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        since = 0.0  # when this send started to wait
        subs: list[Submission] = []
        calls: Calls = []
        while True:
            with self.lock:
                if self.state != RUNNING or self.halted or edge.closed:
                    self._check_can_send(edge)  # raises the precise error
                ts = packet._ts
                last_sent = edge.last_sent
                if ts <= last_sent or ts == TS_UNSET:
                    if ts == TS_UNSET:
                        msg = f"packets on a graph input port must carry an explicit timestamp (port `{edge.name}`)"
                        raise UsageError(msg)
                    if last_sent != TS_UNSET:
                        msg = (f"graph input port `{edge.name}` timestamps must be strictly increasing: "
                               f"previous {ts_name(last_sent)}, this one {ts_name(ts)}")
                        raise UsageError(msg)
                if (
                    (not self.limit_packets or self.queued < self.limit_packets)
                    and (not self.limit_bytes or self.queued_bytes < self.limit_bytes)
                    and not edge.blocking
                ) or self.has_room(edge):
                    edge.last_sent = ts
                    packet._owned = False
                    port = edge.solo
                    if port is not None:
                        self._deliver_solo(edge, port, [packet], subs)
                    else:
                        self._deliver(edge, [packet], subs, calls)
                    if self._retry:
                        self._settle(subs, calls)
                    return subs, calls
                if not wait:
                    msg = f"graph input `{edge.name}` would block: {self._fullness()}"
                    raise WouldBlock(msg)
            if not since:
                since = time.monotonic()
            self._wait_for_room(edge, deadline, since)

    def _fullness(self) -> str:
        limit = f"limit={self.limit_packets}" if self.limit_packets else "no packet limit"
        extra = f", {self.queued_bytes} buffer bytes (limit={self.limit_bytes})" if self.limit_bytes else ""
        return f"{self.queued} packets queued ({limit}){extra}"

    def _wait_for_room(self, edge: Edge, deadline: float | None, since: float) -> None:
        """One step of a blocked send (waiting since ``since``): pump delegated work, or wait
        for progress; raise ``DeadlockError`` when nothing can ever make room."""
        if self.pump_step():
            return
        with self.lock:
            if self.has_room(edge) or self.halted:
                return
            if self.idle():
                stall = self._stall_reason(since)
                if stall:
                    msg = f"graph input `{edge.name}` blocked and nothing can drain the graph: {stall}"
                    raise DeadlockError(msg)
            try:
                self.wait_change(deadline)
            except Timeout:
                msg = f"send on `{edge.name}` timed out waiting for room: {self._fullness()}"
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
        holding = [p for e in self.edges.values() for p in e.pollers if len(p)]
        for poller in holding:
            if poller.readers or (poller.last_reader != me and now - poller.last_read < READER_GRACE_S):
                return ""
        if not holding:
            return f"{self._fullness()}; read your pollers (or use bounded ones) or raise max_queued_packets"
        if now - since < READER_GRACE_S:
            return ""
        held = ", ".join(f"`{p.name}` ({len(p)} packets)" for p in holding)
        return (f"{self._fullness()}, held by the poller(s) on output {held} that no other thread has read for "
                f"{now - since:.1f} s; read them from another thread while sending, bound them "
                "(add_poller(port, capacity=N, overflow=...)), or raise max_queued_packets (0 = unlimited)")

    def run_work(self, work: Work) -> None:
        """Run what ``accept`` claimed (inline work runs on this thread)."""
        subs, calls = work  # unpacked, not `*work`: compiled, a star call is a generic call
        self._dispatch(subs, calls)

    def _check_can_send(self, edge: Edge) -> None:
        state = self.state
        if state < RUNNING:
            msg = (f"cannot send on `{edge.name}`: send requires the graph to be RUNNING (current "
                   f"{GraphState(state).name}); call Graph.start() first")
            raise StateError(msg)
        # A failure or a cancel explains more than "closed": report it first.
        if self.cancelled:
            msg = "the graph was cancelled"
            raise GraphCancelled(msg)
        self.raise_if_failed()
        if state != RUNNING:
            msg = f"cannot send on `{edge.name}`: the graph's inputs are closed ({GraphState(state).name})"
            raise ClosedError(msg)
        if edge.closed:
            msg = f"graph input port `{edge.name}` is closed"
            raise ClosedError(msg)
