"""Frozen snapshots of a graph's counters: ``NodeStats``, ``PortStats``, ``EdgeStats``, ``GraphStats``.

``collect(graph)`` copies every counter under the engine lock in one pass (one timestamp per
snapshot) and does all arithmetic after releasing it. The stats level decides what is reported,
not what the engine counts: under ``off`` the throughput counters, peaks and timings read 0
(lm-flow's rule), under ``basic`` the timings read 0 and the percentiles ``None``.

Fields of the engine that a newer engine may lack are read with defaults, so a snapshot never
breaks while the runtime grows.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from .._state import GraphState
from .._suggest import did_you_mean
from .._timestamps import ts_name

if TYPE_CHECKING:
    from ..graph import Graph
    from ..graph._engine import Engine
    from ..graph._nodes import Edge, InPort, Node

__all__ = [
    "NODE_STATES",
    "EdgeStats",
    "ExecutorStats",
    "GraphStats",
    "NodeStats",
    "PollerStats",
    "PortStats",
    "collect",
    "dump",
    "percentile_us",
]

NODE_STATES: Final = ("CREATED", "IDLE", "WAITING_SOURCE", "RUNNING", "CLOSED", "ERROR")
"""Every value of ``NodeStats.state`` (lm-flow's DOT node states)."""

_HIST_BUCKETS: Final = 32


@dataclass(frozen=True, slots=True)
class PortStats:
    """One input port of a node."""

    name: str
    """The port name (also the name of the edge feeding it)."""
    queued: int
    """Packets waiting in the port's queue now."""
    capacity: int
    """Lossless capacity from ``input_queues``; 0 means unbounded."""
    fixed: int
    """``fixed_size`` capacity (the port drops its oldest packets beyond it); 0 when lossless."""
    peak: int
    """Highest queue depth seen (0 under stats ``off``)."""
    closed: bool
    """No more packets will arrive."""
    back_edge: bool
    """A feedback register (keeps only the latest packet)."""
    dropped: int
    """Packets the feeding edge dropped under ``fixed_size`` (edge-wide, shown on lossy ports only)."""

    @property
    def full(self) -> bool:
        """The lossless capacity is reached: its producer's next flush blocks."""
        return self.capacity > 0 and self.queued >= self.capacity


@dataclass(frozen=True, slots=True)
class NodeStats:
    """One node: its state, throughput counters and (stats ``full``) callback timings."""

    node_name: str
    """The full node name (``p/q/b`` for nodes expanded from subgraphs)."""
    kernel_name: str
    """The registered kernel name (``__lmflow.route`` for route nodes)."""
    language: str
    """The kernel class's ``language`` (``Python`` for flowplex's kernels)."""
    executor: str
    """The executor the node runs on."""
    state: str
    """One of ``NODE_STATES``: CREATED before start, then IDLE, WAITING_SOURCE (a paced source
    waiting for its next turn), RUNNING (a callback claimed or executing), CLOSED or ERROR."""
    running: bool
    """A callback of this node is claimed or executing now."""
    running_for_us: int
    """How long the executing callback has run so far (stats ``full``; else 0)."""
    in_flight: int
    """Claimed, unfinished invocations."""
    processed: int
    """Successful ``process`` invocations."""
    errors: int
    """Failed invocations (always counted, whatever the stats level)."""
    total_process_us: int
    """Wall time spent in ``process`` (stats ``full``; else 0)."""
    max_process_us: int
    """Longest single ``process`` call (stats ``full``; else 0)."""
    packets_in: int
    """Packets popped from the input queues at claim time."""
    packets_out: int
    """Packets dispatched downstream from the node's outputs."""
    peak_queue_depth: int
    """Deepest input queue seen (the maximum over the node's ports)."""
    queued: int
    """Packets waiting in the node's input queues now."""
    p50_us: int | None
    """Median ``process`` time, as the upper bound of its power-of-two bucket (``full`` only)."""
    p95_us: int | None
    """95th percentile ``process`` time (``full`` only)."""
    p99_us: int | None
    """99th percentile ``process`` time (``full`` only)."""
    latency_hist: tuple[int, ...]
    """Counts of ``process`` times per power-of-two µs bucket (bucket ``i`` ends at ``2**i`` µs);
    empty unless stats ``full``."""
    blocked: bool
    """A finished invocation waits for room in a full consumer queue (backpressure)."""
    blocked_for_us: int
    """How long the current backpressure wait has lasted (0 when not blocked)."""
    block_events: int
    """How many times the node's flush blocked on a full consumer."""
    copies: int
    """Copy-on-write payload copies made by ``take_input`` (stats ``full``; else 0)."""
    ignored_emits: int
    """Emits/forwards to output indexes the node lacks, ignored as lm-flow does (always counted;
    ``strict_ports: true`` makes them errors instead)."""
    is_source: bool
    """The node has no input ports."""
    ports: tuple[PortStats, ...]
    """Per-input-port queue stats, in declaration order."""

    @property
    def avg_process_us(self) -> float | None:
        """Mean ``process`` time (``None`` without timings or invocations)."""
        if not self.latency_hist or not self.processed:
            return None
        return self.total_process_us / max(1, sum(self.latency_hist))


@dataclass(frozen=True, slots=True)
class PollerStats:
    """One poller subscribed to a graph output."""

    port: str
    """The graph output it reads."""
    queued: int
    """Packets waiting to be read."""
    capacity: int
    """0 for an unbounded poller."""
    overflow: str
    """What a full bounded poller does: ``block``, ``drop_oldest``, ``drop_newest`` or ``latest``."""
    dropped: int
    """Packets the poller discarded."""
    closed: bool
    """The stream ended."""


@dataclass(frozen=True, slots=True)
class EdgeStats:
    """One edge: a producer port and its consumers."""

    name: str
    """The edge (= producer port) name."""
    producer: str | None
    """The producing node, or ``None`` for a graph input."""
    consumers: tuple[tuple[str, str], ...]
    """``(node, input port)`` of every consumer port."""
    queued: int
    """Packets in the consumer queues of this edge."""
    dropped: int
    """Packets dropped by ``fixed_size`` consumers."""
    closed: bool
    """The producer finished (or the graph input was closed)."""
    is_graph_input: bool
    """Fed by ``Graph.send``."""
    is_graph_output: bool
    """Delivered to pollers and observers."""
    last_sent: str
    """Last timestamp sent on a graph input (``Unset`` otherwise)."""
    pollers: tuple[PollerStats, ...]
    """Pollers subscribed to this edge."""


@dataclass(frozen=True, slots=True)
class ExecutorStats:
    """One executor: where it runs work and how much waits for it."""

    name: str
    """The executor name (``default`` for executor #0)."""
    kind: str
    """``inline`` (flowplex's default: the thread that made work ready), ``threads`` or ``delegating``."""
    threads: int
    """Worker threads it owns (0 for inline and delegating)."""
    affinity: tuple[int, ...]
    """CPU cores the workers are pinned to (empty: any)."""
    priority: int
    """Real-time priority requested for the workers (0: none)."""
    queued: int
    """Tasks submitted and not started yet."""
    running: int
    """Invocations and closes of its nodes that are claimed or executing."""
    capacity: int
    """How many tasks it runs at once: ``threads`` for a pool, 1 for delegating, 0 (no fixed
    limit) for inline."""

    @property
    def saturated(self) -> bool:
        """Every worker is busy."""
        return self.capacity > 0 and self.running >= self.capacity


@dataclass(frozen=True, slots=True)
class GraphStats:
    """A consistent snapshot of the whole graph (one lock acquisition, one timestamp)."""

    state: str
    """The lifecycle state: a ``GraphState`` member's name (``"RUNNING"``...)."""
    stats_level: str
    """Effective stats level: ``off``, ``basic`` or ``full``."""
    taken_ns: int
    """``time.perf_counter_ns()`` when the snapshot was taken."""
    started_ns: int
    """``perf_counter_ns`` at ``start`` when the engine records it, else 0."""
    nodes: tuple[NodeStats, ...]
    """Per-node stats, in YAML order."""
    edges: tuple[EdgeStats, ...]
    """Per-edge stats: graph inputs first, then node outputs (the plan's order)."""
    executors: tuple[ExecutorStats, ...]
    """Per-executor stats, ``default`` first (the plan's order)."""
    queued: int
    """Packets in all node input queues."""
    queue_limit: int
    """The global packet watermark graph-input sends wait on; 0 means unlimited."""
    counted: int
    """Packets counted against ``queue_limit`` now: node input queues *and* poller queues."""
    counted_bytes: int
    """Buffer bytes counted against ``queue_bytes_limit`` (node and poller queues; 0 when unlimited)."""
    queue_bytes_limit: int
    """The buffer-byte bound of the default settings (64 MiB); 0 when ``max_queued_packets`` is set."""
    error: str
    """Text of the first error, ``""`` when none."""
    cancelled: bool
    """``cancel`` was called (or Ctrl-C reached a kernel)."""

    def node(self, name: str) -> NodeStats:
        """The stats of node ``name``; ``KeyError`` (with a suggestion) when there is none."""
        for n in self.nodes:
            if n.node_name == name:
                return n
        from ..errors import UnknownPortError

        msg = f"no node named `{name}`{did_you_mean(name, [n.node_name for n in self.nodes])}"
        raise UnknownPortError(msg)

    @property
    def dropped(self) -> int:
        """Packets dropped on all edges."""
        return sum(e.dropped for e in self.edges)

    @property
    def errors(self) -> int:
        """Failed invocations over all nodes."""
        return sum(n.errors for n in self.nodes)

    @property
    def started(self) -> bool:
        """The graph was started (RUNNING, DRAINING or TERMINATED)."""
        return GraphState[self.state] >= GraphState.RUNNING


def percentile_us(hist: tuple[int, ...] | list[int], q: float) -> int | None:
    """The upper bound (µs) of the power-of-two bucket holding quantile ``q`` of ``hist``.

    >>> percentile_us([0, 3, 1], 0.5), percentile_us([0, 3, 1], 0.99), percentile_us([], 0.5)
    (2, 4, None)
    """
    total = sum(hist)
    if total <= 0:
        return None
    rank = q * total
    seen = 0
    for i, count in enumerate(hist):
        seen += count
        if count and seen >= rank:
            return 1 << i
    return 1 << (len(hist) - 1)


# -- collection ----------------------------------------------------------------------------------

@dataclass(slots=True)
class _RawNode:
    """Counters copied under the lock (plain values only)."""

    node: Node
    closed: bool
    close_started: bool
    opened: bool
    waiting: bool
    in_flight: int
    processed: int
    errors: int
    packets_in: int
    packets_out: int
    total_ns: int
    max_ns: int
    hist: tuple[int, ...]
    running_since: int
    blocked: bool
    blocked_since: float
    block_events: int
    copies: int
    ignored_emits: int
    ports: tuple[tuple[InPort, int, int, bool, int], ...]
    """``(port, queued, peak, closed, edge dropped)``."""


def _raw_node(node: Node) -> _RawNode:
    ports = tuple(
        (p, len(p.queue), p.peak, p.closed, p.edge.dropped if p.edge is not None else 0) for p in node.inputs
    )
    return _RawNode(
        node=node, closed=node.closed, close_started=node.close_started, opened=node.opened,
        waiting=node.waiting, in_flight=node.in_flight, processed=node.processed, errors=node.errors,
        packets_in=node.packets_in, packets_out=node.packets_out, total_ns=node.total_ns, max_ns=node.max_ns,
        hist=tuple(node.hist), running_since=node.running_since,
        blocked=bool(getattr(node, "blocked", False)), blocked_since=float(getattr(node, "blocked_since", 0.0)),
        block_events=int(getattr(node, "block_events", 0)), copies=int(getattr(node, "copies", 0)),
        ignored_emits=node.info.ignored_emits, ports=ports,
    )


def _raw_edge(edge: Edge) -> tuple[Edge, int, bool, int, tuple[PollerStats, ...]]:
    pollers = tuple(
        PollerStats(
            port=p.name, queued=len(p), capacity=int(getattr(p, "capacity", 0)),
            overflow=str(getattr(p, "overflow", "block")), dropped=int(getattr(p, "dropped", 0)),
            closed=bool(p.closed),
        )
        for p in edge.pollers
    )
    return edge, edge.dropped, edge.closed, edge.last_sent, pollers


def collect(graph: Graph) -> GraphStats:
    """Take a ``GraphStats`` snapshot of ``graph``; safe from any thread, at any time.

    Holds the engine lock only to copy counters (no formatting, no user code).
    """
    engine: Engine = graph._engine
    status, budget = engine.status, engine.budget
    with status.lock:
        now_ns = time.perf_counter_ns()
        now_mono = time.monotonic()
        state = status.state
        level = engine.stats_level
        error_text = status.error_text
        error = status.error
        failed_node = error.node if error is not None else None
        cancelled = status.cancelled
        nodes = [_raw_node(n) for n in engine.nodes]
        edges = [_raw_edge(e) for e in engine.edges.values()]
        limit = budget.limit_packets
        counted, counted_bytes, bytes_limit = budget.queued, budget.queued_bytes, budget.limit_bytes
        started_ns = status.started_ns
        executor_tasks = [ex.stats() for ex in engine.executors]
    outputs = set(graph.plan.graph_outputs)
    node_stats = tuple(
        _node_stats(raw, state, level, failed_node, now_ns, now_mono) for raw in nodes
    )
    edge_stats = tuple(
        EdgeStats(
            name=edge.name,
            producer=edge.producer.name if edge.producer is not None else None,
            consumers=tuple((p.node.name, p.name) for p in edge.consumers),
            queued=sum(q for raw in nodes for (p, q, _, _, _) in raw.ports if p.edge is edge),
            dropped=dropped, closed=closed, is_graph_input=edge.is_graph_input,
            is_graph_output=edge.name in outputs, last_sent=ts_name(last_sent), pollers=pollers,
        )
        for edge, dropped, closed, last_sent, pollers in edges
    )
    executor_stats = []
    for i, ex in enumerate(engine.executors):
        spec = graph.plan.executors[i] if i < len(graph.plan.executors) else None
        tasks = executor_tasks[i]
        running = sum(1 for n in node_stats if n.executor == ex.name and n.running)
        executor_stats.append(ExecutorStats(
            name=ex.name, kind=tasks.kind, threads=tasks.threads,
            affinity=spec.affinity if spec is not None else (), priority=spec.priority if spec is not None else 0,
            queued=tasks.queued, running=running, capacity=tasks.capacity,
        ))
    return GraphStats(
        state=GraphState(state).name, stats_level=level, taken_ns=now_ns, started_ns=started_ns,
        nodes=node_stats, edges=edge_stats, executors=tuple(executor_stats),
        queued=sum(n.queued for n in node_stats), queue_limit=limit, counted=counted,
        counted_bytes=counted_bytes if bytes_limit else 0, queue_bytes_limit=bytes_limit,
        error=error_text, cancelled=cancelled,
    )


def _node_state(raw: _RawNode, graph_state: int, failed_node: str | None) -> str:
    node = raw.node
    if node.name == failed_node or (raw.errors and not node.on_error_skip):
        return "ERROR"
    if graph_state < GraphState.RUNNING:  # not started (or reset)
        return "CREATED"
    if raw.closed:
        return "CLOSED"
    if raw.in_flight or (raw.close_started and not raw.closed):
        return "RUNNING"
    if raw.waiting:
        return "WAITING_SOURCE"
    return "IDLE"


def _node_stats(raw: _RawNode, graph_state: int, level: str, failed_node: str | None, now_ns: int,
                now_mono: float) -> NodeStats:
    node = raw.node
    counting = level != "off"
    full = level == "full"
    state = _node_state(raw, graph_state, failed_node)
    ports = tuple(
        PortStats(
            name=p.name, queued=queued, capacity=p.capacity, fixed=p.fixed, peak=peak if counting else 0,
            closed=closed, back_edge=p.is_back, dropped=dropped if p.fixed else 0,
        )
        for p, queued, peak, closed, dropped in raw.ports
    )
    hist = raw.hist if full else ()
    running = state == "RUNNING"
    running_for_us = (now_ns - raw.running_since) // 1000 if full and running and raw.running_since else 0
    return NodeStats(
        node_name=node.name,
        kernel_name=node.spec.kernel,
        language=str(getattr(node.kernel, "language", "Python")),
        executor=node.executor.name,
        state=state,
        running=running,
        running_for_us=max(0, running_for_us),
        in_flight=raw.in_flight,
        processed=raw.processed if counting else 0,
        errors=raw.errors,
        total_process_us=raw.total_ns // 1000 if full else 0,
        max_process_us=raw.max_ns // 1000 if full else 0,
        packets_in=raw.packets_in if counting else 0,
        packets_out=raw.packets_out if counting else 0,
        peak_queue_depth=max((p.peak for p in ports), default=0),
        queued=sum(p.queued for p in ports),
        p50_us=percentile_us(hist, 0.50) if full else None,
        p95_us=percentile_us(hist, 0.95) if full else None,
        p99_us=percentile_us(hist, 0.99) if full else None,
        latency_hist=hist,
        blocked=raw.blocked,
        blocked_for_us=int((now_mono - raw.blocked_since) * 1e6) if raw.blocked and raw.blocked_since else 0,
        block_events=raw.block_events,
        copies=raw.copies if full else 0,
        ignored_emits=raw.ignored_emits,
        is_source=node.is_source,
        ports=ports,
    )


# -- text dump -----------------------------------------------------------------------------------

def _dump_state(n: NodeStats) -> str:
    if n.state == "RUNNING":
        return f"RUNNING {n.running_for_us // 1000}ms" if n.running_for_us else "RUNNING"
    return {"CREATED": "new", "IDLE": "idle", "WAITING_SOURCE": "waiting", "CLOSED": "closed",
            "ERROR": "error"}.get(n.state, n.state.lower())


def dump(stats: GraphStats) -> str:
    """lm-flow's ``dump()`` text snapshot: a header, a node table, then ports, edges and pollers."""
    limit = str(stats.queue_limit) if stats.queue_limit else "unbounded"
    lines = [
        f"graph state={stats.state} stats={stats.stats_level} nodes={len(stats.nodes)} edges={len(stats.edges)} "
        f"queued={stats.queued}/{limit} packets"
    ]
    if stats.error:
        lines.append(f"error: {stats.error}")
    width = max([len(n.node_name) for n in stats.nodes] + [4])
    lines.append(f"{'node':<{width}}  {'state':<12} {'queued':>7} {'processed':>10} {'errors':>7} "
                 f"{'avg_us':>8} {'max_us':>8}")
    for n in stats.nodes:
        avg = n.avg_process_us
        avg_text = f"{avg:.1f}" if avg is not None else "-"
        max_text = str(n.max_process_us) if n.latency_hist else "-"
        lines.append(f"{n.node_name:<{width}}  {_dump_state(n):<12} {n.queued:>7} {n.processed:>10} "
                     f"{n.errors:>7} {avg_text:>8} {max_text:>8}")
    for n in stats.nodes:
        for p in n.ports:
            cap = str(p.capacity) if p.capacity else f"fixed {p.fixed}" if p.fixed else "unbounded"
            extra = " back-edge" if p.back_edge else ""
            lines.append(f"port {n.node_name}.{p.name}: capacity={cap} queued={p.queued} peak={p.peak} "
                         f"blocked={'yes' if p.full else 'no'} closed={'yes' if p.closed else 'no'}{extra}")
    for e in stats.edges:
        kind = "input" if e.is_graph_input else "edge"
        sent = f" last_sent={e.last_sent}" if e.is_graph_input else ""
        lines.append(f"{kind} {e.name}: closed={'yes' if e.closed else 'no'} dropped={e.dropped}{sent}")
    for e in stats.edges:
        for poll in e.pollers:
            cap = str(poll.capacity) if poll.capacity else "unbounded"
            lines.append(f"poller {poll.port}: policy={poll.overflow} capacity={cap} queued={poll.queued} "
                         f"dropped={poll.dropped} closed={'yes' if poll.closed else 'no'}")
    return "\n".join(lines) + "\n"
