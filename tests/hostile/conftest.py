"""Helpers for the hostile-input tests: the CLI in a subprocess under memory and time limits."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass

CLI = [sys.executable, "-c", "import sys; from flowplex.cli import main; sys.argv[0] = 'flowplex'; main()"]

# The launcher: runs the command with RLIMIT_AS set (so a runaway allocation fails instead of
# swapping the machine), optionally sends SIGTERM after a while, and reports the command's own
# peak RSS (RUSAGE_CHILDREN of a fresh process: no other test's children in it).
_LAUNCHER = r"""
import json, resource, signal, subprocess, sys, time
spec = json.loads(sys.argv[1])
def limits():
    resource.setrlimit(resource.RLIMIT_AS, (spec["mem"], spec["mem"]))
out = open(spec["stdout"], "wb") if spec["stdout"] else subprocess.PIPE
start = time.monotonic()
p = subprocess.Popen(spec["argv"], stdout=out, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                     preexec_fn=limits, env=spec["env"])
if spec["stop_after"] is not None:
    time.sleep(spec["stop_after"])
    p.send_signal(signal.SIGTERM)
try:
    stdout, stderr = p.communicate(timeout=spec["timeout"])
    hung = False
except subprocess.TimeoutExpired:
    p.kill()
    stdout, stderr = p.communicate()
    hung = True
print(json.dumps({"rc": p.returncode, "hung": hung, "elapsed": time.monotonic() - start,
                  "maxrss_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
                  "stdout": (stdout or b"")[-20000:].decode("utf-8", "replace"),
                  "stderr": stderr[-20000:].decode("utf-8", "replace")}))
"""


@dataclass(frozen=True)
class Limited:
    """What a limited run came to."""

    rc: int
    hung: bool
    elapsed: float
    maxrss_mb: float
    stdout: str
    stderr: str


def run_limited(argv: list[str], *, mem_mb: int = 2048, timeout_s: float = 60.0, stop_after_s: float | None = None,
                stdout_path: str | None = "/dev/null", env: dict[str, str] | None = None) -> Limited:
    """Run ``argv`` under an address-space limit of ``mem_mb`` and a wall-clock limit."""
    import os

    spec = {"argv": argv, "mem": mem_mb * 1024 * 1024, "timeout": timeout_s, "stop_after": stop_after_s,
            "stdout": stdout_path, "env": env if env is not None else dict(os.environ)}
    proc = subprocess.run([sys.executable, "-c", _LAUNCHER, json.dumps(spec)], capture_output=True,
                          timeout=timeout_s + 30, check=True)
    return Limited(**json.loads(proc.stdout))
