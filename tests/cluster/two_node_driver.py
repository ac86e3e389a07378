"""Driver of ``test_two_nodes.py``, run as a script in a process of its own: a process joins one
Ray cluster at most, and the test's own process may hold the suite's local Ray instance.

``python two_node_driver.py --address 127.0.0.1:PORT --kill-pid PID --out result.json``:

1. runs the two-node graph inline (no executor named: the driver's own threads), then with node
   ``a`` on a ``RayExecutor`` that asks for resource ``left`` and node ``b`` on one that asks for
   ``right``, and records both outputs and which Ray node each packet went through;
2. starts the Ray graph again, checks that packets flow, SIGKILLs process ``PID`` (the raylet of
   the node that offers ``right``), waits until Ray marks that node dead, sends more and records
   what ``wait_done`` raises.

It writes what it saw as JSON to ``--out`` (Ray may print to stdout) and leaves every judgement
to the test. Imports happen in ``main``: the module is also imported by pytest's doctest
collection, where the kernel module is not on ``sys.path``.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

WAIT_S = 60.0
"""Bound on every wait of the driver (Ray needs a few seconds to notice a dead raylet)."""
BEFORE_KILL = 3
"""Packets sent, and read back, through both nodes before the kill."""
AFTER_KILL = 5
"""Packets sent after the kill."""


def graph_yaml(address: str | None) -> str:
    """The graph: ``a`` (x * 3) on resource ``left``, then ``b`` (+ 7) on ``right``; outputs ``y``
    and, per packet, the Ray node ``a`` ran on (``wa``) and ``b`` ran on (``wb``). Without an
    address: the same graph, inline."""
    executors, on_left, on_right = "", "", ""
    if address is not None:
        ray = f'type: RayExecutor, address: "{address}", num_cpus: 0.25, max_batch: 16, max_restarts: 0'
        executors = ("executors:\n"
                     f"  - {{ name: left, {ray}, resources: {{ left: 1 }} }}\n"
                     f"  - {{ name: right, {ray}, resources: {{ right: 1 }} }}\n")
        on_left, on_right = ", executor: left", ", executor: right"
    return (f"{executors}"
            "input_ports: [x]\n"
            "output_ports: [y, wa, wb]\n"
            "nodes:\n"
            f"  - {{ name: a, kernel: TwoNodeWhere{on_left}, options: {{ factor: 3 }}, input_ports: [x],"
            " output_ports: [m, wa] }\n"
            f"  - {{ name: b, kernel: TwoNodeWhere{on_right}, options: {{ offset: 7 }}, input_ports: [m],"
            " output_ports: [y, wb] }\n")


def run_graph(text: str, count: int) -> dict[str, Any]:
    """Send ``0..count-1`` through the graph; every output's payloads and the time it took."""
    import flowplex

    started = time.monotonic()
    g = flowplex.Graph.from_yaml(text)
    polls = {port: g.add_poller(port) for port in ("y", "wa", "wb")}
    try:
        g.start()
        for i in range(count):
            g.send("x", i, ts=i)
        g.close_all_inputs()
        g.wait_done(timeout=WAIT_S)
        outputs: dict[str, Any] = {port: [p.payload for p in poll] for port, poll in polls.items()}
    finally:
        g.close()
    outputs["seconds"] = time.monotonic() - started
    return outputs


def cluster_nodes() -> list[dict[str, Any]]:
    """The cluster's nodes as the driver's Ray connection sees them."""
    import ray

    return [{"id": n["NodeID"], "alive": n["Alive"], "resources": n["Resources"],
             "manager_port": n.get("NodeManagerPort")} for n in ray.nodes()]


def kill_phase(text: str, pid: int) -> dict[str, Any]:
    """Packets through both nodes, then SIGKILL ``pid``, wait for Ray to mark its node dead, send
    more packets, and record what ``wait_done`` raises."""
    from _two_node_cluster import alive

    import flowplex
    from flowplex.errors import KernelError

    seen: dict[str, Any] = {"before": [], "send_error": None, "error": None}
    g = flowplex.Graph.from_yaml(text)
    y = g.add_poller("y")
    try:
        g.start()
        for i in range(BEFORE_KILL):
            g.send("x", i, ts=i)
        for _ in range(BEFORE_KILL):
            packet = y.next(timeout=WAIT_S)
            seen["before"].append(None if packet is None else packet.payload)
        os.kill(pid, signal.SIGKILL)
        killed = time.monotonic()
        while alive(pid) and time.monotonic() < killed + 10.0:
            time.sleep(0.05)
        seen["killed_pid_alive"] = alive(pid)
        # A dead raylet's workers live on until the GCS declares its node dead (~4 s here: the
        # actor keeps answering calls without its raylet); wait for that, so later calls must fail.
        while time.monotonic() < killed + WAIT_S and all(node["alive"] for node in cluster_nodes()):
            time.sleep(0.1)
        seen["node_dead_after_s"] = time.monotonic() - killed
        seen["nodes_dead"] = [node["id"] for node in cluster_nodes() if not node["alive"]]
        try:
            for i in range(BEFORE_KILL, BEFORE_KILL + AFTER_KILL):
                g.send("x", i, ts=i)
            g.close_all_inputs()
        except Exception as exc:  # the graph may have failed already: wait_done says how
            seen["send_error"] = f"{type(exc).__name__}: {exc}"
        try:
            g.wait_done(timeout=WAIT_S)
        except Exception as exc:
            seen["error"] = {"type": f"{type(exc).__module__}.{type(exc).__qualname__}",
                             "is_kernel_error": isinstance(exc, KernelError), "message": str(exc),
                             "node": getattr(exc, "node", None), "cause": repr(exc.__cause__)}
        seen["error_after_kill_s"] = time.monotonic() - killed
        seen["after_queued"] = len(y)  # reading them would raise the graph's error
    finally:
        closing = time.monotonic()
        g.close()
        seen["close_s"] = time.monotonic() - closing
    seen["nodes_after"] = cluster_nodes()
    return seen


def main(argv: list[str] | None = None) -> int:
    """Run both phases against the cluster at ``--address``; write the JSON record to ``--out``."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--address", required=True, help="the head's GCS, IP:PORT")
    parser.add_argument("--kill-pid", type=int, required=True, help="the raylet to kill in phase 2")
    parser.add_argument("--out", type=Path, required=True, help="where to write the JSON record")
    parser.add_argument("--count", type=int, default=100, help="packets of phase 1")
    args = parser.parse_args(argv)

    sys.path.insert(0, str(Path(__file__).resolve().parent))  # the actors get this sys.path too
    import two_node_kernels  # noqa: F401 - registers TwoNodeWhere (the actors import it by reference)

    record: dict[str, Any] = {"inline": run_graph(graph_yaml(None), args.count)}
    record["ray"] = run_graph(graph_yaml(args.address), args.count)
    record["nodes"] = cluster_nodes()
    record["kill"] = kill_phase(graph_yaml(args.address), args.kill_pid)
    args.out.write_text(json.dumps(record))
    return 0


if __name__ == "__main__":
    sys.exit(main())
