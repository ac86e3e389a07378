"""What the compact and diagnostics DOT views infer from a snapshot: windows, hot spots, pressure.

Each view keeps a private baseline per graph (lm-flow's interval semantics): the first export
after ``start`` reports the window since start, later exports the delta since the previous
export of the *same* view; a new run (``start`` after ``reset``) clears the baselines.
Baselines live in a weak map keyed by the graph, so they vanish with it.
"""

from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass, field
from typing import Final

from ._stats import GraphStats, NodeStats, PortStats, percentile_us

__all__ = ["Analysis", "NodeDelta", "PortKey", "Window", "analyse", "window_for"]

PortKey = tuple[str, str]
"""``(node name, input port name)``."""

TOP_N: Final = 5
SATURATION_RED_US: Final = 1_000_000
"""A saturated executor whose queue stayed non-empty this long is drawn light red."""


@dataclass(frozen=True, slots=True)
class NodeDelta:
    """A node's counters over the view's window."""

    processed: int
    packets_in: int
    packets_out: int
    errors: int
    calls: int
    """Timed ``process`` calls in the window (stats ``full``)."""
    total_us: int
    hist: tuple[int, ...]
    block_events: int

    @property
    def avg_us(self) -> float | None:
        """Mean ``process`` time in the window, if any call was timed."""
        return self.total_us / self.calls if self.calls else None

    def percentile(self, q: float) -> int | None:
        """Windowed latency percentile (upper bound of its power-of-two bucket)."""
        return percentile_us(self.hist, q)


@dataclass(frozen=True, slots=True)
class Window:
    """The interval a compact/diagnostics export reports on."""

    since_start: bool
    """No earlier export of this view in this run: the window starts at ``start``."""
    window_us: float | None
    """Length of the window; ``None`` when it starts at ``start`` and the engine did not record
    when that was."""
    snapshot_us: float | None
    """Time since ``start`` (``None`` when not started or unknown)."""
    nodes: dict[str, NodeDelta]
    edge_dropped: dict[str, int]
    poller_dropped: dict[tuple[str, int], int]
    executor_queued_us: dict[str, float]
    """How long each executor's queue has stayed non-empty (0 when empty now)."""


@dataclass(slots=True)
class _Memory:
    started_ns: int = 0
    baselines: dict[str, GraphStats] = field(default_factory=dict)
    queued_since: dict[str, int] = field(default_factory=dict)

    def clear(self) -> None:
        self.started_ns = 0
        self.baselines.clear()
        self.queued_since.clear()


_memories: weakref.WeakKeyDictionary[object, _Memory] = weakref.WeakKeyDictionary()
_lock: Final = threading.Lock()


def _went_backwards(old: GraphStats, new: GraphStats) -> bool:
    # Counters only grow within one run; a drop means reset + start happened in between.
    before = {n.node_name: n for n in old.nodes}
    return any(
        n.processed < before[n.node_name].processed or n.packets_in < before[n.node_name].packets_in
        for n in new.nodes if n.node_name in before
    )


def window_for(owner: object, view: str, stats: GraphStats) -> Window:
    """The window of ``view`` for this export, and move the view's baseline to ``stats``.

    ``owner`` identifies the graph (the ``Graph``); ``stats.started_ns`` identifies the run when
    the engine records it (otherwise a counter going backwards reveals a reset).
    """
    with _lock:
        mem = _memories.get(owner)
        if mem is None:
            mem = _Memory()
            _memories[owner] = mem
        base: GraphStats | None = None
        if not stats.started:
            mem.clear()
        else:
            if stats.started_ns and stats.started_ns != mem.started_ns:
                mem.clear()
                mem.started_ns = stats.started_ns
            base = mem.baselines.get(view)
            if base is not None and _went_backwards(base, stats):
                mem.clear()
                base = None
            mem.baselines[view] = stats
        for ex in stats.executors:
            if ex.queued:
                mem.queued_since.setdefault(ex.name, stats.taken_ns)
            else:
                mem.queued_since.pop(ex.name, None)
        queued_us = {name: (stats.taken_ns - since) / 1000 for name, since in mem.queued_since.items()}
    snapshot_us: float | None = None
    if stats.started and stats.started_ns:
        snapshot_us = max(0.0, (stats.taken_ns - stats.started_ns) / 1000)
    window_us = snapshot_us if base is None else max(0.0, (stats.taken_ns - base.taken_ns) / 1000)
    if not stats.started:
        window_us = 0.0
    return Window(
        since_start=base is None, window_us=window_us, snapshot_us=snapshot_us,
        nodes=_node_deltas(base, stats), edge_dropped=_edge_drops(base, stats),
        poller_dropped=_poller_drops(base, stats), executor_queued_us=queued_us,
    )


