"""Helpers for the built-in kernel tests: one-shot runner calls and small YAML graphs."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import pytest

import flowplex
from flowplex import Packet


def run_once(
    kernel: str,
    inputs: Mapping[int, object],
    *,
    input_ports: int = 1,
    output_ports: int = 1,
    options: Any = None,
    side_packets: Mapping[str, object] | None = None,
    ts: int = 5,
) -> list[list[Packet]]:
    """Open ``kernel`` in a ``KernelRunner``, process ``inputs`` once at ``ts``, close it.

    Returns the packets of each output port (process outputs, then close outputs).
    """
    with flowplex.KernelRunner(
        kernel, input_ports=input_ports, output_ports=output_ports, options=options,
        side_packets=side_packets,
    ) as r:
        for port, value in inputs.items():
            r.add_input(port, value)
        r.process(ts)
        r.close()
        return [drain_runner(r, o) for o in range(output_ports)]


def drain_runner(r: flowplex.KernelRunner, port: int = 0) -> list[Packet]:
    out = []
    while (p := r.try_next(port)) is not None:
        out.append(p)
    return out


def ints(packets: list[Packet]) -> list[tuple[int, int | None]]:
    """``(timestamp, value)`` of each I64 packet."""
    return [(p.timestamp, p.as_int()) for p in packets]


GraphFactory = Callable[[str], flowplex.Graph]


@pytest.fixture
def make_graph() -> Iterator[GraphFactory]:
    """Build graphs from YAML; every graph is closed after the test."""
    graphs: list[flowplex.Graph] = []

    def build(text: str) -> flowplex.Graph:
        g = flowplex.Graph.from_yaml(text)
        graphs.append(g)
        return g

    yield build
    for g in graphs:
        g.close()


def run_graph(
    g: flowplex.Graph,
    sends: Sequence[tuple[str, object, int]],
    outputs: Sequence[str],
) -> dict[str, list[Packet]]:
    """Start ``g``, send ``(port, value, ts)`` in order, close the inputs and collect ``outputs``."""
    pollers = {name: g.add_poller(name) for name in outputs}
    g.start()
    for port, value, ts in sends:
        g.send(port, value, ts=ts)
    g.close_all_inputs()
    result = {name: list(p) for name, p in pollers.items()}
    g.wait_done(timeout=10)
    return result


NO_GRAPH = pytest.mark.executors(
    "inline", reason="a static check: the kernel runs in a KernelRunner or a KernelHost, or fails to load or to "
                     "type-check at build, before any graph starts: no executor takes part, so one run covers it")
"""Runs once: for the tests of kernels that never start a graph (issue 26: static checks run once)."""
