"""Prometheus metrics of a running graph, served with ``prometheus-client``.

``GraphCollector`` turns one ``GraphStats`` snapshot per scrape into metric families, so
scraping costs nothing between scrapes and every value of one scrape is consistent.
``serve_metrics`` starts ``prometheus_client``'s HTTP server on its own registry (the process
default registry is left alone) and returns a handle to stop it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from .._state import GraphState
from ._stats import GraphStats

if TYPE_CHECKING:
    import threading
    from wsgiref.simple_server import WSGIServer

    from prometheus_client.core import Metric

    from ..graph import Graph

__all__ = ["GRAPH_STATES", "GraphCollector", "MetricsServer", "serve_metrics"]

log = logging.getLogger(__name__)

GRAPH_STATES: Final = tuple(s.name for s in GraphState)
"""Every value of ``GraphStats.state``, in lifecycle order (one ``flowplex_graph_state`` label each)."""


class GraphCollector:
    """A ``prometheus_client`` collector reading one graph (register it on any registry).

    Metric names start with ``flowplex_``; node metrics carry ``node`` and ``kernel`` labels,
    port metrics ``node`` and ``port``, edge metrics ``edge``.
    """

    def __init__(self, graph: Graph) -> None:
        self._graph = graph

    def collect(self) -> Iterator[Metric]:
        """Build every family from a fresh snapshot (called by the registry on each scrape)."""
        s: GraphStats = self._graph.stats()
        yield from _node_families(s)
        yield from _port_families(s)
        yield from _edge_families(s)
        yield from _graph_families(s)


def _node_families(s: GraphStats) -> Iterator[Metric]:
    """``flowplex_node_*``: counters and gauges per node, labelled ``node`` and ``kernel``."""
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

    node_labels = ["node", "kernel"]

    def counter(name: str, doc: str) -> CounterMetricFamily:
        return CounterMetricFamily(f"flowplex_node_{name}", doc, labels=node_labels)

    def gauge(name: str, doc: str) -> GaugeMetricFamily:
        return GaugeMetricFamily(f"flowplex_node_{name}", doc, labels=node_labels)

    processed = counter("processed", "Successful process invocations.")
    errors = counter("errors", "Failed invocations.")
    packets_in = counter("packets_in", "Packets popped from the node's input queues.")
    packets_out = counter("packets_out", "Packets dispatched from the node's outputs.")
    block_events = counter("backpressure_events", "Times the node's flush waited for a full consumer queue.")
    process_seconds = counter("process_seconds", "Wall time spent in process (stats full).")
    queued = gauge("queued", "Packets waiting in the node's input queues.")
    peak = gauge("peak_queue_depth", "Deepest input queue seen.")
    running = gauge("running", "1 while a callback of the node is claimed or executing.")
    blocked = gauge("blocked", "1 while the node waits for room downstream.")
    max_seconds = gauge("process_max_seconds", "Longest single process call (stats full).")
    state = GaugeMetricFamily("flowplex_node_state", "1 for the node's current state.",
                              labels=["node", "state"])
    for n in s.nodes:
        labels = [n.node_name, n.kernel_name]
        processed.add_metric(labels, n.processed)
        errors.add_metric(labels, n.errors)
        packets_in.add_metric(labels, n.packets_in)
        packets_out.add_metric(labels, n.packets_out)
        block_events.add_metric(labels, n.block_events)
        process_seconds.add_metric(labels, n.total_process_us / 1e6)
        queued.add_metric(labels, n.queued)
        peak.add_metric(labels, n.peak_queue_depth)
        running.add_metric(labels, 1 if n.running else 0)
        blocked.add_metric(labels, 1 if n.blocked else 0)
        max_seconds.add_metric(labels, n.max_process_us / 1e6)
        state.add_metric([n.node_name, n.state], 1)
    yield from (processed, errors, packets_in, packets_out, block_events, process_seconds, queued, peak,
                running, blocked, max_seconds, state)


def _port_families(s: GraphStats) -> Iterator[Metric]:
    """``flowplex_port_*``: each input port's queue and capacity."""
    from prometheus_client.core import GaugeMetricFamily

    port_queued = GaugeMetricFamily("flowplex_port_queued", "Packets queued on an input port.",
                                    labels=["node", "port"])
    port_capacity = GaugeMetricFamily("flowplex_port_capacity", "Capacity of an input port (0: unbounded).",
                                      labels=["node", "port"])
    for n in s.nodes:
        for p in n.ports:
            port_queued.add_metric([n.node_name, p.name], p.queued)
            port_capacity.add_metric([n.node_name, p.name], p.capacity or p.fixed)
    yield port_queued
    yield port_capacity


