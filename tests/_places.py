"""Where the executor-comparison tests put a graph's nodes: one helper for the YAML head, the
default slot, and the check that the graph ran where it was asked to."""

from __future__ import annotations

from contextlib import AbstractContextManager

import flowplex
from flowplex.testing import default_executor


def place_head(place: str, workers: int = 2) -> str:
    """The YAML executors section that puts every node (sources too) on ``place``; "" for the
    places the default slot serves (``inline``, ``threads``, ``ray``)."""
    if place != "processes":
        return ""
    return (f"executors: [{{ name: pool, type: ProcessPoolExecutor, num_processes: {workers} }}]\n"
            "default_executor: pool\n")


def default_slot(place: str) -> AbstractContextManager[None]:
    """``default_executor`` for the graph built inside it: ``place`` where the default slot
    serves it, inline under a process pool's head."""
    return default_executor(place if place in ("threads", "ray") else "inline")


def assert_placed(g: flowplex.Graph, place: str) -> None:
    """The graph's nodes ran on an executor of kind ``place``."""
    kinds = {s.name: s.kind for s in g.stats().executors}
    assert kinds.get("pool" if place == "processes" else "default") == place, kinds
