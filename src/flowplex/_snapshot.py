"""``EngineSnapshot``: the engine's state copied in one pass, as plain frozen data.

A leaf module (stdlib only at run time) so that both sides of the seam can import it: the
graph layer fills it (``flowplex.engine._snapshot.take_snapshot``, the one place that reads the
engine for diagnostics) and every diagnostic (stats, DOT, metrics, trace, ``Graph.dump``, the
live view) formats it, without knowing the engine's classes. Values are raw: counters as the
engine keeps them, times in the engine's clocks, no stats level applied. What a level hides and
what a node's state is called is the business of ``flowplex.diagnostics._stats``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeAlias

if TYPE_CHECKING:  # annotations only: the graph layer builds the values, this leaf imports nothing
    from ._state import GraphState

__all__ = ["EdgeSnapshot", "EngineSnapshot", "ExecutorSnapshot", "NodeSnapshot", "PollerSnapshot",
           "PortSnapshot", "TracerHook"]

TracerHook: TypeAlias = Callable[[str, str, int, int, int], None]
"""The engine's tracer hook: ``fn(node, callback, ts, start_ns, duration_ns)``."""


@dataclass(frozen=True, slots=True)
class PortSnapshot:
    """One consumer input port of a node."""

    name: str
    """The port name."""
    edge: str | None
    """The edge feeding it (``None`` when nothing does)."""
    queued: int
    """Packets in its queue."""
    peak: int
    """Deepest queue seen (counted whatever the stats level)."""
    closed: bool
    """No more packets will arrive."""
    bound: int
    """Its timestamp bound: no packet below it can still arrive."""
    capacity: int
    """Lossless capacity from ``input_queues``; 0 means unbounded."""
    fixed: int
    """``fixed_size`` capacity (oldest packets dropped beyond it); 0 when lossless."""
    is_back: bool
    """A feedback register (keeps only the latest packet)."""
    overwritten: int
    """Feedback values replaced before they were read (back-edges only)."""
    timeout_ms: float = 0.0
    """Its ``timeout_ms`` (0: a join waits for it as long as it takes)."""
    timeouts: int = 0
    """Times a join stopped waiting for it (its timeout passed) and ran with it empty."""
    late: int = 0
    """Packets dropped because they came after their join had timed out."""


@dataclass(frozen=True, slots=True)
class NodeSnapshot:
    """One node: identity, flags and raw counters."""

    name: str
    """The full node name (``p/q/b`` for nodes expanded from subgraphs)."""
    kernel: str
    """The registered kernel name."""
    language: str
    """The kernel class's ``language``."""
    executor: str
    """The name of the executor it runs on."""
    is_source: bool
    """It has no input ports."""
    on_error_skip: bool
    """``on_error: skip``: a failed invocation is counted, the node goes on."""
    opened: bool
    """``open`` has run."""
    close_started: bool
    """Its close was claimed."""
    closed: bool
    """``close`` has finished."""
    waiting: bool
    """A paced source waits for its next turn."""
    blocked: bool
    """A finished invocation waits for room in a full consumer queue."""
    blocked_since_s: float
    """``time.monotonic()`` when the current backpressure wait began (0.0: none)."""
    block_events: int
    """How many times its flush blocked on a full consumer."""
    in_flight: int
    """Claimed, unfinished invocations."""
    processed: int
    """Successful ``process`` invocations."""
    errors: int
    """Failed invocations."""
    packets_in: int
    """Packets popped from its input queues at claim time."""
    packets_out: int
    """Packets dispatched downstream from its outputs."""
    total_ns: int
    """Wall time measured in ``process`` (timed runs only)."""
    max_ns: int
    """Longest measured ``process`` call."""
    hist: tuple[int, ...]
    """Measured ``process`` calls per power-of-two µs bucket."""
    running_since_ns: int
    """``time.perf_counter_ns()`` when the measured callback now executing began (0: none)."""
    copies: int
    """Copy-on-write payload copies made inside ``process``."""
    ignored_emits: int
    """Emits to output indexes the node lacks, ignored."""
    ports: tuple[PortSnapshot, ...]
    """Its input ports, in declaration order."""
    held: str = ""
    """What its conditions hold it by now (``disabled by condition 'armed'``); "" when nothing does."""


