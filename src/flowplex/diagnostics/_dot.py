"""Graphviz DOT export of a graph: the ``topology``, ``compact`` and ``diagnostics`` views.

The structure follows lm-flow's ``to_dot``: ``digraph lmflow``, left to right, nodes as rounded
boxes labelled ``short-name\\n(kernel · Language)\\n@executor``, subgraph namespaces (``p/a``) as
nested ``subgraph cluster_N`` boxes, graph inputs/outputs as ``cds`` port nodes, an executor
legend, and for the live views a title with hot spots, node states, queue pressure and drops.
Rendering is pure: one ``EngineSnapshot`` and the plan in, text out (``render_svg`` runs Graphviz).

Differences from lm-flow are deliberate and listed in ``to_dot``'s docstring.
"""

from __future__ import annotations

import logging
import shutil
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from ..errors import RunError, Timeout, UsageError
from ._dot_analysis import Analysis, Window, analyse, node_is_quiet, port_capacity_text, window_for
from ._dot_format import (
    CLUSTER_NAME_MAX,
    EXECUTOR_FILLS,
    KERNEL_NAME_MAX,
    NODE_NAME_MAX,
    PORT_NAME_MAX,
    STATE_BORDERS,
    TIMES,
    attrs,
    fmt_duration_us,
    fmt_rate,
    heat_colour,
    quote,
    truncate,
)
from ._dot_view import DotView
from ._stats import ExecutorStats, GraphStats, NodeStats, graph_stats

if TYPE_CHECKING:
    from .._snapshot import EngineSnapshot
    from ..spec._plan import GraphPlan
    from ..spec._specs import NodeSpec

__all__ = ["graphviz_available", "parse_view", "render_svg", "to_dot"]

log = logging.getLogger(__name__)

_STATE_ORDER: Final = {"ERROR": 0, "RUNNING": 1, "WAITING_SOURCE": 2, "IDLE": 3, "CREATED": 4, "CLOSED": 5}
_PORT_FILL: Final = "#e8e8e8"
_GREY: Final = "#777777"
_PURPLE: Final = "#6f42c1"
_RED: Final = "#d62728"
_YELLOW: Final = "#d6a700"
_AMBER: Final = "#d98c00"
_BLUE: Final = "#4c78a8"
_HEADER: Final = (
    "digraph lmflow {",
    "  rankdir=LR;",
    "  newrank=true;",
    '  graph [fontname="sans", nodesep=0.35, ranksep=0.65];',
    '  node [fontname="sans", shape=box, style="rounded,filled", fillcolor=white, ordering=out];',
    '  edge [fontname="sans", fontsize=10];',
)
_STATE_LEGEND: Final = (
    "  subgraph cluster_node_state_legend {",
    '    label="node state (border)"; style=dashed; color="#888888";',
    '    legend_state_created [shape=box, style=filled, fillcolor=white, color="#777777", label="CREATED"];',
    '    legend_state_idle [shape=box, style=filled, fillcolor=white, color="#4c78a8", label="IDLE"];',
    '    legend_state_waiting_source [shape=box, style=filled, fillcolor=white, color="#d6a700", penwidth=2, '
    'label="WAITING_SOURCE"];',
    '    legend_state_running [shape=box, style=filled, fillcolor=white, color="#2ca02c", penwidth=3, '
    'label="RUNNING"];',
    '    legend_state_closed [shape=box, style=filled, fillcolor=white, color="#777777", label="CLOSED"];',
    '    legend_state_error [shape=box, style=filled, fillcolor=white, color="#d62728", penwidth=3, label="ERROR"];',
    "  }",
)
_DIAGNOSTICS_LEGEND: Final = (
    "  subgraph cluster_diagnostics_legend {",
    '    label="diagnostics"; style=dashed; color="#888888";',
    '    legend_blocked [shape=box, style=filled, fillcolor="#ffd6d6", color="#d62728", penwidth=3, '
    'label="BLOCKED\\nconsumer queue full, producer waits"];',
    '    legend_waiting [shape=box, style=filled, fillcolor="#fff7bf", color="#d6a700", penwidth=2, '
    'label="WAITING\\nlikely missing aligned input"];',
    '    legend_history [shape=box, style=filled, fillcolor="#fff0c2", color="#d98c00", penwidth=2, '
    'label="recovered / dropped\\nhistorical pressure"];',
    '    legend_subscription [shape=box, style="rounded,filled", fillcolor="#e8f1fb", color="#4c78a8", '
    'label="dashed edge\\npoller subscription"];',
    '    legend_hot [shape=box, style=filled, fillcolor=white, color="#333333", penwidth=2, '
    'label="HOT #1..#5\\ncombined node / port rank"];',
    '    legend_pressure [shape=box, style=filled, fillcolor=white, color="#6f42c1", fontcolor="#553096", '
    'penwidth=3, label="PRESSURE PATH\\nupstream propagation to active stall"];',
    '    legend_executor_hot [shape=box, style=filled, fillcolor="#ffd6d6", color="#d62728", penwidth=2, '
    'label="EXECUTOR SATURATED\\nred >1s queued · orange shorter"];',
    '    legend_latency [shape=box, style=filled, fillcolor=white, color="#555555", '
    'label="lat p50/p95/p99\\nwindowed process latency\\n(power-of-two buckets)"];',
    "  }",
)


