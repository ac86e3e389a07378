"""The scheduler loop: run a claimed invocation, complete it, claim what it made ready.

This is the loop. An executor runs ``Scheduler.run(ctx)`` for every claimed invocation (a task
of the engine's); the general per-packet path is

    run → kernel callback (here, or on the executor's kernel host: ``_seam``)
        → complete → Delivery.flush → Claims.schedule (downstream, then this node again)
        → Closing.try_close → submit the claimed work outside the lock

and ``complete`` is the one completion method: in-process callbacks and hosted ones (their
``Outcome`` applied to the context first) finish there. Two guarded shortcuts stand in front
of it where they pay, each tested equal to it (tests/graph/test_hop.py): ``run_hop`` for chain
links and sinks, and the hand-over of one packet to an idle consumer (``Claims.hand_over``).

The rule of every locked section (httpcore's pool): decide under the lock, act outside it —
kernels, observers and executor submissions never run while the lock is held; the parts leave
the work they decided in their outboxes and ``take_work`` collects it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sized
from typing import TYPE_CHECKING

from .._timestamps import TS_MAX, TS_MIN, next_allowed
from ..kernels._context import PHASE_CLOSE, PHASE_PROCESS, SPILL_SLICE, Context
from ..kernels._host import describe_failure as _describe
from ..kernels._host import is_interrupt
from ..packets import _thread_cow_counts
from ._claims import NO_WORK
from ._engine_common import _is_power_of_two
from ._nodes import _output_type_error, input_type_error
from ._seam import apply_outcome, invocation_of
from ._spill import Spills
from ._status import CREATED, INITIALIZED

if TYPE_CHECKING:
    from ..executors._invocation import Outcome
    from ..executors._protocol import KernelHostExecutor
    from ._blocking import Blocking
    from ._budget import Budget
    from ._claims import Claims
    from ._closing import Closing
    from ._delivery import Delivery
    from ._engine_common import Calls, Submission
    from ._nodes import Edge, InPort, Node, OutputQueue
    from ._sources import FailureHandler, Sources
    from ._status import Status

log = logging.getLogger("flowplex.graph")

Tracer = Callable[[str, str, int, int, int], None]
"""``fn(node, callback, ts, start_ns, duration_ns)`` after each measured callback."""


def _unreported(node: Node | None, exc: BaseException, where: str, lost: bool) -> None:
    raise exc


class Scheduler:
    """Runs and completes invocations; the executors' entry point (``run``)."""

    def __init__(self, status: Status, budget: Budget, blocking: Blocking, claims: Claims, delivery: Delivery,
                 closing: Closing, sources: Sources) -> None:
        self.status = status
        self.budget = budget
        self.blocking = blocking
        self.claims = claims
        self.delivery = delivery
        self.closing = closing
        self.sources = sources
        self.timed = False
        """Measure every callback: stats ``full``, a tracer or the watchdog is on."""
        self.watchdog_ns = 0
        self.tracer: Tracer | None = None
        self.on_failure: FailureHandler = _unreported
        """Set by the engine (``Engine.thread_failed``): where a completion thread reports what
        raised while it completed a hosted call."""
        self._run = self.run
        claims.task = self._run
        self.spills = spills = Spills(status, budget, delivery, self.take_work, self.dispatch)
        for node in closing.nodes:
            if not node.remote:  # (a hosted kernel's host spills itself: ``Spills.hosted``)
                node.info.spill = spills.spill
                for ctx in node.contexts:
                    ctx.spill_at = SPILL_SLICE

    # -- outside the lock ---------------------------------------------------------------------

    def take_work(self) -> tuple[list[Submission], Calls]:
        """The claims and observer calls decided in this locked section; lock held."""
        return self.claims.take(), self.delivery.take_calls()

    def dispatch(self, subs: list[Submission], calls: Calls) -> None:
        """Outside the lock: call observers, then hand claimed work to executors (a hosted
        kernel's to the hand-off, which calls ``invoke`` on this thread: ``_handoff``)."""
        if calls:
            call_observers(calls)
        for submitter, task, arg in subs:
            submitter.submit(task, arg)

    # -- running --------------------------------------------------------------------------------

    def run(self, arg: object) -> None:
        """Executor entry point: run one claimed invocation or a close, then complete it."""
        ctx: Context = arg  # type: ignore[assignment]
        node: Node = ctx.owner  # type: ignore[assignment]
        if node.remote:
            self._run_hosted(node, ctx)
            return
        if ctx.phase == PHASE_CLOSE:
            self._run_close(node, ctx)
            return
        if node.hop and not self.timed:
            self.run_hop(node, ctx)
            return
        err: BaseException | None = None
        if node.rate_period:
            # `rate` spaces the *starts* of process calls: stamp when it really starts.
            node.last_start = self.sources.clock()
        text = input_type_error(node, ctx) if node.typed_inputs else ""
        if not text:
            if self.timed:
                err, text = self.timed_call(node, ctx, node.kernel.process)
            else:
                try:
                    node.kernel.process(ctx)
                except BaseException as exc:
                    if is_interrupt(exc):
                        self._abandon(node, ctx)
                        raise
                    err = exc
                    text = _describe(exc, ctx)
        release_inputs(ctx)
        if ctx.batch is not None:
            ctx.batch = None
        if node.typed_outputs and not text:
            text = _output_type_error(node, ctx)
        self.complete(node, ctx, err, text)

    def timed_call(self, node: Node, ctx: Context, fn: Callable[[Context], None]) -> tuple[BaseException | None, str]:
        """Run a kernel callback measuring it (stats ``full``, tracing, watchdog)."""
        err: BaseException | None = None
        text = ""
        copies_before = _thread_cow_counts()[0]
        start = time.perf_counter_ns()
        node.running_since = start
        try:
            fn(ctx)
        except BaseException as exc:
            if is_interrupt(exc):
                node.running_since = 0
                if ctx.phase == PHASE_PROCESS:
                    self._abandon(node, ctx)
                raise
            err = exc
            text = _describe(exc, ctx)
        end = time.perf_counter_ns()
        node.running_since = 0
        self._measured(node, ctx, getattr(fn, "__name__", "process"), start, end - start,
                       _thread_cow_counts()[0] - copies_before)
        return err, text

    def _measured(self, node: Node, ctx: Context, name: str, start: int, duration: int, copies: int) -> None:
        """Account one measured callback: node timings, the watchdog, the tracer."""
        if ctx.phase == PHASE_PROCESS:  # node stats time `process` only (lm-flow's definition)
            node.record_time(duration)
            node.copies += copies
        if self.watchdog_ns and duration > self.watchdog_ns:
            log.warning("node `%s`: one %s took %.1f ms, exceeding watchdog %d ms", node.name,
                        name.capitalize(), duration / 1e6, self.watchdog_ns // 1_000_000)
        tracer = self.tracer
        if tracer is not None and ctx.phase == PHASE_PROCESS:
            tracer(node.name, name, ctx.ts, start, duration)

    def _abandon(self, node: Node, ctx: Context) -> None:
        """The user's Ctrl-C (``is_interrupt``) escaped a kernel: cancel the graph, keep counts straight."""
        for out in ctx.out_packets:
            out.clear()
        status = self.status
        with status.lock:
            node.in_flight -= 1
            status.busy -= 1
            node.contexts.append(ctx)
        self.cancel()

    def cancel(self) -> None:
        """Stop claiming, drop pending wakes and close every node with reason CANCELLED."""
        status = self.status
        with status.lock:
            if status.cancelled or status.state in (INITIALIZED, CREATED):
                status.set_cancelled()
                return
            status.set_cancelled()
            self.blocking.drop_blocked()
            self.sources.cancel_waits(self.closing.nodes)
            status.bump()
            self.closing.force_close()
            subs, calls = self.take_work()
        self.dispatch(subs, calls)

    # -- completing ----------------------------------------------------------------------------

    def complete(self, node: Node, ctx: Context, err: BaseException | None, text: str) -> None:
        """The one completion method: account a finished invocation, flush it, claim again.

        ``text`` is its failure ("" when it succeeded); ``err`` the exception, when there is one.
        """
        status = self.status
        with status.lock:
            if text:
                self.fail(node, ctx, err, text)
            else:
                node.processed += 1
            node.in_flight -= 1
            status.busy -= 1
            self._flush_finished(node, ctx)
            if node.is_source:
                # After the flush: the queue bound counts what this call emitted.
                if ctx.source_finished or (node.gate is not None and node.gate.finished()):
                    node.source_done = True
                    node.closable = True
                    ctx.source_finished = False
                elif not (status.cancelled or status.error is not None):
                    # (A yield after a cancel or a failure parks nothing: the source closes.)
                    self.sources.pace(node, ctx)
                ctx.yield_s = None
            elif ctx.yield_s is not None:
                if not (status.cancelled or status.error is not None):
                    self.sources.call_after(node, ctx.yield_s)
                ctx.yield_s = None
            if self.blocking.retry:
                self._settle()
            self.claims.schedule(node)
            if node.closable or status.halted:
                self.closing.try_close(node)
            if status.waiters:
                status.changed.notify_all()
                self.sources.room()  # (parked sources count among the waiters: ``_sources``)
            subs, calls = self.take_work()
        wake = status.wakeup
        if wake is not None:
            wake()
        self.dispatch(subs, calls)

    def _flush_finished(self, node: Node, ctx: Context) -> None:
        """Flush a finished invocation now, or keep it for claim order or as a blocked flush."""
        if node.max_in_flight == 1 and not node.blocked:
            if self.delivery.flush(node, ctx):
                node.next_flush = ctx.seq + 1
                node.contexts.append(ctx)
            else:
                node.pending[ctx.seq] = ctx
        else:
            # Flush strictly in claim order so downstream timestamps stay monotonic.
            node.pending[ctx.seq] = ctx
            if not node.blocked:
                self._flush_pending(node)

    def _flush_pending(self, node: Node) -> None:
        """Flush finished invocations strictly in claim order, stopping at a blocked one."""
        pending = node.pending
        while node.next_flush in pending:
            ctx = pending[node.next_flush]
            if not self.delivery.flush(node, ctx):
                return
            del pending[node.next_flush]
            node.contexts.append(ctx)
            node.next_flush += 1
        if node.blocked:
            self.blocking.unblock(node)

    def _settle(self) -> None:
        """Retry blocked flushes whose consumers made room; lock held."""
        retry = self.blocking.retry
        while retry:
            node = retry.pop()
            if not node.blocked:
                continue
            self._flush_pending(node)
            if not node.blocked:
                self.claims.schedule(node)
                self.closing.try_close(node)

    def settle(self) -> None:
        """Retry blocked flushes now (a poller made room), then run what they made ready."""
        status = self.status
        with status.lock:
            self._settle()
            status.bump()
            subs, calls = self.take_work()
        self.dispatch(subs, calls)

    def settle_locked(self) -> None:
        """``settle`` for a caller that holds the lock and dispatches the work itself."""
        if self.blocking.retry:
            self._settle()

    def fail(self, node: Node, ctx: Context, err: BaseException | None, text: str) -> None:
        """Discard a failed invocation's output; skip it or fail the graph; lock held."""
        for out in ctx.out_packets:
            out.clear()
        ctx.bounds = None
        ctx.error_text = None
        node.errors += 1
        if node.on_error_skip:
            if _is_power_of_two(node.errors):
                log.warning("node `%s`: skipping a failed packet (on_error=skip), %d so far: %s",
                            node.name, node.errors, text)
            return
        self.status.record_error(node, err, text, ctx.ts)
        self.blocking.drop_blocked()
        for other in self.closing.nodes:
            if other is not node:
                self.closing.try_close(other)

    def _run_close(self, node: Node, ctx: Context) -> None:
        """Run ``node``'s close callback here, then close it (``Closing.closed``)."""
        text = ""
        err: BaseException | None = None
        if self.timed:
            err, text = self.timed_call(node, ctx, node.kernel.close)
        else:
            try:
                node.kernel.close(ctx)
            except BaseException as exc:
                if is_interrupt(exc):
                    raise
                err = exc
                text = _describe(exc, ctx)
        if not text and node.typed_outputs:
            text = _output_type_error(node, ctx)
        self._close_complete(node, ctx, err, text)

    def _close_complete(self, node: Node, ctx: Context, err: BaseException | None, text: str) -> None:
        with self.status.lock:
            self.closing.closed(node, ctx, err, text)
            subs, calls = self.take_work()
        self.dispatch(subs, calls)

    # -- hosted kernels (the seam) ------------------------------------------------------------------

    def _run_hosted(self, node: Node, ctx: Context) -> None:
        """Send the callback to the kernel host of ``node``'s executor; complete what comes back."""
        text = ""
        if ctx.phase == PHASE_PROCESS:
            if node.rate_period:
                node.last_start = self.sources.clock()
            if node.typed_inputs:
                text = input_type_error(node, ctx)
        if text:
            release_inputs(ctx)
            ctx.batch = None
            self.complete(node, ctx, None, text)
            return
        invocation = invocation_of(node, ctx)
        host: KernelHostExecutor = node.executor  # type: ignore[assignment]
        if self.timed:  # the watchdog sees a hosted call while it runs, too
            node.running_since = time.perf_counter_ns()
        host.invoke(invocation, lambda outcome: self._hosted_done(node, ctx, outcome),
                    lambda outputs: self.spills.hosted(node, ctx, outputs))

    def _hosted_done(self, node: Node, ctx: Context, outcome: Outcome) -> None:
        """The completion callback of a hosted callback: apply the outcome, then complete.

        It runs on the executor's completion thread (a process pool's receiver, say): what
        raises here must not end that thread silently, leaving the node running for good, so
        it fails the graph instead (``on_failure``; the ``try`` costs nothing until then).
        """
        try:
            err, text = apply_outcome(node, ctx, outcome)
            if self.timed:
                node.running_since = 0
                self._measured(node, ctx, "close" if ctx.phase == PHASE_CLOSE else "process", outcome.started_ns,
                               outcome.duration_ns, outcome.copies)
            if not text and node.typed_outputs:
                text = _output_type_error(node, ctx)
            if ctx.phase == PHASE_CLOSE:
                self._close_complete(node, ctx, err, text)
            else:
                self.complete(node, ctx, err, text)
        except BaseException as exc:
            self.on_failure(node, exc, f"completing a call of node `{node.name}` on thread "
                                       f"`{threading.current_thread().name}`", True)

    # -- the hop shortcut ---------------------------------------------------------------------------

    def run_hop(self, node: Node, ctx: Context) -> None:
        """``run`` for chain links and sinks (``node.hop``): the common case, in few frames.

        A hop node runs one invocation at a time, has at most one output, a single-packet
        policy, no feedback input, no declared types and no ``rate``, and nothing measures it
        (stats ``basic``). When an invocation succeeds with one packet for an edge whose only
        reader is a plain consumer port, the packet goes straight into the consumer's next
        context if the consumer is idle with an empty queue (``_hop_land``): the state
        ``complete`` → ``flush`` → ``deliver`` → ``schedule`` would reach. If the consumer is
        a hop node on the same runs-on-caller executor (``port.chained``) and nothing else
        waits on this thread, it runs next in this loop instead of through the executor,
        which would have run it next too. Anything else goes through ``complete``.
        """
        executor = node.executor
        # The work queued behind this task on this thread (None: the executor has no such loop).
        backlog = executor.backlog() if node.on_caller else None
        while True:
            try:
                node.kernel.process(ctx)
            except BaseException as exc:
                if is_interrupt(exc):
                    self._abandon(node, ctx)
                    raise
                release_inputs(ctx)
                self.complete(node, ctx, exc, _describe(exc, ctx))
                return
            release_inputs(ctx)
            if ctx.yield_s is not None:  # ``call_after``: ``complete`` arms it
                self.complete(node, ctx, None, "")
                return
            edge = node.out_edge
            port: InPort | None = None
            poller: OutputQueue | None = None
            if edge is not None:
                port = edge.solo
                if port is None:
                    poller = edge.sole_poller
                if (port is None and poller is None) or len(ctx.out_packets[0]) != 1 or ctx.bounds is not None:
                    self.complete(node, ctx, None, "")
                    return
            nxt, subs = self._hop_land(node, ctx, edge, port, poller)
            if nxt is ctx:
                self.complete(node, ctx, None, "")
                return
            wake = self.status.wakeup
            if wake is not None:
                wake()
            if nxt is None:
                follow = self._hop_follow(executor, backlog, subs)
                if follow is None:
                    return
                node = follow.owner  # type: ignore[assignment]
                ctx = follow
                continue
            if backlog or not port.chained or self.timed:  # type: ignore[union-attr]
                self._hand_on(port.node, nxt, subs)  # type: ignore[union-attr]
                return
            # The consumer would run next on this thread anyway: run it here, after handing
            # the other claimed work to executors, as they would have seen it.
            for ex, task, arg in subs:
                ex.submit(task, arg)
            node = port.node  # type: ignore[union-attr]
            ctx = nxt

    def _hop_land(self, node: Node, ctx: Context, edge: Edge | None, port: InPort | None,
                  poller: OutputQueue | None) -> tuple[Context | None, list[Submission]]:
        """Under the lock: finish a hop invocation and land its one packet (if any).

        Returns ``ctx`` when ``complete`` must take over (decided under the lock), the
        consumer's claimed context when the packet was handed over, else None; and the other
        work claimed meanwhile, taken from the outbox before the lock is released.
        """
        status = self.status
        budget = self.budget
        nxt: Context | None = None
        lock = status.lock
        # acquire/release rather than `with`: half the cost, and this runs once per hop.
        lock.acquire()
        try:
            # (A running hop node is never `blocked`: it has one output, to a plain port.)
            if status.halted or self.blocking.retry:
                return ctx, NO_WORK
            node.processed += 1
            node.in_flight = 0
            node.next_flush = ctx.seq + 1
            ctx.in_done = None
            node.contexts.append(ctx)
            status.busy -= 1  # this invocation is done (a hand-over below counts the next one)
            if edge is not None:
                # What ``deliver`` does for one packet, up to where it lands.
                p = ctx.out_packets[0].pop()
                node.packets_out += 1
                ts = p._ts
                b = ts + 1 if TS_MIN <= ts < TS_MAX else next_allowed(ts)
                if b > edge.published:
                    edge.published = b
                if poller is not None:
                    # A graph output that only one unbounded poller reads.
                    poller.packets.append(p)
                    budget.add_one(p)
                elif port is not None:
                    # ``deliver_solo`` of one packet: ``land`` it (the next call comes back
                    # when the consumer takes it at once).
                    nxt = self.delivery.land(edge, port, p, ts, b)
            # Claim the node again if input waits (a join: only a non-empty queue can make
            # it ready again), close it if it may.
            own = node.fast1
            if own is not None:
                if own.queue:
                    self.claims.schedule(node)
            else:
                for fwd in node.fwd:
                    if fwd.queue:
                        self.claims.schedule(node)
                        break
            if node.closable:
                self.closing.try_close(node)
            if status.waiters:
                status.changed.notify_all()
                self.sources.room()
            claims = self.claims
            subs = claims.out  # ``claims.take()``, inline: this runs once per hop
            if subs:
                claims.out = []
            else:
                subs = NO_WORK  # never the live outbox: other threads append to it
        finally:
            lock.release()
        return nxt, subs

    def _hop_follow(self, executor: object, backlog: Sized | None, subs: list[Submission]) -> Context | None:
        """After a hop with no hand-over: the one claimed invocation to run in this loop, if it
        would run next on this thread anyway; else submit ``subs`` and return None."""
        if len(subs) == 1 and backlog is not None and not backlog:
            ex, task, arg = subs[0]
            claimed: Context = arg  # type: ignore[assignment]
            owner: Node = claimed.owner  # type: ignore[assignment]
            # One invocation claimed (a join made ready), for this runs-on-caller executor
            # with nothing queued before it. (Closes run the close phase: not a hop.)
            if ex is executor and task is self._run and owner.hop and claimed.phase != PHASE_CLOSE and not self.timed:
                return claimed
        for ex, task, arg in subs:
            ex.submit(task, arg)
        return None

    def _hand_on(self, consumer: Node, nxt: Context, subs: list[Submission]) -> None:
        """Submit the handed-over invocation to the consumer's executor, then the other work."""
        inbox = consumer.inbox
        if inbox is not None:
            # What ``submit`` does there, in direct calls: the queue keeps lm-flow's order
            # (the consumer runs when its turn comes, not now).
            inbox.append((self._run, nxt))
            self.status.wake_hosts()
        else:
            consumer.handler.submit(self._run, nxt)
        for ex, task, arg in subs:
            ex.submit(task, arg)


def call_observers(calls: Calls) -> None:
    """Call each observer with its packet; an observer's failure must not break the graph."""
    for fn, packet in calls:
        try:
            fn(packet)
        except Exception as exc:
            log.warning("observer %r failed: %r", fn, exc)
    calls.clear()  # hold no packet while downstream work runs (in-place writes need that)


def release_inputs(ctx: Context) -> None:
    """Drop the invocation's input handles before its output is flushed, so that downstream
    ``take_input`` sees exclusive payloads (and may write in place)."""
    inputs = ctx.in_packets
    for i in range(len(inputs)):
        inputs[i] = None
