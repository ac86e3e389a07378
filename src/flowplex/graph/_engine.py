"""The scheduler core: claim → run → flush → deliver → reschedule, and source pacing.

One lock guards every queue, bound and counter of a graph. The rule (httpcore's pool): decide
under the lock, act outside it — kernels, observers and executor submissions never run while
the lock is held. ``_claim`` pops inputs at claim time, so two claims never take the same
timestamp, and ``_finish`` flushes staged output in claim order.

``Engine`` keeps the per-packet data path here, hot paths included (``schedule``, ``_run_hop``,
``_deliver_solo``, ``_hand_over``). The rest of the scheduler lives in base classes, one concern
per module, each a subclass of the next, all on the same state and lock:

- ``_backpressure.BackpressureMixin``: limits, send admission (``accept``), blocked flushes;
- ``_closing.ClosingMixin``: closing nodes and edges, termination;
- ``_lifecycle.LifecycleMixin``: states, the first error, waits, pause, cancel, stall errors;
- ``_engine_common.EngineState``: the state they share, the work tuples, failure-text helpers.

Names that moved out (the states, ``Submission``, ``Work``, ``WAIT_SLICE_S``) are re-exported
here (``X as X``), so ``from ._engine import RUNNING, Engine`` keeps working.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from .._timestamps import TS_MAX, TS_MIN, TS_POST_STREAM, TS_PRE_STREAM, next_allowed
from ..errors import KernelError
from ..kernels._context import PHASE_CLOSE, PHASE_PROCESS, Context
from ..packets import Packet, _thread_cow_counts, type_name
from ._backpressure import BackpressureMixin
from ._engine_common import _BUFFER, _buffer_bytes, _describe, _is_power_of_two, _output_type_error
from ._engine_common import Submission as Submission
from ._engine_common import Work as Work
from ._lifecycle import CREATED as CREATED
from ._lifecycle import DRAINING as DRAINING
from ._lifecycle import INITIALIZED as INITIALIZED
from ._lifecycle import RUNNING as RUNNING
from ._lifecycle import TERMINATED as TERMINATED
from ._lifecycle import WAIT_SLICE_S as WAIT_SLICE_S
from ._nodes import (
    BATCH,
    SYNC,
    SYNC_SET,
    Edge,
    InPort,
    Node,
    batch_plan,
    ready_ts,
    sync_set_group,
    sync_ts,
    takes_at_once,
)
from ._timers import Timers

if TYPE_CHECKING:
    from ..executors import Executor
    from ._engine_common import Calls
    from ._io import Poller

log = logging.getLogger("flowplex.graph")


class Engine(BackpressureMixin):
    """Scheduling state and algorithms of one graph (the public facade is ``Graph``)."""

    def __init__(self, nodes: list[Node], edges: dict[str, Edge], graph_inputs: list[str],
                 executors: list[Executor]) -> None:
        self.lock = threading.Lock()
        self.changed = threading.Condition(self.lock)
        self.nodes = nodes
        self.edges = edges
        self.graph_inputs = [edges[name] for name in graph_inputs]
        self.executors = executors
        self.inboxes = [box for box in (ex.inbox() for ex in executors) if box is not None]
        """The FIFOs host threads drain (``pump``): one per executor that runs no task itself."""
        self._pump_gate = threading.Lock()
        self._pump_cursor = 0
        self.state = INITIALIZED
        self.error: KernelError | None = None
        self.error_text = ""
        self.cancelled = False
        self.paused = False
        self.halted = False
        """``error or cancelled or paused``: no new claims (one check on the hot path)."""
        self.waiters = 0
        """Host threads inside ``wait_change``; progress notifies only when some wait."""
        self._run = self.run
        self.stats_level = "basic"
        self.started_ns = 0
        """``perf_counter_ns`` at ``Graph.start`` (0 before): the diagnostics window origin."""
        self.timed = False
        """Measure every callback: stats ``full``, a tracer or the watchdog is on."""
        self.watchdog_ns = 0
        self.tracer: Callable[[str, str, int, int, int], None] | None = None
        """``fn(node, callback, ts, start_ns, duration_ns)`` after each measured callback."""
        self.busy = 0
        """Claimed-but-unfinished invocations, pending wakes and running closes."""
        self.queued = 0
        """Packets waiting in node input queues and poller queues."""
        self.queued_bytes = 0
        """Buffer bytes in node input and poller queues (tracked only while ``limit_bytes`` is set)."""
        self.limit_packets = 0
        """Global watermark checked by graph-input sends; 0 = unlimited."""
        self.limit_bytes = 0
        self.soft_limit = 100
        self.blocked_nodes: set[Node] = set()
        self._retry: list[Node] = []
        self.wakeup: Callable[[], None] | None = None
        self._timers: Timers | None = None
        for ex in executors:
            ex.set_on_submit(self._on_delegated)

    # -- claiming -------------------------------------------------------------------------------

    def schedule(self, node: Node, out: list[Submission]) -> None:
        """Claim as many invocations of ``node`` as are ready; caller holds the lock."""
        if self.halted or not node.claimable or node.blocked:
            return
        port = node.fast1
        if port is not None:
            # Fast path (most nodes): one forward input, single-packet policy, one invocation
            # at a time. Same effect as ``_claim``, without the general bookkeeping.
            q = port.queue
            if node.in_flight or not q:
                return
            p = q.popleft()
            self.queued -= 1
            if p._tid == _BUFFER and self.limit_bytes:
                self.queued_bytes -= p._value.nbytes()  # type: ignore[attr-defined]
            ts = p._ts
            ctx = node.contexts.pop()
            ctx._ts = ts
            ctx._phase = PHASE_PROCESS
            ctx._in[0] = p
            b = ts + 1 if TS_MIN <= ts < TS_MAX else next_allowed(ts)
            if b > port.bound:
                port.bound = b
            if port.closed and not q:
                ctx._done = [True]
            node.packets_in += 1
            ctx.seq = node.seq
            node.seq += 1
            node.in_flight = 1
            self.busy += 1
            if port.capacity and self.blocked_nodes:
                self._retry_later(port)
            out.append((node.executor, self._run, ctx))
            return
        run = self._run
        # Finished-but-unflushed invocations still hold their contexts (claim-order flushing).
        while node.in_flight + len(node.pending) < node.max_in_flight:
            claimed = self._claim(node)
            if claimed is None:
                return
            out.append((node.executor, run, claimed))

    def _claim(self, node: Node) -> Context | None:
        """Pop the inputs of one invocation into a free context ("pop at claim")."""
        port = node.fast_port
        if port is not None:
            # Fast path: one forward input, single-packet policy (most nodes).
            q = port.queue
            if not q:
                return None
            p = q.popleft()
            self.queued -= 1
            if self.limit_bytes and p._tid == _BUFFER:
                self.queued_bytes -= p._value.nbytes()  # type: ignore[attr-defined]
            ts = p._ts
            ctx = node.contexts.pop()
            ctx._ts = ts
            ctx._phase = PHASE_PROCESS
            ctx._in[port.index] = p
            b = ts + 1 if TS_MIN <= ts < TS_MAX else next_allowed(ts)
            if b > port.bound:
                port.bound = b
            if port.closed and not q:
                ctx._done = [False] * len(node.inputs)
                ctx._done[port.index] = True
            node.packets_in += 1
            if port.capacity and self.blocked_nodes:
                self._retry_later(port)
        elif node.is_source:
            if node.source_done or node.waiting:
                return None
            ctx = node.contexts.pop()
            ctx._ts = node.seq
            ctx._phase = PHASE_PROCESS
        else:
            general = self._claim_general(node)
            if general is None:
                return None
            ctx = general
        ctx.seq = node.seq
        node.seq += 1
        node.in_flight += 1
        self.busy += 1
        return ctx

    def _claim_general(self, node: Node) -> Context | None:
        if node.policy == BATCH:
            plan = batch_plan(node)
            if plan is None:
                return None
            counts, ts = plan
            ctx = node.contexts.pop()
            ctx._ts = ts
            ctx._phase = PHASE_PROCESS
            batch: list[list[Packet]] = [[] for _ in node.inputs]
            for port, count in zip(node.fwd, counts, strict=True):
                items = [port.queue.popleft() for _ in range(count)]
                self._unqueue(items)
                batch[port.index] = items
                ctx._in[port.index] = items[0] if items else None
                if items:
                    b = next_allowed(items[-1]._ts)
                    if b > port.bound:
                        port.bound = b
                node.packets_in += count
            ctx._batch = batch
        else:
            # `sync` (joins) is the common case here: ask its rule directly.
            found = sync_ts(node.fwd) if node.policy == SYNC else ready_ts(node)
            if found is None:
                return None
            ts = found
            ports = sync_set_group(node, ts) if node.policy == SYNC_SET else node.fwd
            ctx = node.contexts.pop()
            ctx._ts = ts
            ctx._phase = PHASE_PROCESS
            inputs = ctx._in
            for p in node.fwd:
                inputs[p.index] = None
            b = next_allowed(ts)
            for port in ports:
                q = port.queue
                if q and q[0]._ts == ts:
                    popped = q.popleft()
                    self.queued -= 1
                    if self.limit_bytes and popped._tid == _BUFFER:
                        self.queued_bytes -= popped._value.nbytes()  # type: ignore[attr-defined]
                    inputs[port.index] = popped
                    node.packets_in += 1
                if b > port.bound:
                    port.bound = b
        for port in node.backs:
            if port.queue:
                register = port.queue.popleft()
                ctx._in[port.index] = register
                self.queued -= 1
                if ctx._batch is not None:
                    ctx._batch[port.index] = [register]  # read once per batch, like lm-flow
            else:
                ctx._in[port.index] = None
        if self.blocked_nodes:
            for port in node.fwd:
                if port.capacity:
                    self._retry_later(port)
        for p in node.inputs:
            if p.closed:
                ctx._done = [p.closed and not p.queue for p in node.inputs]
                break
        return ctx

    def _unqueue(self, packets: tuple[Packet, ...] | list[Packet]) -> None:
        """Account packets leaving node input queues; lock held."""
        self.queued -= len(packets)
        if self.limit_bytes:
            self.queued_bytes -= _buffer_bytes(packets)
    # -- running ----------------------------------------------------------------------------------

    def run(self, arg: object) -> None:
        """Executor entry point: run one claimed invocation or a close, then finish it."""
        ctx: Context = arg  # type: ignore[assignment]
        node: Node = ctx._owner  # type: ignore[assignment]
        if ctx._phase == PHASE_CLOSE:
            self._run_close(node, ctx)
            return
        if node.hop and not self.timed:
            self._run_hop(node, ctx)
            return
        err: BaseException | None = None
        if node.rate_period:
            # `rate` spaces the *starts* of process calls: stamp when it really starts.
            node.last_start = time.monotonic()
        text = _input_type_error(node, ctx) if node.typed_inputs else ""
        if not text:
            if self.timed:
                err, text = self._timed_call(node, ctx, node.kernel.process)
            else:
                try:
                    node.kernel.process(ctx)
                except Exception as exc:
                    err = exc
                    text = _describe(exc, ctx)
                except BaseException:
                    self._abandon(node, ctx)
                    raise
        _release_inputs(ctx)
        if ctx._batch is not None:
            ctx._batch = None
        if node.typed_outputs and not text:
            text = _output_type_error(node, ctx)
        self._finish(node, ctx, err, text)

    def _timed_call(self, node: Node, ctx: Context, fn: Callable[[Context], None]) -> tuple[Exception | None, str]:
        """Run a kernel callback measuring it (stats ``full``, tracing, watchdog)."""
        err: Exception | None = None
        text = ""
        copies_before = _thread_cow_counts()[0]
        start = time.perf_counter_ns()
        node.running_since = start
        try:
            fn(ctx)
        except Exception as exc:
            err = exc
            text = _describe(exc, ctx)
        except BaseException:
            node.running_since = 0
            if fn == node.kernel.process:
                self._abandon(node, ctx)
            raise
        end = time.perf_counter_ns()
        node.running_since = 0
        if ctx._phase == PHASE_PROCESS:  # node stats time `process` only (lm-flow's definition)
            node.record_time(end - start)
            node.copies += _thread_cow_counts()[0] - copies_before
        if self.watchdog_ns and end - start > self.watchdog_ns:
            log.warning("node `%s`: one %s took %.1f ms, exceeding watchdog %d ms", node.name,
                        getattr(fn, "__name__", "callback").capitalize(), (end - start) / 1e6,
                        self.watchdog_ns // 1_000_000)
        tracer = self.tracer
        if tracer is not None and ctx._phase == PHASE_PROCESS:
            tracer(node.name, getattr(fn, "__name__", "process"), ctx._ts, start, end - start)
        return err, text

    def _abandon(self, node: Node, ctx: Context) -> None:
        """A BaseException (Ctrl-C) escaped a kernel: cancel the graph, keep counts straight."""
        for out in ctx._out:
            out.clear()
        with self.lock:
            node.in_flight -= 1
            self.busy -= 1
            node.contexts.append(ctx)
        self.cancel()

    def _finish(self, node: Node, ctx: Context, err: BaseException | None, text: str) -> None:
        subs: list[Submission] = []
        calls: Calls = []
        with self.lock:
            if text:
                self._fail_invocation(node, ctx, err, text, subs)
            else:
                node.processed += 1
            node.in_flight -= 1
            self.busy -= 1
            if node.is_source:
                if ctx._source_done:
                    node.source_done = True
                    node.closable = True
                    ctx._source_done = False
                else:
                    self._pace_source(node, ctx, subs)
                ctx._yield = None
            if node.max_in_flight == 1 and not node.blocked:
                if self._flush(node, ctx, subs, calls):
                    node.next_flush = ctx.seq + 1
                    node.contexts.append(ctx)
                else:
                    node.pending[ctx.seq] = ctx
            else:
                # Flush strictly in claim order so downstream timestamps stay monotonic.
                node.pending[ctx.seq] = ctx
                if not node.blocked:
                    self._flush_pending(node, subs, calls)
            if self._retry:
                self._settle(subs, calls)
            self.schedule(node, subs)
            if node.closable or self.halted:
                self._try_close(node, subs)
            if self.waiters:
                self.changed.notify_all()
        wake = self.wakeup
        if wake is not None:
            wake()
        if calls:
            self.call_observers(calls)
        for executor, task, arg in subs:
            executor.submit(task, arg)

    def _run_hop(self, node: Node, ctx: Context) -> None:
        """``run`` for chain links and sinks (``node.hop``): the common case, in few frames.

        A hop node runs one invocation at a time, has at most one output, a single-packet
        policy, no feedback input, no declared types and no ``rate``, and nothing measures it
        (stats ``basic``). When an invocation
        succeeds with one packet for an edge whose only reader is a plain consumer port, the
        packet goes straight into the consumer's next context if the consumer is idle with an
        empty queue: the state ``_finish`` → ``_flush`` → ``_deliver`` → ``schedule`` would
        reach, without touching the queue. On a graph output read by one unbounded poller and
        nothing else (``edge.sole_poller``) the packet goes into the poller's queue, as
        ``_deliver`` would put it. If the consumer is a hop node on the same
        runs-on-caller executor (``port.chained``) and nothing else waits on this thread, it runs next in
        this loop instead of through the executor, which would have run it next too. Anything
        else (an error, no packet or several, a subscriber or a feedback consumer on the edge,
        a halted graph, backpressure) goes through ``_finish``. tests/graph/test_hop.py runs
        each case on both paths and compares.
        """
        lock = self.lock
        executor = node.executor
        # The work queued behind this task on this thread (None: the executor has no such loop).
        backlog = executor.backlog() if node.on_caller else None
        while True:
            try:
                node.kernel.process(ctx)
            except Exception as exc:
                _release_inputs(ctx)
                self._finish(node, ctx, exc, _describe(exc, ctx))
                return
            except BaseException:
                self._abandon(node, ctx)
                raise
            _release_inputs(ctx)
            edge = node.out_edge
            port: InPort | None = None
            poller: Poller | None = None
            if edge is not None:
                staged = ctx._out[0]
                port = edge.solo
                if port is None:
                    poller = edge.sole_poller
                if (port is None and poller is None) or len(staged) != 1 or ctx._bounds is not None:
                    self._finish(node, ctx, None, "")
                    return
            nxt: Context | None = None
            subs: list[Submission] = []
            # acquire/release rather than `with`: half the cost, and this runs once per hop.
            lock.acquire()
            try:
                # (A running hop node is never `blocked`: it has one output, to a plain port.)
                if self.halted or self._retry:
                    nxt = ctx  # decided under the lock: ``_finish`` takes it from here
                else:
                    node.processed += 1
                    node.in_flight = 0
                    node.next_flush = ctx.seq + 1
                    ctx._done = None
                    node.contexts.append(ctx)
                    self.busy -= 1  # this invocation is done (a hand-over below counts the next one)
                    if edge is not None:
                        # What ``_deliver`` does for one packet, up to where it lands.
                        p = staged.pop()
                        node.packets_out += 1
                        ts = p._ts
                        b = ts + 1 if TS_MIN <= ts < TS_MAX else next_allowed(ts)
                        if b > edge.published:
                            edge.published = b
                    if poller is not None:
                        # A graph output that only one unbounded poller reads.
                        poller._queue.append(p)
                        self.queued += 1
                        if self.limit_bytes and p._tid == _BUFFER:
                            self.queued_bytes += p._value.nbytes()  # type: ignore[attr-defined]
                    elif port is not None:
                        # ``_deliver_solo``, then ``schedule`` of the consumer.
                        if b > port.bound:
                            port.bound = b
                        consumer = port.node
                        if takes_at_once(consumer, port):
                            nxt = self._hand_over(consumer, port, p, ts)
                        else:
                            q = port.queue
                            q.append(p)
                            self.queued += 1
                            if self.limit_bytes and p._tid == _BUFFER:
                                self.queued_bytes += p._value.nbytes()  # type: ignore[attr-defined]
                            if len(q) > port.peak:
                                self._new_peak(edge, port)  # type: ignore[arg-type]
                            self.schedule(consumer, subs)
                    own = node.fast1
                    if own is not None:
                        if own.queue:
                            self.schedule(node, subs)
                    else:
                        # Several inputs (a join): an invocation needs a queued packet, so
                        # only a non-empty queue can make this node ready again.
                        for fwd in node.fwd:
                            if fwd.queue:
                                self.schedule(node, subs)
                                break
                    if node.closable:
                        self._try_close(node, subs)
                    if self.waiters:
                        self.changed.notify_all()
            finally:
                lock.release()
            if nxt is ctx:
                self._finish(node, ctx, None, "")
                return
            wake = self.wakeup
            if wake is not None:
                wake()
            if nxt is None:
                if len(subs) == 1 and backlog is not None and not backlog:
                    ex, task, arg = subs[0]
                    claimed: Context = arg  # type: ignore[assignment]
                    if ex is executor and task is self._run and claimed._owner.hop and not self.timed:  # type: ignore[attr-defined]
                        # One invocation claimed (a join made ready), for this runs-on-caller
                        # executor with nothing queued before it: it would run next on this thread, so
                        # run it in this loop.  (Closes are submitted with another callable.)
                        p = None  # type: ignore[assignment]  # hold no handle of the packet
                        node = claimed._owner  # type: ignore[assignment]
                        ctx = claimed
                        continue
                for ex, task, arg in subs:
                    ex.submit(task, arg)
                return
            if backlog or not port.chained or self.timed:  # type: ignore[union-attr]
                consumer = port.node  # type: ignore[union-attr]
                inbox = consumer.inbox
                if inbox is not None:
                    # What ``submit`` does there, in direct calls: the queue keeps lm-flow's
                    # order (the consumer runs when its turn comes, not now).
                    inbox.append((self._run, nxt))
                    self._on_delegated()
                else:
                    consumer.executor.submit(self._run, nxt)
                for ex, task, arg in subs:
                    ex.submit(task, arg)
                return
            # The consumer would run next on this thread anyway: run it here, after handing
            # the other claimed work to executors, as they would have seen it.
            if subs:
                for ex, task, arg in subs:
                    ex.submit(task, arg)
            del p  # hold no handle of the packet: the consumer may write into it in place
            node = port.node  # type: ignore[union-attr]
            ctx = nxt
    # -- flushing and delivering --------------------------------------------------------------------

    def _deliver_solo(self, edge: Edge, port: InPort, packets: list[Packet], subs: list[Submission]) -> None:
        """``_deliver`` for an edge with one plain consumer port and no subscribers; lock held."""
        n = len(packets)
        q = port.queue
        last = packets[-1]._ts
        b = last + 1 if TS_MIN <= last < TS_MAX else next_allowed(last)
        if b > port.bound:
            port.bound = b
        if b > edge.published:
            edge.published = b
        node = port.node
        if n == 1 and not self.halted and takes_at_once(node, port):
            # ``schedule`` would pop the packet at once: hand it to the consumer directly.
            subs.append((node.executor, self._run, self._hand_over(node, port, packets[0], last)))
            return
        q.extend(packets)
        self.queued += n
        if self.limit_bytes:
            self.queued_bytes += _buffer_bytes(packets)
        if len(q) > port.peak:
            self._new_peak(edge, port)
        self.schedule(node, subs)

    def _hand_over(self, node: Node, port: InPort, p: Packet, ts: int) -> Context:
        """Claim ``node`` (idle, ``fast1`` is ``port``, its queue empty) for ``p`` (``ts`` is its
        timestamp, which every caller has at hand); lock held.

        What queueing ``p`` and ``schedule`` would do, without the queue: its counters would
        go up and down again, so only the peak records the depth of 1 (which warns at no soft
        limit, since limits are at least 1).
        """
        ctx = node.contexts.pop()
        ctx._ts = ts
        ctx._phase = PHASE_PROCESS
        ctx._in[0] = p
        if port.closed:
            ctx._done = [True]
        ctx.seq = node.seq
        node.seq += 1
        node.in_flight = 1
        node.packets_in += 1
        self.busy += 1
        if not port.peak:
            port.peak = 1
        return ctx

    def _fail_invocation(self, node: Node, ctx: Context, err: BaseException | None, text: str,
                         subs: list[Submission]) -> None:
        """Discard a failed invocation's output; skip it or fail the graph; lock held."""
        for out in ctx._out:
            out.clear()
        ctx._bounds = None
        ctx._error_text = None
        node.errors += 1
        if node.on_error_skip:
            if _is_power_of_two(node.errors):
                log.warning("node `%s`: skipping a failed packet (on_error=skip), %d so far: %s",
                            node.name, node.errors, text)
            return
        self.record_error(node, err, text, ctx._ts)
        self._drop_blocked()
        for other in self.nodes:
            if other is not node:
                self._try_close(other, subs)

    def call_observers(self, calls: Calls) -> None:
        for fn, packet in calls:
            try:
                fn(packet)
            except Exception as exc:  # an observer's failure must not break the graph
                log.warning("observer %r failed: %r", fn, exc)
        calls.clear()  # hold no packet while downstream work runs (in-place writes need that)

    def _dispatch(self, subs: list[Submission], calls: Calls) -> None:
        """Outside the lock: call observers, then hand claimed work to executors."""
        if calls:
            self.call_observers(calls)
        for executor, task, arg in subs:
            executor.submit(task, arg)

    def _flush(self, node: Node, ctx: Context, subs: list[Submission], calls: Calls) -> bool:
        """Deliver a finished invocation's staging, port by port; caller holds the lock.

        Returns False (and delivers nothing) when a lossless consumer has no room: the
        invocation then waits as the node's blocked flush and no worker waits with it.
        """
        if node.limited and not self.halted and ctx._phase != PHASE_CLOSE and not self._fits(node, ctx):
            return False
        discard = self.error is not None or self.cancelled  # after _fits: it may record an error
        bounds = ctx._bounds
        if bounds is not None:
            ctx._bounds = None
        if ctx._done is not None:
            ctx._done = None
        in_ts = ctx._ts
        for o, staged in enumerate(ctx._out):
            edge = node.out_edges[o]
            if staged and not discard:
                n = len(staged)
                node.packets_out += n
                port = edge.solo
                if port is not None:
                    self._deliver_solo(edge, port, staged, subs)
                else:
                    self._deliver(edge, staged, subs, calls)
                staged.clear()
            else:
                staged.clear()
                if bounds is not None and o in bounds:
                    b = bounds[o]
                elif TS_PRE_STREAM <= in_ts <= TS_POST_STREAM:
                    b = next_allowed(in_ts)
                else:
                    continue
                self._advance(edge, b, subs, calls)
        return True

    def _deliver(self, edge: Edge, packets: list[Packet], subs: list[Submission], calls: Calls) -> None:
        """Fan ``packets`` out to pollers, observers and consumer queues; lock held."""
        for poller in edge.pollers:
            poller.push_many(packets)
        for fn in edge.observers:
            for p in packets:
                calls.append((fn, p))
        last = packets[-1]._ts
        b = last + 1 if TS_MIN <= last < TS_MAX else next_allowed(last)
        n = len(packets)
        nbytes = -1  # counted once, when a queue takes the packets
        for port in edge.consumers:
            q = port.queue
            node = port.node
            if n == 1 and not self.halted and takes_at_once(node, port):
                # ``schedule`` would pop the packet at once: hand it over (see ``_hand_over``).
                if b > port.bound:
                    port.bound = b
                subs.append((node.executor, self._run, self._hand_over(node, port, packets[0], last)))
                continue
            if port.is_back:
                # A feedback register keeps only the newest value.
                if q:
                    port.overwritten += len(q)
                    self.queued -= len(q)
                    q.clear()
                q.append(packets[-1])
                self.queued += 1
            else:
                q.extend(packets)
                self.queued += n
                if self.limit_bytes:
                    if nbytes < 0:
                        nbytes = _buffer_bytes(packets)
                    self.queued_bytes += nbytes
                if port.fixed:
                    while len(q) > port.fixed:
                        self._unqueue((q.popleft(),))
                        edge.dropped += 1
                        if _is_power_of_two(edge.dropped):
                            log.warning("edge `%s` has dropped %d packets total due to the fixed_size policy "
                                        "(capacity %d)", edge.name, edge.dropped, port.fixed)
                if len(q) > port.peak:
                    self._new_peak(edge, port)
                if b > port.bound:
                    port.bound = b
            self.schedule(port.node, subs)
        if b > edge.published:
            self._publish(edge, b, calls)

    def _advance(self, edge: Edge, b: int, subs: list[Submission], calls: Calls) -> None:
        """Propagate a bound with no packet (rule 3 of lm-flow's bound propagation)."""
        for port in edge.consumers:
            if not port.is_back and b > port.bound:
                port.bound = b
                self.schedule(port.node, subs)
        self._publish(edge, b, calls)

    def _publish(self, edge: Edge, b: int, calls: Calls) -> None:
        if b <= edge.published:
            return
        edge.published = b
        if edge.bound_pollers or edge.bound_observers:
            for poller in edge.bound_pollers:
                poller.push_bound(b)
            for fn in edge.bound_observers:
                marker = Packet()
                marker._ts = b
                calls.append((fn, marker))

    # -- sources ---------------------------------------------------------------------------------

    def _pace_source(self, node: Node, ctx: Context, subs: list[Submission]) -> None:
        """After a source invocation: wait for ``source_yield`` / ``rate`` without a worker."""
        delay = ctx._yield
        deadline = 0.0
        now = time.monotonic()
        if node.rate_period:
            deadline = node.last_start + node.rate_period
        if delay is not None and delay > 0:
            deadline = max(deadline, now + delay)
        if deadline > now:
            node.waiting = True
            self.busy += 1
            self._timer_service().add(deadline, node, node.wake_gen)

    def wake(self, node: Node, gen: int) -> None:
        """Timer callback: a waiting source may run again."""
        subs: list[Submission] = []
        with self.lock:
            if gen != node.wake_gen or not node.waiting:
                return  # stale: cancel or reset already settled this wake's ``busy`` count
            self.busy -= 1
            node.waiting = False
            self.rescan((node,), subs)
            self._bump()
        self.submit_background(subs)

    def rescan(self, nodes: tuple[Node, ...] | list[Node], subs: list[Submission]) -> None:
        """Claim what is ready and close what may close, for each of ``nodes``; lock held."""
        for node in nodes:
            self.schedule(node, subs)
            self._try_close(node, subs)

    @staticmethod
    def submit_background(subs: list[Submission]) -> None:
        """Hand work nobody waits on (sources, wakes) to executors' background paths."""
        for executor, task, arg in subs:
            executor.submit_background(task, arg)

    def _timer_service(self) -> Timers:
        if self._timers is None:
            self._timers = Timers(self)
        return self._timers


def _release_inputs(ctx: Context) -> None:
    """Drop the invocation's input handles before its output is flushed, so that downstream
    ``take_input`` sees exclusive payloads (and may write in place)."""
    inputs = ctx._in
    for i in range(len(inputs)):
        inputs[i] = None


def _input_type_error(node: Node, ctx: Context) -> str:
    for i, want in enumerate(node.in_types):
        p = ctx._in[i]
        if want and p is not None and p._tid != want:
            hint = " (packets of type id 0 only pass ports declared `any`)" if p._tid == 0 else ""
            return (f"input port `{node.inputs[i].name}` type mismatch: contract declares {type_name(want)}, "
                    f"actual {type_name(p._tid)}{hint}")
    return ""