def parse_view(view: str | DotView) -> DotView:
    """Normalise a view name; ``UsageError`` (a ``ValueError``) for anything else."""
    try:
        return DotView(view)
    except ValueError:
        choices = ", ".join(repr(v.value) for v in DotView)
        msg = f"to_dot: unknown view {view!r}; expected one of {choices}"
        raise UsageError(msg) from None


def to_dot(snapshot: EngineSnapshot, plan: GraphPlan, view: str | DotView = DotView.TOPOLOGY, *, owner: object,
           counter_value: Callable[[str], int]) -> str:
    """The DOT text of the graph built from ``plan``, in ``view``, as ``snapshot`` shows it.

    ``owner`` identifies the graph whose views keep their baselines (the ``Graph``), and
    ``counter_value`` reads its named counters (the route nodes' ``route.*``).

    Differences from lm-flow: kernels show their class's ``language`` (``Python`` for
    flowplex's built-ins where lm-flow shows ``C++``); flowplex's default executor is shown as
    ``inline · caller thread``; byte counts, reservations (``rN``), executor wait times,
    graph-input wait counts, CoW bytes, the ``remaining`` time of a paced source and end-to-end
    latency are not measured and are left out (``e2e n/a``); backpressure is counted per
    producer (``bp N times``) rather than per port; back-edges are drawn dashed purple; a diagnostics
    edge also shows its queue line whenever packets are queued on it; the title gains an
    ``error:`` line after a failure.
    """
    v = parse_view(view)
    stats = graph_stats(snapshot, plan)
    window: Window | None = None
    analysis: Analysis | None = None
    if v is not DotView.TOPOLOGY:
        window = window_for(owner, v.value, stats)
        policies: dict[str, str] = {n.name: n.input_policy.type for n in plan.spec.nodes}
        analysis = analyse(stats, window, policies)
    routes = _route_counters(counter_value, plan)
    return "\n".join(_Renderer(plan, stats, v, window, analysis, routes).lines()) + "\n"


def _route_counters(counter_value: Callable[[str], int], plan: GraphPlan) -> dict[str, int]:
    names: list[str] = []
    for spec in plan.spec.nodes:
        if spec.route is None:
            continue
        names += [f"route.{spec.name}.dropped", f"route.{spec.name}.default_emitted"]
        for port in spec.output_ports:
            names += [f"route.{spec.name}.matched.{port.name}", f"route.{spec.name}.emitted.{port.name}"]
    return {name: counter_value(name) for name in names}


@dataclass(slots=True)
class _Cluster:
    name: str
    path: str
    nodes: list[int] = field(default_factory=list)
    children: dict[str, _Cluster] = field(default_factory=dict)


