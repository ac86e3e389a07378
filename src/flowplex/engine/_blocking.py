"""Backpressure inside the graph: blocked flushes and the producers to retry.

A finished invocation whose lossless consumer (a capacity-limited port or a blocking poller)
has no room becomes its node's *blocked flush* (``fits`` → ``block``): no worker waits with it.
When a consumer makes room, its producer goes on the retry list; the scheduler loop flushes it
then (``Scheduler.settle``).
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from ._engine_common import _is_power_of_two

if TYPE_CHECKING:
    from ..kernels._context import Context
    from ._nodes import Edge, InPort, Node
    from ._status import Status

log = logging.getLogger("flowplex.graph")


class Blocking:
    """The nodes whose flush waits for room downstream, and those that may go on."""

    def __init__(self, status: Status) -> None:
        self.status = status
        self.blocked: set[Node] = set()
        """Nodes holding a blocked flush."""
        self.retry: list[Node] = []
        """Blocked producers whose consumer made room (the loop retries them)."""

    def retry_later(self, port: InPort) -> None:
        """A capacity-limited port made room: its producer's blocked flush may go on."""
        edge = port.edge
        producer = edge.producer if edge is not None else None
        if producer is not None and producer.blocked:
            self.retry.append(producer)

    def poller_popped(self, edge: Edge) -> None:
        """A blocking poller on ``edge`` made room: retry its producer and wake senders."""
        producer = edge.producer
        if producer is not None and producer.blocked:
            self.retry.append(producer)
        self.status.bump()

    def fits(self, node: Node, ctx: Context) -> bool:
        """Whether every lossless consumer of ``ctx``'s staging has room; lock held.

        A batch larger than a consumer's whole capacity can never fit: that is a graph error.
        """
        for o, staged in enumerate(ctx.out_packets):
            if not staged:
                continue
            n = len(staged)
            edge = node.out_edges[o]
            for port in edge.consumers:
                cap = port.capacity
                if cap and len(port.queue) + n > cap:
                    if n > cap:
                        self.status.record_error(node, None, (
                            f"node `{node.name}` emits a batch of {n} packets to edge `{edge.name}`, exceeding "
                            f"consumer `{port.node.name}` input port `{port.name}` effective packet capacity {cap}; "
                            "set a larger input_queues capacity"), ctx.ts)
                        return True  # flushed as discarded: the graph failed
                    return self.block(node, f"consumer `{port.node.name}` input `{port.name}` (capacity={cap}, "
                                            f"queued={len(port.queue)}, incoming={n})")
            for poller in edge.pollers:
                if poller.blocks and len(poller) + n > poller.capacity:
                    return self.block(node, f"poller on output port `{edge.name}` (capacity={poller.capacity})")
        return True

    def block(self, node: Node, where: str) -> bool:
        """Make ``node``'s finished invocation its blocked flush; returns False (not flushed)."""
        node.blocked = True
        node.blocked_since = time.monotonic()
        node.block_events += 1
        self.blocked.add(node)
        if _is_power_of_two(node.block_events):
            log.warning("internal backpressure #%d: producer `%s` paused by %s; the worker was released and "
                        "will resume after dequeue", node.block_events, node.name, where)
        return False

    def unblock(self, node: Node) -> None:
        """``node``'s blocked flush went through."""
        node.blocked = False
        self.blocked.discard(node)
        log.info("internal backpressure cleared: producer `%s` resumed after %.0f us", node.name,
                 (time.monotonic() - node.blocked_since) * 1e6)

    def drop_blocked(self) -> None:
        """After an error or cancel: discard blocked flushes so their nodes can close."""
        for node in list(self.blocked):
            for ctx in node.pending.values():
                for staged in ctx.out_packets:
                    staged.clear()
                node.contexts.append(ctx)
            node.pending.clear()
            node.blocked = False
        self.blocked.clear()

    def blocked_names(self) -> str:
        """The blocked producers, for stall errors."""
        return ", ".join(sorted(n.name for n in self.blocked))
