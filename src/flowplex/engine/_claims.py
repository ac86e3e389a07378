"""Readiness and claiming: which invocation of a node may run now, and taking its inputs.

``schedule`` asks a node's input policy (``_nodes``: ``sync``, ``immediate``, ``fixed_size``,
``sync_set``, ``batch``) whether an invocation is ready and pops its inputs into a free context
("pop at claim": two claims never take the same timestamp). Each claim is queued in the outbox
as a submission; whoever holds the lock takes the outbox (``take``) and submits it after
releasing the lock.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Final

from .._timestamps import TS_MAX, TS_MIN, next_allowed
from ..kernels._context import PHASE_PROCESS
from ._nodes import BATCH, SYNC, SYNC_SET, batch_plan, ready_ts, sync_set_group, sync_ts

if TYPE_CHECKING:
    from ..kernels._context import Context
    from ..packets import Packet
    from ._blocking import Blocking
    from ._budget import Budget
    from ._engine_common import Submission
    from ._nodes import InPort, Node
    from ._status import Status

NO_WORK: Final[list[Submission]] = []
"""What ``take`` returns when nothing was claimed: shared, never appended to."""


def _no_task(arg: object) -> None:
    del arg


class Claims:
    """Claims ready invocations into the outbox; lock held for every call."""

    def __init__(self, status: Status, budget: Budget, blocking: Blocking) -> None:
        self.status = status
        self.budget = budget
        self.blocking = blocking
        self.out: list[Submission] = []
        """Claimed work, submitted by whoever takes it once the lock is released."""
        self.task: Callable[[object], None] = _no_task
        """The task every claim is submitted with: ``Scheduler.run`` (set when it is built)."""

    def take(self) -> list[Submission]:
        """The claimed work, leaving the outbox empty."""
        out = self.out
        if not out:
            return NO_WORK
        self.out = []
        return out

    def submit(self, node: Node, ctx: Context) -> None:
        """Queue claimed ``ctx`` of ``node`` for submission: the one writer of ``out``.

        It goes to the node's ``handler``: its executor, or the engine's hand-off for a hosted
        kernel, which then calls the executor's ``invoke`` directly."""
        self.out.append((node.handler, self.task, ctx))

    def schedule(self, node: Node) -> None:
        """Claim as many invocations of ``node`` as are ready."""
        if self.status.halted or not node.claimable or node.blocked:
            return
        port = node.fast1
        if port is not None:
            # Fast path (most nodes): one forward input, single-packet policy, one invocation
            # at a time: ``claim``'s first branch, without the loop and the in-flight count.
            if node.in_flight or not port.queue:
                if node.wake_due and not node.in_flight:
                    self._submit_woken(node)
                return
            ctx = self._take_single(node, port)
            ctx.seq = node.seq
            node.seq += 1
            node.in_flight = 1
            self.status.busy += 1
            self.submit(node, ctx)
            return
        # Finished-but-unflushed invocations still hold their contexts (claim-order flushing).
        gate = node.gate
        while node.in_flight + len(node.pending) < node.max_in_flight:
            claimed = self.claim(node)
            if claimed is None:
                if node.wake_due and not node.in_flight and not node.is_source:
                    self._submit_woken(node)
                return
            self.submit(node, claimed)
            if gate is not None and not gate.claimed():
                return

    def _submit_woken(self, node: Node) -> None:
        """Claim the call a fired ``call_after`` asked for: no new inputs, at the timestamp of
        the node's last input (its inputs' bounds are unchanged)."""
        node.wake_due = False
        ctx = node.contexts.pop()
        last = max((p.bound for p in node.fwd), default=TS_MIN)
        ctx.ts = last - 1 if last > TS_MIN else TS_MIN
        ctx.phase = PHASE_PROCESS
        for i in range(len(ctx.in_packets)):
            ctx.in_packets[i] = None
        ctx.seq = node.seq
        node.seq += 1
        node.in_flight += 1
        self.status.busy += 1
        self.submit(node, ctx)

    def claim(self, node: Node) -> Context | None:
        """Pop the inputs of one invocation into a free context, or None when none is ready."""
        port = node.fast_port
        if port is not None:
            # One forward input, single-packet policy (most nodes).
            if not port.queue:
                return None
            ctx = self._take_single(node, port)
        elif node.is_source:
            if node.source_done or node.waiting:
                return None
            ctx = node.contexts.pop()
            ctx.ts = node.seq
            ctx.phase = PHASE_PROCESS
        else:
            gate = node.gate
            if gate is not None and gate.ports:
                gate.drop_late()
            general = self._claim_batch(node) if node.policy == BATCH else self._claim_aligned(node)
            if general is None and gate is not None and gate.ports:
                gate.stalled()
            if general is None:
                return None
            ctx = general
            self._claim_registers(node, ctx)
        ctx.seq = node.seq
        node.seq += 1
        node.in_flight += 1
        self.status.busy += 1
        return ctx

    def _take_single(self, node: Node, port: InPort) -> Context:
        """Take the head of ``port``'s queue (not empty) into a free context: the one step of a
        single-packet claim (budget, bound, done flag, the retry of a blocked producer)."""
        q = port.queue
        p = q.popleft()
        self.budget.take_one(p)
        ts = p._ts
        ctx = node.contexts.pop()
        ctx.ts = ts
        ctx.phase = PHASE_PROCESS
        ctx.in_packets[port.index] = p
        b = ts + 1 if TS_MIN <= ts < TS_MAX else next_allowed(ts)
        if b > port.bound:
            port.bound = b
        if port.closed and not q:
            done = [False] * len(node.inputs)
            done[port.index] = True
            ctx.in_done = done
        node.packets_in += 1
        if port.capacity and self.blocking.blocked:
            self.blocking.retry_later(port)
        return ctx

    def _claim_batch(self, node: Node) -> Context | None:
        """Under ``batch``: up to N aligned rounds of every forward port, in one invocation."""
        plan = batch_plan(node)
        if plan is None:
            return None
        counts, ts = plan
        ctx = node.contexts.pop()
        ctx.ts = ts
        ctx.phase = PHASE_PROCESS
        batch: list[list[Packet]] = [[] for _ in node.inputs]
        for port, count in zip(node.fwd, counts, strict=True):
            items = [port.queue.popleft() for _ in range(count)]
            self.budget.take(items)
            batch[port.index] = items
            ctx.in_packets[port.index] = items[0] if items else None
            if items:
                b = next_allowed(items[-1]._ts)
                if b > port.bound:
                    port.bound = b
            node.packets_in += count
        ctx.batch = batch
        return ctx

    def _claim_aligned(self, node: Node) -> Context | None:
        """Joins (``sync``, ``immediate``, ``sync_set``): the packets at the ready timestamp."""
        # `sync` (joins) is the common case here: ask its rule directly.
        found = sync_ts(node.fwd) if node.policy == SYNC else ready_ts(node)
        if found is None:
            return None
        ts = found
        ports = sync_set_group(node, ts) if node.policy == SYNC_SET else node.fwd
        ctx = node.contexts.pop()
        ctx.ts = ts
        ctx.phase = PHASE_PROCESS
        inputs = ctx.in_packets
        for p in node.fwd:
            inputs[p.index] = None
        b = next_allowed(ts)
        for port in ports:
            q = port.queue
            if q and q[0]._ts == ts:
                popped = q.popleft()
                self.budget.take_one(popped)
                inputs[port.index] = popped
                node.packets_in += 1
            if b > port.bound:
                port.bound = b
        return ctx

    def _claim_registers(self, node: Node, ctx: Context) -> None:
        """Feedback registers, the retry of blocked producers and the done flags of a claim."""
        for port in node.backs:
            if port.queue:
                register = port.queue.popleft()
                ctx.in_packets[port.index] = register
                self.budget.add_uncounted(-1)  # feedback registers are not in the byte count
                if ctx.batch is not None:
                    ctx.batch[port.index] = [register]  # read once per batch, like lm-flow
            else:
                ctx.in_packets[port.index] = None
        if self.blocking.blocked:
            for port in node.fwd:
                if port.capacity:
                    self.blocking.retry_later(port)
        for p in node.inputs:
            if p.closed:
                ctx.in_done = [p.closed and not p.queue for p in node.inputs]
                break

    def hand_over(self, node: Node, port: InPort, p: Packet, ts: int) -> Context:
        """Claim ``node`` (idle, ``fast1`` is ``port``, its queue empty) for ``p`` (``ts`` is its
        timestamp, which every caller has at hand).

        What queueing ``p`` and ``schedule`` would do, without the queue: its counters would
        go up and down again, so only the peak records the depth of 1 (which warns at no soft
        limit, since limits are at least 1).
        """
        ctx = node.contexts.pop()
        ctx.ts = ts
        ctx.phase = PHASE_PROCESS
        ctx.in_packets[0] = p
        if port.closed:
            ctx.in_done = [True]
        ctx.seq = node.seq
        node.seq += 1
        node.in_flight = 1
        node.packets_in += 1
        self.status.busy += 1
        if not port.peak:
            port.peak = 1
        return ctx
