"""Workers that die, kernel classes a worker cannot import, and stopping: no hang, no process left."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
import time
import types
from pathlib import Path

import pytest

import flowplex
from flowplex.errors import BrokenError, ConfigError, KernelError
from flowplex.executors._invocation import Invocation, NodeRecipe, Outcome
from flowplex.executors.processes import ProcessPoolExecutor
from flowplex.kernels import kernel_class
from flowplex.kernels._context import PHASE_PROCESS
from flowplex.spec import NodeSpec, PortSpec
from flowplex.testing import default_executor

from .conftest import WAIT_S, alive, pool_yaml

ROOT = Path(__file__).resolve().parents[2]


def hang_graph(pid_file: Path, sleep_s: float = 30.0, extra_node: str = "") -> str:
    return pool_yaml(f"""
nodes:
  - {{ name: h, kernel: PHang, input_ports: [x], output_ports: [y], executor: pool,
      options: {{ pid_file: "{pid_file}", sleep_s: {sleep_s} }} }}
{extra_node}input_ports: [x]
output_ports: [y]
""")


def test_a_worker_killed_mid_run_fails_the_graph_within_a_second(tmp_path: Path,
                                                                    no_leftover_workers: None) -> None:
    pid_file = tmp_path / "pid"
    with flowplex.Graph.from_yaml(hang_graph(pid_file)) as g:
        out = g.add_poller("y")
        g.start()
        pid = int(pid_file.read_text())  # written by open, which start() waited for
        g.send("x", 1, ts=0)
        time.sleep(0.1)  # let the invocation reach the worker
        killed = time.monotonic()
        os.kill(pid, signal.SIGKILL)
        with pytest.raises(KernelError) as info:
            g.wait_done(timeout=WAIT_S)
        took = time.monotonic() - killed
        with pytest.raises(KernelError):
            out.next(timeout=WAIT_S)  # the poller reports the failure, it does not hang
    assert took < 1.5
    err = info.value
    assert (err.node, err.ts) == ("h", 0)
    assert str(err) == (f"kernel failed: [h] BrokenError: worker process {pid} of executor `pool` was killed by "
                        "signal 9 (SIGKILL) while running node `h`")
    assert isinstance(err.__cause__, BrokenError)
    assert not alive(pid)


@pytest.mark.parametrize(
    ("kernel", "how"),
    [("PExit", "exited with code 7"), ("PSegfault", r"was killed by signal 11 \(SIGSEGV\)")],
)
def test_a_worker_that_exits_or_crashes_reports_how(kernel: str, how: str) -> None:
    body = f"""
nodes:
  - {{ name: q, kernel: {kernel}, input_ports: [x], output_ports: [y], executor: pool, options: {{ code: 7 }} }}
input_ports: [x]
output_ports: [y]
"""
    with flowplex.Graph.from_yaml(pool_yaml(body, 1)) as g:
        g.start()
        g.send("x", 1, ts=0)
        with pytest.raises(KernelError, match=rf"^kernel failed: \[q\] BrokenError: worker process \d+ of executor "
                                              rf"`pool` {how} while running node `q`$"):
            g.wait_done(timeout=WAIT_S)


def test_invocations_to_a_dead_worker_complete_at_once_with_the_reason(tmp_path: Path) -> None:
    pool = ProcessPoolExecutor("p", 1)
    with default_executor(lambda name: pool):
        g = flowplex.Graph.from_yaml(hang_graph(tmp_path / "pid").replace("executor: pool", "executor: default"))
    with g:
        g.start()
        (pid,) = pool.pids
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + WAIT_S
        while not all(workers_lost(pool)):  # the receiver has seen the death
            assert time.monotonic() < deadline
            time.sleep(0.01)
        got: list[Outcome] = []
        pool.invoke(Invocation(0, 5, PHASE_PROCESS, 3, [None]), got.append)  # from this thread: answered here
        assert len(got) == 1
        assert (got[0].node, got[0].seq) == (0, 5)
        assert got[0].error == (f"BrokenError: worker process {pid} of executor `p` was killed by signal 9 "
                                "(SIGKILL); node `h` cannot run on it")
        assert isinstance(got[0].exception, BrokenError)
        with pytest.raises(BrokenError, match=r"it cannot host nodes again \(workers are not restarted\)"):
            pool.host([])


def workers_lost(pool: ProcessPoolExecutor) -> list[str]:
    return [link.lost for link in pool._links]


def test_a_kernel_class_defined_in_a_function_is_a_clear_error_at_start(no_leftover_workers: None) -> None:
    @flowplex.kernel("PLocalKernel")
    class Local(flowplex.Kernel):
        def process(self, cc: flowplex.Context) -> None:
            cc.forward(0, 0)

    body = """