def _node_deltas(base: GraphStats | None, stats: GraphStats) -> dict[str, NodeDelta]:
    before = {n.node_name: n for n in base.nodes} if base is not None else {}
    out = {}
    for n in stats.nodes:
        b = before.get(n.node_name)
        hist = n.latency_hist
        if b is not None and b.latency_hist and hist:
            hist = tuple(x - y for x, y in zip(hist, b.latency_hist, strict=True))
        out[n.node_name] = NodeDelta(
            processed=n.processed - (b.processed if b else 0),
            packets_in=n.packets_in - (b.packets_in if b else 0),
            packets_out=n.packets_out - (b.packets_out if b else 0),
            errors=n.errors - (b.errors if b else 0),
            calls=sum(hist),
            total_us=n.total_process_us - (b.total_process_us if b else 0),
            hist=hist,
            block_events=n.block_events - (b.block_events if b else 0),
        )
    return out


def _edge_drops(base: GraphStats | None, stats: GraphStats) -> dict[str, int]:
    before = {e.name: e.dropped for e in base.edges} if base is not None else {}
    return {e.name: e.dropped - before.get(e.name, 0) for e in stats.edges}


def _poller_drops(base: GraphStats | None, stats: GraphStats) -> dict[tuple[str, int], int]:
    before: dict[tuple[str, int], int] = {}
    if base is not None:
        for e in base.edges:
            for k, p in enumerate(e.pollers):
                before[(e.name, k)] = p.dropped
    return {(e.name, k): p.dropped - before.get((e.name, k), 0) for e in stats.edges for k, p in enumerate(e.pollers)}


# -- inference -------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Analysis:
    """Hot spots, rankings and the pressure path of one export."""

    blocked: frozenset[PortKey]
    """Lossless ports at capacity: their producers' flushes wait (BLOCKED: queue full)."""
    waiting: frozenset[PortKey]
    """Open, empty ports of aligning nodes whose siblings hold packets (WAITING)."""
    recovered: frozenset[PortKey]
    """Lossless ports that reached capacity earlier but have room now."""
    port_drops: dict[PortKey, int]
    """Packets dropped in the window on each lossy port."""
    node_rank: dict[str, int]
    """Top nodes, 1-based."""
    port_rank: dict[PortKey, int]
    """Top input ports, 1-based."""
    pressure_nodes: frozenset[str]
    """Producers upstream of a blocked or waiting port."""
    pressure_ports: frozenset[PortKey]
    """Input ports of pressure-path nodes (their feeding edges carry the pressure)."""
    running: int
    errors: int
    dropped: int
    """Packets dropped in the window, edges and pollers together."""


def _aligning(policy: str) -> bool:
    # Every policy except `immediate` waits for aligned timestamps on its forward inputs.
    return policy != "immediate"


def analyse(stats: GraphStats, window: Window, policies: dict[str, str]) -> Analysis:
    """Infer hot spots from a snapshot; ``policies`` maps node name to its input policy type."""
    blocked: set[PortKey] = set()
    waiting: set[PortKey] = set()
    recovered: set[PortKey] = set()
    port_drops: dict[PortKey, int] = {}
    for n in stats.nodes:
        live = n.state not in ("CLOSED", "CREATED")
        forward = [p for p in n.ports if not p.back_edge]
        for p in n.ports:
            key = (n.node_name, p.name)
            if p.full and live:
                blocked.add(key)
            elif p.capacity and p.peak >= p.capacity:
                recovered.add(key)
            if p.fixed:
                drops = window.edge_dropped.get(p.name, 0)
                if drops:
                    port_drops[key] = drops
        aligning = _aligning(policies.get(n.node_name, "sync")) and len(forward) > 1
        if live and aligning and any(p.queued for p in forward):
            waiting.update((n.node_name, p.name) for p in forward if not p.queued and not p.closed)
    pressure_nodes, pressure_ports = _pressure_path(stats, blocked | waiting)
    node_rank = _rank_nodes(stats, window, blocked, waiting, port_drops)
    port_rank = _rank_ports(stats, blocked, waiting, port_drops)
    dropped = sum(window.edge_dropped.values()) + sum(window.poller_dropped.values())
    return Analysis(
        blocked=frozenset(blocked), waiting=frozenset(waiting), recovered=frozenset(recovered - blocked),
        port_drops=port_drops, node_rank=node_rank, port_rank=port_rank, pressure_nodes=frozenset(pressure_nodes),
        pressure_ports=frozenset(pressure_ports), running=sum(1 for n in stats.nodes if n.state == "RUNNING"),
        errors=sum(1 for n in stats.nodes if n.state == "ERROR"), dropped=dropped,
    )


