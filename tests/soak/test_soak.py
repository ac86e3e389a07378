"""Soak: memory stays bounded by the watermark, not by how much data is streamed.

Each measurement runs in a fresh interpreter (so one run's allocator state cannot hide or fake
another's): a sender pushes 256 KiB packets as fast as it can into a graph with
``max_queued_packets: 32`` whose consumer is slow, and the child reports its peak RSS above a
baseline taken after a warm-up. Streaming five times more data must not grow memory five times
more. The negative control runs the same measurement with a consumer that leaks every packet
on purpose, and shows the same comparison does catch a leak.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

pytestmark = pytest.mark.slow

PACKET_KIB = 256
WATERMARK = 32
N_MIB = 48
"""The small run streams N MiB, the large one 5 x N MiB."""

CHILD = (
    r"""
import json, sys, threading, time
import numpy as np
import flowplex

packets, leak = int(sys.argv[1]), sys.argv[2] == "leak"
LEAKED = []

@flowplex.kernel("SoakSlowSink")
class SoakSlowSink(flowplex.Kernel):
    def process(self, cc):
        if leak:
            LEAKED.append(bytes(cc.input(0).as_numpy()))  # a copy that is never freed
        time.sleep(0.0005)

def status_kb(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0

with flowplex.Graph.from_yaml('''
max_queued_packets: {watermark}
executors: [{ name: slow, type: ThreadPoolExecutor, num_threads: 1 }]
nodes:
  - { name: sink, executor: slow, kernel: SoakSlowSink, input_ports: [x] }
input_ports: [x]
''') as g:
    g.start()
    size = {packet_kib} * 1024
    ts = 0
    def stream(n):
        global ts
        for _ in range(n):
            g.send("x", np.full(size, ts & 255, np.uint8), ts=ts, timeout=30)
            ts += 1
    stream(4 * {watermark})  # warm-up: allocator arenas, thread stacks, first-use caches
    g.wait_until_idle(timeout=30)
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # reset VmHWM so it measures from here
        hwm = True
    except OSError:
        hwm = False
    baseline = status_kb("VmRSS")
    peak = [baseline]
    stop = threading.Event()
    def sample():
        while not stop.wait(0.001):
            peak[0] = max(peak[0], status_kb("VmRSS"))
    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    stream(packets)
    g.close_all_inputs()
    g.wait_done(timeout=60)
    stop.set()
    sampler.join()
    top = max(peak[0], status_kb("VmHWM") if hwm else 0)
    depth = max(n.peak_queue_depth for n in g.node_stats())
print(json.dumps({"growth_mib": (top - baseline) / 1024, "peak_queue_depth": depth}))
"""
    .replace("{watermark}", str(WATERMARK))
    .replace("{packet_kib}", str(PACKET_KIB))
)


def measure(mib: int, *, leak: bool = False) -> dict[str, Any]:
    packets = mib * 1024 // PACKET_KIB
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(packets), "leak" if leak else "clean"],
        capture_output=True, text=True, timeout=90, check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_rss_growth_is_bounded_by_the_watermark_not_by_the_data_streamed() -> None:
    small, large = measure(N_MIB), measure(5 * N_MIB)
    queued_mib = WATERMARK * PACKET_KIB / 1024  # 8 MiB may legitimately sit in queues
    for run in (small, large):
        assert run["peak_queue_depth"] >= WATERMARK // 2, f"the consumer never fell behind: {run}"
        assert run["growth_mib"] < queued_mib + 24, f"grew past the watermark's worth: {run}"
    # 4 x N more data streamed (192 MiB): growth may differ by allocator noise only.
    assert large["growth_mib"] - small["growth_mib"] < 12, (small, large)


def test_the_measurement_detects_a_leak() -> None:
    # Negative control: the same comparison with a consumer that keeps a copy of every packet.
    small, large = measure(N_MIB, leak=True), measure(5 * N_MIB, leak=True)
    assert large["growth_mib"] - small["growth_mib"] > 0.8 * 4 * N_MIB, (small, large)
