"""Source pacing: ``source_yield``, ``rate`` and the queue bound park a source without a worker.

After a source invocation the loop asks ``pace``; a source that must wait counts as busy (the
graph is not idle) until the timer thread calls ``wake``, which claims it again on its
executor's background path.

The graph's queue bound (``max_queued_packets``, and the default 4096 packets / 64 MiB of
buffers) holds for sources as it does for graph-input sends: a source is not called again
while the graph holds as many packets as the bound allows (``parked``), so a source that
emits many packets per call stops reading its input until its consumers catch up. The bound
is checked between calls, so each source may exceed it by at most the packets of one call
(one call's emits are never split). A parked source counts among ``status.waiters``: the
places that already notify waiting hosts after progress (``Scheduler.complete``, the hop, a
poller read) then call ``room``, and a graph nothing is parked in pays nothing per packet.

A parked source also runs when nothing else in the graph runs and packets wait in node queues
(a join waiting for another source's packets): the bound then yields, once per such moment,
rather than deadlock the graph. A backlog held by pollers waits for a host that reads them;
when the host waits in ``wait_done`` instead and no other thread reads them, the sources run
on unheld (``unheld``), as lm-flow's sources always do, until a poller is read again: the
lm-flow program that runs a graph to the end and then reads its outputs keeps working.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ._clock import SYSTEM_CLOCK, Clock
from ._timers import Timers

if TYPE_CHECKING:
    from ..kernels._context import Context
    from ._budget import Budget
    from ._claims import Claims
    from ._closing import Closing
    from ._nodes import Node
    from ._status import Status

    FailureHandler = Callable[[Node | None, BaseException, str, bool], None]
    """``Engine.thread_failed``: where the timer thread reports what its loop caught."""


def _unreported(node: Node | None, exc: BaseException, where: str, lost: bool) -> None:
    raise exc


class Sources:
    """Parks and wakes sources; owns the graph's timer thread (started lazily)."""

    def __init__(self, status: Status, budget: Budget, claims: Claims, closing: Closing) -> None:
        self.status = status
        self.budget = budget
        self.claims = claims
        self.closing = closing
        self._timers: Timers | None = None
        self.clock: Clock = SYSTEM_CLOCK
        """Engine time (``_clock``): pacing deadlines and the timer thread read it."""
        self.parked: dict[Node, float] = {}
        """Sources waiting for the queue bound, with the earliest time each may start again
        (its ``rate`` / ``source_yield`` deadline, 0.0 for none)."""
        self.parked_since = 0.0
        """``monotonic`` time the first of ``parked`` parked (stall reports)."""
        self.on_failure: FailureHandler = _unreported
        """Set by the engine: where the timer thread reports what its loop caught."""
        self.unheld = False
        """The bound does not hold sources: their backlog sits in pollers nobody reads while the
        host waits for the end (``Waits``); the next poller read sets it back."""

    def pace(self, node: Node, ctx: Context) -> None:
        """After a source invocation: wait for ``source_yield`` / ``rate`` / the bound; lock held."""
        delay = ctx.yield_s
        deadline = 0.0
        now = self.clock()
        if node.rate_period:
            deadline = node.last_start + node.rate_period
        if delay is not None and delay > 0:
            deadline = max(deadline, now + delay)
        budget = self.budget
        if not self.unheld and ((budget.limit_packets and budget.queued >= budget.limit_packets)
                or (budget.limit_bytes and budget.queued_bytes >= budget.limit_bytes)):
            self._park(node, deadline, now)
        elif deadline > now:
            node.waiting = True
            self.status.busy += 1
            self.timer().add(deadline, node, node.wake_gen)

    def call_after(self, node: Node, delay: float) -> None:
        """A non-source node asked to be called again after ``delay`` s (``cc.call_after``); lock
        held. A later request replaces a pending one (a debounce: flush-on-idle batching)."""
        if node.waiting:
            node.wake_gen += 1  # the pending wake is stale now; its ``busy`` carries over
        else:
            node.waiting = True
            self.status.busy += 1
        self.timer().add(self.clock() + delay, node, node.wake_gen)

    def timer(self) -> Timers:
        """The graph's timer thread (started on first use)."""
        if self._timers is None:
            self._timers = Timers(self.clock, self.wake, self.on_failure)
        return self._timers

    def timers_due(self) -> bool:
        """Whether a timer's deadline has come and it has not fired yet (``wait_until_idle`` waits for it)."""
        return self._timers is not None and self._timers.due()

    def has_timers(self) -> bool:
        """Whether a timed wake waits or fires now."""
        return self._timers is not None and self._timers.pending()

    def _park(self, node: Node, deadline: float, now: float) -> None:
        """Hold ``node`` until the bound has room (``room``); lock held."""
        status = self.status
        if not self.parked:
            self.parked_since = now
        self.parked[node] = deadline
        node.waiting = True
        status.busy += 1
        status.waiters += 1  # progress now calls ``room`` (see the module docstring)

    def room(self) -> None:
        """Packets left the queues (or the graph went idle): release the parked sources if the
        bound has room, the graph halted, or nothing else runs while node queues hold packets
        that may wait for them; lock held."""
        parked = self.parked
        if not parked:
            return
        status = self.status
        if not (self.budget.under() or status.halted
                or (status.busy == len(parked) and any(p.queue for n in self.closing.nodes for p in n.inputs))):
            return
        self.release()

    def release(self) -> None:
        """Let every parked source run again (each at its own pacing deadline); lock held."""
        parked = self.parked
        status = self.status
        timers = self.timer()
        for node, deadline in parked.items():
            timers.add(deadline, node, node.wake_gen)  # still ``waiting``: ``wake`` claims it
        status.waiters -= len(parked)
        parked.clear()

    def wake(self, node: Node, gen: int) -> None:
        """Timer callback: a waiting source may run again."""
        status = self.status
        with status.lock:
            if gen != node.wake_gen or not node.waiting:
                return  # stale: cancel or reset already settled this wake's ``busy`` count
            status.busy -= 1
            node.waiting = False
            if not node.is_source:
                node.wake_due = True  # ``cc.call_after``: one call with no new inputs
            self.closing.rescan((node,))
            status.bump()
            subs = self.claims.take()
        for executor, task, arg in subs:
            executor.submit_background(task, arg)

    def cancel_waits(self, nodes: list[Node]) -> None:
        """Drop pending wakes, parked sources and running periods (a cancel or a failure); lock held."""
        for node in nodes:
            if node.waiting:
                node.waiting = False
                node.wake_gen += 1
                self.status.busy -= 1
            node.wake_due = False
            gate = node.gate
            if gate is not None:
                gate.cancel()
        self.status.waiters -= len(self.parked)
        self.parked.clear()

    def stop(self) -> None:
        """Stop the timer thread."""
        if self._timers is not None:
            self._timers.stop()
            self._timers = None
