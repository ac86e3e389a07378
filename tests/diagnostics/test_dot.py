"""DOT export: the three views, the strings lm-flow's tests pin, and Graphviz rendering."""

from __future__ import annotations

import re
import threading
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator

import pytest
import yaml as pyyaml
from hypothesis import given, settings
from hypothesis import strategies as st

import flowplex
from flowplex.diagnostics import graphviz_available, render_svg

NO_DOT = "Graphviz's `dot` is not installed; the DOT text is still checked by the other tests"
needs_dot = pytest.mark.skipif(not graphviz_available(), reason=NO_DOT)
VIEWS = ("topology", "compact", "diagnostics")

HOLD = threading.Event()


@flowplex.kernel("DotHold")
class DotHold(flowplex.Kernel):
    """Holds each packet until ``HOLD`` is set (keeps the node RUNNING and its queue full)."""

    def process(self, cc: flowplex.Context) -> None:
        HOLD.wait(10)
        cc.forward(0, 0)


@flowplex.kernel("DotBoom")
class DotBoom(flowplex.Kernel):
    def process(self, cc: flowplex.Context) -> None:
        msg = "boom"
        raise RuntimeError(msg)


@pytest.fixture(autouse=True)
def _release() -> Iterator[None]:
    HOLD.clear()
    yield
    HOLD.set()


NAMESPACED = """
executors:
  - { name: pool, type: ThreadPoolExecutor, num_threads: 2 }
  - { name: host, type: DelegatingExecutor }
nodes:
  - { name: src, kernel: RangeSourceKernel, output_ports: [n], options: { count: 7 } }
  - { name: p/a, kernel: PassThroughKernel, executor: pool, input_ports: [n], output_ports: [m] }
  - { name: p/q/b, kernel: PassThroughKernel, input_ports: [m], output_ports: [k] }
  - { name: h, kernel: PassThroughKernel, executor: host, input_ports: [x], output_ports: [w] }
input_ports: [x]
output_ports: [k, w]
"""


def finished(yaml: str, sends: int = 0) -> flowplex.Graph:
    g = flowplex.Graph.from_yaml(yaml)
    g.start()
    for i in range(sends):
        g.send("x", i, ts=i)
    g.close_all_inputs()
    g.wait_done(timeout=10)
    return g


def label_of(dot: str, node_id: str) -> str:
    match = re.search(rf"^  {node_id} \[label=\"((?:[^\"\\]|\\.)*)\"", dot, re.MULTILINE)
    assert match, f"no node {node_id} in:\n{dot}"
    return match.group(1)


def check_syntax(dot: str) -> None:
    """A tiny structural check: quoted strings close, braces balance, edge ends are declared."""
    body = re.sub(r'"(?:[^"\\]|\\.)*"', '""', dot)
    assert '"' not in body.replace('""', ""), "unterminated string"
    assert body.count("{") == body.count("}")
    assert body.startswith("digraph lmflow {") and body.rstrip().endswith("}")
    declared = set(re.findall(r"^\s+(\w+) \[", body, re.MULTILINE))
    for a, b in re.findall(r"^\s+(\w+) -> (\w+) \[", body, re.MULTILINE):
        assert a in declared and b in declared, (a, b)


# -- the pinned strings ----------------------------------------------------------------------------

def test_topology_view() -> None:
    with flowplex.Graph.from_yaml(NAMESPACED) as g:
        dot = g.to_dot()
    check_syntax(dot)
    assert dot.startswith("digraph lmflow {\n  rankdir=LR;")
    assert "subgraph cluster_0 { label=\"p\"" in dot and "subgraph cluster_1 { label=\"q\"; tooltip=\"p/q\"" in dot
    assert "@default" in dot and "@pool" in dot and "@host" in dot
    assert "PassThroughKernel · Python" in dot and "RangeSourceKernel · Python" in dot
    assert "cap n=unbounded" in label_of(dot, "n1")
    assert 'label="executors (node fill = placement)"' in dot
    assert "pool\\n2t · cores: any" in dot and "host\\nhost thread (delegating)" in dot
    assert "default\\ninline · caller thread" in dot
    assert "pin0 [shape=cds" in dot and 'label="x", tooltip="graph input x"' in dot
    assert "n3 -> pout" in dot and "pin0 -> n3" in dot
    # static only: no title, no states, no legend of states
    assert "hotspots running" not in dot and "\\nCREATED" not in dot and "cluster_node_state_legend" not in dot
    assert 'fillcolor="white"' in dot  # delegating executor nodes are white