def _edge_families(s: GraphStats) -> Iterator[Metric]:
    """``flowplex_edge_*`` and ``flowplex_poller_*``: what edges dropped, what their pollers hold."""
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

    dropped = CounterMetricFamily("flowplex_edge_dropped", "Packets dropped on an edge by fixed_size.",
                                  labels=["edge"])
    poller_queued = GaugeMetricFamily("flowplex_poller_queued", "Packets waiting in pollers of a graph output.",
                                      labels=["port"])
    poller_dropped = CounterMetricFamily("flowplex_poller_dropped", "Packets bounded pollers discarded.",
                                         labels=["port"])
    for e in s.edges:
        dropped.add_metric([e.name], e.dropped)
        if e.pollers:
            poller_queued.add_metric([e.name], sum(p.queued for p in e.pollers))
            poller_dropped.add_metric([e.name], sum(p.dropped for p in e.pollers))
    yield from (dropped, poller_queued, poller_dropped)


def _graph_families(s: GraphStats) -> Iterator[Metric]:
    """The executors' queues and the graph's own state and totals."""
    from prometheus_client.core import GaugeMetricFamily

    executor_queued = GaugeMetricFamily("flowplex_executor_queued", "Tasks waiting for an executor.",
                                        labels=["executor", "kind"])
    for ex in s.executors:
        executor_queued.add_metric([ex.name, ex.kind], ex.queued)
    yield executor_queued

    graph_state = GaugeMetricFamily("flowplex_graph_state", "1 for the graph's current lifecycle state.",
                                    labels=["state"])
    for name in GRAPH_STATES:
        graph_state.add_metric([name], 1 if s.state == name else 0)
    yield graph_state
    yield GaugeMetricFamily("flowplex_graph_queued", "Packets in all node input queues.", value=s.queued)
    yield GaugeMetricFamily("flowplex_graph_queue_limit", "Global packet watermark (0: unlimited).",
                            value=s.queue_limit)


@dataclass(slots=True)
class MetricsServer:
    """A running metrics endpoint; ``close()`` stops it (idempotent)."""

    host: str
    port: int
    """The bound port (the real one when 0 was requested)."""
    _server: WSGIServer
    _thread: threading.Thread

    @property
    def url(self) -> str:
        """``http://host:port/metrics``."""
        return f"http://{self.host}:{self.port}/metrics"

    def close(self) -> None:
        """Stop serving and join the server thread (waits for an in-progress scrape)."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5.0)


def serve_metrics(graph: Graph, port: int, host: str = "127.0.0.1") -> MetricsServer:
    """Serve ``graph``'s metrics on ``http://host:port/metrics`` from a daemon thread.

    ``port=0`` picks a free port (read it from ``MetricsServer.port``). The default host only
    accepts local scrapers; pass ``0.0.0.0`` to expose it.

    Raises:
        OSError: The port is taken or the host cannot be bound.
    """
    from prometheus_client import CollectorRegistry, start_http_server

    registry = CollectorRegistry(auto_describe=False)
    registry.register(GraphCollector(graph))
    server, thread = start_http_server(port, addr=host, registry=registry)
    bound = int(server.server_address[1])
    log.info("metrics.serve.started url=http://%s:%d/metrics", host, bound)
    return MetricsServer(host=host, port=bound, _server=server, _thread=thread)