nodes:
  - { name: loc, kernel: PLocalKernel, input_ports: [x], output_ports: [y], executor: pool }
input_ports: [x]
output_ports: [y]
"""
    with flowplex.Graph.from_yaml(pool_yaml(body)) as g:
        with pytest.raises(ConfigError) as info:
            g.start()
        assert pool_pids(g) == []  # refused before any worker started
    assert str(info.value) == (
        "nodes[0] (node `loc`): kernel class `tests.processes.test_faults."
        "test_a_kernel_class_defined_in_a_function_is_a_clear_error_at_start.<locals>.Local` cannot be "
        "imported by the worker processes of executor `pool`: it is defined inside a function; move the "
        "class into a module they can import (on sys.path), or name its file in the graph's `imports:`")


def pool_pids(g: flowplex.Graph) -> list[int]:
    pools = [ex for ex in g._engine.executors if isinstance(ex, ProcessPoolExecutor)]
    return [pid for pool in pools for pid in pool.pids]


def test_a_class_the_worker_cannot_import_names_the_node_and_the_cause(no_leftover_workers: None) -> None:
    ghost = types.ModuleType("flowplex_test_ghost_module")  # importable here (sys.modules), nowhere else
    sys.modules[ghost.__name__] = ghost
    try:
        exec(textwrap.dedent("""
            import flowplex
            @flowplex.kernel("PGhostKernel")
            class Ghost(flowplex.Kernel):
                def process(self, cc):
                    cc.forward(0, 0)
        """), ghost.__dict__)
        body = """
nodes:
  - { name: a, kernel: PDouble, input_ports: [x], output_ports: [y], executor: pool }
  - { name: g, kernel: PGhostKernel, input_ports: [y], output_ports: [z], executor: pool }
input_ports: [x]
output_ports: [z]
"""
        with flowplex.Graph.from_yaml(pool_yaml(body)) as g, pytest.raises(ConfigError) as info:
            g.start()
    finally:
        del sys.modules[ghost.__name__]
    assert str(info.value).startswith(
        "nodes[1] (node `g`): kernel class `flowplex_test_ghost_module.Ghost` cannot be imported in worker "
        "process ")
    assert str(info.value).endswith(
        "of executor `pool`: ModuleNotFoundError: No module named 'flowplex_test_ghost_module'; move the class "
        "into a module the workers can import (on sys.path), or name its file in the graph's `imports:`")


def test_a_kernel_file_that_fails_to_load_in_the_worker_says_why(tmp_path: Path,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    module = tmp_path / "host_only_kernels.py"
    module.write_text(textwrap.dedent("""
        import multiprocessing
        import flowplex

        if multiprocessing.parent_process() is not None:
            raise RuntimeError("only in the host")

        @flowplex.kernel("PHostOnly")
        class HostOnly(flowplex.Kernel):
            def process(self, cc):
                cc.forward(0, 0)
    """))
    body = f"""
imports: ["{module}"]
nodes:
  - {{ name: h, kernel: PHostOnly, input_ports: [x], output_ports: [y], executor: pool }}
