"""A ``/dev/shm`` that fills while a process pool runs is a clear error, never a SIGBUS.

On tmpfs a page gets its memory when first touched; a touch that finds the file system full
killed the host (or a worker) with SIGBUS: ``flowplex run`` exited 135 with no message and its
outputs lost. Now the arena reserves its pages (``fallocate``) before it hands them out, and a
full ``/dev/shm`` fails the allocation that needed more, naming the node, with what is free and
what to do; everything that fitted in the pages reserved already is delivered.

Each case runs in a private mount namespace whose ``/dev/shm`` is a 64 MiB tmpfs of its own
(``unshare``, as root; skipped elsewhere), while another process fills it; the real ``/dev/shm``
is never touched. The case runs under a memory cap and a timeout (``run_limited``).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Final

import pytest

from flowplex.transport import _accel

from ._arena_full_run import CLI_GRAPH
from ._ring_run import ROOT, env
from .conftest import CLI, Limited, run_limited

UNSHARE: Final = ["unshare", "--mount", "--propagation", "private", "sh", "-c"]
PYTHON: Final = shlex.quote(sys.executable)
MOUNT: Final = "mount -t tmpfs -o size=64m tmpfs /dev/shm && exec "
FULL: Final = (r"the shared-memory arena could not get memory for a {what} of 1048576 bytes: /dev/shm is full "
               r"\(\d+ MiB free; the 8 MiB the arena reserved so far, of its 32 MiB, have no room for it\); "
               r"free space in /dev/shm \(`flowplex shm clean` removes what dead flowplex processes left\), or "
               r"keep fewer frames in flight")


def _namespace_or_skip() -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root: the test mounts a small tmpfs on /dev/shm in a private mount namespace")
    if shutil.which("unshare") is None:
        pytest.skip("needs unshare(1) (util-linux) for a private mount namespace")
    probe = subprocess.run([*UNSHARE, "mount -t tmpfs -o size=1m tmpfs /dev/shm"], capture_output=True, text=True,
                           timeout=30)
    if probe.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs in a private mount namespace here: {probe.stderr.strip()}")


def _run(command: str, impl: str = "c") -> Limited:
    """``command`` (shell words, quoted) in a namespace with a 64 MiB /dev/shm of its own."""
    _namespace_or_skip()
    environ = env(impl)
    environ["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), environ["PYTHONPATH"]])
    return run_limited([*UNSHARE, f"cd {ROOT} && {MOUNT}{command}"], mem_mb=4096, timeout_s=60, stdout_path=None,
                       env=environ)


def _signal_death(r: Limited) -> str:
    return f"died of a signal (rc {r.rc}: SIGBUS is 135 or -7); stderr: {r.stderr[-2000:]}"


@pytest.mark.parametrize(("mode", "impl", "what", "node"), [
    ("host", "c", "buffer", "fwd"),  # the host writes numpy frames into the arena
    ("host", "python", "buffer", "fwd"),  # FLOWPLEX_PURE_PYTHON=1: the reservation is pure Python
    ("worker", "c", "new_buffer", "make"),  # a worker's kernel makes them with new_buffer
])
def test_dev_shm_filling_while_the_pool_runs_is_an_error_naming_the_node(mode: str, impl: str, what: str,
                                                                         node: str) -> None:
    r = _run(f"{PYTHON} -m tests.hostile._arena_full_run {mode}", impl)
    assert r.rc == 0 and not r.hung, _signal_death(r)
    # 2 frames before the fill, then the 8 that the 8 MiB reserved hold: each delivered, intact.
    line = r.stdout.strip().splitlines()[-1]
    assert re.fullmatch(rf"error after 10 outputs KernelError: kernel failed: \[{node}\] UsageError: "
                        rf"{FULL.format(what=what)}.*", line), line


def test_dev_shm_full_before_the_start_fails_the_start_saying_so() -> None:
    r = _run(f"{PYTHON} -m tests.hostile._arena_full_run start")
    assert r.rc == 0 and not r.hung, _signal_death(r)
    line = r.stdout.strip().splitlines()[-1]
    assert re.fullmatch(r"error after 0 outputs UsageError: ProcessPoolExecutor `pool`: the shared-memory arena "
                        r"could not get memory: /dev/shm is full \(0 MiB free, it needs 1 MiB to start\); free space "
                        r"in /dev/shm .*--shm-size\)", line), line


def test_flowplex_run_exits_1_with_the_message_and_every_output_that_fitted(tmp_path: Path) -> None:
    graph = tmp_path / "arena_full.yaml"
    graph.write_text(CLI_GRAPH)
    cli = shlex.join(CLI)
    r = _run(f"{cli} run {graph} --import tests.hostile._arena_full_run")
    assert r.rc == 1 and not r.hung, _signal_death(r)
    assert re.search(rf"flowplex: error: .*arena_full.yaml: kernel failed: \[fwd\] UsageError: "
                     rf"{FULL.format(what='buffer')}", r.stderr), r.stderr
    # Frames 0..7 filled the 8 MiB reserved (2 before the fill, 6 after); each was delivered.
    assert [line.split("\t")[-1] for line in r.stdout.splitlines()] == [str(n) for n in range(1, 9)], r.stdout


RING_FULL: Final = (r"error OSError: \[Errno 28\] ring 'flowplex-ring-[0-9a-f-]+': /dev/shm is full \(\d+ MiB free\), "
                    r"so {what} could not get memory; free space in /dev/shm \(`flowplex shm clean` removes what "
                    r"dead flowplex processes left\), or use a smaller capacity")


@pytest.mark.parametrize(("mode", "expected"), [
    ("create", RING_FULL.format(what="its headers")),  # was SIGBUS: the header was written first
    ("claim", RING_FULL.format(what=r"producer lane 0 \(1024 KiB\)")),  # was SIGBUS at a later send
    ("send", "sent 4096 received 4096 EndOfStream"),  # the lane was reserved when claimed: nothing lost
])
@pytest.mark.parametrize("impl", ["c", "python"])
def test_a_ring_on_a_full_dev_shm_is_an_error_at_create_or_claim_never_at_a_send(mode: str, expected: str,
                                                                                 impl: str) -> None:
    r = _run(f"{PYTHON} -m tests.hostile._arena_full_run ring-{mode}", impl)
    assert r.rc == 0 and not r.hung, _signal_death(r)
    assert re.fullmatch(expected, r.stdout.strip()), r.stdout


@pytest.mark.parametrize(("mode", "node"), [("host", "fwd"), ("worker", "make")])
def test_an_arena_truncated_under_the_pool_is_an_error_naming_the_node(mode: str, node: str) -> None:
    """Another process truncates the arena's file: the SIGBUS guard covers the arena's mapping in
    the host and the workers, and the next allocation or transfer says what happened."""
    if _accel.guard is None:
        pytest.skip("without the C extension's SIGBUS guard a truncated arena kills the process that touches it")
    r = run_limited([sys.executable, "-m", "tests.hostile._arena_full_run", f"{mode}-truncate"], mem_mb=4096,
                    timeout_s=60, stdout_path=None, env=env("c") | {"PYTHONPATH": f"{ROOT / 'src'}:{ROOT}"})
    assert r.rc == 0 and not r.hung, _signal_death(r)
    line = r.stdout.strip().splitlines()[-1]
    assert re.fullmatch(rf"error after 2 outputs KernelError: kernel failed: \[{node}\] UsageError: the process pool's "
                        r"shared-memory arena (flowplex-arena-[0-9a-f-]+) lost pages under its mapping \(another "
                        r"process truncated /dev/shm/\1\?\); the frames in them are gone", line), line
