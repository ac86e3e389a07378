"""The host's blocking calls: ``wait_done``, ``wait_until_idle`` and reading a poller.

Each pumps delegated work on the calling thread while it waits, wakes at least every
``WAIT_SLICE_S``, and turns a graph that can never progress into a ``DeadlockError`` (or a
``StateError`` when the host itself must act) instead of a hang.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING

from ..errors import GraphCancelled, StateError, Timeout
from ..packets import clone_owned
from ._admission import READER_GRACE_S
from ._stalls import stall_error, waits_on
from ._status import INITIALIZED, RUNNING, TERMINATED
from ._watchdog import running_what

DUE_POLL_S = 0.001
"""How often ``wait_until_idle`` looks again while a timer is due but not yet fired (a firing
that changes nothing signals nothing)."""

if TYPE_CHECKING:
    from ..packets import Packet
    from ._blocking import Blocking
    from ._budget import Budget
    from ._closing import Closing
    from ._conditions import Conditions
    from ._loop import Scheduler
    from ._nodes import OutputQueue
    from ._pump import Pump
    from ._status import Status


class Waits:
    """Blocking host calls over the engine's parts."""

    def __init__(self, status: Status, budget: Budget, blocking: Blocking, closing: Closing, scheduler: Scheduler,
                 pump: Pump, conditions: Conditions) -> None:
        self.conditions = conditions
        self.status = status
        self.budget = budget
        self.blocking = blocking
        self.closing = closing
        self.scheduler = scheduler
        self.pump = pump

    # -- the whole graph ------------------------------------------------------------------------

    def wait_done(self, deadline: float | None) -> None:
        """Block until every node has closed; raise the graph's error, if any (``Graph.wait_done``)."""
        status = self.status
        if status.state == INITIALIZED and not status.cancelled:
            msg = "wait_done() before start()"
            raise StateError(msg)
        began = time.monotonic()
        while True:
            self.pump.pump()
            with status.lock:
                if status.state in (TERMINATED, INITIALIZED) or status.broken:
                    break
                if self.scheduler.sources.parked:
                    self._parked_verdict()
                if self._autojump():
                    continue
                force = self.pump.idle() and self._idle_verdict()
                if status.state == TERMINATED:
                    break
                if not force:
                    try:
                        status.wait_change(deadline)
                    except Timeout:
                        msg = f"wait_done timed out after {time.monotonic() - began:.3g} s; {self.still_running()}"
                        raise Timeout(msg) from None
            if force:
                self.force_close()
        # Ended: what is still queued can never run (a failure's or a cancel's backlog).
        self.release_held()
        if status.cancelled:
            msg = "the graph was cancelled"
            raise GraphCancelled(msg)
        status.raise_if_failed()

    def _idle_verdict(self) -> bool:
        """The graph is idle and not terminated: terminate it, raise, or ask for a forced close
        (True: a failed graph with nodes left to close); lock held."""
        status = self.status
        closing = self.closing
        failed = status.error is not None or status.cancelled
        open_inputs = [e.name for e in closing.graph_inputs if not e.closed]
        if open_inputs and not failed:
            msg = (
                f"wait_done: graph input ports [{', '.join(open_inputs)}] still open, the graph "
                "won't finish on its own -- call close_input/close_all_inputs first"
            )
            raise StateError(msg)
        if failed:
            if all(n.closed or not n.opened for n in closing.nodes):
                status.state = TERMINATED
                return False
            return True
        closing.check_terminated()
        if status.state == TERMINATED or self.conditions.externally_held(closing.nodes):
            return False  # (held by a flag or an event: the outside may still let it run)
        msg_0 = "wait_done"
        raise stall_error(msg_0, closing.nodes, self.blocking)

    def _autojump(self) -> bool:
        """With an autojump clock: when nothing runs but timers wait, move the clock to the next
        timer (it fires at once) and return True; lock held."""
        sources = self.scheduler.sources
        clock = sources.clock
        if not clock.autojump or self.pump.pending() or not self.conditions.quiet(self.closing.nodes):
            return False
        target = sources.timer().jump_target()
        if target is None:
            return False
        clock.jump_to(target)
        # The timer thread fires it and the graph moves on; wait for that, not a whole slice.
        self.status.wait_change(None, 0.005)
        return True

    def still_running(self) -> str:
        """What keeps the graph from finishing, node by node, for a timeout's message; lock held.

        Durations come from the callback stamps that ``watchdog_ms`` or ``stats: full`` turn on
        (no per-packet cost otherwise): without them a running call shows as "in flight".
        """
        now_ns = time.perf_counter_ns()
        parked = self.scheduler.sources.parked
        timed = self.scheduler.timed
        parts: list[str] = []
        for node in self.closing.nodes:
            if node.closed:
                continue
            what: list[str] = []
            since = node.running_since
            if since:
                what.append(f"in {running_what(node)} for {(now_ns - since) / 1e9:.3g} s")
            elif node.in_flight or (node.close_started and not node.closed):
                call = "close()" if node.close_started else f"{node.in_flight} process() call(s)"
                what.append(f"{call} in flight")
            if node in parked:
                what.append("paused at the queue bound")
            elif node.waiting:
                what.append("paced (rate / source_yield)" if node.is_source else "waits for its call_after")
            held = node.gate.holding() if node.gate is not None else ""
            if held:
                what.append(held)
            if node.blocked:
                what.append("output blocked by a full consumer")
            queued = node.queued()
            if queued:
                what.append(f"queued {queued}")
            if what:
                parts.append(f"'{node.name}' ({', '.join(what)})")
        waits = waits_on(self.closing.nodes)
        if waits:
            parts.append("; ".join(waits))
        if not parts:
            unclosed = ", ".join(f"'{n.name}'" for n in self.closing.nodes if not n.closed)
            return f"nothing is running; not closed yet: {unclosed or 'none'}"
        untimed = not timed and any("in flight" in part for part in parts)
        hint = " (set watchdog_ms or stats: full to see for how long each call has run)" if untimed else ""
        return f"still running: {', '.join(parts)}{hint}"

    def _parked_verdict(self) -> None:
        """Sources wait for the queue bound while the host waits for the end: release them if the
        graph halted, or, when nothing runs and the backlog sits in pollers that no other thread
        reads (none ever read, or none for ``READER_GRACE_S``), let the sources run on unheld, as
        lm-flow's do: the host reads its outputs once the graph is done; lock held."""
        sources = self.scheduler.sources
        status = self.status
        sources.room()  # a halt or an idle graph releases them
        if not sources.parked or status.busy != len(sources.parked) or self.pump.pending():
            return
        holding = [p for n in self.closing.nodes for e in n.out_edges for p in e.pollers if len(p)]
        if not holding:
            return
        now = time.monotonic()
        me = threading.get_ident()
        if any(p.readers or (p.last_reader != me and now - p.last_read < READER_GRACE_S) for p in holding):
            return  # another thread drains them: the bound holds
        if any(p.last_read for p in holding) and now - sources.parked_since < READER_GRACE_S:
            return  # read before: give a reader that pauses a moment the benefit of the doubt
        sources.unheld = True
        sources.release()

    def wait_until_idle(self, deadline: float | None) -> None:
        """Block until nothing is running or queued for execution (closes nothing)."""
        status = self.status
        while True:
            self.pump.pump()
            with status.lock:
                if status.broken:
                    break
                # (a node waiting out its ``periodic`` condition runs nothing meanwhile)
                if self.pump.idle() or (not self.pump.pending() and status.busy == self.conditions.periods()):
                    if self.scheduler.sources.timers_due():  # (a manual clock moved: its timers fire first)
                        status.wait_change(deadline, DUE_POLL_S)
                        continue
                    if self.blocking.blocked and not status.halted:
                        msg = "wait_until_idle"
                        raise stall_error(msg, self.closing.nodes, self.blocking)
                    break
                status.wait_change(deadline)
        status.raise_if_failed()

    def force_close(self) -> None:
        """Close every idle node of a halted graph, and run those closes."""
        status = self.status
        with status.lock:
            self.closing.force_close()
            subs, calls = self.scheduler.take_work()
        self.scheduler.dispatch(subs, calls)

    def release_held(self) -> None:
        """``Closing.take_held`` under the lock, then drop the packets outside it."""
        with self.status.lock:
            held = self.closing.take_held()
        del held

    # -- one poller -----------------------------------------------------------------------------

    def _take(self, poller: OutputQueue) -> Packet:
        """Take ``poller``'s oldest packet for the host; lock held."""
        status = self.status
        p = poller.packets.popleft()
        self.budget.take_one(p)
        poller.last_read = time.monotonic()
        poller.last_reader = threading.get_ident()
        self.scheduler.sources.unheld = False  # a reader is back: the bound holds sources again
        if poller.blocks:
            self.blocking.poller_popped(poller.edge)
            if status.waiters:
                self.scheduler.sources.room()
        elif status.waiters:
            status.changed.notify_all()  # a send (or a source: ``Sources.room``) waiting for room may go on
            self.scheduler.sources.room()
        return p if p._value is None else clone_owned(p)

    def try_next(self, poller: OutputQueue) -> Packet | None:
        """``Poller.try_next``: the next packet if one is queued, else None."""
        status = self.status
        with status.lock:
            if poller.packets:
                p = self._take(poller)
            else:
                status.raise_if_failed()
                return None
        if self.blocking.retry:
            self.scheduler.settle()
        return p

    def next(self, poller: OutputQueue, deadline: float | None, timeout: float | None) -> Packet | None:
        """``Poller.next``: block for the next packet; None at the end of the stream."""
        status = self.status
        with status.lock:
            p = self._take(poller) if poller.packets else None
            if p is None:
                status.raise_if_failed()
                poller.readers += 1  # waiting on this poller: senders see someone reads it
        if p is not None:
            if self.blocking.retry:
                self.scheduler.settle()
            return p
        try:
            return self._wait_next(poller, deadline, timeout)
        finally:
            with status.lock:
                poller.readers -= 1

    def _wait_next(self, poller: OutputQueue, deadline: float | None, timeout: float | None) -> Packet | None:
        """``next()`` once the queue was empty: pump delegated work or wait for a packet."""
        status = self.status
        while True:
            p = self.try_next(poller)
            if p is not None:
                return p
            with status.lock:
                # Packets and the close may both have landed since ``try_next`` let go of the
                # lock: the stream ends only when it is closed and drained, seen in one hold.
                if poller.packets:
                    continue
                if poller.closed:
                    return None
                if status.state < RUNNING:
                    msg = "Poller.next() before Graph.start()"
                    raise StateError(msg)
            if self.pump.pump_step():
                continue
            with status.lock:
                if poller.packets or poller.closed or status.error is not None:
                    continue
                if status.cancelled and self.pump.idle():
                    # A cancel ends the stream once its closes ran (the poller closed, above),
                    # on every executor alike; only an output no close can reach ends here.
                    msg = "the graph was cancelled"
                    raise GraphCancelled(msg)
                if self._autojump():
                    continue
                if (self.pump.idle() and all(e.closed for e in self.closing.graph_inputs)
                        and status.state != TERMINATED and not self.conditions.externally_held(self.closing.nodes)):
                    msg_0 = f"Poller.next on `{poller.name}`"
                    raise stall_error(msg_0, self.closing.nodes, self.blocking)
                try:
                    status.wait_change(deadline)
                except Timeout:
                    msg = f"Poller.next on `{poller.name}` timed out after {timeout} s"
                    raise Timeout(msg) from None
