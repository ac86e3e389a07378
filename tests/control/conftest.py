"""Each control test gets its own runtime directory: ``ps`` then lists exactly the test's graphs."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def runtime(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A fresh, short runtime directory (socket paths are limited to 107 bytes), set for subprocesses too."""
    path = Path(tempfile.mkdtemp(prefix="fpc-", dir="/tmp")) / "rt"
    monkeypatch.setenv("FLOWPLEX_RUNTIME_DIR", str(path))
    yield path
    shutil.rmtree(path.parent, ignore_errors=True)


def flowplex(*args: str, cwd: Path, timeout: float = 30, check: bool = False) -> subprocess.CompletedProcess[str]:
    """``flowplex ARGS`` in a real subprocess."""
    done = subprocess.run([sys.executable, "-m", "flowplex", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=timeout, stdin=subprocess.DEVNULL, check=False)
    if check:
        assert done.returncode == 0, (args, done.stdout, done.stderr)
    return done


def gone(pid: int, seconds: float = 10) -> bool:
    """Whether process ``pid`` exits within ``seconds`` (reaped if it is our child)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                return True
        except ChildProcessError:
            pass
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.02)
    return False


SLOW_SOURCE = """nodes:
  - { name: src, kernel: RangeSourceKernel, output_ports: [a], options: { count: 1000000000 }, rate: 200 }
  - { name: double, kernel: ScaleKernel, input_ports: [a], output_ports: [b], options: { factor: 2 } }
  - { name: sink, kernel: SinkKernel, input_ports: [b] }
"""
"""A graph that runs until stopped: 200 packets per second through a node to a sink."""
