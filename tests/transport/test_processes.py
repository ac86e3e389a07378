"""Several real processes on one real shared-memory ring: stress, crashes, cleanup."""

from __future__ import annotations

import hashlib
import multiprocessing as mp
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from flowplex.errors import BrokenError, EndOfStream
from flowplex.transport import Ring

from . import _workers

CTX = mp.get_context("spawn")


@pytest.fixture
def kill_on_exit() -> Iterator[list[mp.process.BaseProcess]]:
    procs: list[mp.process.BaseProcess] = []
    yield procs
    for p in procs:
        if p.is_alive():
            p.kill()
        p.join(10)


def run_stress(producers: int, n: int, *, capacity: int = 1024, weak: bool = False) -> float:
    """4 producer processes x n messages of 1 B..4 KiB, checked end to end by content hash."""
    t0 = time.monotonic()
    with Ring.create(capacity=capacity, full_policy="block", max_producers=producers) as ring:
        consumer = ring.consumer(expect_producers=producers)
        pipes = [CTX.Pipe(duplex=False) for _ in range(producers)]
        procs = [
            CTX.Process(target=_workers.stress_producer, args=(ring.name, k, n, weak, pipes[k][1]))
            for k in range(producers)
        ]
        for p in procs:
            p.start()
        hashes = [hashlib.blake2b() for _ in range(producers)]
        counts = [0] * producers
        lanes: dict[int, int] = {}
        last_seq = [-1] * producers
        for m in consumer:
            k = m.stream_id
            _workers.chain(hashes[k], m.data)
            counts[k] += 1
            assert lanes.setdefault(k, m.producer_id) == m.producer_id
            assert m.seq > last_seq[k]
            last_seq[k] = m.seq
        reports = sorted(pipes[k][0].recv() for k in range(producers))
        for p in procs:
            p.join(30)
            assert p.exitcode == 0
        assert counts == [n] * producers
        assert reports == [(k, n, hashes[k].hexdigest()) for k in range(producers)]
        s = ring.stats()
        assert (s.produced, s.consumed, s.rejected, s.dropped) == (producers * n, producers * n, 0, 0)
        assert s.fragmented == s.reassembled > 0
    return time.monotonic() - t0


def test_stress_four_processes_small() -> None:
    run_stress(4, 3_000)


def test_stress_weak_memory_model_accessors() -> None:
    """The arm64 code path (patomic acquire/release), forced on this x86 machine, across processes."""
    from flowplex.transport import _ordering

    _ordering.set_memory_model("weak")
    try:
        run_stress(2, 400, capacity=64, weak=True)
    finally:
        _ordering.set_memory_model(None)


@pytest.mark.slow
def test_stress_four_processes_full_size() -> None:
    elapsed = run_stress(4, 100_000)
    print(f"\n4 x 100,000 messages (1 B..4 KiB) through the ring in {elapsed:.1f} s")


def test_killed_producer_becomes_broken_error_and_nothing_leaks(
    kill_on_exit: list[mp.process.BaseProcess],
) -> None:
    with Ring.create(capacity=16) as ring:
        consumer = ring.consumer()
        with ring.producer() as alive:
            rx, tx = CTX.Pipe(duplex=False)
            proc = CTX.Process(target=_workers.send_then_hang, args=(ring.name, 3, tx))
            kill_on_exit.append(proc)
            proc.start()
            lane = rx.recv()
            alive.send(b"still here")
            got = sorted(consumer.recv(timeout=10).data for _ in range(4))
            assert got == [b"before death 0", b"before death 1", b"before death 2", b"still here"]
            os.kill(proc.pid, signal.SIGKILL)  # not reaped yet: a zombie must count as dead
            t0 = time.monotonic()
            with pytest.raises(BrokenError, match=rf"producer {lane} \(pid {proc.pid}\) died without closing"):
                consumer.recv(timeout=10)
            assert time.monotonic() - t0 < 5
            assert ring.stats().dead_producers == 1
            alive.send(b"after")
            assert consumer.recv(timeout=1).data == b"after"
        with pytest.raises(EndOfStream):
            consumer.recv(timeout=5)
        proc.join(10)


def test_killed_consumer_breaks_a_blocked_producer(kill_on_exit: list[mp.process.BaseProcess]) -> None:
    with Ring.create(capacity=2, full_policy="block") as ring:
        rx, tx = CTX.Pipe(duplex=False)
        proc = CTX.Process(target=_workers.consume_then_hang, args=(ring.name, tx))
        kill_on_exit.append(proc)
        proc.start()
        rx.recv()
        p = ring.producer()
        p.send(b"1")
        p.send(b"2")
        os.kill(proc.pid, signal.SIGKILL)
        with pytest.raises(BrokenError, match=rf"the consumer \(pid {proc.pid}\) died; nobody will free slots"):
            p.send(b"3", timeout=30)
        proc.join(10)
        ring.consumer()  # the dead consumer's role can be taken over


def test_segment_of_a_killed_creator_is_unlinked_by_its_resource_tracker() -> None:
    code = "from tests.transport._workers import create_then_hang; create_then_hang()"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=os.getcwd()
    )
    try:
        assert proc.stdout is not None
        name = proc.stdout.readline().decode().strip()
        path = f"/dev/shm/{name}"
        assert os.path.exists(path)
        proc.kill()
        proc.wait(10)
        deadline = time.monotonic() + 10
        while os.path.exists(path) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not os.path.exists(path)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        if proc.stdout:
            proc.stdout.close()
        if proc.stderr:
            proc.stderr.close()
