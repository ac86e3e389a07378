"""Deadlines that cover start-up: a kernel hung in ``open`` or an import that never finishes.

Before: ``flowplex run --timeout N`` did not fire while a node was opening (on every executor;
the process pool's case also left its arena in /dev/shm when killed), nor while a module
named by ``--import``/``imports:`` was importing; ``Graph.start()`` blocked for ever on a hung
``open``, and ``cancel()`` + ``close()`` after a hung ``process()`` took 15 s. Every hang here
is bounded (the kernels sleep for a while, the CLI runs in a subprocess under a timeout), so a
regression fails instead of hanging the suite.
"""

from __future__ import annotations

import logging
import os
import re
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

import flowplex
from flowplex.testing import default_executor

from .._shm import ours
from . import engine_kernels as engine_kernels  # registers the kernels (a pool's workers import them)
from .conftest import CLI, run_limited

ROOT = Path(__file__).resolve().parents[2]
IMPORTS = "imports: [tests.hostile.engine_kernels]\n"
OPENING = f"""{IMPORTS}nodes:
  - {{ name: stuck, kernel: HostileOpenHang, output_ports: [y], options: {{ open_s: 8 }} }}
output_ports: [y]
"""


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), str(ROOT), env.get("PYTHONPATH", "")])
    return env


def _shm() -> set[str]:
    return {name for name in os.listdir("/dev/shm") if name.startswith("flowplex-arena-")}


@pytest.mark.parametrize("kind", ["inline", "threads", "processes"])
def test_start_with_a_timeout_names_the_node_hung_in_open(kind: str) -> None:
    limit = 1.5 if kind == "processes" else 0.3  # a worker takes a while to start
    with default_executor(kind), flowplex.Graph.from_yaml(OPENING) as g:
        began = time.monotonic()
        with pytest.raises(flowplex.Timeout, match=r"^start timed out after [\d.]+ s: node `stuck` is still in "
                                                    r"open\(\)( on executor `default`)? \(for [\d.]+ s"):
            g.start(timeout=limit)
        assert time.monotonic() - began < limit + 0.5
        with pytest.raises(flowplex.StateError, match=r"open\(\) of node `stuck` from an earlier start never "
                                                       r"returned; build the graph again"):
            g.start()
        began = time.monotonic()
    assert time.monotonic() - began < 2.5  # close() does not wait for the hung open


@pytest.mark.parametrize("kind", ["inline", "processes"])
def test_cancel_from_another_thread_ends_a_start_that_waits(kind: str) -> None:
    with default_executor(kind), flowplex.Graph.from_yaml(OPENING) as g:
        threading.Timer(1.5 if kind == "processes" else 0.3, g.cancel).start()
        with pytest.raises(flowplex.GraphCancelled, match=r"^start was cancelled: node `stuck` is still in open\(\)"):
            g.start(timeout=None if kind == "processes" else 20)


def test_the_watchdog_reports_an_open_while_it_hangs(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="flowplex.graph")
    with flowplex.Graph.from_yaml(f"watchdog_ms: 50\n{OPENING}") as g, pytest.raises(flowplex.Timeout):
        g.start(timeout=0.4)
    warned = [r.getMessage() for r in caplog.records if "still running" in r.getMessage()]
    assert len(warned) == 1, warned
    assert re.fullmatch(r"node `stuck`: open\(\) has been running for [\d.]+ ms, exceeding watchdog 50 ms "
                        r"\(still running\)", warned[0])


def test_cancel_and_close_after_a_hung_process_return_within_about_a_second(
        caplog: pytest.LogCaptureFixture) -> None:
    engine_kernels.GATE.clear()
    caplog.set_level(logging.WARNING, logger="flowplex.graph")
    try:
        with default_executor("threads"), flowplex.Graph.from_yaml(f"""{IMPORTS}nodes:
  - {{ name: slow, kernel: HostileHang, input_ports: [x], output_ports: [y], options: {{ max_s: 20 }} }}
input_ports: [x]
output_ports: [y]
""") as g:
            g.start()
            g.send("x", 1, ts=0)
            time.sleep(0.1)
            began = time.monotonic()
            g.cancel()
            g.close()
            took = time.monotonic() - began
    finally:
        engine_kernels.GATE.set()
    assert took < 1.8, took
    warned = [r.getMessage() for r in caplog.records if r.getMessage().startswith("graph.close.abandoned")]
    assert warned and "'slow' (1 process() call(s) in flight)" in warned[0], warned