def _pressure_path(stats: GraphStats, stalled: set[PortKey]) -> tuple[set[str], set[PortKey]]:
    """Read-only reverse walk from every stalled port: all upstream producers and their inputs."""
    producer_of = {e.name: e.producer for e in stats.edges}
    ports_of = {n.node_name: n.ports for n in stats.nodes}
    nodes: set[str] = set()
    ports: set[PortKey] = set()
    stack = [producer_of.get(port) for _, port in sorted(stalled)]
    while stack:
        name = stack.pop()
        if name is None or name in nodes:
            continue
        nodes.add(name)
        for p in ports_of.get(name, ()):
            if p.back_edge:
                continue  # feedback registers never stall their producer
            ports.add((name, p.name))
            stack.append(producer_of.get(p.name))
    return nodes, ports - stalled


def _rank_nodes(stats: GraphStats, window: Window, blocked: set[PortKey], waiting: set[PortKey],
                port_drops: dict[PortKey, int]) -> dict[str, int]:
    """Errors > blocked ports > waiting ports and drops > window average latency > backlog.

    Latency only ranks a node whose window average is at least half the slowest node's, so a
    uniformly fast graph has no latency hot spots.
    """
    avgs = [d.avg_us for d in window.nodes.values() if d.avg_us is not None]
    slow = max(avgs, default=0.0) / 2
    keyed: list[tuple[tuple[float, ...], int, str]] = []
    for i, n in enumerate(stats.nodes):
        delta = window.nodes.get(n.node_name)
        names = [(n.node_name, p.name) for p in n.ports]
        avg = delta.avg_us if delta is not None and delta.avg_us is not None else 0.0
        key = (
            float(delta.errors if delta else 0),
            float(sum(1 for k in names if k in blocked)),
            float(sum(1 for k in names if k in waiting) + sum(port_drops.get(k, 0) for k in names)),
            avg if avg > 0 and avg >= slow else 0.0,
            float(sum(p.queued for p in n.ports if not p.back_edge)),
        )
        if any(key):
            keyed.append((key, i, n.node_name))
    keyed.sort(key=lambda item: (tuple(-x for x in item[0]), item[1]))
    return {name: rank for rank, (_, _, name) in enumerate(keyed[:TOP_N], start=1)}


def _rank_ports(stats: GraphStats, blocked: set[PortKey], waiting: set[PortKey],
                port_drops: dict[PortKey, int]) -> dict[PortKey, int]:
    """Blocked > waiting > drops > backlog."""
    keyed: list[tuple[tuple[int, ...], int, PortKey]] = []
    order = 0
    for n in stats.nodes:
        for p in n.ports:
            k = (n.node_name, p.name)
            backlog = 0 if p.back_edge else p.queued  # a feedback register always holds its value
            key = (int(k in blocked), int(k in waiting), port_drops.get(k, 0), backlog)
            if any(key):
                keyed.append((key, order, k))
            order += 1
    keyed.sort(key=lambda item: (tuple(-x for x in item[0]), item[1]))
    return {k: rank for rank, (_, _, k) in enumerate(keyed[:TOP_N], start=1)}


def port_capacity_text(p: PortStats, unbounded: str) -> str:
    """``N`` (lossless), ``N drop`` (fixed_size) or ``unbounded``/``∞``."""
    if p.capacity:
        return str(p.capacity)
    if p.fixed:
        return f"{p.fixed} drop"
    return unbounded


def node_is_quiet(n: NodeStats) -> bool:
    """Nothing happened and nothing is wrong: compact omits the counters."""
    return not (n.processed or n.packets_in or n.packets_out or n.queued or n.errors or n.running or n.blocked
                or n.block_events)