input_ports: [x]
output_ports: [y]
"""
    with flowplex.Graph.from_yaml(pool_yaml(body, 1)) as g, pytest.raises(ConfigError) as info:
        g.start()
    assert re.fullmatch(
        r"nodes\[0\] \(node `h`\): kernel class `flowplex_import_host_only_kernels_\w+\.HostOnly` cannot be "
        r"imported in worker process \d+ of executor `pool`: ModuleNotFoundError: No module named "
        rf"'flowplex_import_host_only_kernels_\w+' \(loading `{re.escape(str(module))}` failed there too: "
        r"ConfigError: `.*`: cannot import file `.*`: RuntimeError: only in the host\); move the class into a "
        r"module the workers can import \(on sys\.path\), or name its file in the graph's `imports:`",
        str(info.value)), str(info.value)
    assert any("process.worker.import.failed" in r.getMessage() for r in caplog.records)


def test_a_kernel_in_main_of_a_script_read_from_stdin_is_a_clear_error() -> None:
    script = textwrap.dedent("""
        import flowplex

        @flowplex.kernel("PStdinKernel")
        class FromStdin(flowplex.Kernel):
            def process(self, cc):
                cc.forward(0, 0)

        g = flowplex.Graph.from_yaml('''
        executors: [{ name: cpu, type: ProcessPoolExecutor, num_processes: 1 }]
        default_executor: cpu
        nodes: [{ name: s, kernel: PStdinKernel, input_ports: [x], output_ports: [y] }]
        input_ports: [x]
        output_ports: [y]
        ''')
        try:
            g.start()
        except flowplex.ConfigError as exc:
            print(exc)
        finally:
            g.close()

        # A built-in kernel runs: the worker starts without this program's main module.
        with flowplex.Graph.from_yaml('''
        executors: [{ name: cpu, type: ProcessPoolExecutor, num_processes: 1 }]
        nodes: [{ name: s, kernel: ScaleKernel, executor: cpu, input_ports: [x], output_ports: [y],
                  options: { factor: 5 } }]
        input_ports: [x]
        output_ports: [y]
        ''') as g:
            out = g.add_poller("y")
            g.start()
            g.send("x", 3, ts=0)
            g.close_all_inputs()
            print([p.as_int() for p in out])
    """)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    result = subprocess.run([sys.executable, "-"], input=script, capture_output=True, text=True, timeout=60,
                            env=env, check=True)
    assert result.stdout.strip().splitlines() == [(
        "nodes[0] (node `s`): kernel class `__main__.FromStdin` cannot be imported by the worker processes of "
        "executor `cpu`: it is defined in `__main__` of a program that has no file (an interactive session, "
        "`python -c`, or a script read from stdin); move the class into a module they can import (on "
        "sys.path), or name its file in the graph's `imports:`"), "[15]"]


def test_cancel_then_close_stops_every_worker(tmp_path: Path, no_leftover_workers: None) -> None:
    g = flowplex.Graph.from_yaml(hang_graph(tmp_path / "pid", sleep_s=0.3, extra_node=(
        "  - { name: d, kernel: PDouble, input_ports: [x], output_ports: [z], executor: pool }\n")))
    g.start()
    pids = pool_pids(g)
    assert len(pids) == 2 and all(map(alive, pids))
    g.send("x", 1, ts=0)
    time.sleep(0.05)
    started = time.monotonic()
    g.cancel()
    g.close()  # waits for the running callback (0.3 s), closes the kernels, stops the workers
    assert time.monotonic() - started < 2.0
    assert not any(map(alive, pids))
    g.close()  # idempotent


def test_shutdown_terminates_a_stuck_worker_and_drops_its_invocation(tmp_path: Path,
                                                                        no_leftover_workers: None) -> None:
    pool = ProcessPoolExecutor("p", 1)
    spec = NodeSpec("h", "PHang", "nodes[0]", (PortSpec("x"),), (PortSpec("y"),),
                    options={"pid_file": str(tmp_path / "pid"), "sleep_s": 30.0})
    pool.host([NodeRecipe(0, spec, kernel_class("PHang"), False, {})])
    pool.start()
    (pid,) = pool.pids
    got: list[Outcome] = []
    pool.invoke(Invocation(0, 0, PHASE_PROCESS, 0, [flowplex.Packet.from_int(1, 0)]), got.append)
    time.sleep(0.1)
    assert pool.stats().running == 1
    started = time.monotonic()
    pool.shutdown()  # the kernel sleeps for 30 s: the worker is terminated after the grace
    assert time.monotonic() - started < 2.5
    assert not alive(pid)
    assert got == []  # dropped, as a shut-down executor drops its queued work
    pool.shutdown()


def test_close_after_a_normal_run_is_quick_and_leaves_no_worker(no_leftover_workers: None) -> None:
    body = """
nodes:
  - { name: a, kernel: PDouble, input_ports: [x], output_ports: [y], executor: pool }
  - { name: b, kernel: PDouble, input_ports: [y], output_ports: [z], executor: pool }
input_ports: [x]
output_ports: [z]
"""
    g = flowplex.Graph.from_yaml(pool_yaml(body))
    out = g.add_poller("z")
    g.start()
    pids = pool_pids(g)
    g.send("x", 1, ts=0)
    g.close_all_inputs()
    assert [p.as_int() for p in out] == [4]
    g.wait_done(timeout=WAIT_S)
    started = time.monotonic()
    g.close()
    assert time.monotonic() - started < 1.0
    assert len(pids) == 2 and not any(map(alive, pids))
