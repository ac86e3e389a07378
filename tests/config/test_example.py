"""The compact example of the reference (section 1.9) loads into the expected specs."""

from __future__ import annotations

from pathlib import Path

from flowplex.config import load_yaml_file
from flowplex.spec import ExecutorSpec, PortSpec
from flowplex.spec._specs import ROUTE_KERNEL

DATA = Path(__file__).parent / "data"


def test_compact_example() -> None:
    spec = load_yaml_file(DATA / "compact_example.yaml")
    assert (spec.stats, spec.max_queued_packets, spec.watchdog_ms) == ("basic", 256, 2000)
    assert spec.executors == (
        ExecutorSpec(name="cpu", type="ThreadPoolExecutor", num_threads=4, affinity=(0, 1, 2, 3)),
        ExecutorSpec(name="host", type="DelegatingExecutor", num_threads=0),
    )
    assert [n.name for n in spec.nodes] == ["cam", "prep/cast", "prep/norm", "detect", "route", "ui"]
    cam, cast, norm, detect, route, ui = spec.nodes
    assert (cam.rate, cam.executor, cam.is_source) == (30.0, "cpu", True)
    assert cast.options == {"dtype": "f32"}
    assert [p.name for p in cast.input_ports] == ["frames"]
    assert [p.name for p in norm.output_ports] == ["tensor"]
    assert detect.input_ports == (PortSpec("tensor", "IMG", 0), PortSpec("state", "FB", 0))
    assert (detect.max_in_flight, detect.on_error, detect.back_edges) == (2, "skip", ("state",))
    assert detect.input_queues.packets == 8
    assert route.kernel == ROUTE_KERNEL
    assert ui.input_policy.type == "fixed_size"
    assert [p.name for p in spec.output_ports] == ["shown", "low"]