def test_compact_before_start() -> None:
    with flowplex.Graph.from_yaml(NAMESPACED) as g:
        dot = g.to_dot("compact")
    check_syntax(dot)
    assert "state Initialized · stats basic · not started" in dot
    assert "@default\\nCREATED" in dot and "hotspots running 0 · error 0" in dot
    assert "cluster_node_state_legend" in dot and "ports:" not in dot
    assert "top nodes none\\ntop ports none" in dot
    assert "0 pkts" not in dot  # quiet nodes show no counters in compact


def test_compact_and_diagnostics_after_a_run() -> None:
    with finished(NAMESPACED, sends=4) as g:
        compact = g.to_dot("compact")
        diag = g.to_dot("diagnostics")
    for dot in (compact, diag):
        check_syntax(dot)
        assert "state Terminated · stats basic" in dot
        assert "CLOSED · 7 pkts (+7" in dot and "CLOSED · 4 pkts (+4" in dot
        assert "timing n/a" in dot and "detailed stats n/a" in dot
    assert "ports:" not in compact
    assert "ports:\\n  n 0/∞" in diag
    assert 'label="executors (node label = placement)"' in diag
    assert "cluster_diagnostics_legend" in diag and "cluster_diagnostics_legend" not in compact


def test_stats_off_draws_no_counters() -> None:
    yaml = NAMESPACED.replace("executors:", "stats: off\nexecutors:", 1)
    with finished(yaml, sends=4) as g:
        dot = g.to_dot("compact")
        diag = g.to_dot("diagnostics")
    assert "stats off" in dot and "pkts" not in dot and "pkts" not in diag
    assert "@default\\nCLOSED" in dot


def test_full_stats_show_latency() -> None:
    yaml = NAMESPACED.replace("executors:", "stats: full\nexecutors:", 1)
    with finished(yaml, sends=4) as g:
        compact = g.to_dot("compact")
        diag = g.to_dot("diagnostics")
    assert "timing n/a" not in compact and re.search(r"pkts \(\+7 · [^)]*\) · \d+(\.\d)?(µs|ms) avg", compact)
    assert "lat p50 " in diag and "e2e n/a" in diag and "lat p50" not in compact
    assert re.search(r'fillcolor="#[0-9A-F]{6}"', compact)  # latency heat map
    assert "done 4\\nexec " in diag  # executor legend with full stats


def test_queue_drops_and_waiting_are_diagnosed() -> None:
    yaml = """
executors: [ { name: host, type: DelegatingExecutor } ]
nodes:
  - { name: f, kernel: PassThroughKernel, executor: host, input_ports: [x], output_ports: [y],
      input_policy: { type: fixed_size, capacity: 2 } }
  - { name: z, kernel: ZipKernel, input_ports: [a, b], output_ports: [zz] }
  - { name: up, kernel: PassThroughKernel, input_ports: [u], output_ports: [b] }
input_ports: [x, a, u]
output_ports: [y, zz]
"""
    with flowplex.Graph.from_yaml(yaml) as g:
        g.add_poller("y")
        g.start()
        for i in range(11):  # one is claimed by the delegating executor, 2 stay, 8 are dropped
            g.send("x", i, ts=i)
        g.send("a", 1, ts=0)
        g.send("a", 2, ts=1)
        diag = g.to_dot("diagnostics")
        again = g.to_dot("diagnostics")
        compact = g.to_dot("compact")
        g.cancel()
    check_syntax(diag)
    assert "hotspots running 1 · error 0 · blocked 0 · waiting 1 · dropped 8" in diag
    assert "queue 2/unbounded" in diag and "dropped +8 in window" in diag
    assert "BOTTLENECK: consumer cannot keep up" in diag
    assert "WAITING: missing aligned input" in diag and "b 0/∞ HOT #1 WAITING: aligned input" in diag
    assert "PRESSURE PATH: upstream propagation" in diag  # u -> up -> z.b: the input of `up`
    assert "top ports #1 z.b" in diag and "top nodes #1 f" in diag
    assert "poller: y\\nBlock · queue 0/unbounded" in diag and 'label="subscription"' in diag
    # interval semantics: the second export of the same view reports only what changed since
    assert "dropped 8\\n" in diag and "dropped 0\\n" in again and "dropped +8 in window" not in again
    assert "window since start" in diag and "window since start" not in again
    assert "dropped 8\\n" in compact  # compact keeps its own baseline