def _cli(tmp_path: Path, *args: str, timeout_s: float = 30.0) -> object:
    return run_limited([*CLI, *args], timeout_s=timeout_s, env=_env(), stdout_path=None)


def _graph(tmp_path: Path, executor: str = "", imports: str = IMPORTS) -> Path:
    path = tmp_path / "g.yaml"
    executors = {"": "", "threads": "executors: [{ name: pool, type: ThreadPoolExecutor }]\n",
                 "processes": "executors: [{ name: pool, type: ProcessPoolExecutor, num_processes: 1 }]\n"}[executor]
    where = ", executor: pool" if executor else ""
    path.write_text(f"""{imports}{executors}nodes:
  - {{ name: stuck, kernel: HostileOpenHang, output_ports: [y]{where}, options: {{ open_s: 20 }} }}
output_ports: [y]
""")
    return path


@pytest.mark.parametrize("executor", ["", "threads", "processes"])
def test_run_timeout_fires_while_a_node_opens_and_leaves_no_shared_memory(tmp_path: Path, executor: str) -> None:
    before = _shm()
    n = 2.0 if executor == "processes" else 1.0
    result = _cli(tmp_path, "run", "--timeout", f"{n:g}", str(_graph(tmp_path, executor)))
    assert not result.hung, result.stderr
    assert result.rc == 1, result.stderr
    assert re.fullmatch(rf".*g\.yaml: --timeout {n:g} s expired \(start timed out after [\d.]+ s: node `stuck` is "
                        r"still in open\(\).*\)\n", result.stderr), result.stderr
    assert result.stderr.count("\n") == 1, result.stderr
    assert result.elapsed < n + 3.5, result.elapsed
    assert not ours(_shm() - before)


@pytest.mark.parametrize("how", ["imports", "--import"])
@pytest.mark.parametrize("command", ["run", "check"])
def test_an_import_that_never_finishes_is_ended_by_the_timeout(tmp_path: Path, how: str, command: str) -> None:
    (tmp_path / "hang.py").write_text("import time\ntime.sleep(30)\n")
    graph = _graph(tmp_path, imports="imports: [hang.py]\n" if how == "imports" else IMPORTS)
    extra = ["--import", str(tmp_path / "hang.py")] if how == "--import" else []
    result = _cli(tmp_path, command, "--timeout", "1", *extra, str(graph))
    assert not result.hung and result.rc == 1, (result.rc, result.stderr)
    shown = r".*g\.yaml:1: imports\[0\] \(`hang\.py`\)" if how == "imports" else r"`.*hang\.py` \(--import .*hang\.py\)"
    assert re.fullmatch(rf"flowplex: error: .*g\.yaml: --timeout 1 s expired while importing {shown}\n",
                        result.stderr), result.stderr
    assert result.elapsed < 4.5, result.elapsed


def test_run_timeout_fires_in_a_kernel_constructor(tmp_path: Path) -> None:
    (tmp_path / "k.py").write_text("""import time, flowplex
@flowplex.kernel("SlowInit")
class SlowInit(flowplex.Kernel):
    def __init__(self):
        time.sleep(30)
""")
    graph = tmp_path / "g.yaml"
    graph.write_text("imports: [k.py]\nnodes:\n  - { name: born, kernel: SlowInit, output_ports: [y] }\n"
                     "output_ports: [y]\n")
    result = _cli(tmp_path, "run", "--timeout", "1", str(graph))
    assert result.rc == 1 and not result.hung, result.stderr
    assert re.fullmatch(r"flowplex: error: .*g\.yaml: --timeout 1 s expired while creating the kernel of node `born` "
                        r"\(kernel `SlowInit`: its get_contract or constructor\)\n", result.stderr), result.stderr


