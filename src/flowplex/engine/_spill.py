"""One call emitting many packets: its output delivered in slices, the kernel held for room.

``Scheduler`` wires ``Spills.spill`` into every in-process node's ``NodeInfo.spill`` (``emit``
calls it every ``SPILL_SLICE`` packets on a port) and hands ``Spills.hosted`` to a kernel host
that can hold its kernel (the process pool's workers send their slices). Both deliver through
``Delivery.flush_port``, the one path every delivered packet takes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ..kernels._context import PHASE_PROCESS, SPILL_NEVER, SPILL_SLICE, Context
from ._seam import stage_outputs

if TYPE_CHECKING:
    from ..packets import Packet
    from ._budget import Budget
    from ._delivery import Delivery
    from ._engine_common import Calls, Submission
    from ._nodes import Node
    from ._status import Status

__all__ = ["Spills"]


class Spills:
    """Delivers a running call's staged output in slices and holds it until the budget has room."""

    def __init__(self, status: Status, budget: Budget, delivery: Delivery,
                 take_work: Callable[[], tuple[list[Submission], Calls]],
                 dispatch: Callable[[list[Submission], Calls], None]) -> None:
        self.status = status
        self.budget = budget
        self.delivery = delivery
        self.take_work = take_work
        """``Scheduler.take_work``: the claims and observer calls a delivery decided (lock held)."""
        self.dispatch = dispatch
        """``Scheduler.dispatch``: run them, outside the lock."""

    def spill(self, ctx: Context) -> None:
        """``emit`` staged ``ctx.spill_at`` packets on one port while the call runs: deliver all
        the call has staged so far, then hold the kernel until the graph's budget has room.

        Without this a call's output is staged whole before any of it is delivered, so one call
        emitting 10 M packets held them all (1.1-1.3 GB). Delivered in slices, the budget holds
        for the call as it does between calls. While it waits, this thread runs the work queued
        behind the call (the consumers it fed, on a runs-on-caller executor or the node's
        delegating inbox): a kernel whose consumers run on its own thread cannot deadlock on its
        own output. On another executor it waits for progress, a slice (50 ms) at a time.

        When nothing on this thread can make room and a slice passes without progress (the
        backlog sits in a poller nobody reads, or the consumers wait for this executor's only
        thread), the call goes on staging as before, and the next spill of this context comes
        at twice the count: a call that cannot be held costs a few slices, never a hang.
        Slices are delivered only where that equals delivering at the end: one call at a time
        (``max_in_flight`` 1), no lossless consumer capacity (``input_queues``: a full consumer
        must leave the whole flush blocked), no declared output types (checked at the end), and
        in ``process`` only.
        """
        node: Node = ctx.owner  # type: ignore[assignment]
        if self._deliver_staged(node, ctx):
            ctx.spill_at = SPILL_SLICE
        else:
            ctx.spill_at = min(ctx.spill_at * 2, SPILL_NEVER)

    def hosted(self, node: Node, ctx: Context, outputs: list[list[Packet]]) -> bool:
        """``spill`` for a call running on a kernel host (a process pool's worker): ``outputs``
        is what it staged so far (a partial outcome), staged here behind what ``ctx`` kept.

        Runs on the executor's completion thread while the worker waits for its go-ahead.
        Returns whether the worker's next slice comes after ``SPILL_SLICE`` packets (True) or
        after twice its last count (False: not eligible, kept staged for the final outcome, or
        nothing made room within a slice), as ``spill`` decides for an in-process call.
        """
        stage_outputs(ctx, outputs)
        return self._deliver_staged(node, ctx)

    def _deliver_staged(self, node: Node, ctx: Context) -> bool:
        """``spill``'s body: deliver what the running call staged, then ``_wait_for_room``;
        False when it may not be delivered yet (it stays staged) or no room came."""
        status = self.status
        with status.lock:
            if (ctx.phase != PHASE_PROCESS or status.halted or node.blocked or node.limited
                    or node.typed_outputs or node.max_in_flight != 1):
                return False
            delivery = self.delivery
            for o, staged in enumerate(ctx.out_packets):
                if staged:
                    edge = node.out_edges[o]
                    node.packets_out += len(staged)
                    delivery.flush_port(edge, staged)  # the one tap point, as at the call's end
                    staged.clear()
            if status.waiters:
                status.changed.notify_all()
            subs, calls = self.take_work()
        self.dispatch(subs, calls)
        return self._wait_for_room(node)

    def _wait_for_room(self, node: Node) -> bool:
        """``spill``'s wait: until the budget has room (True) or nothing here can make it (False)."""
        status = self.status
        budget = self.budget
        run_next = node.executor.run_next if node.on_caller else None
        inbox = node.inbox
        while True:
            with status.lock:
                if budget.under() or status.halted:
                    return True
                before = budget.queued
            if run_next is not None:
                if not run_next():
                    return False
                continue
            if inbox is not None:
                # This thread pumps the node's delegating executor (it runs this call): its
                # other tasks may run here, one at a time, as the pump would run them.
                try:
                    fn, arg = inbox.popleft()
                except IndexError:
                    return False
                fn(arg)
                continue
            with status.lock:
                if budget.under() or status.halted:
                    return True
                status.wait_change(None)
                if budget.queued >= before and not budget.under():
                    return False
