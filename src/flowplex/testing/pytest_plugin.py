"""flowplex's pytest plugin: the fixtures ``flowplex_graph`` and ``kernel_runner``.

Installed with flowplex (entry point ``pytest11``), so any test may ask for them; without the
entry point (a source checkout), enable it with ``-p flowplex.testing.pytest_plugin``.

- ``flowplex_graph(yaml_or_path, clock=None) -> Graph``: a built graph (YAML text, a file, a
  graph dict), with its ``ScriptedSource`` scripts checked, on ``clock`` if given (a
  ``FakeClock``); closed when the test ends.
- ``kernel_runner(kernel, **kwargs) -> KernelRunner``: ``flowplex.KernelRunner(kernel, ...)``,
  closed when the test ends.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from ..engine._clock import Clock
from ..graph import Graph
from ..kernels import KernelRunner
from ._run import GraphSource, build_graph

__all__ = ["flowplex_graph", "kernel_runner"]


@pytest.fixture
def flowplex_graph() -> Iterator[Callable[..., Graph]]:
    """A factory of graphs (YAML text, a path or a graph dict; ``clock=``), each closed after the test."""
    built: list[Graph] = []

    def make(source: GraphSource, *, clock: Clock | None = None) -> Graph:
        graph = build_graph(source)
        built.append(graph)
        if clock is not None:
            graph.set_clock(clock)
        return graph

    yield make
    for graph in reversed(built):
        graph.close()


@pytest.fixture
def kernel_runner() -> Iterator[Callable[..., KernelRunner]]:
    """A factory of ``KernelRunner(kernel, input_ports=1, output_ports=1, options=None,
    side_packets=None)``, each closed (the kernel's ``close`` run) after the test."""
    runners: list[KernelRunner] = []

    def make(kernel: str, *args: Any, **kwargs: Any) -> KernelRunner:
        runner = KernelRunner(kernel, *args, **kwargs)
        runners.append(runner)
        return runner

    yield make
    for runner in reversed(runners):
        runner.close()