@dataclass(frozen=True, slots=True)
class PollerSnapshot:
    """One poller subscribed to a graph output."""

    port: str
    """The graph output it reads."""
    queued: int
    """Packets waiting to be read."""
    capacity: int
    """0 for an unbounded poller."""
    overflow: str
    """What it does when full: ``block``, ``drop_oldest``, ``drop_newest`` or ``latest``."""
    dropped: int
    """Packets it discarded."""
    closed: bool
    """The stream ended."""


@dataclass(frozen=True, slots=True)
class EdgeSnapshot:
    """One edge: a producer port, its consumer ports and its pollers."""

    name: str
    """The edge (= producer port) name."""
    producer: str | None
    """The producing node, ``None`` for a graph input."""
    consumers: tuple[tuple[str, str], ...]
    """``(node, input port)`` of every consumer port."""
    is_graph_input: bool
    """Fed by ``Graph.send``."""
    closed: bool
    """The producer finished (or the graph input was closed)."""
    dropped: int
    """Packets dropped by ``fixed_size`` consumers."""
    last_sent: int
    """Last timestamp sent on a graph input (``TS_UNSET`` otherwise)."""
    pollers: tuple[PollerSnapshot, ...]
    """Pollers subscribed to it, in subscription order."""


@dataclass(frozen=True, slots=True)
class ExecutorSnapshot:
    """One executor: its ``TaskStats`` (``Executor.stats()``) under its name."""

    name: str
    """The executor name (``default`` for executor #0)."""
    kind: str
    """``inline``, ``threads`` or ``delegating``: for display only."""
    threads: int
    """Worker threads it owns."""
    queued: int
    """Tasks submitted and not started yet."""
    running: int
    """Tasks it is executing now."""
    capacity: int
    """How many tasks it runs at once (0: no fixed limit)."""


@dataclass(frozen=True, slots=True)
class EngineSnapshot:
    """The whole engine at one instant: one lock acquisition, one pair of timestamps."""

    state: GraphState
    """The lifecycle state."""
    stats_level: str
    """The effective stats level: ``off``, ``basic`` or ``full``."""
    error: str
    """Text of the first error, ``""`` when none."""
    error_node: str | None
    """The failed node (``KernelError.node``), ``None`` when none failed or the failure is no node's."""
    error_kernel: str | None
    """That node's kernel (``KernelError.kernel``)."""
    error_ts: int | None
    """The input timestamp of the failed ``process`` call (``KernelError.ts``; ``None`` in open/close)."""
    cancelled: bool
    """``cancel`` was called (or Ctrl-C reached a kernel)."""
    paused: bool
    """``pause`` is in effect."""
    started_ns: int
    """``time.perf_counter_ns()`` at ``start``; 0 before."""
    taken_ns: int
    """``time.perf_counter_ns()`` when the snapshot was taken."""
    taken_monotonic_s: float
    """``time.monotonic()`` when the snapshot was taken (the clock of ``blocked_since_s``)."""
    queued: int
    """Packets counted against the global watermark: node input queues and poller queues."""
    queued_bytes: int
    """Buffer bytes counted against ``limit_bytes`` (tracked only while it is set)."""
    limit_packets: int
    """The packet watermark graph-input sends wait on; 0 means unlimited."""
    limit_bytes: int
    """The buffer-byte watermark; 0 means unlimited."""
    soft_limit: int
    """The per-queue depth that logs a backlog warning (``max_queue_size``)."""
    busy: int
    """Claimed-but-unfinished invocations, pending wakes and running closes."""
    nodes: tuple[NodeSnapshot, ...]
    """Every node, in YAML order."""
    edges: tuple[EdgeSnapshot, ...]
    """Every edge, in the plan's order (graph inputs first)."""
    executors: tuple[ExecutorSnapshot, ...]
    """Every executor, ``default`` first."""
    tracer: TracerHook | None
    """The tracer hook attached to the engine (a reference, not a copy: it keeps its own
    events under its own lock), ``None`` when tracing is off."""
