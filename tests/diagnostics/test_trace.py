"""``Graph.to_chrome_trace``: kernel invocations as Chrome/Perfetto Trace Event Format JSON."""

from __future__ import annotations

import json

import pytest

import flowplex

CHAIN = """
executors: [ { name: pool, type: ThreadPoolExecutor, num_threads: 2 } ]
nodes:
  - { name: src, kernel: RangeSourceKernel, output_ports: [n], options: { count: 6 } }
  - { name: p/scale, kernel: ScaleKernel, executor: pool, input_ports: [n], output_ports: [m], options: { factor: 2 } }
  - { name: ext, kernel: PassThroughKernel, input_ports: [x], output_ports: [y] }
input_ports: [x]
output_ports: [m, y]
"""


def traced(capacity: int | None = None) -> tuple[flowplex.Graph, dict[str, object]]:
    g = flowplex.Graph.from_yaml(CHAIN)
    if capacity is None:
        g.enable_tracing()
    else:
        g.enable_tracing(capacity=capacity)
    g.start()
    g.send("x", 41, ts=-5)
    g.close_all_inputs()
    g.wait_done(timeout=10)
    return g, json.loads(g.to_chrome_trace())


def complete_events(trace: dict[str, object]) -> list[dict[str, object]]:
    events = trace["traceEvents"]
    assert isinstance(events, list)
    return [e for e in events if e["ph"] == "X"]


def test_without_tracing_the_trace_is_empty_but_valid() -> None:
    with flowplex.Graph.from_yaml(CHAIN) as g:
        assert json.loads(g.to_chrome_trace()) == {"traceEvents": [], "displayTimeUnit": "ms"}


def test_every_invocation_is_a_complete_event() -> None:
    g, trace = traced()
    with g:
        stats = g.stats()
    assert stats.stats_level == "full"  # tracing forces per-call timing
    xs = complete_events(trace)
    by_node: dict[object, list[dict[str, object]]] = {}
    for e in xs:
        by_node.setdefault(e["name"], []).append(e)
    assert {k: len(v) for k, v in by_node.items()} == {n.node_name: n.processed for n in stats.nodes}
    assert [e["args"]["input_ts"] for e in by_node["p/scale"]] == list(range(6))  # type: ignore[index]
    assert by_node["ext"][0]["args"] == {"kernel": "PassThroughKernel", "phase": "process", "input_ts": -5}
    for e in xs:
        assert e["cat"] == "process" and e["pid"] == 1 and isinstance(e["tid"], int)
        assert isinstance(e["ts"], int | float) and isinstance(e["dur"], int | float)
        assert e["ts"] >= 0 and e["dur"] >= 0
    starts = [e["ts"] for e in xs]
    assert starts == sorted(starts)  # type: ignore[type-var]


def test_threads_are_named_and_metadata_comes_first() -> None:
    g, trace = traced()
    g.close()
    events = trace["traceEvents"]
    assert isinstance(events, list)
    phases = [e["ph"] for e in events]
    assert phases == sorted(phases, key=lambda ph: ph != "M")
    assert events[0] == {"name": "process_name", "ph": "M", "pid": 1, "args": {"name": "flowplex graph"}}
    names = {e["tid"]: e["args"]["name"] for e in events if e["name"] == "thread_name"}
    used = {e["tid"] for e in complete_events(trace)}
    assert used <= set(names)
    scale_tids = {e["tid"] for e in complete_events(trace) if e["name"] == "p/scale"}
    assert all(names[t].startswith("pool-") for t in scale_tids)
    assert trace["displayTimeUnit"] == "ms"


def test_the_ring_keeps_the_latest_events() -> None:
    g, trace = traced(capacity=4)
    g.close()
    xs = complete_events(trace)
    assert len(xs) == 4
    assert trace["otherData"] == {"overwritten_events": 13 - 4}  # 6 + 6 + 1 invocations


@pytest.mark.parametrize("capacity", [0, -1, True, 2.5])
def test_bad_capacity_is_a_usage_error(capacity: object) -> None:
    with flowplex.Graph.from_yaml(CHAIN) as g, pytest.raises(flowplex.UsageError, match="trace capacity"):
        g.enable_tracing(capacity=capacity)  # type: ignore[arg-type]
