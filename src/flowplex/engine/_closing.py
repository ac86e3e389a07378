"""Closing and termination: when a node may close, what its close does, closing edges, TERMINATED.

Closing is its own protocol: a node closes once its forward inputs are closed and drained (a
source: once it called ``source_done``; any node: once the graph failed or was cancelled), its
``close`` flushes like a last invocation, and its output edges then close the downstream ports
in turn, until every node is closed and the graph is TERMINATED.

Once a graph has ended (terminated, however: normally, failed or cancelled; closed; reset), the
packets it still holds for work that can never run are released (``take_held``): the backlog
of node input queues and feedback registers, discarded blocked flushes and idle contexts'
inputs. That is what gives adopted arrays their writeability back. Packets already in poller
queues are not touched: a delivered packet is the host's, readable after the graph closed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._timestamps import TS_DONE
from ..kernels._context import PHASE_CLOSE, CloseReason
from ._status import DRAINING, RUNNING, TERMINATED

if TYPE_CHECKING:
    from ..kernels._context import Context
    from ._blocking import Blocking
    from ._budget import Budget
    from ._claims import Claims
    from ._delivery import Delivery
    from ._nodes import Edge, Node
    from ._status import Status


class Closing:
    """Closes nodes and edges and decides termination; lock held for every call."""

    def __init__(self, status: Status, budget: Budget, blocking: Blocking, claims: Claims, delivery: Delivery,
                 nodes: list[Node], graph_inputs: list[Edge]) -> None:
        self.status = status
        self.budget = budget
        self.blocking = blocking
        self.claims = claims
        self.delivery = delivery
        self.nodes = nodes
        self.graph_inputs = graph_inputs

    def try_close(self, node: Node) -> None:
        """Start closing ``node`` if it may: its close runs on the node's executor."""
        if not node.opened or node.close_started or node.in_flight or node.waiting or node.blocked:
            return
        status = self.status
        if not (status.error is not None or status.cancelled or node.may_close()):
            return
        node.close_started = True
        node.claimable = False
        status.busy += 1
        ctx = node.contexts.pop()
        ctx.reset_for(TS_DONE, PHASE_CLOSE)
        ctx.close_reason = (CloseReason.CANCELLED if status.cancelled
                            else CloseReason.ERROR if status.error is not None else CloseReason.NORMAL)
        self.claims.submit(node, ctx)

    def rescan(self, nodes: tuple[Node, ...] | list[Node]) -> None:
        """Claim what is ready and close what may close, for each of ``nodes``."""
        for node in nodes:
            self.claims.schedule(node)
            self.try_close(node)

    def try_close_all(self, nodes: tuple[Node, ...] | list[Node]) -> None:
        """``try_close`` each of ``nodes``."""
        for node in nodes:
            self.try_close(node)

    def closed(self, node: Node, ctx: Context, err: BaseException | None, text: str) -> None:
        """``node``'s close callback returned (``text``: its failure): flush, close its edges."""
        if text:
            for out in ctx.out_packets:
                out.clear()
            self.status.record_error(node, err, text)
            self.try_close_all(self.nodes)
        else:
            self.delivery.flush(node, ctx)
        ctx.close_reason = CloseReason.NORMAL
        node.contexts.append(ctx)
        node.closed = True
        if node.gate is not None:
            node.gate.cancel()  # a period still running holds nothing for a closed node
        self.status.busy -= 1
        for edge in node.out_edges:
            self.close_edge(edge)
        self.check_terminated()
        self.status.bump()

    def close_edge(self, edge: Edge) -> None:
        """No more packets on ``edge``: close consumer ports and pollers."""
        if edge.closed:
            return
        edge.closed = True
        for poller in edge.pollers:
            poller.closed = True
        for port in edge.consumers:
            port.closed = True
            if not port.is_back:
                port.bound = TS_DONE
                node = port.node
                node.closed_fwd += 1
                if node.closed_fwd == len(node.fwd):
                    node.closable = True
            self.claims.schedule(port.node)
            self.try_close(port.node)
        self.delivery.publish(edge, TS_DONE)

    def close_input(self, edge: Edge) -> None:
        """Close one graph input port (idempotent)."""
        status = self.status
        self.close_edge(edge)
        if status.state == RUNNING and all(e.closed for e in self.graph_inputs):
            status.state = DRAINING
        self.check_terminated()
        status.bump()

    def check_terminated(self) -> None:
        """TERMINATED once nothing runs, every node closed and inputs closed (or the graph halted)."""
        status = self.status
        if (
            status.state in (RUNNING, DRAINING)
            and status.busy == 0
            and all(n.closed for n in self.nodes)
            and (all(e.closed for e in self.graph_inputs) or status.error is not None or status.cancelled)
        ):
            status.state = TERMINATED

    def force_close(self) -> None:
        """After an error or cancel: close every idle node (running ones close when they end)."""
        if self.status.halted:
            self.blocking.drop_blocked()
        self.try_close_all(self.nodes)
        self.check_terminated()
        self.status.bump()

    def take_held(self) -> list[object]:
        """Take every packet the graph holds for work that will never run.

        Empties node input queues (counters adjusted), discards blocked or unflushed output
        and clears the inputs of idle contexts (running or submitted invocations keep theirs:
        they release them when they end). Only for a graph that has ended or is being reset:
        nothing may claim these packets any more. Returns them, for the caller to drop outside
        the lock (dropping the last handle of an adopted array restores its writeability).
        """
        held: list[object] = []
        for node in self.nodes:
            for port in node.inputs:
                q = port.queue
                if not q:
                    continue
                if port.is_back:  # feedback registers are not in the byte count
                    self.budget.add_uncounted(-len(q))
                else:
                    self.budget.take(list(q))
                held.extend(q)
                q.clear()
            for ctx in node.pending.values():
                node.contexts.append(ctx)
            node.pending.clear()
            if node.blocked:
                node.blocked = False
                self.blocking.blocked.discard(node)
            for ctx in node.contexts:
                _take_context(ctx, held)
        return held


def _take_context(ctx: Context, held: list[object]) -> None:
    """Move an idle context's staged output, inputs and batch into ``held``."""
    for staged in ctx.out_packets:
        if staged:
            held.extend(staged)
            staged.clear()
    inputs = ctx.in_packets
    for i in range(len(inputs)):
        if inputs[i] is not None:
            held.append(inputs[i])
            inputs[i] = None
    if ctx.batch is not None:
        held.append(ctx.batch)
        ctx.batch = None
