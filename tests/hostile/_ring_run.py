"""Start the hostile ring workers in subprocesses under a memory and a CPU-time limit."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path
from typing import Final

ROOT: Final = Path(__file__).resolve().parents[2]
MEMORY_LIMIT: Final = 1 << 30
"""Address space a worker may take (``RLIMIT_AS``): a runaway allocation fails instead of
eating the machine.  An idle worker maps about 300 MiB (threads' stacks, numpy)."""
RSS_BOUND_KIB: Final = 256 * 1024
"""Peak resident memory a victim may report: a leak per forged message would exceed it."""


def limits(cpu_s: int) -> None:
    """``preexec_fn``: cap the child's address space and CPU time."""
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s))


def env(impl: str) -> dict[str, str]:
    """The environment of a worker: this interpreter's path, and the hot path ``impl`` picks."""
    out = {k: v for k, v in os.environ.items() if not k.startswith("FLOWPLEX_")}
    out["PYTHONPATH"] = os.pathsep.join([str(ROOT), *sys.path])
    if impl == "python":
        out["FLOWPLEX_PURE_PYTHON"] = "1"
    return out


def spawn(impl: str, *args: str, cpu_s: int = 60, new_session: bool = False) -> subprocess.Popen[str]:
    """Start ``python -m tests.hostile._ring_workers ARGS`` with pipes, under the limits."""
    return subprocess.Popen(
        [sys.executable, "-m", "tests.hostile._ring_workers", *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env(impl),
        cwd=ROOT,
        preexec_fn=lambda: limits(cpu_s),
        start_new_session=new_session,
    )


def finish(proc: subprocess.Popen[str], timeout_s: float) -> tuple[str, str]:
    """Wait for ``proc`` (killing it after ``timeout_s``: a hang fails) and return its output."""
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        msg = f"worker {proc.args!r} hung for {timeout_s} s; stderr:\n{err[-4000:]}"
        raise AssertionError(msg) from None
    assert proc.returncode >= 0, f"worker died of signal {-proc.returncode}; stderr:\n{err[-4000:]}"
    assert proc.returncode == 0, f"worker failed ({proc.returncode}); stderr:\n{err[-4000:]}"
    return out, err


def reap(proc: subprocess.Popen[str]) -> None:
    """Kill ``proc`` if it still runs, wait for it and close its pipes."""
    if proc.poll() is None:
        proc.kill()
    proc.communicate(timeout=30)
