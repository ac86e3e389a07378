"""Ring throughput between two processes, against multiprocessing.Queue, faster-fifo and pyzmq.

Every transport runs in the same invocation, one sender process and one receiver process each,
for 64-byte and 1-KiB messages, one message per call and batched:

* ring: ``Producer.send`` / ``Consumer.recv``; batched ``send_many`` / ``recv_many`` with
  ``SLOT_DTYPE`` numpy arrays (a 1-KiB message is 5 rows).  One message per call runs in the C
  extension ``_fastring`` when it is built; ``ring (py)`` is the same with
  ``FLOWPLEX_PURE_PYTHON=1`` (the pure-Python hot path, one message per call only).
* ``multiprocessing.Queue``: ``put`` / ``get``; batched: one ``put`` of a list of messages.
* faster-fifo: ``put`` / ``get``; batched ``put_many`` / ``get_many``.
* pyzmq PUSH/PULL over ``ipc://``: ``send`` / ``recv``; batched ``send_multipart`` / ``recv_multipart``.

The rate is messages received divided by the receiver's time from the common start to the last
message; each configuration runs ``--repeat`` times (interleaved with nothing else of ours) and
the best run is shown, because a shared 2-core machine is noisy.  Ratios compare with the
fastest of the three baselines in the same configuration.

Run: ``.venv/bin/python benchmarks/transport.py`` (``--quick`` for a 10x shorter run).
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import platform
import sys
import tempfile
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from multiprocessing.synchronize import Barrier
from typing import Any

import numpy as np

from flowplex.transport import FLAG_FIRST, Ring, _accel, make_batch

CTX = mp.get_context("spawn")
SIZES = (64, 1024)
RING_CAPACITY = 1 << 14
BATCH_ROWS = 4096

# Messages per run, chosen for roughly a second each on a 2-core machine.
COUNTS: dict[tuple[str, int, str], int] = {
    ("ring", 64, "single"): 1_000_000,
    ("ring", 1024, "single"): 300_000,
    ("ring", 64, "batched"): 20_000_000,
    ("ring (py)", 64, "single"): 500_000,
    ("ring (py)", 1024, "single"): 100_000,
    ("ring", 1024, "batched"): 3_000_000,
    ("mp.Queue", 64, "single"): 200_000,
    ("mp.Queue", 1024, "single"): 200_000,
    ("mp.Queue", 64, "batched"): 4_000_000,
    ("mp.Queue", 1024, "batched"): 2_000_000,
    ("faster-fifo", 64, "single"): 200_000,
    ("faster-fifo", 1024, "single"): 200_000,
    ("faster-fifo", 64, "batched"): 4_000_000,
    ("faster-fifo", 1024, "batched"): 2_000_000,
    ("pyzmq", 64, "single"): 1_000_000,
    ("pyzmq", 1024, "single"): 500_000,
    ("pyzmq", 64, "batched"): 4_000_000,
    ("pyzmq", 1024, "batched"): 2_000_000,
}


def batch_size(size: int) -> int:
    """Messages per batch: 4096 rows of slots (a 1-KiB message takes 5)."""
    return BATCH_ROWS if size <= 224 else BATCH_ROWS // 5


# -- ring ---------------------------------------------------------------------------------------
def ring_send(name: str, size: int, n: int, batched: bool, start: Barrier) -> None:
    payload = os.urandom(size)
    with Ring.attach(name) as ring, ring.producer() as p:
        if batched:
            b = batch_size(size)
            batch = make_batch(distinct(size, b))
            start.wait()
            for _ in range(n // b):
                p.send_many(batch)
        else:
            send = p.send
            start.wait()
            for _ in range(n):
                send(payload)


def ring_recv(name: str, size: int, n: int, batched: bool, start: Barrier, out: Connection) -> None:
    with Ring.attach(name) as ring:
        c = ring.consumer()
        start.wait()
        t0 = time.perf_counter()
        if batched:
            got = 0
            while got < n:
                rows = c.recv_many(RING_CAPACITY, timeout=30)
                got += int(np.count_nonzero(rows["flags"] & FLAG_FIRST))
        else:
            recv = c.recv
            for _ in range(n):
                recv(30)
        out.send(time.perf_counter() - t0)


# -- multiprocessing.Queue ------------------------------------------------------------------------
def distinct(size: int, count: int) -> list[bytes]:
    """``count`` different payload objects (pickle would send one repeated object only once)."""
    return [os.urandom(size) for _ in range(count)]


def mpq_send(q: Any, size: int, n: int, batched: bool, start: Barrier) -> None:
    payload = os.urandom(size)
    if batched:
        b = batch_size(size)
        batch = distinct(size, b)
        start.wait()
        for _ in range(n // b):
            q.put(batch)
    else:
        put = q.put
        start.wait()
        for _ in range(n):
            put(payload)


def mpq_recv(q: Any, size: int, n: int, batched: bool, start: Barrier, out: Connection) -> None:
    start.wait()
    t0 = time.perf_counter()
    got = 0
    if batched:
        while got < n:
            got += len(q.get(timeout=30))
    else:
        get = q.get
        for _ in range(n):
            get(timeout=30)
    out.send(time.perf_counter() - t0)


# -- faster-fifo ----------------------------------------------------------------------------------
def ff_send(q: Any, size: int, n: int, batched: bool, start: Barrier) -> None:
    payload = os.urandom(size)
    if batched:
        b = batch_size(size)
        batch = distinct(size, b)
        start.wait()
        for _ in range(n // b):
            q.put_many(batch, timeout=30)
    else:
        put = q.put
        start.wait()
        for _ in range(n):
            put(payload, timeout=30)


def ff_recv(q: Any, size: int, n: int, batched: bool, start: Barrier, out: Connection) -> None:
    start.wait()
    t0 = time.perf_counter()
    got = 0
    if batched:
        while got < n:
            got += len(q.get_many(timeout=30, max_messages_to_get=batch_size(size)))
    else:
        get = q.get
        for _ in range(n):
            get(timeout=30)
    out.send(time.perf_counter() - t0)


# -- pyzmq ------------------------------------------------------------------------------------------
def zmq_send(addr: str, size: int, n: int, batched: bool, start: Barrier) -> None:
    import zmq

    ctx = zmq.Context()
    sock = ctx.socket(zmq.PUSH)
    sock.setsockopt(zmq.SNDHWM, 100_000)
    sock.connect(addr)
    payload = os.urandom(size)
    if batched:
        b = batch_size(size)
        batch = distinct(size, b)
        start.wait()
        for _ in range(n // b):
            sock.send_multipart(batch)
    else:
        send = sock.send
        start.wait()
        for _ in range(n):
            send(payload)
    sock.close(linger=-1)
    ctx.term()


def zmq_recv(addr: str, size: int, n: int, batched: bool, start: Barrier, out: Connection) -> None:
    import zmq

    ctx = zmq.Context()
    sock = ctx.socket(zmq.PULL)
    sock.setsockopt(zmq.RCVHWM, 100_000)
    sock.bind(addr)
    start.wait()
    t0 = time.perf_counter()
    got = 0
    if batched:
        while got < n:
            got += len(sock.recv_multipart())
    else:
        recv = sock.recv
        for _ in range(n):
            recv()
    out.send(time.perf_counter() - t0)
    sock.close()
    ctx.term()


# -- harness ----------------------------------------------------------------------------------------
def run_pair(
    sender: Callable[..., None], receiver: Callable[..., None], endpoint: object, size: int, n: int, batched: bool
) -> float:
    """Start both processes, release them together, return messages per second."""
    start = CTX.Barrier(2)
    rx, tx = CTX.Pipe(duplex=False)
    recv_proc = CTX.Process(target=receiver, args=(endpoint, size, n, batched, start, tx))
    send_proc = CTX.Process(target=sender, args=(endpoint, size, n, batched, start))
    recv_proc.start()
    send_proc.start()
    if not rx.poll(600):
        recv_proc.kill()
        send_proc.kill()
        raise RuntimeError(f"{sender.__name__}: no result within 600 s")
    elapsed = float(rx.recv())
    send_proc.join(60)
    recv_proc.join(60)
    return n / elapsed


def measure(transport: str, size: int, mode: str, scale: float) -> float | None:
    batched = mode == "batched"
    n = max(batch_size(size), int(COUNTS[(transport, size, mode)] * scale))
    n -= n % batch_size(size)
    if transport.startswith("ring"):
        pure = transport == "ring (py)"
        if pure:
            os.environ["FLOWPLEX_PURE_PYTHON"] = "1"  # inherited by the spawned processes
        try:
            with Ring.create(capacity=RING_CAPACITY, full_policy="block", max_producers=1) as ring:
                return run_pair(ring_send, ring_recv, ring.name, size, n, batched)
        finally:
            if pure:
                del os.environ["FLOWPLEX_PURE_PYTHON"]
    if transport == "mp.Queue":
        return run_pair(mpq_send, mpq_recv, CTX.Queue(), size, n, batched)
    if transport == "faster-fifo":
        try:
            import faster_fifo
        except ImportError:
            return None
        q = faster_fifo.Queue(max_size_bytes=64 * 1024 * 1024)
        return run_pair(ff_send, ff_recv, q, size, n, batched)
    try:
        import zmq  # noqa: F401
    except ImportError:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        return run_pair(zmq_send, zmq_recv, f"ipc://{tmp}/bench.sock", size, n, batched)


def machine_facts() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    versions = [f"numpy {np.__version__}"]
    for mod in ("faster_fifo", "zmq"):
        try:
            m = __import__(mod)
            versions.append(f"{mod} {getattr(m, '__version__', '?')}")
        except ImportError:
            versions.append(f"{mod} missing")
    hot_path = "C extension" if _accel.fast is not None else "pure Python (extension not built)"
    return (
        f"{os.cpu_count()} CPUs ({cpu}), {platform.system()} {platform.machine()}, "
        f"Python {platform.python_version()}, {', '.join(versions)}; ring hot path: {hot_path}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10x fewer messages")
    parser.add_argument("--sizes", type=int, nargs="*", default=list(SIZES))
    parser.add_argument("--modes", nargs="*", default=["single", "batched"])
    parser.add_argument("--repeat", type=int, default=3, help="runs per configuration; the best is shown")
    args = parser.parse_args()
    scale = 0.1 if args.quick else 1.0
    print(machine_facts())
    print(f"{'transport':<12} {'size':>5} {'mode':<8} {'msgs/s':>12} {'MB/s':>9} {'vs fastest baseline':>20}")
    for mode in args.modes:
        for size in args.sizes:
            rates: dict[str, float | None] = {}
            transports = ["mp.Queue", "faster-fifo", "pyzmq", "ring"]
            if mode == "single" and _accel.fast is not None:
                transports.append("ring (py)")
            for transport in transports:
                runs = [measure(transport, size, mode, scale) for _ in range(args.repeat)]
                rates[transport] = max((r for r in runs if r is not None), default=None)
            baselines = [r for t, r in rates.items() if not t.startswith("ring") and r is not None]
            best = max(baselines) if baselines else None
            for transport, rate in rates.items():
                if rate is None:
                    print(f"{transport:<12} {size:>5} {mode:<8} {'(not installed)':>12}")
                    continue
                ratio = f"{rate / best:.2f}x" if best else "-"
                print(f"{transport:<12} {size:>5} {mode:<8} {rate:>12,.0f} {rate * size / 1e6:>9.1f} {ratio:>20}")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