class _Renderer:
    """One export: holds the snapshot and emits lines in lm-flow's order."""

    def __init__(self, plan: GraphPlan, stats: GraphStats, view: DotView, window: Window | None,
                 analysis: Analysis | None, routes: dict[str, int]) -> None:
        self.plan = plan
        self.stats = stats
        self.view = view
        self.live = view is not DotView.TOPOLOGY
        self.diag = view is DotView.DIAGNOSTICS
        self.window = window
        self.analysis = analysis
        self.routes = routes
        self.edge_index = {name: i for i, name in enumerate(plan.edges)}
        self.exec_index = {ex.name: i for i, ex in enumerate(plan.executors)}
        self.exec_kind = {ex.name: ex.kind for ex in stats.executors}
        self.level = stats.stats_level
        avgs = [n.avg_process_us for n in stats.nodes]
        self.max_avg = max((a for a in avgs if a is not None), default=0.0)
        self.cluster_ids = 0

    # -- document ----------------------------------------------------------------------------------

    def lines(self) -> Iterator[str]:
        yield from _HEADER
        if self.live:
            yield f"  graph [labelloc=t, label={quote(self.title())}];"
        yield from self.node_statements()
        yield from self.port_statements()
        yield from self.edge_statements()
        yield from self.executor_legend()
        if self.live:
            yield from _STATE_LEGEND
        if self.diag:
            yield from _DIAGNOSTICS_LEGEND
        yield "}"

    def title(self) -> str:
        s, w, a = self.stats, self.window, self.analysis
        assert w is not None and a is not None  # live views only
        head = f"state {s.state.capitalize()} · stats {s.stats_level} · "
        if not s.started:
            head += "not started · window since start 0µs"
        elif w.window_us is None:  # the engine did not record its start time
            head += "snapshot n/a · window since start n/a"
        else:
            head += f"snapshot +{fmt_duration_us(w.snapshot_us)} · " if w.snapshot_us is not None else ""
            head += f"window since start {fmt_duration_us(w.window_us)}" if w.since_start else (
                f"window {fmt_duration_us(w.window_us)}")
        limit = str(s.queue_limit) if s.queue_limit else "unbounded"
        head += f" · queued {s.queued}/{limit} packets"
        top_nodes = ", ".join(f"#{r} {name}" for name, r in sorted(a.node_rank.items(), key=lambda kv: kv[1]))
        top_ports = ", ".join(f"#{r} {node}.{port}" for (node, port), r in
                              sorted(a.port_rank.items(), key=lambda kv: kv[1]))
        lines = [
            head,
            f"hotspots running {a.running} · error {a.errors} · blocked {len(a.blocked)} · "
            f"waiting {len(a.waiting)} · dropped {a.dropped}",
            f"top nodes {top_nodes or 'none'}",
            f"top ports {top_ports or 'none'}",
        ]
        if self.diag and self.level == "full":
            lines.append("e2e n/a")
        if s.error:
            lines.append(f"error: {truncate(s.error, 160)}")
        return "\n".join(lines)

    # -- nodes -------------------------------------------------------------------------------------

    def sort_key(self, i: int) -> tuple[int, int, int]:
        n = self.stats.nodes[i]
        state = _STATE_ORDER.get(n.state, 9) if self.live else 0
        return self.exec_index.get(n.executor, 0), state, i

    def node_statements(self) -> Iterator[str]:
        root = _Cluster("", "")
        for i, spec in enumerate(self.plan.spec.nodes):
            where = root
            parts = spec.name.split("/")[:-1]
            for depth, part in enumerate(parts):
                child = where.children.get(part)
                if child is None:
                    child = _Cluster(part, "/".join(parts[: depth + 1]))
                    where.children[part] = child
                where = child
            where.nodes.append(i)
        yield from self.cluster_body(root)

    def cluster_body(self, cluster: _Cluster) -> Iterator[str]:
        for i in sorted(cluster.nodes, key=self.sort_key):
            yield f"  n{i} {self.node_attrs(i)};"
        for child in cluster.children.values():
            cid = self.cluster_ids
            self.cluster_ids += 1
            label = quote(truncate(child.name, CLUSTER_NAME_MAX))
            yield (f"  subgraph cluster_{cid} {{ label={label}; tooltip={quote(child.path)}; style=dashed; "
                   'color="#888888";')
            yield from self.cluster_body(child)
            yield "  }"

    def executor_fill(self, executor: str) -> str:
        fill = _KIND_FILLS.get(self.exec_kind.get(executor, ""))
        if fill is not None:
            return fill
        return EXECUTOR_FILLS[self.exec_index.get(executor, 0) % len(EXECUTOR_FILLS)]

    def node_attrs(self, i: int) -> str:
        n = self.stats.nodes[i]
        spec = self.plan.spec.nodes[i]
        label = [
            truncate(n.node_name.rsplit("/", 1)[-1], NODE_NAME_MAX),
            f"({truncate(n.kernel_name, KERNEL_NAME_MAX)} · {n.language})",
            f"@{n.executor}",
        ]
        fill = self.executor_fill(n.executor)
        colour, width = "#333333", 1
        if not self.live:
            caps = ", ".join(f"{truncate(p.name, PORT_NAME_MAX)}={_cap_text(p.capacity, p.fixed)}" for p in n.ports)
            if caps:
                label.append(f"cap {caps}")
        else:
            label += self.route_lines(spec)
            label += self.live_lines(n)
            colour, width = STATE_BORDERS.get(n.state, (_GREY, 1))
            avg = n.avg_process_us
            if avg is not None and self.max_avg > 0:
                fill = heat_colour(avg / self.max_avg)
            elif avg is not None:
                fill = heat_colour(0.0)
            if (self.diag and self.analysis is not None and n.node_name in self.analysis.pressure_nodes
                    and n.state != "ERROR"):
                colour, width = _PURPLE, 3
        return attrs(label="\n".join(label), fillcolor=fill, color=colour, penwidth=width,
                     group=f"exec{self.exec_index.get(n.executor, 0)}", tooltip=self.node_tooltip(n))

    def node_tooltip(self, n: NodeStats) -> str:
        avg = n.avg_process_us
        rank = self.analysis.node_rank.get(n.node_name) if self.analysis is not None else None
        pressure = self.analysis is not None and n.node_name in self.analysis.pressure_nodes
        return (f"{n.node_name} ({n.kernel_name} · {n.language}) on @{n.executor}: state {n.state}, "
                f"stats {self.level}, processed {n.processed}, "
                f"avg {fmt_duration_us(avg) if avg is not None else 'n/a'}, "
                f"in {n.packets_in}, out {n.packets_out}, errors {n.errors}, queued {n.queued}, "
                f"CoW {n.copies} copies, {n.ignored_emits} ignored emits, "
                f"hotspot rank {f'#{rank}' if rank else 'none'}, "
                f"pressure path {'true' if pressure else 'false'}")

    def route_lines(self, spec: NodeSpec) -> list[str]:
        route = spec.route
        if route is None:
            return []
        from ._check import describe_predicate

        c = self.routes
        name = spec.name
        lines = [f"route {route.mode} · unmatched {route.unmatched} · drop {c.get(f'route.{name}.dropped', 0)}"]
        for k, rule in enumerate(route.rules, start=1):
            to = truncate(rule.to, PORT_NAME_MAX)
            emitted = c.get(f"route.{name}.emitted.{rule.to}", 0)
            if rule.default or rule.when is None:
                lines.append(f"rule {k} [default] → {to}: emit {c.get(f'route.{name}.default_emitted', 0)}")
            else:
                matched = c.get(f"route.{name}.matched.{rule.to}", 0)
                lines.append(f"rule {k} [{truncate(describe_predicate(rule.when), 40)}] → {to}: "
                             f"match {matched} / emit {emitted}")
        return lines

    def live_lines(self, n: NodeStats) -> list[str]:
        a, w = self.analysis, self.window
        assert a is not None and w is not None
        lines: list[str] = []
        rank = a.node_rank.get(n.node_name)
        if rank:
            lines.append(f"HOT #{rank}")
        state = n.state
        if state == "RUNNING" and n.running_for_us:
            state = f"RUNNING {fmt_duration_us(n.running_for_us)}"
        if n.blocked:
            state += f" · BLOCKED {fmt_duration_us(n.blocked_for_us)}"
        if n.held:
            state += f" · {n.held}"
        delta = w.nodes.get(n.node_name)
        if self.level == "off":
            lines.append(state + (f" · {n.errors} err" if n.errors else ""))
            if n.ignored_emits:
                lines.append(f"ignored emits {n.ignored_emits}")
            if n.queued:
                lines.append(f"queue {n.queued} pkts")
        elif not self.diag and node_is_quiet(n):
            lines.append(state)
        else:
            d_proc = delta.processed if delta else 0
            if n.latency_hist:
                avg = delta.avg_us if delta and delta.calls else n.avg_process_us
                timing = f"{fmt_duration_us(avg)} avg" if avg is not None else "0µs avg"
            else:
                timing = "timing n/a"
            lines.append(f"{state} · {n.processed} pkts (+{d_proc} · {fmt_rate(d_proc, w.window_us)}) · {timing}")
            io = (f"in {n.packets_in} (+{delta.packets_in if delta else 0}) / "
                  f"out {n.packets_out} (+{delta.packets_out if delta else 0})")
            if not n.is_source:
                io += f" · peakQ {n.peak_queue_depth}"
            if n.errors:
                io += f" · {n.errors} err (+{delta.errors if delta else 0})"
            lines.append(io)
            if self.diag and n.latency_hist:
                hist = delta.hist if delta and delta.calls else n.latency_hist
                p50, p95, p99 = (_pct(hist, q) for q in (0.50, 0.95, 0.99))
                if p50 is not None:
                    lines.append(f"lat p50 {p50} · p95 {p95} · p99 {p99}")
            if n.queued:
                lines.append(f"queue {n.queued} pkts")
            if n.block_events:
                lines.append(f"bp {n.block_events}{TIMES} (+{delta.block_events if delta else 0})")
            if self.diag and n.copies:
                lines.append(f"CoW {n.copies} copies")
            if n.ignored_emits:
                lines.append(f"ignored emits {n.ignored_emits}")
        if self.diag and n.ports:
            lines.append("ports:")
            lines += [self.port_line(n, k) for k in range(len(n.ports))]
        return lines

    def port_line(self, n: NodeStats, k: int) -> str:
        a = self.analysis
        assert a is not None
        p = n.ports[k]
        key = (n.node_name, p.name)
        text = f"  {truncate(p.name, PORT_NAME_MAX)} {p.queued}/{port_capacity_text(p, '∞')}"
        if p.back_edge:
            text += " back-edge"
        if p.timeout_ms:
            text += f" timeout {p.timeout_ms:g}ms ({p.timeouts} timed out)"
        drops = a.port_drops.get(key, 0)
        if drops:
            text += f" dropped +{drops}"
        rank = a.port_rank.get(key)
        if rank:
            text += f" HOT #{rank}"
        if key in a.blocked:
            text += " BLOCKED: queue full"
        elif key in a.waiting:
            text += " WAITING: aligned input"
        elif key in a.recovered:
            text += " recovered: downstream slow"
        return text

    # -- graph ports and edges ---------------------------------------------------------------------

    def port_statements(self) -> Iterator[str]:
        edges = {e.name: e for e in self.stats.edges}
        for name in self.plan.graph_inputs:
            e = self.edge_index[name]
            label = [truncate(name, PORT_NAME_MAX)]
            colour, width = _GREY, 1
            stat = edges.get(name)
            if self.diag and stat is not None:
                if stat.closed:
                    label.append("closed")
                elif stat.last_sent != "Unset":
                    label.append(f"last ts {stat.last_sent}")
                s = self.stats
                if not stat.closed and s.queue_limit and s.queued >= s.queue_limit and s.started:
                    label.append("BLOCKED: global packet limit")
                    colour, width = _RED, 3
            yield (f"  pin{e} [shape=cds, style=filled, fillcolor=\"{_PORT_FILL}\", color=\"{colour}\", "
                   f"penwidth={width}, label={quote(chr(10).join(label))}, tooltip={quote(f'graph input {name}')}];")
        for name in self.plan.graph_outputs:
            e = self.edge_index[name]
            yield (f"  pout{e} [shape=cds, style=filled, fillcolor=\"{_PORT_FILL}\", color=\"{_GREY}\", "
                   f"label={quote(truncate(name, PORT_NAME_MAX))}, tooltip={quote(f'graph output {name}')}];")

    def edge_statements(self) -> Iterator[str]:
        stats_by_edge = {e.name: e for e in self.stats.edges}
        for name, ep in self.plan.edges.items():
            e = self.edge_index[name]
            src = f"pin{e}" if ep.producer is None else f"n{ep.producer}"
            for node_index, port_index in ep.consumers:
                yield f"  {src} -> n{node_index} {self.edge_attrs(name, node_index, port_index)};"
            if ep.is_graph_output:
                yield f"  {src} -> pout{e} {attrs(label=truncate(name, PORT_NAME_MAX))};"
                stat = stats_by_edge.get(name)
                if self.diag and stat is not None:
                    for k in range(len(stat.pollers)):
                        yield from self.poller_statements(name, e, k)

    def edge_attrs(self, name: str, node_index: int, port_index: int) -> str:
        n = self.stats.nodes[node_index]
        p = n.ports[port_index]
        short = truncate(name, PORT_NAME_MAX)
        extra: dict[str, str | int] = {}
        if p.back_edge:
            extra = {"style": "dashed", "color": _PURPLE}
        timeout = f"timeout {p.timeout_ms:g}ms" if p.timeout_ms else ""
        if not self.diag:
            tip = f"edge {name}" + (" (back-edge latest-value register)" if p.back_edge else "")
            return attrs(label=f"{short}\n{timeout}" if timeout else short, **extra, tooltip=tip)
        a, w = self.analysis, self.window
        assert a is not None and w is not None
        key = (n.node_name, p.name)
        drops = a.port_drops.get(key, 0)
        rank = a.port_rank.get(key)
        reason, colour, font = "healthy", "", ""
        if key in a.blocked:
            reason, colour, font = "BLOCKED: queue full", _RED, "#a01c1c"
        elif key in a.waiting:
            reason, colour, font = "WAITING: missing aligned input", _YELLOW, "#8a6d00"
        elif drops:
            reason, colour, font = "BOTTLENECK: consumer cannot keep up", _AMBER, "#9a6200"
        elif key in a.recovered:
            reason, colour, font = "RECOVERED: downstream drained slowly", _AMBER, "#9a6200"
        elif key in a.pressure_ports:
            reason, colour, font = "PRESSURE PATH: upstream propagation", _PURPLE, "#553096"
        producer = next((e.producer for e in self.stats.edges if e.name == name), None)
        cap = port_capacity_text(p, "unbounded")
        tip = (f"edge {name} to {n.node_name}.{p.name}: reason {reason.split(':')[0].lower()}, queue {p.queued}/{cap}, "
               f"peak {p.peak}, dropped {p.dropped}, window dropped {drops}, "
               f"producer {producer if producer is not None else 'graph input'}")
        if timeout:
            timeout += f" · {p.timeouts} timed out · {p.late} late"
            tip += f", {timeout}"
        if reason == "healthy" and not p.queued and not rank:
            return attrs(label=f"{short}\n{timeout}" if timeout else short, **extra, tooltip=tip)
        label = [short, f"queue {p.queued}/{cap}"]
        if timeout:
            label.append(timeout)
        prod = next((m for m in self.stats.nodes if m.node_name == producer), None)
        if p.capacity and prod is not None and prod.block_events:
            delta = w.nodes.get(prod.node_name)
            label.append(f"bp {prod.block_events}{TIMES} · window +{delta.block_events if delta else 0}{TIMES}")
        if drops:
            label.append(f"dropped +{drops} in window")
        if rank:
            label.append(f"HOT #{rank}")
        if reason != "healthy":
            label.append(reason)
            extra = {"color": colour, "fontcolor": font, "penwidth": 3 if key in a.blocked else 2}
            if p.back_edge:
                extra["style"] = "dashed"
        return attrs(label="\n".join(label), **extra, tooltip=tip)

    def poller_statements(self, name: str, e: int, k: int) -> Iterator[str]:
        a, w = self.analysis, self.window
        assert a is not None and w is not None
        stat = next(s for s in self.stats.edges if s.name == name)
        poll = stat.pollers[k]
        cap = str(poll.capacity) if poll.capacity else "unbounded"
        policy = "".join(part.capitalize() for part in poll.overflow.split("_"))
        dropped = w.poller_dropped.get((name, k), 0)
        label = [f"poller: {truncate(name, PORT_NAME_MAX)}", f"{policy} · queue {poll.queued}/{cap}",
                 f"dropped {poll.dropped} · window +{dropped}"]
        colour, width = _BLUE, 1
        if poll.capacity and poll.overflow == "block" and poll.queued >= poll.capacity and not poll.closed:
            label.append("BLOCKED: subscriber queue full")
            colour, width = _RED, 3
        elif dropped:
            label.append("BOTTLENECK: subscriber dropping")
            colour, width = _AMBER, 2
        elif not poll.capacity and poll.queued >= 100 and not poll.closed:
            label.append("slow subscriber")
            colour, width = _AMBER, 2
        tip = (f"poller {name}: {policy}, queue {poll.queued}/{cap}, dropped {poll.dropped}, "
               f"closed {'true' if poll.closed else 'false'}")
        yield (f"  poller{e}_{k} [shape=cylinder, style=filled, fillcolor=\"#e8f1fb\", color=\"{colour}\", "
               f"penwidth={width}, label={quote(chr(10).join(label))}, tooltip={quote(tip)}];")
        yield f'  pout{e} -> poller{e}_{k} [style=dashed, color="{_BLUE}", label="subscription"];'

    # -- legend ------------------------------------------------------------------------------------

    def executor_legend(self) -> Iterator[str]:
        placement = "node label = placement" if self.live else "node fill = placement"
        yield "  subgraph cluster_legend {"
        yield f'    label="executors ({placement})"; style=dashed; color="#888888";'
        for i, ex in enumerate(self.stats.executors):
            label = [truncate(ex.name, NODE_NAME_MAX), _executor_kind(ex)]
            fill = self.executor_fill(ex.name)
            mine = [n for n in self.stats.nodes if n.executor == ex.name]
            queued_nodes = sorted((n for n in mine if n.queued), key=lambda n: -n.queued)[:5]
            tip = f"executor {ex.name}: queued {ex.queued}, running {ex.running}"
            if self.live:
                cap = f"/{ex.capacity}" if ex.capacity else ""
                line = f"queued {ex.queued} · running {ex.running}{cap}"
                if self.level == "full":
                    done = sum(n.processed for n in mine)
                    busy = sum(n.total_process_us for n in mine)
                    line += f" · done {done}\nexec {fmt_duration_us(busy)}"
                else:
                    line += " · detailed stats n/a"
                label.append(line)
                fill = "white"
                queued_for = self.window.executor_queued_us.get(ex.name, 0.0) if self.window else 0.0
                if ex.saturated and queued_for >= 1_000_000:
                    fill = "#ffd6d6"
                elif ex.queued or ex.saturated:
                    fill = "#ffe0b2"
                tip += f", queued for {fmt_duration_us(queued_for)}, queued nodes " + (
                    ", ".join(f"{n.node_name} ({n.queued})" for n in queued_nodes) or "none")
            yield (f"    legend_e{i} [shape=box, style=filled, fillcolor={quote(fill)}, "
                   f"label={quote(chr(10).join(label))}, tooltip={quote(tip)}];")
        yield "  }"


