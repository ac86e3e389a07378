"""Two Ray nodes on this one machine: a graph whose nodes ask for each node's custom resource runs
across both, with the outputs of an inline run, and killing the second node's raylet fails the
graph with that node's ``KernelError``.

Real processes throughout, no mocks: ``ray start --head`` (resource ``left``) and ``ray start
--address`` (resource ``right``) on free ports, with a temp dir and an auth token of their own
(``_two_node_cluster``); the graph runs in a driver subprocess (``two_node_driver.py``), because a
process joins one Ray cluster at most and this one may hold the suite's local instance; the
raylet killed is the second node's real one. The fixture kills exactly the cluster's processes
afterwards, whether the test passes or not (never ``ray stop``: it would kill every Ray process
of the machine).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ._two_node_cluster import TwoNodeCluster, alive, start_cluster

DRIVER = Path(__file__).with_name("two_node_driver.py")
DRIVER_TIMEOUT_S = 150.0
"""Bound on the driver (it takes ~10 s; Ray's own waits inside it are bounded at 60 s each)."""
COUNT = 100
"""Packets of the run across both nodes."""


@pytest.fixture
def two_nodes() -> Iterator[TwoNodeCluster]:
    """A started two-node cluster, its processes killed afterwards (pass or fail)."""
    if os.environ.get("FLOWPLEX_REQUIRE_EXTRAS") == "1":
        import ray  # noqa: F401 - a missing extra fails rather than skips
    else:
        pytest.importorskip("ray", reason="the two-node cluster test needs Ray: pip install 'flowplex[ray]'")
    ray_cli = Path(sys.executable).parent / "ray"
    assert ray_cli.exists(), f"Ray is importable but its CLI is not next to the interpreter: {ray_cli}"
    cluster = start_cluster(ray_cli)
    try:
        yield cluster
    finally:
        cluster.stop()


def _run_driver(cluster: TwoNodeCluster, kill_pid: int, out: Path) -> dict[str, Any]:
    """Run ``two_node_driver.py`` against ``cluster``; its JSON record (the run's output on failure)."""
    command = [sys.executable, str(DRIVER), "--address", cluster.address, "--kill-pid", str(kill_pid),
               "--out", str(out), "--count", str(COUNT)]
    run = subprocess.run(command, env=cluster.env, capture_output=True, text=True, timeout=DRIVER_TIMEOUT_S,
                         check=False)
    assert run.returncode == 0 and out.exists(), (
        f"driver exited with {run.returncode}\nstdout (tail):\n{run.stdout[-3000:]}\nstderr (tail):\n"
        f"{run.stderr[-6000:]}")
    record: dict[str, Any] = json.loads(out.read_text())
    return record


@pytest.mark.timeout(240)
def test_graph_runs_across_two_ray_nodes_and_a_dead_raylet_fails_its_node(
        two_nodes: TwoNodeCluster, tmp_path: Path) -> None:
    """Node ``a`` (RayExecutor asking ``left: 1``) runs on the head and node ``b`` (``right: 1``)
    on the second node: every packet reports the Ray node it went through, the outputs equal
    the inline run's, and once the second node's raylet is SIGKILLed (and Ray marks the node
    dead) the graph fails with a ``KernelError`` naming ``b``; the head lives on."""
    head_raylet = two_nodes.raylet_pid(two_nodes.head_manager_port)
    second_raylet = two_nodes.raylet_pid(two_nodes.second_manager_port)
    assert head_raylet != second_raylet

    record = _run_driver(two_nodes, second_raylet, tmp_path / "record.json")

    # The cluster, as the driver's Ray connection saw it: our two nodes, one per resource.
    nodes = record["nodes"]
    assert len(nodes) == 2 and all(node["alive"] for node in nodes), nodes
    (left,) = [node for node in nodes if "left" in node["resources"]]
    (right,) = [node for node in nodes if "right" in node["resources"]]
    assert left["id"] != right["id"]
    assert "right" not in left["resources"] and "left" not in right["resources"]
    assert left["manager_port"] == two_nodes.head_manager_port
    assert right["manager_port"] == two_nodes.second_manager_port

    # Inline: the reference outputs, computed in the driver's process (no Ray node).
    expected = [3 * i + 7 for i in range(COUNT)]
    inline = record["inline"]
    assert inline["y"] == expected
    assert inline["wa"] == [""] * COUNT and inline["wb"] == [""] * COUNT

    # On Ray: the same outputs, each packet through `a` on the head and `b` on the second node.
    on_ray = record["ray"]
    assert on_ray["y"] == inline["y"]
    assert on_ray["wa"] == [left["id"]] * COUNT
    assert on_ray["wb"] == [right["id"]] * COUNT

    # The kill: packets flowed through both nodes first, then the second node died and its node failed.
    kill = record["kill"]
    assert kill["before"] == expected[:3]
    assert kill["killed_pid_alive"] is False and not alive(second_raylet)
    assert kill["nodes_dead"] == [right["id"]], kill
    error = kill["error"]
    assert error is not None, f"the graph finished without an error after its node `b` died: {kill}"
    assert error["is_kernel_error"], error
    assert error["node"] == "b", error
    assert "node `b`" in error["message"] and "executor `right`" in error["message"], error
    assert "died" in error["message"], error
    assert kill["after_queued"] == 0, kill

    # The head, and the driver's connection to it, outlived the second node.
    assert alive(head_raylet)
    after = {node["id"]: node["alive"] for node in kill["nodes_after"]}
    assert after == {left["id"]: True, right["id"]: False}
