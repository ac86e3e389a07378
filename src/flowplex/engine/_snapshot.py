"""The diagnostics seam of the engine: ``take_snapshot`` (``Engine.snapshot``) reads it.

Every diagnostic (stats, DOT, metrics, trace, ``Graph.dump``, the live view) formats an
``EngineSnapshot`` and never touches the engine, its nodes, ports, edges, pollers or executors.
This module is the only place that reads them on the diagnostics' behalf, and every
engine-level attribute it reads is named in ``take_snapshot`` alone. The one write diagnostics
need, a tracer, goes through ``Engine.set_tracer``.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from .._snapshot import (
    EdgeSnapshot,
    EngineSnapshot,
    ExecutorSnapshot,
    NodeSnapshot,
    PollerSnapshot,
    PortSnapshot,
    TracerHook,
)
from .._state import GraphState

if TYPE_CHECKING:
    from ..executors import Executor
    from ._budget import Budget
    from ._loop import Scheduler
    from ._nodes import Edge, InPort, Node, OutputQueue
    from ._status import Status

__all__ = ["take_snapshot"]


def take_snapshot(status: Status, budget: Budget, scheduler: Scheduler, stats_level: str, nodes: list[Node],
                  edges: list[Edge], executors: list[Executor]) -> EngineSnapshot:
    """Copy the engine's state in one pass under its lock; safe from any thread, at any time.

    The lock is held only to copy plain values (no formatting, no user code), so a snapshot
    is consistent: one instant for every counter, queue and flag. Blocks only while another
    thread holds the engine lock.
    """
    with status.lock:
        taken_ns = time.perf_counter_ns()
        taken_monotonic_s = time.monotonic()
        state = status.state
        error_text = status.error_text
        error = status.error
        cancelled = status.cancelled
        paused = status.paused
        started_ns = status.started_ns
        queued, queued_bytes = budget.queued, budget.queued_bytes
        limit_packets, limit_bytes, soft_limit = budget.limit_packets, budget.limit_bytes, budget.soft_limit
        busy = status.busy
        tracer: TracerHook | None = scheduler.tracer
        node_snaps = tuple(_node(n) for n in nodes)
        edge_snaps = tuple(_edge(e) for e in edges)
        tasks = [(ex.name, ex.stats()) for ex in executors]
    return EngineSnapshot(
        state=GraphState(state), stats_level=stats_level, error=error_text,
        error_node=error.node if error is not None else None,
        error_kernel=error.kernel if error is not None else None,
        error_ts=error.ts if error is not None else None,
        cancelled=cancelled, paused=paused, started_ns=started_ns, taken_ns=taken_ns,
        taken_monotonic_s=taken_monotonic_s, queued=queued, queued_bytes=queued_bytes,
        limit_packets=limit_packets, limit_bytes=limit_bytes, soft_limit=soft_limit, busy=busy,
        nodes=node_snaps, edges=edge_snaps,
        executors=tuple(
            ExecutorSnapshot(name=name, kind=t.kind, threads=t.threads, queued=t.queued, running=t.running,
                             capacity=t.capacity)
            for name, t in tasks
        ),
        tracer=tracer,
    )


# Lock held by the caller (take_snapshot) in the helpers below: plain reads of Node, InPort,
# Edge and Poller fields.

def _port(p: InPort) -> PortSnapshot:
    return PortSnapshot(
        name=p.name, edge=p.edge.name if p.edge is not None else None, queued=len(p.queue), peak=p.peak,
        closed=p.closed, bound=p.bound, capacity=p.capacity, fixed=p.fixed, is_back=p.is_back,
        overwritten=p.overwritten, timeout_ms=p.timeout_s * 1e3, timeouts=p.timeouts, late=p.late,
    )


def _node(n: Node) -> NodeSnapshot:
    return NodeSnapshot(
        name=n.name, kernel=n.spec.kernel, language=n.kernel.language, executor=n.executor.name,
        is_source=n.is_source, on_error_skip=n.on_error_skip, opened=n.opened, close_started=n.close_started,
        closed=n.closed, waiting=n.waiting, blocked=n.blocked, blocked_since_s=n.blocked_since,
        block_events=n.block_events, in_flight=n.in_flight, processed=n.processed, errors=n.errors,
        packets_in=n.packets_in, packets_out=n.packets_out, total_ns=n.total_ns, max_ns=n.max_ns,
        hist=tuple(n.hist), running_since_ns=n.running_since, copies=n.copies,
        ignored_emits=n.info.ignored_emits, ports=tuple(_port(p) for p in n.inputs),
        held=n.gate.holding() if n.gate is not None else "",
    )


def _poller(p: OutputQueue) -> PollerSnapshot:
    return PollerSnapshot(port=p.name, queued=len(p), capacity=p.capacity, overflow=p.overflow, dropped=p.dropped,
                          closed=p.closed)


def _edge(e: Edge) -> EdgeSnapshot:
    return EdgeSnapshot(
        name=e.name, producer=e.producer.name if e.producer is not None else None,
        consumers=tuple((p.node.name, p.name) for p in e.consumers), is_graph_input=e.is_graph_input,
        closed=e.closed, dropped=e.dropped, last_sent=e.last_sent, pollers=tuple(_poller(p) for p in e.pollers),
    )
