"""Nothing a run started outlives it: not a pool kernel's daemon, not a command's child that
ignores hang-ups, even when flowplex itself is killed by SIGKILL (issue 25).

Each test starts real processes that detach the way careless programs do (``setsid``, a double
fork, SIGHUP and SIGTERM ignored) and checks that they are gone soon after the run ended. A
test that fails kills what it found in ``finally``, so it leaves nothing behind.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import flowplex
from flowplex.executors.processes import ProcessPoolExecutor
from flowplex.testing import default_executor

from . import lifetime_kernels as lifetime_kernels  # registers HostileDaemon here (workers import it)
from .conftest import CLI

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl, PTYs and /proc are Linux's")

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
WAIT_S = 20.0
GONE_S = 3.0
"""How soon a stray process must be gone once its run ended ("within a couple of seconds")."""

POOL_GRAPH = """
executors: [{ name: pool, type: ProcessPoolExecutor, num_processes: 1 }]
nodes:
  - { name: d, kernel: HostileDaemon, input_ports: [n], output_ports: [p], executor: pool }
input_ports: [n]
output_ports: [p]
"""

# What a command leaves behind: a child in its session that ignores the hang-up and SIGTERM, and
# a daemon that left the session (setsid) and ignores them too. Each prints its pid.
LEAVE = """\
sh -c 'trap "" HUP TERM; echo $$; exec sleep 306' &
setsid sh -c 'trap "" HUP TERM; echo $$; exec sleep 307' &
wait
"""


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def wait_gone(pids: list[int], timeout_s: float = GONE_S) -> list[int]:
    """The pids still alive after up to ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not any(map(alive, pids)):
            return []
        time.sleep(0.02)
    return [p for p in pids if alive(p)]


@pytest.fixture
def strays() -> Iterator[list[int]]:
    """Pids a test found; those still alive at its end are killed (a failing test leaves nothing)."""
    found: list[int] = []
    yield found
    for pid in found:
        if alive(pid):
            os.kill(pid, signal.SIGKILL)


def read_pids(stream: object, count: int, timeout_s: float = WAIT_S) -> list[int]:
    """The first ``count`` numbers that end a line on ``stream`` (``label | 123`` or ``123``)."""
    fd = stream.fileno()  # type: ignore[attr-defined]
    buf = b""
    pids: list[int] = []
    deadline = time.monotonic() + timeout_s
    while len(pids) < count and time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.1)
        if ready:
            data = os.read(fd, 4096)
            if not data:
                break
            buf += data
            tails = [line.rsplit(b"|", 1)[-1].strip() for line in buf.splitlines()]
            pids = [int(t) for t in tails if t.isdigit()]
    assert len(pids) >= count, buf
    return pids[:count]


# -- the process pool ------------------------------------------------------------------------------


POOLS = {
    "spawn": lambda name: ProcessPoolExecutor(name, 1),
    "forkserver": lambda name: ProcessPoolExecutor(name, 1, start_method="forkserver"),
    "warm": lambda name: ProcessPoolExecutor(name, 1, warm=True),  # its worker lives on: the pool kills
}


@pytest.mark.parametrize("pool", sorted(POOLS))
def test_a_pool_kernels_daemon_is_gone_after_close(pool: str, strays: list[int]) -> None:
    with default_executor(POOLS[pool]):
        g = flowplex.Graph.from_yaml(POOL_GRAPH.replace("executor: pool", "executor: default"))
    p = g.add_poller("p")
    g.start()
    try:
        g.send("n", 1, ts=0)
        strays.append(p.next(timeout=WAIT_S).as_int())
        assert alive(strays[0])
        g.close_all_inputs()
        g.wait_done(timeout=WAIT_S)
    finally:
        g.close()
    assert wait_gone(strays) == [], "a pool kernel's setsid daemon outlived the graph"


def test_a_pool_kernels_daemon_dies_with_a_sigtermed_worker(strays: list[int]) -> None:
    with flowplex.Graph.from_yaml(POOL_GRAPH) as g:
        p = g.add_poller("p")
        g.start()
        g.send("n", 1, ts=0)
        strays.append(p.next(timeout=WAIT_S).as_int())
        (pool,) = (ex for ex in g._engine.executors if isinstance(ex, ProcessPoolExecutor))
        os.kill(pool.pids[0], signal.SIGTERM)
        assert wait_gone(strays) == [], "a SIGTERMed worker left its kernel's daemon running"


HOST = f"""
import sys
import time

import flowplex
import tests.hostile.lifetime_kernels

g = flowplex.Graph.from_yaml('''{POOL_GRAPH}''')
p = g.add_poller("p")
g.start()
g.send("n", 1, ts=0)
daemon = p.next(timeout=20).as_int()
g.send("n", -1, ts=1)  # the worker's callback thread now sleeps in the kernel
time.sleep(0.3)
print(daemon, flush=True)
time.sleep(60)
"""


def test_a_pool_kernels_daemon_dies_with_a_sigkilled_host(strays: list[int]) -> None:
    """Nobody in the host can act, and the worker's one callback thread is busy in a kernel:
    the worker still sees its host gone and ends what it started."""
    with subprocess.Popen([sys.executable, "-c", textwrap.dedent(HOST)], stdout=subprocess.PIPE,
                          stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, env=ENV, cwd=ROOT) as host:
        try:
            strays.extend(read_pids(host.stdout, 1))
            assert alive(strays[0])
            host.kill()
            host.wait(WAIT_S)
            assert wait_gone(strays) == [], "a pool kernel's daemon outlived its SIGKILLed host"
        finally:
            host.kill()


# -- commands ------------------------------------------------------------------------------------

GRAPH_HOST = """
import json, sys, time
import flowplex, flowplex.agents
from flowplex.agents import read_chunk

spec = {"nodes": [{"name": "src", "kernel": "CommandSource", "output_ports": ["out"],
                   "options": {"argv": ["sh", sys.argv[1]]}}], "output_ports": ["out"]}
g = flowplex.Graph.from_yaml(json.dumps(spec))
g.observe("out", lambda p: print(read_chunk(p).text.replace("\\r", ""), end="", flush=True))
g.start()
time.sleep(60)
"""


@pytest.mark.parametrize("host", ["agents", "graph"])
def test_what_a_command_left_dies_with_a_sigkilled_flowplex(host: str, tmp_path: Path, strays: list[int]) -> None:
    """``kill -9`` of ``flowplex agents`` (a subreaper) or of a program running a CommandSource
    graph: the command's child that stayed in its session but ignores SIGHUP and SIGTERM, and
    its daemon that left the session, are gone within a couple of seconds."""
    script = tmp_path / "leave.sh"
    script.write_text(LEAVE)
    argv = ([*CLI, "agents", "--mode", "log", "--", "sh", str(script)] if host == "agents"
            else [sys.executable, "-c", GRAPH_HOST, str(script)])
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
                          env=ENV, cwd=ROOT) as proc:
        try:
            strays.extend(read_pids(proc.stdout, 2))
            assert all(map(alive, strays))
            proc.kill()
            proc.wait(WAIT_S)
            assert wait_gone(strays) == [], "a command's child outlived a SIGKILLed flowplex"
        finally:
            proc.kill()
