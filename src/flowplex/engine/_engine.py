"""``Engine``: one graph's scheduler, composed of parts that own their data and call one way.

From the bottom up (a part calls only parts listed above it):

- ``_status.Status``: the one lock, lifecycle state, first error, pause/cancel, host wake-ups;
- ``_budget.Budget``: packets and bytes queued, against the graph's watermark;
- ``_blocking.Blocking``: blocked flushes and the producers to retry;
- ``_claims.Claims``: readiness under the input policies, claiming inputs ("pop at claim");
- ``_delivery.Delivery``: flushing staged output, fan-out, bound propagation;
- ``_closing.Closing``: closing nodes and edges, termination, releasing held packets;
- ``_sources.Sources``: source pacing (``source_yield``, ``rate``) and their timer;
- ``_loop.Scheduler``: **the scheduler loop** — run, complete, the hop shortcut, the seam;
- ``_pump.Pump``: host threads running delegated work;
- ``_admission.Admission`` and ``_waiting.Waits``: the host's sends and blocking calls.

``Engine`` builds them and offers the host operations ``Graph`` (a facade) delegates to:
start, stop, reset, cancel, pause, inputs, pollers and observers. The path of one packet:
``Input.send`` → ``Admission.accept`` → ``Delivery`` → ``Claims`` → executor →
``Scheduler.run``/``complete`` → ``Delivery`` → a poller's ``OutputQueue``.
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Final

from .._timestamps import TS_UNSTARTED
from ..errors import GraphCancelled, KernelError, StateError, Timeout, UsageError
from ..executors._invocation import Invocation, Outcome
from ..kernels._context import PHASE_OPEN
from ..kernels._host import is_interrupt
from ._admission import Admission
from ._blocking import Blocking
from ._budget import Budget
from ._claims import Claims
from ._closing import Closing
from ._conditions import Conditions
from ._delivery import Delivery
from ._engine_common import Submission as Submission
from ._engine_common import Work as Work
from ._loop import Scheduler, Tracer, call_observers
from ._nodes import OutputQueue
from ._pump import Pump
from ._seam import recipe_of
from ._snapshot import take_snapshot
from ._sources import Sources
from ._status import CREATED as CREATED
from ._status import DRAINING as DRAINING
from ._status import INITIALIZED as INITIALIZED
from ._status import RUNNING as RUNNING
from ._status import TERMINATED as TERMINATED
from ._status import WAIT_SLICE_S as WAIT_SLICE_S
from ._status import Status
from ._waiting import Waits
from ._watchdog import Watchdog

if TYPE_CHECKING:
    from .._snapshot import EngineSnapshot
    from ..executors import Executor
    from ..executors._protocol import KernelHostExecutor
    from ..kernels._context import Context
    from ..packets import Packet
    from ..packets._packet import BufferAllocator
    from ._nodes import Edge, Node, Observer

log = logging.getLogger("flowplex.graph")

OPEN_TIMEOUT_S = 60.0
"""How long ``start`` waits for a kernel host to open one kernel before calling it dead."""
START_SLICE_S: Final = 0.05
"""How often a start waiting for an open looks at its deadline and for a cancel."""
CLOSE_WAIT_S: Final = 5.0
"""How long ``stop`` (``Graph.close``) lets a cancelled graph drain at most."""
CLOSE_STALL_S: Final = 1.0
"""How long ``stop`` waits without progress before it gives up on a callback that does not return."""


def _call_open(node: Node, ctx: Context) -> tuple[BaseException | None, str]:
    """``node.kernel.open(ctx)``: its failure as ``(exc, text)``, ``(None, "")`` when it succeeded."""
    try:
        node.kernel.open(ctx)
    except BaseException as exc:  # SystemExit too: only the user's Ctrl-C goes through
        if is_interrupt(exc):
            raise
        return exc, f"{type(exc).__name__}: {exc}"
    return None, ""


class Engine:
    """The scheduler of one graph: its parts, and the host operations over them."""

    def __init__(self, nodes: list[Node], edges: dict[str, Edge], graph_inputs: list[str],
                 executors: list[Executor], strict_ports: bool = False) -> None:
        self.nodes = nodes
        self.edges = edges
        self.graph_inputs = [edges[name] for name in graph_inputs]
        self.executors = executors
        self.strict_ports = strict_ports
        self.input_zeros: BufferAllocator | None = None
        """Where ``Graph.new_buffer`` gets memory: set at ``start`` (see ``_host_kernels``)."""
        self.stats_level = "basic"
        self.watchdog: Watchdog | None = None
        """Started by ``start`` when ``watchdog_ms`` is set (``_watchdog``)."""
        self.abandoned = ""
        """The node whose ``open`` a start gave up waiting for (it may still run): no restart."""
        self._start_began = 0.0
        self.status = status = Status()
        self.budget = budget = Budget()
        self.blocking = blocking = Blocking(status)
        self.claims = claims = Claims(status, budget, blocking)
        self.delivery = delivery = Delivery(status, budget, blocking, claims)
        self.closing = closing = Closing(status, budget, blocking, claims, delivery, nodes, self.graph_inputs)
        self.sources = sources = Sources(status, budget, claims, closing)
        self.conditions = Conditions(status, budget, claims, closing, sources)
        self.scheduler = scheduler = Scheduler(status, budget, blocking, claims, delivery, closing, sources)
        inboxes = [box for box in (ex.inbox() for ex in executors) if box is not None]
        self.pump = pump = Pump(status, scheduler, inboxes)
        self.admission = Admission(status, budget, delivery, scheduler, pump, edges)
        self.waits = Waits(status, budget, blocking, closing, scheduler, pump, self.conditions)
        for ex in executors:
            ex.set_on_submit(status.wake_hosts)
            ex.set_on_failure(self._failure_report(ex))
        sources.on_failure = scheduler.on_failure = self.thread_failed

    # -- subscribers and side packets (before start) --------------------------------------------

    def add_poller(self, edge: Edge, observe_bounds: bool, capacity: int, overflow: str) -> OutputQueue:
        """Subscribe a new poller to graph output ``edge``: its queue, which the host reads through ``waits``."""
        poller = OutputQueue(self.budget, edge, observe_bounds, capacity, overflow)
        with self.status.lock:
            edge.pollers.append(poller)
            if observe_bounds:
                edge.bound_pollers.append(poller)
            if poller.blocks and edge.producer is not None:
                edge.producer.limited = True
            edge.update_solo()
        return poller

    def observe(self, edge: Edge, fn: Observer, observe_bounds: bool, packets: bool = True) -> None:
        """Call ``fn(packet)`` for every packet on ``edge`` and, if asked, for each bound (an empty
        packet whose timestamp is the new bound); ``packets=False``: bounds only (a recorder must
        tell a bound from an empty packet)."""
        with self.status.lock:
            if packets:
                edge.observers.append(fn)
            if observe_bounds:
                edge.bound_observers.append(fn)
            edge.update_solo()

    def unobserve(self, edge: Edge, fn: Observer) -> None:
        """Stop calling ``fn`` for ``edge`` (a live tap detaching; any time, any thread)."""
        with self.status.lock:
            edge.observers = [f for f in edge.observers if f is not fn]
            edge.bound_observers = [f for f in edge.bound_observers if f is not fn]
            edge.update_solo()

    def enable_timing(self) -> None:
        """Measure every callback from now on (stats ``full``): a live ``top`` asked for timings."""
        with self.status.lock:
            self.stats_level = "full"
            self.scheduler.timed = True

    def finish_sources(self) -> None:
        """End every source as if it had called ``source_done``: a call in flight finishes and is
        flushed, a paced or parked source's wait ends, and each closes; the graph then drains."""
        status = self.status
        sources = self.sources
        with status.lock:
            for node in self.nodes:
                if not node.is_source or node.source_done:
                    continue
                node.source_done = True
                node.closable = True
                if node in sources.parked:
                    del sources.parked[node]
                    status.waiters -= 1
                if node.waiting:  # its wake, timer or parking, is settled here: the count with it
                    node.waiting = False
                    node.wake_gen += 1
                    status.busy -= 1
                self.closing.try_close(node)
            status.bump()
            if status.waiters:
                status.changed.notify_all()
            subs, calls = self.scheduler.take_work()
        self.scheduler.dispatch(subs, calls)

    def set_side_packet(self, name: str, packet: Packet) -> None:
        """Give every kernel the side packet ``name``."""
        for node in self.nodes:
            node.info.side_packets[name] = packet

    def set_tracer(self, tracer: Tracer) -> None:
        """Measure every callback and report it to ``tracer`` (forces stats ``full``)."""
        with self.status.lock:
            self.scheduler.tracer = tracer
            self.stats_level = "full"
            self.scheduler.timed = True

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self, deadline: float | None = None) -> None:
        """Open every kernel in node order, then start running (``Graph.start``).

        Without ``deadline`` each in-process ``open`` runs on this thread. With one (a
        ``time.monotonic()`` instant) they run on a helper thread while this one waits, so that
        a kernel whose ``open`` never returns ends the start with ``Timeout`` at ``deadline``;
        a kernel host's loading and opening wait until it as well. A wait (a helper thread's
        open, a kernel host's) also ends at ``cancel()`` from another thread, with
        ``GraphCancelled``. Either names the node; its ``open`` is left running (it cannot be
        stopped), and this graph cannot start again.
        """
        if self.abandoned:
            msg = (f"start: the open() of node `{self.abandoned}` from an earlier start never returned; "
                   "build the graph again")
            raise StateError(msg)
        missing = [(n, name) for n in self.nodes for name in n.side_required if name not in n.info.side_packets]
        if missing:
            node, name = missing[0]
            msg = (f"missing required side packet `{name}` -- node `{node.name}` declared it in "
                   "get_contract; inject it with set_side_packet before start")
            raise UsageError(msg)
        if self.scheduler.watchdog_ns and self.watchdog is None:
            # Before the opens: an open that hangs is reported while it hangs, as a process() is.
            self.watchdog = Watchdog(self.nodes, self.scheduler.watchdog_ns)
        self._start_began = time.monotonic()
        self._host_kernels(deadline)
        for node in self.nodes:
            if not node.opened:
                self._open(node, deadline)
                node.opened = True
                node.claimable = True
        used = {id(n.executor) for n in self.nodes}
        for ex in self.executors:
            if id(ex) in used:
                ex.start()
        status = self.status
        with status.lock:
            status.started_ns = time.perf_counter_ns()
            self.conditions.opened()
            status.state = RUNNING
            if self.graph_inputs and all(e.closed for e in self.graph_inputs):
                status.state = DRAINING
            self.closing.rescan(self.nodes)
            self.closing.check_terminated()
            subs = self.claims.take()
        for executor, task, arg in subs:
            executor.submit_background(task, arg)

    def _host_kernels(self, deadline: float | None) -> None:
        """Hand each kernel-hosting executor the recipes of its nodes; a node that feeds one
        whose executor keeps buffers in memory of its own allocates its buffers there."""
        status = self.status
        for ex in self.executors:
            if ex.hosts_kernels:
                host: KernelHostExecutor = ex  # type: ignore[assignment]
                # one that queues calls of its own drops them once the graph stopped; one whose
                # hosting waits (workers loading kernels) stops at the deadline or a cancel
                host.watch(lambda: status.cancelled or status.error is not None)
                host.bound_start(deadline, lambda: status.cancelled)
                host.host([recipe_of(n, self.strict_ports) for n in self.nodes if n.executor is ex])
        for node in self.nodes:
            if not node.remote:
                node.info.zeros = self._allocator_for(node.out_edges)
        self.input_zeros = self._allocator_for(self.graph_inputs)

    @staticmethod
    def _allocator_for(edges: list[Edge]) -> BufferAllocator | None:
        """The buffer allocator of the first hosted consumer of ``edges`` that has one."""
        for edge in edges:
            for port in edge.consumers:
                if port.node.remote:
                    host: KernelHostExecutor = port.node.executor  # type: ignore[assignment]
                    found = host.buffer_allocator()
                    if found is not None:
                        return found
        return None

    def _open(self, node: Node, deadline: float | None) -> None:
        """Run ``node``'s open callback (here, on a helper thread, or on its executor's kernel host)."""
        ctx = node.contexts[-1]
        ctx.reset_for(TS_UNSTARTED, PHASE_OPEN)
        err: BaseException | None = None
        text = ""
        if self.watchdog is not None:
            node.running_since = time.perf_counter_ns()
        left = False
        try:
            if node.remote:
                err, text = self._open_hosted(node, deadline)
            elif deadline is None:
                err, text = _call_open(node, ctx)
            else:
                err, text = self._open_aside(node, ctx, deadline)
        except (Timeout, GraphCancelled):
            left = not node.remote  # its helper thread still runs open() and may still emit
            self.abandoned = node.name  # a worker hung in it too: nothing can open it again
            raise
        finally:
            node.running_since = 0
            if not left:
                for staged in ctx.out_packets:
                    staged.clear()
        if text:
            with self.status.lock:
                self.status.record_error(node, err, f"open failed: {text}")
            msg = f"kernel failed: [{node.name}] open failed: {text}"
            raise KernelError(msg, node=node.name, kernel=node.spec.kernel) from err

    def _open_aside(self, node: Node, ctx: Context, deadline: float) -> tuple[BaseException | None, str]:
        """``node``'s open on a helper thread (a daemon: one that never returns keeps no
        interpreter alive), waited for until ``deadline`` or a cancel."""
        got: list[tuple[BaseException | None, str]] = []
        done = threading.Event()

        def run() -> None:
            try:
                got.append(_call_open(node, ctx))
            finally:
                done.set()

        threading.Thread(target=run, name=f"flowplex-open-{node.name}", daemon=True).start()
        self._wait_open(node, done, deadline, "open()")
        return got[0] if got else (None, "open() ended without an outcome")

    def _wait_open(self, node: Node, done: threading.Event, deadline: float | None, what: str) -> None:
        """Wait for ``done`` (an open, or a kernel host's answer to one), in slices: raise
        ``Timeout`` at ``deadline`` and ``GraphCancelled`` once ``cancel()`` was called."""
        began = time.monotonic()
        limit = began + OPEN_TIMEOUT_S if node.remote else None
        if deadline is not None:
            limit = deadline if limit is None else min(limit, deadline)
        while not done.wait(START_SLICE_S if limit is None else max(0.0, min(START_SLICE_S, limit - time.monotonic()))):
            now = time.monotonic()
            left = "" if node.remote else "; it is left running"  # a worker is killed at close
            where = f"node `{node.name}` is still in {what} (for {now - began:.3g} s{left})"
            if self.status.cancelled:
                msg = f"start was cancelled: {where}"
                raise GraphCancelled(msg)
            if limit is not None and now >= limit:
                if deadline is None or limit < deadline:
                    return  # the kernel host's own limit: the caller says it did not answer
                msg = f"start timed out after {now - self._start_began:.3g} s: {where}"
                raise Timeout(msg)

    def _open_hosted(self, node: Node, deadline: float | None) -> tuple[BaseException | None, str]:
        """Open ``node`` on its executor's kernel host and wait for the outcome."""
        from ._seam import apply_outcome

        done = threading.Event()
        got: list[Outcome] = []

        def complete(outcome: Outcome) -> None:
            got.append(outcome)
            done.set()

        host: KernelHostExecutor = node.executor  # type: ignore[assignment]
        host.invoke(Invocation(node.index, -1, PHASE_OPEN, TS_UNSTARTED, [None] * len(node.inputs)), complete)
        self._wait_open(node, done, deadline, f"open() on executor `{host.name}`")
        if not got:
            return None, f"the kernel host of executor `{host.name}` did not answer within {OPEN_TIMEOUT_S:.0f} s"
        return apply_outcome(node, node.contexts[-1], got[0])

    def stop(self) -> None:
        """Cancel if still running and let the graph drain, stop threads, release held packets.

        The drain lasts up to ``CLOSE_WAIT_S``, but ends after ``CLOSE_STALL_S`` without progress
        (no call finishing, no node closing): a callback that never returns is not waited for.
        It is named in a warning, and its thread (a daemon) is left running.
        """
        status = self.status
        status.wakeup = None
        if status.state in (RUNNING, DRAINING):
            self.scheduler.cancel()
            now = time.monotonic()
            deadline, stall = now + CLOSE_WAIT_S, now + CLOSE_STALL_S
            mark = self._progress()
            while status.state != TERMINATED and not status.broken and now < min(deadline, stall):
                if not self.pump.pump_step():
                    with status.lock:
                        if status.state == TERMINATED or self.pump.idle():
                            break
                        status.wait_change(None, 0.01)
                now = time.monotonic()
                seen = self._progress()
                if seen != mark:
                    mark, stall = seen, now + CLOSE_STALL_S
            if status.state != TERMINATED and not status.broken:
                with status.lock:
                    running = self.waits.still_running()
                log.warning("graph.close.abandoned: %s; close() does not wait for it (its thread is left "
                            "running, and does not keep the interpreter from exiting)", running)
        self.shutdown()
        self.waits.release_held()
        if status.state == TERMINATED:  # no callback can still read a side packet
            for node in self.nodes:
                node.info.side_packets.clear()

    def _progress(self) -> tuple[int, int]:
        """What changes while a cancelled graph drains: calls running, nodes closed (a snapshot
        without the lock: ``stop`` only compares two of them)."""
        return self.status.busy, sum(1 for n in self.nodes if n.closed)

    def reset(self) -> None:
        """Make a terminated, idle graph startable again (kernels stay opened)."""
        status = self.status
        with status.lock:
            if status.state != TERMINATED or not self.pump.idle():
                msg = "reset needs a terminated, idle graph; call wait_done() first"
                raise StateError(msg)
            held = self.closing.take_held()
            for node in self.nodes:
                node.reset()
            for edge in self.edges.values():
                edge.reset()
                for poller in edge.pollers:
                    poller.reset()
            self.budget.clear()
            self.blocking.blocked.clear()
            self.conditions.reset()
            status.clear()
        del held  # outside the lock: the last release of an adopted array restores it

    def shutdown(self) -> None:
        """Stop timers, the watchdog and executor threads."""
        self.sources.stop()
        if self.watchdog is not None:
            self.watchdog.stop()
            self.watchdog = None
        for ex in self.executors:
            ex.shutdown()

    # -- engine threads that caught what should never reach them ------------------------------

    def _failure_report(self, executor: Executor) -> Callable[[object, BaseException, str], None]:
        """The ``set_on_failure`` report of ``executor``: ``thread_failed``, naming a node."""

        # The engine weakly: the executor's threads live until shutdown, and must not keep a
        # dropped graph (and the arrays it holds) alive through this closure. The executor
        # strongly (a compiled one takes no weak reference): the cycle it makes with its own
        # report is the garbage collector's to free.
        engine = weakref.ref(self)

        def report(arg: object, exc: BaseException, where: str) -> None:
            eng = engine()
            if eng is None:
                return
            owner = getattr(arg, "owner", None)  # a task's argument is a call (context) of its node
            node = owner if owner in eng.nodes else next((n for n in eng.nodes if n.executor is executor), None)
            eng.thread_failed(node, exc, where, arg is not None)

        return report

    def thread_failed(self, node: Node | None, exc: BaseException, where: str, lost: bool = False) -> None:
        """An engine thread (a pool worker, the background or the timer thread) caught ``exc``:
        fail the graph with it, naming ``node``, and close what can close.

        ``lost``: the exception interrupted a task, so an invocation's accounting is unknown;
        the graph is then marked ``broken`` and the host's waits end at the error (``wait_done``
        raises it) instead of waiting for a drain that may never come.
        """
        log.error("%s caught %s: %s", where, type(exc).__name__, exc, exc_info=exc)
        status = self.status
        with status.lock:
            status.record_error(node, exc, f"{where} caught {type(exc).__name__}: {exc}")
            if lost:
                status.broken = True
            self.blocking.drop_blocked()
            self.sources.cancel_waits(self.nodes)
            self.closing.force_close()
            subs, calls = self.scheduler.take_work()
        if calls:
            call_observers(calls)
        for executor, task, arg in subs:  # never on this thread: it may be the one that failed
            executor.submit_background(task, arg)

    # -- control -------------------------------------------------------------------------------

    def cancel(self) -> None:
        """Stop claiming and close every node with reason CANCELLED."""
        self.scheduler.cancel()

    def set_paused(self, paused: bool) -> None:
        """Pause claiming, or resume it and claim what is ready."""
        status = self.status
        with status.lock:
            status.set_paused(paused)
            if not paused:
                self.closing.rescan(self.nodes)
                status.bump()
            subs, calls = self.scheduler.take_work()
        self.scheduler.dispatch(subs, calls)

    def set_wakeup(self, fn: Callable[[], None] | None) -> None:
        """Install the host's wake-up callback (None removes it)."""
        self.status.wakeup = fn

    def snapshot(self) -> EngineSnapshot:
        """One consistent copy of the engine's state, for diagnostics to format (any thread)."""
        return take_snapshot(self.status, self.budget, self.scheduler, self.stats_level, self.nodes,
                             list(self.edges.values()), self.executors)