def test_blocked_port_and_running_node() -> None:
    yaml = """
executors: [ { name: pool, type: ThreadPoolExecutor, num_threads: 1 } ]
nodes:
  - { name: hold, kernel: DotHold, executor: pool, input_ports: [x], output_ports: [y],
      input_queues: { packets: 1 } }
input_ports: [x]
output_ports: [y]
"""
    with flowplex.Graph.from_yaml(yaml) as g:
        g.start()
        g.send("x", 0, ts=0)
        deadline = time.monotonic() + 5
        while g.stats().node("hold").queued or not g.stats().node("hold").running:
            assert time.monotonic() < deadline
            time.sleep(0.005)
        g.send("x", 1, ts=1)  # fills the capacity-1 queue while the first packet is held
        dot = g.to_dot("diagnostics")
        HOLD.set()
        g.close_all_inputs()
        g.wait_done(timeout=10)
    label = label_of(dot, "n0")
    assert "RUNNING" in label and "x 1/1 HOT #1 BLOCKED: queue full" in label
    assert "hotspots running 1 · error 0 · blocked 1" in dot
    assert "BLOCKED: queue full" in dot and 'color="#2ca02c", penwidth=3' in dot


def test_error_state_is_red_and_named() -> None:
    yaml = """
nodes:
  - { name: ok, kernel: PassThroughKernel, input_ports: [x], output_ports: [y] }
  - { name: bad, kernel: DotBoom, input_ports: [y], output_ports: [z] }
input_ports: [x]
output_ports: [z]
"""
    with flowplex.Graph.from_yaml(yaml) as g:
        g.start()
        with pytest.raises(flowplex.KernelError):
            g.send("x", 1, ts=0)
            g.close_all_inputs()
            g.wait_done(timeout=5)
        dot = g.to_dot("compact")
    bad = label_of(dot, "n1")
    assert "HOT #1" in bad and "ERROR · 0 pkts" in bad and "1 err (+1)" in bad
    assert "hotspots running 0 · error 1" in dot and "error: kernel failed: [bad] RuntimeError: boom" in dot
    assert dot.index("  n1 [") < dot.index("  n0 [")  # sorted by state: ERROR first
    assert 'color="#d62728", penwidth=3' in dot


def test_waiting_source_state() -> None:
    yaml = """
nodes:
  - { name: src, kernel: RangeSourceKernel, output_ports: [n], options: { count: 100 }, rate: 2 }
output_ports: [n]
"""
    with flowplex.Graph.from_yaml(yaml) as g:
        g.start()
        deadline = time.monotonic() + 5
        while g.stats().node("src").state != "WAITING_SOURCE":
            assert time.monotonic() < deadline
            time.sleep(0.005)
        dot = g.to_dot("compact")
    assert "WAITING_SOURCE · 1 pkts" in label_of(dot, "n0") and 'color="#d6a700"' in dot


def test_route_nodes_show_their_rules() -> None:
    yaml = """
nodes:
  - name: r
    type: route
    input_ports: [x]
    output_ports: [hi, lo]
    routes:
      - { to: hi, when: { timestamp: { op: gte, value: 5 } } }
      - { to: lo, default: true }
input_ports: [x]
output_ports: [hi, lo]
"""
    with finished(yaml, sends=8) as g:
        dot = g.to_dot("compact")
    label = label_of(dot, "n0")
    assert "__lmflow.route · " in label and "route first · unmatched drop · drop 0" in label
    assert "rule 1 [timestamp gte 5] → hi: match 3 / emit 3" in label
    assert "rule 2 [default] → lo: emit 5" in label


def test_reset_clears_the_baselines() -> None:
    yaml = "nodes:\n  - { name: a, kernel: PassThroughKernel, input_ports: [x], output_ports: [y] }\n" \
           "input_ports: [x]\noutput_ports: [y]\n"
    with finished(yaml, sends=3) as g:
        assert "3 pkts (+3" in g.to_dot("compact")
        assert "3 pkts (+0" in g.to_dot("compact")
        g.reset()
        assert "CREATED" in g.to_dot("compact")
        g.start()
        g.send("x", 0, ts=0)
        g.close_all_inputs()
        g.wait_done(timeout=5)
        dot = g.to_dot("compact")
    assert "1 pkts (+1" in dot and "window since start" in dot


