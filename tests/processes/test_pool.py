"""Graphs with nodes on a ``ProcessPoolExecutor``: the same results as inline, from real workers."""

from __future__ import annotations

import logging
import os
import re
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import flowplex
from flowplex.errors import KernelError, UsageError
from flowplex.executors import Executor, TaskStats
from flowplex.executors._protocol import KernelHostExecutor
from flowplex.executors.processes import ProcessPoolExecutor
from flowplex.testing import EXECUTOR_KINDS, default_executor

from .conftest import WAIT_S, pool_yaml, run_values

CHAIN = """
nodes:
  - { name: a, kernel: PDouble, input_ports: [x], output_ports: [y]%s }
  - { name: b, kernel: PPid, input_ports: [y], output_ports: [z]%s }
  - { name: c, kernel: PDouble, input_ports: [z], output_ports: [w]%s }
input_ports: [x]
output_ports: [w]
"""


def unchain(value: object) -> tuple[int, int]:
    """``(x, pid of b)`` from what CHAIN emits for input x: ``2 * (2x * 1_000_000 + pid)``."""
    assert isinstance(value, int)
    return value // 4_000_000, value % 4_000_000 // 2


def test_the_pool_is_a_kernel_host_executor_that_starts_nothing_until_hosting() -> None:
    pool = ProcessPoolExecutor("p", 2)
    assert isinstance(pool, Executor) and isinstance(pool, KernelHostExecutor)
    assert (pool.kind, pool.threads, pool.runs_on_caller, pool.hosts_kernels) == ("processes", 1, False, True)
    assert pool.stats() == TaskStats("processes", 1, 0, 0, 2)
    assert pool.pids == []
    assert ProcessPoolExecutor("p").num_processes == (os.cpu_count() or 1)
    pool.shutdown()
    pool.shutdown()  # idempotent


@pytest.mark.parametrize(
    ("kwargs", "pattern"),
    [
        ({"num_processes": 0}, r"^ProcessPoolExecutor `p`: num_processes must be an integer >= 1, got 0$"),
        ({"num_processes": 1.5}, r"num_processes must be an integer >= 1, got 1\.5$"),
        ({"start_method": "fork"}, r"unknown start_method 'fork'; expected spawn or forkserver \(never fork"),
    ],
)
def test_bad_arguments_are_usage_errors(kwargs: dict[str, object], pattern: str) -> None:
    with pytest.raises(UsageError, match=pattern):
        ProcessPoolExecutor("p", **kwargs)  # type: ignore[arg-type]


def test_a_chain_on_the_pool_gives_the_inline_results_from_worker_processes(no_leftover_workers: None) -> None:
    values = [3, 1, 4, 1, 5, 9, 2, 6]
    place = ", executor: pool"
    with flowplex.Graph.from_yaml(pool_yaml(CHAIN % (place, place, place))) as g:
        pooled = run_values(g, "w", values)
        kinds = {ex.name: ex.kind for ex in g.stats().executors}
    with flowplex.Graph.from_yaml(CHAIN % ("", "", "")) as g:
        inline = run_values(g, "w", values)
    assert kinds["pool"] == "processes"
    assert [x for x, _ in map(unchain, pooled)] == [x for x, _ in map(unchain, inline)] == values
    pids = {pid for _, pid in map(unchain, pooled)}
    assert len(pids) == 1 and os.getpid() not in pids  # b ran in one worker, not here


def test_max_in_flight_beyond_the_workers_pipelines_calls_to_one_instance_in_order() -> None:
    """A pool of one process takes max_in_flight 4: the calls queue at its one instance (no
    replica can run elsewhere), and the outputs still come in input order."""
    body = """
nodes:
  - { name: r, kernel: PReplica, executor: pool, max_in_flight: 4, input_ports: [x], output_ports: [y] }
input_ports: [x]
output_ports: [y]
"""
    with flowplex.Graph.from_yaml(pool_yaml(body, 1)) as g:
        rows = [np.asarray(v) for v in run_values(g, "y", list(range(12)))]
    process_rows = [row for row in rows if row[0] >= 0]
    assert [int(row[0]) for row in process_rows] == list(range(12))
    assert {int(row[1]) for row in rows} != {os.getpid()} and len({int(row[1]) for row in rows}) == 1
    assert [int(row[2]) for row in process_rows] == list(range(1, 13))  # one instance saw them all, in order


def test_nodes_are_placed_round_robin_and_keep_worker_and_state_across_a_restart() -> None:
    body = """
nodes:
  - { name: a, kernel: PCount, input_ports: [x], output_ports: [y], executor: pool }
  - { name: b, kernel: PCount, input_ports: [x], output_ports: [z], executor: pool }
  - { name: c, kernel: PCount, input_ports: [x], output_ports: [w], executor: pool }
input_ports: [x]
output_ports: [y, z, w]
"""

    def run(g: flowplex.Graph, n: int) -> dict[str, list[tuple[int, int]]]:
        outs = {port: g.add_poller(port) for port in ("y", "z", "w")}
        g.start()
        for ts in range(n):
            g.send("x", ts, ts=ts)
        g.close_all_inputs()
        got = {port: [divmod(p.as_int() or 0, 1_000_000) for p in poller] for port, poller in outs.items()}
        g.wait_done(timeout=WAIT_S)
        return got

    with flowplex.Graph.from_yaml(pool_yaml(body)) as g:
        first = run(g, 2)
        g.reset()  # kernels stay opened, on their workers
        second = run(g, 1)
    pid = {port: {p for _, p in first[port] + second[port]} for port in first}
    assert all(len(p) == 1 for p in pid.values())
    assert pid["y"] == pid["w"] != pid["z"]  # a and c on worker 0, b on worker 1
    assert os.getpid() not in pid["y"] | pid["z"]
    assert [n for n, _ in first["y"] + second["y"]] == [1, 2, 3]  # one instance per node, its state kept


