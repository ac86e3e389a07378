"""Prometheus metrics: the collector's families, and the HTTP endpoint."""

from __future__ import annotations

import socket
import urllib.error
import urllib.request

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

import flowplex
from flowplex.diagnostics import GraphCollector, serve_metrics

YAML = """
stats: full
nodes:
  - { name: a, kernel: PassThroughKernel, input_ports: [x], output_ports: [y] }
  - { name: f, kernel: PassThroughKernel, input_ports: [y], output_ports: [z],
      input_policy: { type: fixed_size, capacity: 1 } }
input_ports: [x]
output_ports: [z]
"""


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_collector_reports_node_port_edge_and_graph_metrics() -> None:
    with flowplex.Graph.from_yaml(YAML) as g:
        registry = CollectorRegistry(auto_describe=False)
        registry.register(GraphCollector(g))
        before = samples(generate_latest(registry).decode())
        assert before[("flowplex_graph_state", (("state", "INITIALIZED"),))] == 1
        g.start()
        for i in range(5):
            g.send("x", i, ts=i)
        g.close_all_inputs()
        g.wait_done(timeout=5)
        after = samples(generate_latest(registry).decode())
    a = (("kernel", "PassThroughKernel"), ("node", "a"))
    assert after[("flowplex_node_processed_total", a)] == 5
    assert after[("flowplex_node_packets_in_total", a)] == 5
    assert after[("flowplex_node_packets_out_total", a)] == 5
    assert after[("flowplex_node_errors_total", a)] == 0
    assert after[("flowplex_node_queued", a)] == 0
    assert after[("flowplex_node_process_seconds_total", a)] > 0
    assert after[("flowplex_node_state", (("node", "a"), ("state", "CLOSED")))] == 1
    assert after[("flowplex_port_capacity", (("node", "f"), ("port", "y")))] == 1
    assert after[("flowplex_edge_dropped_total", (("edge", "y"),))] == 0
    assert after[("flowplex_graph_state", (("state", "TERMINATED"),))] == 1
    assert after[("flowplex_graph_state", (("state", "RUNNING"),))] == 0
    assert ("flowplex_graph_queued", ()) in after


def test_serve_metrics_over_http_and_close() -> None:
    with flowplex.Graph.from_yaml(YAML) as g:
        server = serve_metrics(g, 0)
        try:
            assert server.host == "127.0.0.1" and server.port > 0
            assert server.url == f"http://127.0.0.1:{server.port}/metrics"
            with urllib.request.urlopen(server.url, timeout=5) as response:
                body = response.read().decode()
            assert 'flowplex_node_processed_total{kernel="PassThroughKernel",node="a"} 0.0' in body
        finally:
            server.close()
        with pytest.raises(urllib.error.URLError):
            urllib.request.urlopen(server.url, timeout=2)


def test_a_taken_port_is_an_os_error() -> None:
    with socket.socket() as taken, flowplex.Graph.from_yaml(YAML) as g:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        with pytest.raises(OSError):
            serve_metrics(g, taken.getsockname()[1])
