"""Dead peers: a producer learns that the consumer died, and a killed creator's segment is reclaimed.

Under ``reject`` and ``drop_oldest`` a producer used to "send" millions of messages into a ring
whose consumer was dead; now ``send`` raises ``BrokenError`` (as ``block`` already did).  A
SIGKILL of the creator's whole process group takes Python's resource tracker with it, so
nothing unlinks the segment: the next ``Ring.create``, or ``flowplex shm clean``, does.
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from flowplex.errors import BrokenError
from flowplex.transport import Ring, _accel

from ._ring_run import ROOT, env, finish, reap, spawn


@pytest.fixture(params=["c", "python"])
def impl(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Both hot paths, in this process."""
    if request.param == "python":
        monkeypatch.setattr(_accel, "fast", None)
    elif _accel.fast is None:
        pytest.skip("the C extension flowplex.transport._fastring is not built")
    return str(request.param)


def _dead_pid() -> int:
    """The pid of a process that has exited and been reaped."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


@pytest.mark.parametrize("policy", ["reject", "drop_oldest"])
def test_send_raises_broken_error_once_the_consumer_is_killed(impl: str, policy: str) -> None:
    with Ring.create(capacity=8, full_policy=policy) as ring:
        consumer = spawn(impl, "consume")
        try:
            assert consumer.stdin is not None and consumer.stdout is not None
            consumer.stdin.write(ring.name + "\n")
            consumer.stdin.flush()
            assert consumer.stdout.readline() == "ready\n"
            p = ring.producer()
            assert p.send(b"read by nobody")
            consumer.kill()
            consumer.wait(10)
            t0 = time.monotonic()
            sent = 0
            with pytest.raises(BrokenError, match=rf"the consumer \(pid {consumer.pid}\) died; nobody will free"):
                while time.monotonic() - t0 < 10:
                    p.send(b"into the void")
                    sent += 1
        finally:
            reap(consumer)
        elapsed = time.monotonic() - t0
        # reject: the lane fills (7 more), then the next send looks; drop_oldest: every send is
        # a slow one and looks at most 50 ms after the last look.
        assert sent <= 7 if policy == "reject" else elapsed < 1.0, (sent, elapsed)
        print(f"{impl}/{policy}: BrokenError after {sent} sends, {elapsed * 1e3:.1f} ms")


@pytest.mark.parametrize("policy", ["reject", "drop_oldest"])
def test_send_raises_broken_error_after_the_consumer_closed(impl: str, policy: str) -> None:
    with Ring.create(capacity=2, full_policy=policy) as ring:
        p = ring.producer()
        ring.consumer().close()
        with pytest.raises(BrokenError, match=r"the consumer closed; nobody will free slots"):
            for _ in range(3):
                p.send(b"x")


def test_without_a_consumer_yet_reject_still_just_rejects(impl: str) -> None:
    """No consumer has come yet: that is no failure, a consumer may still come."""
    with Ring.create(capacity=2) as ring:
        p = ring.producer()
        assert [p.send(b"x") for _ in range(4)] == [True, True, False, False]
        assert ring.stats().rejected == 2


@pytest.fixture
def fake_segments() -> Iterator[list[str]]:
    made: list[str] = []
    yield made
    for name in made:
        if os.path.exists(f"/dev/shm/{name}"):
            os.unlink(f"/dev/shm/{name}")


def _fake(made: list[str], name: str, uid: int | None = None) -> str:
    fd = os.open(f"/dev/shm/{name}", os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
    os.ftruncate(fd, 4096)
    os.close(fd)
    if uid is not None:
        os.chown(f"/dev/shm/{name}", uid, uid)
    made.append(name)
    return name


def test_a_killed_process_group_leaves_a_segment_that_the_next_create_reclaims(fake_segments: list[str]) -> None:
    creator = spawn("python", "create", new_session=True)
    assert creator.stdout is not None
    name = creator.stdout.readline().strip()
    fake_segments.append(name)
    os.killpg(creator.pid, signal.SIGKILL)  # the creator and its resource tracker
    reap(creator)
    # Nobody is left to unlink it.  (Checked at once: any Ring.create running meanwhile on this
    # machine would reclaim it, which is the point, but would also make this check fail.)
    assert os.path.exists(f"/dev/shm/{name}")
    with Ring.create(capacity=2):
        assert not os.path.exists(f"/dev/shm/{name}")


def _listed_or_reclaimed(lines: list[str], verb: str, gone: list[str]) -> None:
    """``lines`` name the arena in ``gone`` and each ring in it that still existed, nothing else."""
    arena, *rings = gone
    assert f"{verb} /dev/shm/{arena}" in lines, lines
    for ring in rings:
        assert f"{verb} /dev/shm/{ring}" in lines or not os.path.exists(f"/dev/shm/{ring}"), lines
    assert set(lines) <= {f"{verb} /dev/shm/{n}" for n in gone}, lines


def test_shm_clean_removes_only_dead_creators_generated_segments(fake_segments: list[str]) -> None:
    dead = _dead_pid()
    hex12 = secrets.token_hex(6)
    gone = [
        _fake(fake_segments, f"flowplex-arena-{dead}-{hex12}"),
        _fake(fake_segments, f"flowplex-ring-{dead}-{hex12}"),
    ]
    kept = [
        _fake(fake_segments, f"flowplex-ring-{os.getppid()}-{hex12}"),  # its creator runs
        _fake(fake_segments, f"flowplex-ring-{dead}-{hex12}x"),  # not a generated name
        _fake(fake_segments, f"fpx-hostile-{dead}-{hex12}"),  # a named ring: nobody knows whose
    ]
    if os.geteuid() == 0:
        kept.append(_fake(fake_segments, f"flowplex-arena-{dead}-{secrets.token_hex(6)}", uid=65534))  # not ours
    cmd = [sys.executable, "-c", "from flowplex.cli import main; main()", "shm", "clean"]
    dry = subprocess.run([*cmd, "--dry-run"], capture_output=True, text=True, env=env("python"), cwd=ROOT, timeout=60)
    assert dry.returncode == 0, dry.stderr
    # Other tests in this session may have left a SIGKILLed host's segment behind: the command
    # rightly lists it too, so only this test's names are compared exactly.
    # A ring that another test's process creates meanwhile reclaims the dead ring first, as it
    # should (``Ring.create`` sweeps dead creators' rings; the suite runs on two workers): a
    # name missing from a listing must then be gone already. Arenas only ``shm clean`` removes.
    ours = [line for line in dry.stdout.splitlines() if hex12 in line]
    _listed_or_reclaimed(ours, "would remove", gone)
    assert os.path.exists(f"/dev/shm/{gone[0]}")  # a dry run removes nothing
    real = subprocess.run(cmd, capture_output=True, text=True, env=env("python"), cwd=ROOT, timeout=60)
    assert real.returncode == 0, real.stderr
    removed = real.stdout.splitlines()
    _listed_or_reclaimed([line for line in removed if hex12 in line], "removed", gone)
    assert f"flowplex: {len(removed)} segment(s) of dead processes removed" in real.stderr
    assert not any(os.path.exists(f"/dev/shm/{n}") for n in gone)
    assert all(os.path.exists(f"/dev/shm/{n}") for n in kept)


def test_a_worker_that_fails_is_reported_with_its_stderr() -> None:
    """The harness itself: a failing worker fails the test (so a pass means the worker ran)."""
    with pytest.raises(AssertionError, match=r"worker failed \(1\); stderr:\n.*unknown role 'nope'"):
        finish(spawn("python", "nope"), timeout_s=60)