def test_long_and_odd_names_are_truncated_and_escaped() -> None:
    long = "a_really_long_node_name_that_goes_on"
    odd = 'we"ird\\N'
    yaml_doc = {
        "nodes": [
            {"name": long, "kernel": "PassThroughKernel", "input_ports": ["x"], "output_ports": [odd]},
            {"name": "ns_with_a_very_long_cluster_name/n", "kernel": "PassThroughKernel",
             "input_ports": [odd], "output_ports": ["y"]},
        ],
        "input_ports": ["x"],
        "output_ports": ["y"],
    }
    with flowplex.Graph.from_yaml(pyyaml.safe_dump(yaml_doc)) as g:
        dots = [g.to_dot(v) for v in VIEWS]
    for dot in dots:
        check_syntax(dot)
        assert "a_really_long_node_name…" in dot and f"tooltip=\"{long} (" in dot
        assert 'label="ns_with_a_very_long_clu…"' in dot
        assert 'we\\"ird\\\\N' in dot
    if graphviz_available():
        for dot in dots:
            render_svg(dot)


def test_unknown_view_is_a_value_error() -> None:
    with flowplex.Graph.from_yaml(NAMESPACED) as g:
        with pytest.raises(ValueError, match=r"unknown view 'flat'; expected one of 'topology', 'compact'"):
            g.to_dot("flat")
        assert g.to_dot(flowplex.DotView.COMPACT) == g.to_dot("compact")  # not started: no window yet


# -- Graphviz rendering ----------------------------------------------------------------------------

@needs_dot
@pytest.mark.parametrize("view", VIEWS)
def test_every_view_renders_to_svg(view: str) -> None:
    with finished(NAMESPACED.replace("executors:", "stats: full\nexecutors:", 1), sends=3) as g:
        svg = render_svg(g.to_dot(view))
    root = ET.fromstring(svg)
    assert root.tag.endswith("svg")
    text = svg.decode()
    assert "PassThroughKernel · Python" in text and "<title>n1</title>" in text


def test_render_without_graphviz_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(flowplex.errors.RunError, match=r"needs Graphviz's `dot` program on PATH"):
        render_svg("digraph lmflow {}")


@needs_dot
def test_render_reports_graphviz_errors() -> None:
    with pytest.raises(flowplex.errors.RunError, match=r"Graphviz `dot` failed \(exit 1\)"):
        render_svg("digraph lmflow { a -> }")


# -- property: every small graph exports valid DOT ---------------------------------------------------

NAME = st.text(alphabet=st.sampled_from('ab_-.:"\\ éx/'), min_size=1, max_size=12).filter(
    lambda s: not s.startswith("/") and not s.endswith("/") and "//" not in s and s.strip() == s and s != "")


@st.composite
def small_graphs(draw: st.DrawFn) -> dict[str, object]:
    names = draw(st.lists(NAME, min_size=1, max_size=5, unique=True))
    nodes = []
    produced = ["in0"]
    for i, name in enumerate(names):
        source = draw(st.sampled_from(produced))
        nodes.append({"name": name, "kernel": "PassThroughKernel", "input_ports": [source],
                      "output_ports": [f"e{i}"]})
        produced.append(f"e{i}")
    outputs = [p for p in produced[1:] if draw(st.booleans())] or [produced[-1]]
    return {"nodes": nodes, "input_ports": ["in0"], "output_ports": outputs}


@settings(max_examples=25, deadline=None)
@given(doc=small_graphs(), sends=st.integers(0, 3))
def test_dot_is_valid_for_random_small_graphs(doc: dict[str, object], sends: int) -> None:
    with flowplex.Graph.from_yaml(pyyaml.safe_dump(doc)) as g:
        g.start()
        for i in range(sends):
            g.send("in0", i, ts=i)
        dots = [g.to_dot(v) for v in VIEWS]
        g.close_all_inputs()
        g.wait_done(timeout=5)
        dots += [g.to_dot(v) for v in VIEWS]
    for dot in dots:
        check_syntax(dot)
    if graphviz_available():
        render_svg(dots[-1])