def test_what_a_callback_does_crosses_back(caplog: pytest.LogCaptureFixture) -> None:
    """Options, side packets, counters, logs, numpy buffers, set_error and errors that do not unpickle."""
    body = """
nodes:
  - { name: r, kernel: PReport, input_ports: [x], output_ports: [y], executor: pool, options: { tag: t } }
  - { name: s, kernel: PScale, input_ports: [f], output_ports: [g], executor: pool, options: { factor: 3 } }
  - { name: e, kernel: PSetError, input_ports: [x], output_ports: [ey], executor: pool, on_error: skip }
  - { name: o, kernel: POdd, input_ports: [x], output_ports: [oy], executor: pool, on_error: skip }
input_ports: [x, f]
output_ports: [y, g, ey, oy]
"""
    frame = np.arange(1 << 16, dtype=np.float32).reshape(256, 256)
    with caplog.at_level(logging.WARNING, logger="flowplex"), flowplex.Graph.from_yaml(pool_yaml(body)) as g:
        g.set_side_packet("base", 100)
        y, scaled = g.add_poller("y"), g.add_poller("g")
        g.start()
        for ts in range(3):
            g.send("x", ts + 1, ts=ts)
        g.send("f", frame, ts=0)
        g.close_all_inputs()
        got = [p.as_str() for p in y]
        arrays = [p.as_numpy() for p in scaled]
        g.wait_done(timeout=WAIT_S)
        counters = {name: g.counter_value(name) for name in ("opened", "seen", "sum", "closed")}
        errors = {n.node_name: n.errors for n in g.node_stats()}
    assert got == ["t:101", "t:102", "t:103"]
    assert counters == {"opened": 1, "seen": 3, "sum": 6, "closed": 1}
    assert len(arrays) == 1 and arrays[0].shape == (256, 256) and np.array_equal(arrays[0], frame * 3)
    messages = [r.getMessage() for r in caplog.records if r.name.startswith("flowplex")]
    logged = [m for m in messages if " saw " in m]
    assert len(logged) == 3 and all(m.startswith("[r] saw ") for m in logged)
    assert str(os.getpid()) not in logged[0]  # logged in the worker
    assert (errors["e"], errors["o"]) == (3, 3)
    skips = {m.split(" so far: ", 1)[1] for m in messages if "skipping a failed packet" in m}
    assert skips == {"OddError: odd 1/2", "RuntimeError: the frame was empty"}


def test_a_kernel_error_names_the_node_and_carries_the_workers_traceback() -> None:
    body = """
nodes:
  - { name: f, kernel: PFail, input_ports: [x], output_ports: [y], executor: pool, options: { bad: 2 } }
input_ports: [x]
output_ports: [y]
"""
    with flowplex.Graph.from_yaml(pool_yaml(body, 1)) as g, \
            pytest.raises(KernelError, match=r"^kernel failed: \[f\] ValueError: cannot take 2$") as info:
        run_values(g, "y", [1, 2, 3])
    err = info.value
    assert (err.node, err.kernel, err.ts) == ("f", "PFail", 1)
    cause = err.__cause__
    assert isinstance(cause, ValueError)
    notes = "\n".join(getattr(cause, "__notes__", []))
    assert "raised in the kernel host of node `f`" in notes
    assert re.search(r'kernels\.py", line \d+, in explode', notes)


def test_sources_on_the_pool_yield_and_finish() -> None:
    body = """
nodes:
  - { name: s, kernel: PSource, output_ports: [y], executor: pool, options: { count: 4, yield_s: 0.05 } }
  - { name: d, kernel: PDouble, input_ports: [y], output_ports: [z], executor: pool }
output_ports: [z]
"""
    with flowplex.Graph.from_yaml(pool_yaml(body)) as g:
        out = g.add_poller("z")
        g.start()
        started = time.monotonic()
        got = [(p.timestamp, p.as_int()) for p in out]
        took = time.monotonic() - started
        g.wait_done(timeout=WAIT_S)
    assert got == [(0, 0), (1, 2), (2, 4), (3, 6)]
    assert took >= 0.14  # three yields of 50 ms between four packets


