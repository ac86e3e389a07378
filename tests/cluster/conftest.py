"""One local Ray instance for the whole test session (about 4 s and 450 MiB here).

Every ``RayExecutor`` of this process uses it (a driver talks to one cluster) and leaves it
running at ``Graph.close``; it is shut down when the session ends. Without Ray installed, the
tests that need it skip, saying how to install it; the others (batching, configuration, the
error a graph gets without Ray) run anyway.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from typing import Any

import pytest

import flowplex
from flowplex.executors.ray import RayExecutor

from . import kernels as kernels  # registers the kernels here (actors import them by reference)

WAIT_S = 60.0
"""Generous bound on any single wait; the tests finish far sooner."""


def need_ray() -> Any:
    """``ray``, or a skip saying how to install it (a failure with FLOWPLEX_REQUIRE_EXTRAS=1)."""
    if os.environ.get("FLOWPLEX_REQUIRE_EXTRAS") == "1":
        import ray

        return ray
    return pytest.importorskip("ray", reason="Ray is not installed: pip install 'flowplex[ray]'")


@pytest.fixture(scope="session")
def ray_session() -> Iterator[Any]:
    """The session's local Ray instance: 8 logical CPUs (actors ask for fractions), a small store."""
    ray = need_ray()
    if not ray.is_initialized():
        ray.init(num_cpus=8, include_dashboard=False, log_to_driver=False, object_store_memory=512 * 1024 * 1024,
                 configure_logging=False)
    yield ray
    ray.shutdown()


@pytest.fixture
def on_ray(ray_session: Any) -> Any:
    """Ray, for a test whose graphs use the session's instance."""
    return ray_session


def ray_yaml(body: str, fields: str = "", name: str = "cluster") -> str:
    """``body`` with one Ray executor named ``name`` (``fields``: more of its settings) first."""
    return f"executors: [{{ name: {name}, type: RayExecutor, num_cpus: 0.25{fields} }}]\n{body}"


def ray_executors(g: flowplex.Graph) -> list[RayExecutor]:
    return [ex for ex in g._engine.executors if isinstance(ex, RayExecutor)]


def run(g: flowplex.Graph, values: list[object], port: str = "", wait: bool = True) -> list[flowplex.Packet]:
    """Start ``g``, send ``values`` (ts = index) on its first input while another thread reads
    ``port`` (default: the first output), close the inputs; the packets that arrived, in order."""
    out = g.add_poller(port or g.plan.graph_outputs[0])
    got: list[flowplex.Packet] = []
    failed: list[BaseException] = []

    def read() -> None:
        try:
            got.extend(out)
        except flowplex.FlowplexError as exc:  # the graph failed: wait_done raises it too
            failed.append(exc)

    reader = threading.Thread(target=read, daemon=True)
    g.start()
    reader.start()
    try:
        for ts, v in enumerate(values):
            g.send(g.plan.graph_inputs[0], v, ts=ts)
        g.close_all_inputs()
        if wait:
            g.wait_done(timeout=WAIT_S)
    finally:
        reader.join(WAIT_S)
    if failed:
        raise failed[0]
    return got
