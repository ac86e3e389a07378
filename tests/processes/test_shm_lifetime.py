"""No shared-memory segment of a process pool outlives its graph (issue 14).

Not after ``close()``, a kernel error, a worker killed, or the host process killed (then
multiprocessing's resource tracker unlinks it). Other programs may use ``/dev/shm`` at the same
time: each test looks for its own segment's name only.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

import flowplex
from flowplex.errors import KernelError
from flowplex.executors.processes import ProcessPoolExecutor

from .conftest import WAIT_S, alive, pool_yaml

ROOT = Path(__file__).resolve().parents[2]
SHM = Path("/dev/shm")
MIB = 1 << 20

BODY = """
nodes:
  - { name: f, kernel: PForward, input_ports: [x], output_ports: [y], executor: pool }
  - { name: k, kernel: %s, input_ports: [n], output_ports: [m], executor: pool, options: { bad: 2, kill: 2 } }
input_ports: [x, n]
output_ports: [y, m]
"""


def segment_of(g: flowplex.Graph) -> str:
    """The name of the running pool's arena, checked to be in ``/dev/shm``."""
    (pool,) = (ex for ex in g._engine.executors if isinstance(ex, ProcessPoolExecutor))
    arena = pool._arena
    assert arena is not None
    assert (SHM / arena.name).exists()
    return arena.name


def test_close_unlinks_the_arena_while_arrays_of_it_are_still_alive() -> None:
    g = flowplex.Graph.from_yaml(pool_yaml(BODY % "PDouble"))
    y = g.add_poller("y")
    g.start()
    name = segment_of(g)
    g.send("x", np.full(MIB, 7, np.uint8), ts=0)
    kept = y.next(timeout=WAIT_S).as_numpy()
    g.close_all_inputs()
    g.wait_done(timeout=WAIT_S)
    g.close()
    assert not (SHM / name).exists()
    assert (kept == 7).all()  # the memory stays mapped for the arrays that still use it


def test_a_kernel_error_then_close_unlinks_the_arena() -> None:
    with flowplex.Graph.from_yaml(pool_yaml(BODY % "PFail")) as g:
        y, m = g.add_poller("y"), g.add_poller("m")
        g.start()
        name = segment_of(g)
        g.send("x", np.full(MIB, 1, np.uint8), ts=0)
        held = y.next(timeout=WAIT_S).as_numpy()
        g.send("n", 2, ts=0)
        with pytest.raises(KernelError, match=r"^kernel failed: \[k\] ValueError: cannot take 2$"):
            m.next(timeout=WAIT_S)
        with pytest.raises(KernelError):
            g.wait_done(timeout=WAIT_S)
    assert not (SHM / name).exists()
    assert (held == 1).all()


def test_a_killed_worker_then_close_unlinks_the_arena() -> None:
    with flowplex.Graph.from_yaml(pool_yaml(BODY % "PKillOn")) as g:
        y, m = g.add_poller("y"), g.add_poller("m")
        g.start()
        name = segment_of(g)
        g.send("x", np.full(MIB, 1, np.uint8), ts=0)
        held = y.next(timeout=WAIT_S).as_numpy()
        g.send("n", 2, ts=0)  # k SIGKILLs its worker
        with pytest.raises(KernelError, match=r"was killed by signal 9 \(SIGKILL\)"):
            m.next(timeout=WAIT_S)
        with pytest.raises(KernelError):
            g.wait_done(timeout=WAIT_S)
        assert (SHM / name).exists()  # the host still owns it
    assert not (SHM / name).exists()
    assert (held == 1).all()


HOST = """
import json, sys, time

import numpy as np

import flowplex
from flowplex.executors.processes import ProcessPoolExecutor
from tests.processes import kernels  # noqa: F401  (the workers import them by reference)

GRAPH = '''
executors: [{ name: pool, type: ProcessPoolExecutor, num_processes: 2 }]
nodes:
  - { name: f, kernel: PForward, input_ports: [x], output_ports: [y], executor: pool }
  - { name: g, kernel: PMake, input_ports: [n], output_ports: [z], executor: pool }
input_ports: [x, n]
output_ports: [y, z]
'''


def main():
    g = flowplex.Graph.from_yaml(GRAPH)
    y, z = g.add_poller("y"), g.add_poller("z")
    g.start()
    pool = next(ex for ex in g._engine.executors if isinstance(ex, ProcessPoolExecutor))
    g.send("x", np.full(1 << 20, 3, np.uint8), ts=0)
    g.send("n", 3, ts=0)
    held = [y.next(timeout=20).as_numpy(), z.next(timeout=20).as_numpy()]  # blocks in use
    print(json.dumps({"segment": pool._arena.name, "pids": pool.pids, "held": len(held)}), flush=True)
    time.sleep(60)


if __name__ == "__main__":
    main()
"""


def test_a_killed_host_process_leaves_no_segment_and_no_worker(tmp_path: Path) -> None:
    script = tmp_path / "host.py"
    script.write_text(textwrap.dedent(HOST))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    name, pids = "", []
    with subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True, env=env,
                          cwd=ROOT) as host:
        try:
            assert host.stdout is not None
            facts = json.loads(host.stdout.readline())
            name, pids = facts["segment"], facts["pids"]
            assert name.startswith(f"flowplex-arena-{host.pid}-") and facts["held"] == 2
            assert (SHM / name).exists() and len(pids) == 2 and all(map(alive, pids))
            os.kill(host.pid, signal.SIGKILL)
            host.wait(WAIT_S)
            deadline = time.monotonic() + 10.0
            while ((SHM / name).exists() or any(map(alive, pids))) and time.monotonic() < deadline:
                time.sleep(0.05)
            assert not (SHM / name).exists(), "the resource tracker did not unlink the arena"
            assert not any(map(alive, pids)), "a worker outlived its host"
        finally:
            if host.poll() is None:
                host.kill()
            for pid in pids:  # the workers that host started, should they still run: not ours to leave
                if alive(pid):
                    os.kill(pid, signal.SIGKILL)
            if name and (SHM / name).exists():
                (SHM / name).unlink()