def test_route_nodes_and_graph_imports_work_on_the_pool(tmp_path: Path) -> None:
    module = tmp_path / "pool_kernels_from_a_file.py"
    module.write_text(
        "import flowplex\n"
        "@flowplex.kernel('PFileNegate')\n"
        "class Negate(flowplex.Kernel):\n"
        "    def process(self, cc):\n"
        "        cc.emit(0, -cc.input(0).as_int())\n"
    )
    graph = tmp_path / "g.yaml"
    graph.write_text(pool_yaml(f"""
imports: [{module.name}]
nodes:
  - {{ name: n, kernel: PFileNegate, input_ports: [x], output_ports: [y], executor: pool }}
  - name: r
    type: route
    executor: pool
    input_ports: [y]
    output_ports: [small, big]
    routes:
      - {{ to: small, when: {{ timestamp: {{ op: lt, value: 2 }} }} }}
      - {{ to: big, default: true }}
input_ports: [x]
output_ports: [small, big]
"""))
    with flowplex.Graph.from_yaml_file(graph) as g:
        small, big = g.add_poller("small"), g.add_poller("big")
        g.start()
        for ts in range(4):
            g.send("x", ts + 1, ts=ts)
        g.close_all_inputs()
        got = ([p.as_int() for p in small], [p.as_int() for p in big])
        g.wait_done(timeout=WAIT_S)
    assert got == ([-1, -2], [-3, -4])


def test_stats_report_the_invocation_running_in_a_worker(tmp_path: Path) -> None:
    body = f"""
nodes:
  - {{ name: h, kernel: PHang, input_ports: [x], output_ports: [y], executor: pool,
      options: {{ pid_file: "{tmp_path / 'pid'}", sleep_s: 0.5 }} }}
input_ports: [x]
output_ports: [y]
"""
    with flowplex.Graph.from_yaml(pool_yaml(body, 1)) as g:
        out = g.add_poller("y")
        g.start()
        g.send("x", 1, ts=0)
        deadline = time.monotonic() + WAIT_S
        while next(s for s in g.stats().executors if s.name == "pool").running != 1:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        g.close_all_inputs()
        assert [p.as_int() for p in out] == [1]
        g.wait_done(timeout=WAIT_S)
        pool = next(s for s in g.stats().executors if s.name == "pool")
    assert (pool.kind, pool.running, pool.queued) == ("processes", 0, 0)


def test_testing_default_executor_runs_every_default_node_on_a_two_process_pool() -> None:
    assert "processes" in EXECUTOR_KINDS  # the engine suites run on it too
    with default_executor("processes"):
        g = flowplex.Graph.from_yaml(CHAIN % ("", "", ""))
    with g:
        got = run_values(g, "w", [1, 2])
        kinds = {ex.name: (ex.kind, ex.capacity) for ex in g.stats().executors}
    assert kinds["default"] == ("processes", 2)
    assert [x for x, _ in map(unchain, got)] == [1, 2]
    assert os.getpid() not in {pid for _, pid in map(unchain, got)}


def test_forkserver_workers_give_the_same_results() -> None:
    with default_executor(lambda name: ProcessPoolExecutor(name, 1, start_method="forkserver")):
        g = flowplex.Graph.from_yaml(CHAIN % ("", "", ""))
    with g:
        got = run_values(g, "w", [5])
    assert [x for x, _ in map(unchain, got)] == [5]


def test_warm_workers_serve_the_next_warm_pool_fresh(tmp_path: Path) -> None:
    """A ``warm=True`` pool leaves its idle workers to the next one (the test kind does): the
    same processes, no kernel of the last graph, the new pool's arena, and the host's
    ``sys.path`` as it is now (a module made after the workers started is found)."""
    body = CHAIN % (", executor: pool", ", executor: pool", ", executor: pool")
    with default_executor(lambda name: ProcessPoolExecutor(name, 1, warm=True)):
        with flowplex.Graph.from_yaml(body.replace("executor: pool", "executor: default")) as g:
            first = [unchain(v)[1] for v in run_values(g, "w", [1, 2])]
        (tmp_path / "warm_late_kernels.py").write_text(
            "import flowplex\n\n@flowplex.kernel('WarmLate')\nclass WarmLate(flowplex.Kernel):\n"
            "    def process(self, cc):\n        p, view = cc.new_buffer((1 << 17,), 'u8')\n"
            "        view[:] = cc.input(0).as_int()\n        cc.emit(0, p)\n")
        sys.path.insert(0, str(tmp_path))
        try:
            text = ("imports: [warm_late_kernels]\nnodes:\n  - { name: k, kernel: WarmLate, input_ports: [x], "
                    "output_ports: [y] }\ninput_ports: [x]\noutput_ports: [y]\n")
            with flowplex.Graph.from_yaml(text) as g:
                pool = next(ex for ex in g._engine.executors if isinstance(ex, ProcessPoolExecutor))
                out = g.add_poller("y")
                g.start()
                g.send("x", 7, ts=0)
                arr = out.next(timeout=WAIT_S).as_numpy()
                assert int(arr[0]) == 7 and pool.in_arena(arr)  # made in the new pool's arena
                second = pool.pids
                del arr
                g.close_all_inputs()
                g.wait_done(timeout=WAIT_S)
        finally:
            sys.path.remove(str(tmp_path))
    assert len(set(first)) == 1 and second == [first[0]]  # the same worker process served both graphs