def test_a_hard_exit_flushes_the_output_removes_the_arena_and_kills_the_workers(tmp_path: Path) -> None:
    # A source hung in process() on the inline executor's background thread: the deadline ends the
    # run, close() gives up on the hung call within its bound (it used to hold the command 10 s more,
    # until the deadline thread's hard exit), and nothing is left behind either way.
    before = _shm()
    pid_file = tmp_path / "worker.pid"
    graph = tmp_path / "g.yaml"
    graph.write_text(f"""{IMPORTS}executors: [{{ name: pool, type: ProcessPoolExecutor, num_processes: 1 }}]
nodes:
  - {{ name: src, kernel: HostileEmitThenHang, output_ports: [a], options: {{ calls: 3, hang_s: 30 }} }}
  - {{ name: mark, kernel: HostilePidFile, input_ports: [a], output_ports: [y], executor: pool,
      options: {{ path: "{pid_file}" }} }}
output_ports: [y]
""")
    out = tmp_path / "out.jsonl"
    # 3 s, not 1: on a loaded machine the pool's worker can take over a second to load `mark`, and the
    # deadline would then fire during start (another test covers that message), not in the run.
    result = _cli(tmp_path, "run", "--timeout", "3", "-o", str(out), str(graph))
    assert result.rc == 1 and not result.hung, result.stderr
    lines = result.stderr.splitlines()
    assert re.fullmatch(r"flowplex: error: .*g\.yaml: --timeout 3 s expired \(wait_done timed out after [\d.]+ s; "
                        r"still running: 'src' \(1 process\(\) call\(s\) in flight\).*\)", lines[0]), lines
    assert len(lines) == 1, lines
    assert result.elapsed < 8, result.elapsed
    assert [line.count('"ts"') for line in out.read_text().splitlines()] == [1, 1, 1]  # flushed before the exit
    assert not ours(_shm() - before)
    worker = int(pid_file.read_text())
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        try:
            os.kill(worker, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        pytest.fail(f"worker process {worker} outlived the run")


def test_start_with_a_timeout_names_the_worker_still_loading_kernels(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                                     ) -> None:
    # The file stays among the process's imports, which every later pool's workers load: it hangs
    # only while this test's flag exists, so later tests' workers import it at no cost.
    flag = tmp_path / "hang.flag"
    flag.touch()
    (tmp_path / "worker_hangs.py").write_text(f"""import multiprocessing, os, time, flowplex
if multiprocessing.parent_process() is not None and os.path.exists({str(flag)!r}):  # a pool's worker
    time.sleep(30)

@flowplex.kernel("HostileWorkerOnly")
class WorkerOnly(flowplex.Kernel):
    def process(self, cc):
        cc.source_done()
""")
    monkeypatch.chdir(tmp_path)
    yaml = """imports: [worker_hangs.py]
nodes:
  - { name: w, kernel: HostileWorkerOnly, output_ports: [y] }
output_ports: [y]
"""
    with default_executor("processes"), flowplex.Graph.from_yaml(yaml) as g:
        began = time.monotonic()
        with pytest.raises(flowplex.Timeout, match=r"^start timed out: worker process \d+ of executor `default` is "
                                                    r"still loading the kernels of `w` \(importing their modules, "
                                                    r"constructing them; for [\d.]+ s\)$"):
            try:
                g.start(timeout=1.5)
            finally:
                flag.unlink()
        assert time.monotonic() - began < 2.0


def test_ctrl_c_during_a_hung_open_says_the_graph_was_starting(tmp_path: Path) -> None:
    graph = tmp_path / "g.yaml"
    graph.write_text(OPENING.replace("open_s: 8", "open_s: 20, say: 1"))
    with subprocess.Popen([*CLI, "run", str(graph)], env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True) as proc:
        try:
            assert proc.stdout is not None
            assert proc.stdout.readline() == "opening\n"
            proc.send_signal(signal.SIGINT)
            _, err = proc.communicate(timeout=20)
        finally:
            proc.kill()
    assert proc.returncode == 130, err
    assert err == ("flowplex: cancelled (Ctrl-C) while starting the graph (opening its kernels); in flight: nothing; "
                   "0 packet(s) so far\n")
