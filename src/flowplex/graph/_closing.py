"""Closing and termination: when a node may close, running its ``close``, closing edges, TERMINATED.

Split from ``_engine`` because closing is its own protocol: a node closes once its forward
inputs are closed and drained (a source: once it called ``source_done``; any node: once the
graph failed or was cancelled), its ``close`` flushes like a last invocation, and its output
edges then close the downstream ports in turn, until every node is closed and the graph is
TERMINATED. ``ClosingMixin`` is one layer of ``Engine``
(see ``_engine_common.EngineState``), on the engine's own state and lock.

Once a graph has ended (terminated, however: normally, failed or cancelled; closed; reset), the
packets it still holds for work that can never run are released (``release_held``): the backlog
of node input queues and feedback registers, discarded blocked flushes and idle contexts'
inputs. That is what gives adopted arrays their writeability back. Packets already in poller
queues are not touched: a delivered packet is the host's, readable after the graph closed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._timestamps import TS_DONE
from ..kernels._context import PHASE_CLOSE, CloseReason
from ._engine_common import _buffer_bytes, _describe, _output_type_error
from ._lifecycle import DRAINING, RUNNING, TERMINATED, LifecycleMixin

if TYPE_CHECKING:
    from ..kernels._context import Context
    from ._engine_common import Calls, Submission
    from ._nodes import Edge, Node


class ClosingMixin(LifecycleMixin):
    """Node closing, edge closing and termination of ``Engine`` (a layer of it)."""

    def _try_close(self, node: Node, subs: list[Submission]) -> None:
        """Start closing ``node`` if it may; lock held. Closing runs on the node's executor."""
        if not node.opened or node.close_started or node.in_flight or node.waiting or node.blocked:
            return
        if not (self.error is not None or self.cancelled or node.may_close()):
            return
        node.close_started = True
        node.claimable = False
        self.busy += 1
        ctx = node.contexts.pop()
        ctx._reset_for(TS_DONE, PHASE_CLOSE)
        ctx.close_reason = (CloseReason.CANCELLED if self.cancelled
                            else CloseReason.ERROR if self.error is not None else CloseReason.NORMAL)
        subs.append((node.executor, self.run, ctx))

    def _run_close(self, node: Node, ctx: Context) -> None:
        text = ""
        err: Exception | None = None
        if self.timed:
            err, text = self._timed_call(node, ctx, node.kernel.close)
        else:
            try:
                node.kernel.close(ctx)
            except Exception as exc:
                err = exc
                text = _describe(exc, ctx)
        if not text and node.typed_outputs:
            text = _output_type_error(node, ctx)
        subs: list[Submission] = []
        calls: Calls = []
        with self.lock:
            if text:
                for out in ctx._out:
                    out.clear()
                self.record_error(node, err, text)
                for other in self.nodes:
                    self._try_close(other, subs)
            else:
                self._flush(node, ctx, subs, calls)
            ctx.close_reason = CloseReason.NORMAL
            node.contexts.append(ctx)
            node.closed = True
            self.busy -= 1
            for edge in node.out_edges:
                self._close_edge(edge, subs, calls)
            self._check_terminated()
            self._bump()
        self._dispatch(subs, calls)

    def _close_edge(self, edge: Edge, subs: list[Submission], calls: Calls) -> None:
        """No more packets on ``edge``: close consumer ports and pollers; lock held."""
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
            self.schedule(port.node, subs)
            self._try_close(port.node, subs)
        self._publish(edge, TS_DONE, calls)

    def close_graph_input(self, edge: Edge) -> None:
        """Close one graph input port (idempotent)."""
        subs: list[Submission] = []
        calls: Calls = []
        with self.lock:
            self._close_edge(edge, subs, calls)
            if self.state == RUNNING and all(e.closed for e in self.graph_inputs):
                self.state = DRAINING
            self._check_terminated()
            self._bump()
        self._dispatch(subs, calls)

    def _check_terminated(self) -> None:
        if (
            self.state in (RUNNING, DRAINING)
            and self.busy == 0
            and all(n.closed for n in self.nodes)
            and (all(e.closed for e in self.graph_inputs) or self.error is not None or self.cancelled)
        ):
            self.state = TERMINATED

    def force_close_all(self) -> None:
        """After an error or cancel: close every idle node (running ones close when they end)."""
        subs: list[Submission] = []
        with self.lock:
            if self.halted:
                self._drop_blocked()
            for node in self.nodes:
                self._try_close(node, subs)
            self._check_terminated()
            self._bump()
        self._dispatch(subs, [])

    def take_held(self) -> list[object]:
        """Take every packet the graph holds for work that will never run; lock held.

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
                self.queued -= len(q)
                if self.limit_bytes and not port.is_back:  # feedback registers are not in the byte count
                    self.queued_bytes -= _buffer_bytes(list(q))
                held.extend(q)
                q.clear()
            for ctx in node.pending.values():
                node.contexts.append(ctx)
            node.pending.clear()
            if node.blocked:
                node.blocked = False
                self.blocked_nodes.discard(node)
            for ctx in node.contexts:
                for staged in ctx._out:
                    if staged:
                        held.extend(staged)
                        staged.clear()
                inputs = ctx._in
                for i in range(len(inputs)):
                    if inputs[i] is not None:
                        held.append(inputs[i])
                        inputs[i] = None
                if ctx._batch is not None:
                    held.append(ctx._batch)
                    ctx._batch = None
        return held

    def release_held(self) -> None:
        """``take_held`` under the lock, then drop the packets outside it (see the module doc)."""
        with self.lock:
            held = self.take_held()
        del held
