"""A Ray cluster of two nodes on this one machine, for ``test_two_nodes.py``: start it, find its
raylets, and kill exactly its processes.

``ray start --head`` and ``ray start --address`` each run with ports picked free now, a temp dir
of their own (short: Ray's Unix sockets must fit ~107 characters) and a token of their own
(``RAY_AUTH_MODE=token``, ``RAY_AUTH_TOKEN``), so the cluster shares nothing with a Ray instance
that runs beside it (the suite's own, or a developer's). Each ``ray start`` begins a new session
(``start_new_session``); the daemons it leaves behind, and the workers their raylets fork, stay
in it. A process belongs to the cluster when it is in one of those two sessions or its command
line names the temp dir; ``stop`` kills those and nothing else (never ``ray stop``, which would
kill every Ray process of the machine).
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

__all__ = ["START_TIMEOUT_S", "TwoNodeCluster", "alive", "start_cluster"]

START_TIMEOUT_S: Final = 90.0
"""Bound on one ``ray start`` (a few seconds each on two cores)."""
WORKER_PORTS: Final = 48
"""Worker ports per node (a handful are used: a few actors and prestarted workers)."""
OBJECT_STORE_BYTES: Final = 200 * 1024 * 1024
FAST_FAILURE_DETECTION: Final = {
    "RAY_health_check_period_ms": "1000",
    "RAY_health_check_timeout_ms": "2000",
    "RAY_health_check_failure_threshold": "5",
}
"""The GCS declares a dead raylet dead after ~5 s rather than Ray's default ~15-30 s; a live one
must miss five checks of 2 s each in a row (a busy machine does not get its head declared dead)."""


def alive(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _free_ports(count: int) -> list[int]:
    """``count`` distinct TCP ports nobody listens on now (the kernel's picks)."""
    with contextlib.ExitStack() as stack:
        ports = []
        for _ in range(count):
            s = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            s.bind(("", 0))
            ports.append(s.getsockname()[1])
        return ports


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("", port))
        except OSError:
            return False
        return True


def _free_range(width: int, avoid: set[int]) -> tuple[int, int]:
    """``(first, last)`` of ``width`` consecutive ports, all free now and none in ``avoid``."""
    rng = secrets.SystemRandom()
    for _ in range(200):
        first = rng.randrange(20000, 30000 - width)
        ports = range(first, first + width)
        if not avoid.intersection(ports) and all(_port_free(p) for p in ports):
            return first, first + width - 1
    msg = f"no {width} consecutive free ports found in 20000-30000"
    raise RuntimeError(msg)


