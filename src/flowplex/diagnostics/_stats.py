"""Frozen snapshots of a graph's counters: ``NodeStats``, ``PortStats``, ``EdgeStats``, ``GraphStats``.

``graph_stats(snapshot, plan)`` turns one ``EngineSnapshot`` (taken by the graph layer in one
lock pass, one timestamp) into ``GraphStats``: plain arithmetic on copied values, touching no
engine object. The stats level decides what is reported, not what the engine counts: under
``off`` the throughput counters, peaks and timings read 0 (lm-flow's rule), under ``basic`` the
timings read 0 and the percentiles ``None``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from .._state import GraphState
from .._suggest import did_you_mean
from .._timestamps import ts_name

if TYPE_CHECKING:
    from .._snapshot import EngineSnapshot, NodeSnapshot
    from ..spec._plan import GraphPlan

__all__ = [
    "NODE_STATES",
    "EdgeStats",
    "ExecutorStats",
    "GraphStats",
    "NodeStats",
    "PollerStats",
    "PortStats",
    "dump",
    "graph_stats",
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
    timeout_ms: float = 0.0
    """Its ``timeout_ms`` (0: none)."""
    timeouts: int = 0
    """Times its join stopped waiting for it and ran with it empty."""
    late: int = 0
    """Packets dropped because they came after their join had timed out."""

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
    held: str = ""
    """What its conditions hold it by now (``disabled by condition 'armed'``); "" when nothing does."""

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
    """``inline`` (flowplex's default: the thread that made work ready), ``threads``, ``delegating``
    or ``processes``."""
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
    limit) for inline, the worker processes of a process pool."""

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
    """Payload bytes (buffers, bytes, str) counted against ``queue_bytes_limit`` (node and poller
    queues; 0 when unlimited)."""
    queue_bytes_limit: int
    """The payload-byte bound of the default settings (64 MiB); 0 when ``max_queued_packets`` is set."""
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


# -- from a snapshot -----------------------------------------------------------------------------

def graph_stats(snapshot: EngineSnapshot, plan: GraphPlan) -> GraphStats:
    """The ``GraphStats`` of ``snapshot``, with the stats level applied; pure.

    ``plan`` supplies what the engine does not hold: which edges are graph outputs, and the
    executors' affinity and priority.
    """
    level = snapshot.stats_level
    edge_dropped = {e.name: e.dropped for e in snapshot.edges}
    node_stats = tuple(_node_stats(n, snapshot, edge_dropped) for n in snapshot.nodes)
    outputs = set(plan.graph_outputs)
    queued_by_edge: dict[str, int] = {}
    for n in snapshot.nodes:
        for p in n.ports:
            if p.edge is not None:
                queued_by_edge[p.edge] = queued_by_edge.get(p.edge, 0) + p.queued
    edge_stats = tuple(
        EdgeStats(
            name=e.name, producer=e.producer, consumers=e.consumers, queued=queued_by_edge.get(e.name, 0),
            dropped=e.dropped, closed=e.closed, is_graph_input=e.is_graph_input, is_graph_output=e.name in outputs,
            last_sent=ts_name(e.last_sent),
            pollers=tuple(
                PollerStats(port=p.port, queued=p.queued, capacity=p.capacity, overflow=p.overflow,
                            dropped=p.dropped, closed=p.closed)
                for p in e.pollers
            ),
        )
        for e in snapshot.edges
    )
    executor_stats = []
    for i, ex in enumerate(snapshot.executors):
        spec = plan.executors[i] if i < len(plan.executors) else None
        running = sum(1 for n in node_stats if n.executor == ex.name and n.running)
        executor_stats.append(ExecutorStats(
            name=ex.name, kind=ex.kind, threads=ex.threads,
            affinity=spec.affinity if spec is not None else (), priority=spec.priority if spec is not None else 0,
            queued=ex.queued, running=running, capacity=ex.capacity,
        ))
    return GraphStats(
        state=snapshot.state.name, stats_level=level, taken_ns=snapshot.taken_ns, started_ns=snapshot.started_ns,
        nodes=node_stats, edges=edge_stats, executors=tuple(executor_stats),
        queued=sum(n.queued for n in node_stats), queue_limit=snapshot.limit_packets, counted=snapshot.queued,
        counted_bytes=snapshot.queued_bytes if snapshot.limit_bytes else 0, queue_bytes_limit=snapshot.limit_bytes,
        error=snapshot.error, cancelled=snapshot.cancelled,
    )


def _node_state(n: NodeSnapshot, snapshot: EngineSnapshot) -> str:
    if n.name == snapshot.error_node or (n.errors and not n.on_error_skip):
        return "ERROR"
    if snapshot.state < GraphState.RUNNING:  # not started (or reset)
        return "CREATED"
    if n.closed:
        return "CLOSED"
    if n.in_flight or (n.close_started and not n.closed):
        return "RUNNING"
    if n.waiting:
        return "WAITING_SOURCE"
    return "IDLE"


def _node_stats(n: NodeSnapshot, snapshot: EngineSnapshot, edge_dropped: dict[str, int]) -> NodeStats:
    level = snapshot.stats_level
    counting = level != "off"
    full = level == "full"
    state = _node_state(n, snapshot)
    ports = tuple(
        PortStats(
            name=p.name, queued=p.queued, capacity=p.capacity, fixed=p.fixed, peak=p.peak if counting else 0,
            closed=p.closed, back_edge=p.is_back,
            dropped=edge_dropped.get(p.edge, 0) if p.fixed and p.edge is not None else 0,
            timeout_ms=p.timeout_ms, timeouts=p.timeouts, late=p.late,
        )
        for p in n.ports
    )
    hist = n.hist if full else ()
    running = state == "RUNNING"
    running_for_us = (snapshot.taken_ns - n.running_since_ns) // 1000 if full and running and n.running_since_ns else 0
    blocked_for_us = 0
    if n.blocked and n.blocked_since_s:
        blocked_for_us = int((snapshot.taken_monotonic_s - n.blocked_since_s) * 1e6)
    return NodeStats(
        node_name=n.name,
        kernel_name=n.kernel,
        language=n.language,
        executor=n.executor,
        state=state,
        running=running,
        running_for_us=max(0, running_for_us),
        in_flight=n.in_flight,
        processed=n.processed if counting else 0,
        errors=n.errors,
        total_process_us=n.total_ns // 1000 if full else 0,
        max_process_us=n.max_ns // 1000 if full else 0,
        packets_in=n.packets_in if counting else 0,
        packets_out=n.packets_out if counting else 0,
        peak_queue_depth=max((p.peak for p in ports), default=0),
        queued=sum(p.queued for p in ports),
        p50_us=percentile_us(hist, 0.50) if full else None,
        p95_us=percentile_us(hist, 0.95) if full else None,
        p99_us=percentile_us(hist, 0.99) if full else None,
        latency_hist=hist,
        blocked=n.blocked,
        blocked_for_us=blocked_for_us,
        block_events=n.block_events,
        copies=n.copies if full else 0,
        ignored_emits=n.ignored_emits,
        is_source=n.is_source,
        ports=ports,
        held=n.held,
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
            if p.timeout_ms:
                extra += f" timeout={p.timeout_ms:g}ms timeouts={p.timeouts} late={p.late}"
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
