"""GPU versus CPU formatting throughput into a ring (needs the ``cuda`` extra and a GPU).

CPU: ``producer.send(format_ansi(text, agent_type=...))`` per message.  GPU:
``GpuFormatter.send_batch`` in batches.  Both write the same bytes into a ring that a consumer
in this process drains after each batch; the rate counts messages formatted and published.

Run: ``.venv/bin/python benchmarks/gpu_ring.py`` (exits with a message when there is no GPU).
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import sys
import time

from flowplex.errors import UsageError
from flowplex.transport import GpuFormatter, Ring, format_ansi

WORDS = ["token", "the", "build", "ERROR", "WARNING", "SUCCESS", "agent", "é", "😀", "stream", "ok"]


def make_texts(n: int, seed: int = 1) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 40))) for _ in range(n)]


def cpu_rate(texts: list[str], agents: list[int], batch: int) -> float:
    with Ring.create(capacity=1 << 16, max_producers=1) as ring:
        p, c = ring.producer(), ring.consumer()
        t0 = time.perf_counter()
        for start in range(0, len(texts), batch):
            for text, agent in zip(texts[start : start + batch], agents[start : start + batch], strict=True):
                p.send(format_ansi(text, agent_type=agent), agent_type=agent)
            c.recv_many(1 << 16, timeout=5)
        return len(texts) / (time.perf_counter() - t0)


def gpu_rate(texts: list[str], agents: list[int], batch: int) -> float:
    with Ring.create(capacity=1 << 16, max_producers=1) as ring, GpuFormatter(ring) as gpu:
        c = ring.consumer()
        gpu.send_batch(texts[:batch], agent_types=agents[:batch])  # compile and warm up
        c.recv_many(1 << 16, timeout=5)
        t0 = time.perf_counter()
        for start in range(0, len(texts), batch):
            gpu.send_batch(texts[start : start + batch], agent_types=agents[start : start + batch])
            c.recv_many(1 << 16, timeout=5)
        return len(texts) / (time.perf_counter() - t0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--batch", type=int, default=8192)
    args = parser.parse_args()
    try:
        import cupy

        devices = cupy.cuda.runtime.getDeviceCount()
    except ImportError:
        print("no GPU benchmark: CuPy is not installed (pip install 'flowplex[cuda]')")
        return
    except Exception as exc:  # CUDA driver or device missing
        print(f"no GPU benchmark: {exc}")
        return
    if devices < 1:
        print("no GPU benchmark: no CUDA device")
        return
    props = cupy.cuda.runtime.getDeviceProperties(0)
    print(
        f"{os.cpu_count()} CPUs, Python {platform.python_version()}, GPU {props['name'].decode()}, "
        f"CuPy {cupy.__version__}"
    )
    rng = random.Random(2)
    texts = make_texts(args.messages)
    agents = [rng.randrange(8) for _ in texts]
    avg = sum(len(format_ansi(t, agent_type=a)) for t, a in zip(texts[:1000], agents[:1000], strict=True)) / 1000
    try:
        gpu = gpu_rate(texts, agents, args.batch)
    except UsageError as exc:
        print(f"no GPU benchmark: {exc}")
        return
    cpu = cpu_rate(texts, agents, args.batch)
    print(f"{'path':<6} {'msgs/s':>12} {'MB/s':>9}  (avg formatted size {avg:.0f} B, batch {args.batch})")
    for name, rate in (("cpu", cpu), ("gpu", gpu)):
        print(f"{name:<6} {rate:>12,.0f} {rate * avg / 1e6:>9.1f}")
    print(f"gpu/cpu: {gpu / cpu:.2f}x")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
