"""Time on Ray (issue 29): input timeouts and a kernel's ``cc.notify`` give the same outputs on
a Ray executor as inline, under ``FakeClock(autojump=True)`` (the conditions stay in the
driver; an actor's ``cc.notify`` comes back with its call's outcome)."""

from __future__ import annotations

from typing import Any

import pytest

import flowplex
from flowplex.testing import FakeClock, run_graph

from ..engine import time_kernels as time_kernels  # registers the kernels (actors import them by reference)
from ..engine.test_time import timeout_yaml
from .conftest import ray_yaml

NOTIFY = """
nodes:
  - { name: src, kernel: TimeTicker, output_ports: [x], options: { count: 4, period: 1.0 } }
  - { name: poke, kernel: TimeNotifier, input_ports: [x], output_ports: [y], options: { name: go } }
  - { name: ev, kernel: TimeCounter, output_ports: [t], conditions: [ { event: { name: go } }, { count: 4 } ] }
output_ports: [y, t]
"""


@pytest.mark.parametrize("body", [NOTIFY, timeout_yaml("{ name: b, timeout_ms: 500 }")], ids=["notify", "timeout"])
def test_time_graphs_give_the_same_outputs_on_ray(on_ray: Any, body: str) -> None:
    inline = run_graph(body, clock=FakeClock(autojump=True), timeout=60)
    g = flowplex.Graph.from_yaml(ray_yaml("default_executor: cluster\n" + body), clock=FakeClock(autojump=True))
    with g:
        assert run_graph(g, timeout=60) == inline
        stats = g.stats()
        assert {n.executor for n in stats.nodes} == {"cluster"}
        assert next(s.kind for s in stats.executors if s.name == "cluster") == "ray"