def _cap_text(capacity: int, fixed: int) -> str:
    if capacity:
        return str(capacity)
    if fixed:
        return f"{fixed} (fixed_size)"
    return "unbounded"


def _pct(hist: tuple[int, ...], q: float) -> str | None:
    from ._stats import percentile_us

    value = percentile_us(hist, q)
    return None if value is None else fmt_duration_us(value)


_KIND_FILLS: Final = {"delegating": "white"}
"""Display only: an executor kind drawn in its own fill rather than its index's."""
_KIND_LABELS: Final = {"delegating": "host thread (delegating)", "inline": "inline · caller thread"}
"""Display only: the legend text of an executor kind that has no threads to describe."""


def _executor_kind(ex: ExecutorStats) -> str:
    label = _KIND_LABELS.get(ex.kind)
    if label is not None:
        return label
    if ex.kind == "processes":  # display only: its workers are processes, not threads
        return f"{ex.capacity} worker process{'es' if ex.capacity != 1 else ''}"
    cores = ",".join(str(c) for c in ex.affinity) or "any"
    text = f"{ex.threads}t · cores: {cores}"
    if ex.priority > 0:
        text += f" · rt{ex.priority}"
    return text


# -- rendering -----------------------------------------------------------------------------------

def graphviz_available() -> bool:
    """Whether Graphviz's ``dot`` program is on ``PATH``."""
    return shutil.which("dot") is not None


def render_svg(dot_text: str, *, timeout_s: float = 30.0) -> bytes:
    """Render DOT text to SVG with Graphviz's ``dot`` (a subprocess; blocks up to ``timeout_s``).

    Raises:
        RunError: Graphviz is not installed, or ``dot`` rejected the input (its message included).
        Timeout: ``dot`` ran longer than ``timeout_s``.
    """
    exe = shutil.which("dot")
    if exe is None:
        msg = "rendering SVG needs Graphviz's `dot` program on PATH (e.g. `apt-get install graphviz`)"
        raise RunError(msg)
    try:
        done = subprocess.run([exe, "-Tsvg"], input=dot_text.encode(), capture_output=True, timeout=timeout_s,
                              check=False)
    except subprocess.TimeoutExpired:
        msg = f"Graphviz `dot` did not finish within {timeout_s} s"
        raise Timeout(msg) from None
    if done.returncode != 0:
        detail = done.stderr.decode(errors="replace").strip().splitlines()
        msg = f"Graphviz `dot` failed (exit {done.returncode}): {detail[0] if detail else 'no message'}"
        raise RunError(msg)
    return done.stdout