def _session_of(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return int(stat.rsplit(")", 1)[1].split()[3])  # state ppid pgrp session


def _cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return []
    return raw.decode(errors="replace").split("\0")


@dataclass
class TwoNodeCluster:
    """A head node offering resource ``left: 1`` and a second node offering ``right: 1``, one CPU each."""

    temp_dir: Path
    ray_cli: Path
    gcs_port: int = 0
    head_manager_port: int = 0
    second_manager_port: int = 0
    env: dict[str, str] = field(default_factory=dict)
    """The environment for ``ray start`` and for a driver of this cluster (its auth token)."""
    sessions: set[int] = field(default_factory=set)
    """The session ids of the two ``ray start`` runs."""
    logs: list[str] = field(default_factory=list)
    """What each ``ray start`` printed (for a failure message)."""

    @property
    def address(self) -> str:
        """The head's GCS, for ``RayExecutor(address=...)``."""
        return f"127.0.0.1:{self.gcs_port}"

    def pids(self) -> set[int]:
        """The live processes of this cluster (daemons, raylets, workers), never this process."""
        me = os.getpid()
        mark = str(self.temp_dir)
        found: set[int] = set()
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == me:
                continue
            pid = int(entry)
            if _session_of(pid) in self.sessions or any(
                    arg == mark or arg.endswith(f"={mark}") or f"{mark}/" in arg for arg in _cmdline(pid)):
                found.add(pid)
        return {pid for pid in found if alive(pid)}

    def raylet_pid(self, manager_port: int) -> int:
        """The pid of the raylet that listens on ``manager_port`` (its ``--node_manager_port``)."""
        flag = f"--node_manager_port={manager_port}"
        for pid in self.pids():
            args = _cmdline(pid)
            if args and Path(args[0]).name == "raylet" and flag in args:
                return pid
        msg = f"no raylet with {flag} among the cluster's processes {sorted(self.pids())}"
        raise LookupError(msg)

    def _ray_start(self, args: list[str]) -> None:
        log = self.temp_dir / f"ray_start_{len(self.logs)}.log"
        with log.open("wb") as out:  # a pipe would be held open by the daemons ray start leaves behind
            proc = subprocess.Popen([str(self.ray_cli), "start", *args], stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=subprocess.STDOUT, env=self.env, cwd=self.temp_dir,
                                    start_new_session=True)
            self.sessions.add(proc.pid)
            try:
                rc = proc.wait(START_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                rc = None
        text = log.read_text(errors="replace")
        self.logs.append(text)
        if rc != 0:
            what = "timed out" if rc is None else f"exited with {rc}"
            msg = f"`ray start {' '.join(args)}` {what}:\n{text[-3000:]}"
            raise RuntimeError(msg)

    def start(self) -> None:
        """Start the head, then the second node (each ``ray start`` returns once its node is up)."""
        singles = _free_ports(15)
        first_h, last_h = _free_range(WORKER_PORTS, set(singles))
        first_s, last_s = _free_range(WORKER_PORTS, {*singles, *range(first_h, last_h + 1)})
        (self.gcs_port, dashboard, client, self.head_manager_port, self.second_manager_port) = singles[:5]
        common = ["--num-cpus=1", f"--object-store-memory={OBJECT_STORE_BYTES}", f"--temp-dir={self.temp_dir}",
                  "--disable-usage-stats", "--include-log-monitor=false"]

        def node_ports(ports: list[int], manager: int, first: int, last: int) -> list[str]:
            agent, agent_grpc, objects, metrics, runtime_env = ports
            return [f"--node-manager-port={manager}", f"--object-manager-port={objects}",
                    f"--metrics-export-port={metrics}", f"--runtime-env-agent-port={runtime_env}",
                    f"--dashboard-agent-listen-port={agent}", f"--dashboard-agent-grpc-port={agent_grpc}",
                    f"--min-worker-port={first}", f"--max-worker-port={last}"]

        head = ["--head", f"--port={self.gcs_port}", "--include-dashboard=false", f"--dashboard-port={dashboard}",
                "--resources", json.dumps({"left": 1}),
                *node_ports(singles[5:10], self.head_manager_port, first_h, last_h), *common]
        if importlib.util.find_spec("grpc") is not None:  # Ray Client installed: its server would take 10001
            head.append(f"--ray-client-server-port={client}")
        self._ray_start(head)
        second = [f"--address={self.address}", "--resources", json.dumps({"right": 1}),
                  *node_ports(singles[10:15], self.second_manager_port, first_s, last_s), *common]
        self._ray_start(second)

    def stop(self) -> None:
        """SIGKILL every process of the cluster until none is left (workers may still be forking
        while the first ones die), then remove the temp dir."""
        deadline = time.monotonic() + 20.0
        while (pids := self.pids()) and time.monotonic() < deadline:
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.2)
        left = self.pids()
        shutil.rmtree(self.temp_dir, ignore_errors=True)
        if left:
            msg = f"processes of the two-node cluster still alive after SIGKILL: {sorted(left)}"
            raise RuntimeError(msg)


def start_cluster(ray_cli: Path) -> TwoNodeCluster:
    """A started two-node cluster; the caller must ``stop`` it (it is stopped here if starting fails)."""
    temp_dir = Path(tempfile.mkdtemp(prefix="/tmp/rt2n"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_", "FLOWPLEX_RAY"))}
    env.update(FAST_FAILURE_DETECTION)
    env.update({"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32), "RAY_USAGE_STATS_ENABLED": "0"})
    cluster = TwoNodeCluster(temp_dir, ray_cli, env=env)
    try:
        cluster.start()
    except BaseException:
        cluster.stop()
        raise
    return cluster
