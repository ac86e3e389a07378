"""Planning: check a ``GraphSpec`` and derive its edge, executor and port tables.

Registry-free and thread-free, so ``flowplex check`` and ``Graph.from_yaml`` share it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from ._spec import ExecutorSpec, GraphSpec

DEFAULT_EXECUTOR_SPEC: Final = ExecutorSpec(name="default", type="ThreadPoolExecutor", num_threads=0)
"""Executor #0. ``num_threads=0`` marks flowplex's default executor (runs on the calling thread)."""


@dataclass(frozen=True, slots=True)
class Diagnostic:
    """A static finding that is not an error (logged as a warning at build)."""

    code: str
    """``unconsumed_graph_input``, ``unconsumed_node_output``, ``unused_executor``, ``route_*``."""
    message: str


@dataclass(frozen=True, slots=True)
class EdgePlan:
    """One edge: named after its single producer's port, consumed by any number of ports."""

    name: str
    producer: int | None
    """Index of the producing node, or ``None`` for a graph input."""
    producer_port: int
    """Flat output-port index on the producer (0 for a graph input)."""
    consumers: tuple[tuple[int, int], ...]
    """``(node index, flat input-port index)`` of every consumer, in node order."""
    is_graph_output: bool


@dataclass(frozen=True, slots=True)
class GraphPlan:
    """A checked graph: the spec plus every table the runtime needs."""

    spec: GraphSpec
    edges: dict[str, EdgePlan]
    """Every edge by name, in a deterministic order (graph inputs, then node outputs)."""
    graph_inputs: tuple[str, ...]
    graph_outputs: tuple[str, ...]
    executors: tuple[ExecutorSpec, ...]
    """Executor table; index 0 is always ``DEFAULT_EXECUTOR_SPEC``."""
    node_executor: tuple[int, ...]
    """Executor index of each node."""
    topo_order: tuple[int, ...]
    """Node indices in a topological order of the graph without back edges."""
    diagnostics: tuple[Diagnostic, ...]


def build_plan(spec: GraphSpec) -> GraphPlan:
    """Check ``spec`` and build its tables; raises ``ConfigError`` with a YAML path."""
    raise NotImplementedError  # written in the config work package
