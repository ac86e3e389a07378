"""flowplex's ProcessPoolExecutor against its baselines, in one process run (issue 14).

Usage: python benchmarks/processes.py [--only cpu|overhead|frames] [--packets N] [--calls N] [--frames N]

Three comparisons, one line each, with the figures, the ratio and the ratio's target:

* ``cpu``: a kernel holding the GIL for about 2 ms per packet (a pure-Python loop, calibrated
  here at start). Throughput with the node on a ProcessPoolExecutor of 2 processes and
  ``max_in_flight: 2``, against a ThreadPoolExecutor of 2 threads with ``max_in_flight: 2``
  (target >= 1.7x on 2 cores); also 2 processes against 1, and the same work split by the host
  over two kernel nodes on the 2-process pool (each node lives in one worker, round robin).
* ``overhead``: a kernel that forwards its input, on a pool of 1 process: µs per invocation,
  one packet at a time (send, then read it at a poller) and pipelined (send all, read all),
  against ``concurrent.futures.ProcessPoolExecutor(1)``: ``submit(fn, x).result()`` one at a
  time, and ``submit`` of all then every ``result()`` (target: flowplex >= 3x cheaper).
* ``frames``: 1080p uint8 frames (1080x1920x3) from the host (``Graph.new_buffer``, then
  ``send``) through a middle node on a pool of 1 process to a poller the host reads on another
  thread; the middle node forwards its input, or writes in place (``take_input`` +
  ``make_mutable``). Against a ``multiprocessing.Queue`` pipeline: the host puts each frame on
  one queue, a worker process gets it, writes 4 pixels and puts it on a second queue, which a
  host thread reads (target >= 10x its frames/s, 0 copy-on-write copies per frame).

Worker processes start with ``spawn`` (both engines); start-up is not timed. Every figure is
the best of ``REPEATS`` rounds of the same running graph or pool after a warm-up round, and the
cases of one comparison take turns round by round, so that load from elsewhere on a shared
2-core machine falls on all of them alike. The kernels live at the top of this file: a worker re-imports it
as ``__mp_main__``, which is why everything else runs under ``if __name__ == "__main__":``.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import logging
import multiprocessing as mp
import os
import platform
import threading
import time
from collections.abc import Callable
from typing import Any, Final

import numpy as np
from _rounds import interleaved  # benchmarks/ is on sys.path: the script runs from there

import flowplex
from flowplex.diagnostics import NodeStats

REPEATS: Final = 3
"""Rounds per figure, in one graph (workers start once); the best one is shown."""
SPIN_MS: Final = 2.0
"""The CPU-bound kernel's work per packet."""
FRAME_SHAPE: Final = (1080, 1920, 3)
CTX: Final = mp.get_context("spawn")


# -- kernels (module level: a worker imports this file as __mp_main__ and finds them) -------------


def spin(iterations: int) -> int:
    """Pure-Python work that holds the GIL throughout."""
    x = 0
    for i in range(iterations):
        x ^= i
    return x


@flowplex.kernel("BenchSpin")
class BenchSpin(flowplex.Kernel):
    """Spins ``iterations`` loop turns (about 2 ms), then forwards its input."""

    def open(self, cc: flowplex.Context) -> None:
        self.iterations = cc.option_int("iterations", 100_000)

    def process(self, cc: flowplex.Context) -> None:
        spin(self.iterations)
        cc.forward(0, 0)


@flowplex.kernel("BenchForward")
class BenchForward(flowplex.Kernel):
    """Forwards its input (by reference)."""

    def process(self, cc: flowplex.Context) -> None:
        cc.forward(0, 0)


@flowplex.kernel("BenchStamp")
class BenchStamp(flowplex.Kernel):
    """Writes a few pixels of its input frame in place, then emits it."""

    def process(self, cc: flowplex.Context) -> None:
        packet = cc.take_input(0)
        frame = packet.make_mutable()
        frame[0, :4, 0] = 255 - frame[0, :4, 0]
        cc.emit(0, packet)


def echo(x: object) -> object:
    """The baseline's trivial task."""
    return x


def queue_worker(inbox: Any, outbox: Any) -> None:
    """The baseline's middle stage: get a frame, write a few pixels, put it back; None ends."""
    while True:
        frame = inbox.get()
        if frame is None:
            outbox.put(None)
            return
        frame[0, :4, 0] = 255 - frame[0, :4, 0]
        outbox.put(frame)


# -- helpers --------------------------------------------------------------------------------------


def timed(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def calibrate(target_ms: float) -> tuple[int, float]:
    """Loop turns for ``spin`` to take ``target_ms`` here (best of several), and the ms it takes."""
    n = 20_000
    per_turn = min(timed(lambda: spin(n)) for _ in range(10)) / n
    n = max(1, round(target_ms / 1000 / per_turn))
    return n, min(timed(lambda: spin(n)) for _ in range(10)) * 1000


def drain(poller: Any, count: int, into: list[Any] | None = None) -> None:
    """Read ``count`` packets from ``poller`` (keep the last in ``into`` when given: a consumer
    that kept every frame would hold the whole shared-memory arena)."""
    packet = None
    for _ in range(count):
        packet = poller.next(60.0)
        if packet is None:
            msg = "benchmark: the stream ended early"
            raise RuntimeError(msg)
    if into is not None:
        into.append(packet)


def line(name: str, figures: str, ratio: float, target: float, what: str) -> None:
    verdict = "ok" if ratio >= target else "BELOW TARGET"
    print(f"{name:<8} {figures} | {what} {ratio:.2f}x (target >= {target:g}x: {verdict})", flush=True)


class Running:
    """A started graph with a poller on each output, closed by ``close`` (inputs, then the graph)."""

    def __init__(self, yaml_text: str) -> None:
        self.graph = g = flowplex.Graph.from_yaml(yaml_text)
        try:
            self.pollers = [g.add_poller(port) for port in g.plan.graph_outputs]
            self.inputs = [g.input(port) for port in g.plan.graph_inputs]
            g.start()
        except BaseException:
            g.close()
            raise
        self.ts = 0
        """The next timestamp (strictly increasing per input: one counter for all)."""

    def close(self) -> list[NodeStats]:
        """Let the graph finish and close it; its node stats at the end."""
        g = self.graph
        try:
            g.close_all_inputs()
            g.wait_done(timeout=60.0)
            return g.node_stats()
        finally:
            g.close()


# -- 1. CPU-bound ---------------------------------------------------------------------------------

EXECUTORS: Final = {
    "procs2": "{ name: procs2, type: ProcessPoolExecutor, num_processes: 2 }",
    "procs1": "{ name: procs1, type: ProcessPoolExecutor, num_processes: 1 }",
    "threads2": "{ name: threads2, type: ThreadPoolExecutor, num_threads: 2 }",
}


def cpu_yaml(executor: str, iterations: int, *, nodes: int = 1, max_in_flight: int = 1) -> str:
    """``nodes`` spinning nodes on ``executor``, node ``k`` from input ``xk`` to output ``yk``."""
    body = "\n".join(
        f"  - {{ name: spin{k}, kernel: BenchSpin, executor: {executor}, max_in_flight: {max_in_flight}, "
        f"input_ports: [x{k}], output_ports: [y{k}], options: {{ iterations: {iterations} }} }}"
        for k in range(nodes))
    ports = ", ".join(f"x{k}" for k in range(nodes))
    outs = ", ".join(f"y{k}" for k in range(nodes))
    return (f"stats: full\nexecutors: [{EXECUTORS[executor]}]\nnodes:\n{body}\n"
            f"input_ports: [{ports}]\noutput_ports: [{outs}]\n")


def spin_round(run: Running, packets: int) -> float:
    """Seconds to send ``packets`` (packet ``i`` to input ``i % nodes``) and read every result."""
    inputs, pollers = run.inputs, run.pollers
    t0 = time.perf_counter()
    for i in range(packets):
        inputs[i % len(inputs)].send(i, ts=run.ts)
        run.ts += 1
    for k, poller in enumerate(pollers):
        drain(poller, len(range(k, packets, len(pollers))))
    return time.perf_counter() - t0


def bench_cpu(packets: int) -> None:
    iterations, ms = calibrate(SPIN_MS)
    configs = {
        "2 threads": (cpu_yaml("threads2", iterations, max_in_flight=2)),
        "1 proc": (cpu_yaml("procs1", iterations)),
        "2 procs": (cpu_yaml("procs2", iterations, max_in_flight=2)),
        "2 nodes": (cpu_yaml("procs2", iterations, nodes=2)),
        "2 procs x4": (cpu_yaml("procs2", iterations, max_in_flight=4)),
    }
    runs: dict[str, Running] = {}
    try:
        for name, text in configs.items():
            runs[name] = Running(text)
        secs = interleaved({name: (lambda run=run: spin_round(run, packets)) for name, run in runs.items()}, REPEATS)
    finally:
        stats = {name: run.close() for name, run in runs.items()}
    rate = {name: packets / s for name, s in secs.items()}
    kernel_ms = {name: sum(n.avg_process_us or 0.0 for n in st) / len(st) / 1000 for name, st in stats.items()}
    print(f"# cpu: {packets} packets per round; spin({iterations}) takes {ms:.2f} ms here (one core: "
          f"{1000 / ms:.0f} pkt/s); mean process() as the nodes measured it: "
          + ", ".join(f"{name} {v:.2f} ms" for name, v in kernel_ms.items()), flush=True)
    line("cpu", f"2 procs max_in_flight 2 {rate['2 procs']:.0f} pkt/s, 2 threads max_in_flight 2 "
         f"{rate['2 threads']:.0f} pkt/s", rate["2 procs"] / rate["2 threads"], 1.7, "2 procs/2 threads")
    line("cpu", f"2 procs max_in_flight 2 {rate['2 procs']:.0f} pkt/s, 1 proc {rate['1 proc']:.0f} pkt/s",
         rate["2 procs"] / rate["1 proc"], 1.7, "2 procs/1 proc")
    line("cpu", f"2 procs max_in_flight 4 (2 replicas, 2 calls queued at each) {rate['2 procs x4']:.0f} pkt/s, "
         f"2 threads {rate['2 threads']:.0f} pkt/s", rate["2 procs x4"] / rate["2 threads"], 1.7,
         "2 procs x4/2 threads")
    line("cpu", f"2 nodes on 2 procs (the host alternates inputs) {rate['2 nodes']:.0f} pkt/s, 2 threads "
         f"{rate['2 threads']:.0f} pkt/s", rate["2 nodes"] / rate["2 threads"], 1.7, "2 nodes/2 threads")


# -- 2. per-invocation overhead -------------------------------------------------------------------

OVERHEAD_YAML: Final = """
executors: [{ name: pool, type: ProcessPoolExecutor, num_processes: 1 }]
nodes:
  - { name: fwd, kernel: BenchForward, executor: pool, max_in_flight: %d, input_ports: [x], output_ports: [y] }
input_ports: [x]
output_ports: [y]
"""
PIPELINE_DEPTH: Final = 16
"""``max_in_flight`` of the pipelined case: calls queued at the one worker, answered in order."""


def graph_round_trips(run: Running, calls: int) -> float:
    """Seconds for ``calls`` packets, each sent after the previous one reached the poller."""
    send, poller = run.inputs[0].send, run.pollers[0]
    t0 = time.perf_counter()
    for _ in range(calls):
        send(run.ts, ts=run.ts)
        run.ts += 1
        poller.next(60.0)
    return time.perf_counter() - t0


def graph_pipelined(run: Running, calls: int) -> float:
    """Seconds to send ``calls`` packets while a reader thread takes them from the poller."""
    send = run.inputs[0].send
    reader = threading.Thread(target=drain, args=(run.pollers[0], calls))
    t0 = time.perf_counter()
    reader.start()  # read on another thread: a send never waits for room in the poller
    for _ in range(calls):
        send(run.ts, ts=run.ts)
        run.ts += 1
    reader.join()
    return time.perf_counter() - t0


def futures_round_trips(pool: concurrent.futures.Executor, calls: int) -> float:
    t0 = time.perf_counter()
    for i in range(calls):
        pool.submit(echo, i).result()
    return time.perf_counter() - t0


def futures_pipelined(pool: concurrent.futures.Executor, calls: int) -> float:
    t0 = time.perf_counter()
    futures = [pool.submit(echo, i) for i in range(calls)]
    for f in futures:
        f.result()
    return time.perf_counter() - t0


def bench_overhead(calls: int) -> None:
    run = Running(OVERHEAD_YAML % 1)
    deep = Running(OVERHEAD_YAML % PIPELINE_DEPTH)
    try:
        with concurrent.futures.ProcessPoolExecutor(1, mp_context=CTX) as pool:
            pool.submit(echo, 0).result()  # starts its worker
            secs = interleaved({
                "flowplex round trip": lambda: graph_round_trips(run, calls),
                "futures round trip": lambda: futures_round_trips(pool, calls),
                "flowplex pipelined": lambda: graph_pipelined(deep, calls),
                "futures pipelined": lambda: futures_pipelined(pool, calls),
            }, REPEATS)
    finally:
        run.close()
        deep.close()
    us = {name: s / calls * 1e6 for name, s in secs.items()}
    print(f"# overhead: {calls} int packets per round; a forwarding kernel on a pool of 1 process, against "
          f"concurrent.futures.ProcessPoolExecutor(1) running the same function; round trips with max_in_flight 1, "
          f"pipelined with max_in_flight {PIPELINE_DEPTH} (calls queued at the one worker, outputs in order)",
          flush=True)
    for how in ("round trip", "pipelined"):
        fp, cf = us[f"flowplex {how}"], us[f"futures {how}"]
        line("overhead", f"{how}: flowplex {fp:.0f} us per call, futures {cf:.0f} us per call", cf / fp, 3,
             "futures/flowplex")


# -- 3. 1080p frames ------------------------------------------------------------------------------


def frames_yaml(kernel: str) -> str:
    return f"""
executors: [{{ name: pool, type: ProcessPoolExecutor, num_processes: 1 }}]
stats: full
nodes:
  - {{ name: mid, kernel: {kernel}, executor: pool, input_ports: [x], output_ports: [y] }}
input_ports: [x]
output_ports: [y]
"""


def send_frame(run: Running, i: int) -> None:
    """A new zero-filled frame, stamped with ``i``, sent at ts ``i``; no reference to it is kept."""
    packet, view = run.graph.new_buffer(FRAME_SHAPE, np.uint8)
    view[0, 0, 1] = i & 0xFF
    del view
    run.inputs[0].send(packet, ts=i)


def frames_round(run: Running, count: int, in_place: bool) -> float:
    """Seconds to send ``count`` frames while a reader thread takes them from the poller; the
    last frame is checked (shape, stamp, and the pixels the in-place kernel writes)."""
    got: list[Any] = []
    reader = threading.Thread(target=drain, args=(run.pollers[0], count, got))
    t0 = time.perf_counter()
    reader.start()
    for _ in range(count):
        send_frame(run, run.ts)
        run.ts += 1
    reader.join()
    dt = time.perf_counter() - t0
    last = got[-1].as_numpy()
    if last.shape != FRAME_SHAPE or last[0, 0, 0] != (255 if in_place else 0) or last[0, 0, 1] != (run.ts - 1) & 0xFF:
        msg = "benchmark: the graph delivered a wrong frame"
        raise RuntimeError(msg)
    return dt


class QueuePipeline:
    """The baseline: host → ``multiprocessing.Queue`` → worker process → ``Queue`` → host thread."""

    def __init__(self) -> None:
        self.inbox, self.outbox = CTX.Queue(maxsize=4), CTX.Queue(maxsize=4)
        self.worker = CTX.Process(target=queue_worker, args=(self.inbox, self.outbox), daemon=True)
        self.worker.start()

    def round(self, count: int) -> float:
        outbox = self.outbox
        got: list[Any] = []
        reader = threading.Thread(target=lambda: got.extend(outbox.get(timeout=60.0) for _ in range(count)))
        t0 = time.perf_counter()
        reader.start()
        for i in range(count):
            frame = np.zeros(FRAME_SHAPE, np.uint8)
            frame[0, 0, 1] = i & 0xFF
            self.inbox.put(frame)
            del frame  # the queue's feeder thread pickles it later: never write it again
        reader.join()
        dt = time.perf_counter() - t0
        if len(got) != count or got[-1][0, 0, 0] != 255 or got[-1][0, 0, 1] != (count - 1) & 0xFF:
            msg = "benchmark: the queue pipeline delivered a wrong frame"
            raise RuntimeError(msg)
        return dt

    def close(self) -> None:
        try:
            self.inbox.put(None)
            self.outbox.get(timeout=10.0)
        finally:
            self.worker.join(5.0)
            if self.worker.is_alive():
                self.worker.terminate()


def bench_frames(count: int) -> None:
    runs: dict[str, Running] = {}
    baseline = QueuePipeline()
    try:
        runs["forward"] = Running(frames_yaml("BenchForward"))
        runs["in place"] = Running(frames_yaml("BenchStamp"))
        secs = interleaved({
            "forward": lambda: frames_round(runs["forward"], count, in_place=False),
            "in place": lambda: frames_round(runs["in place"], count, in_place=True),
            "mp.Queue": lambda: baseline.round(count),
        }, REPEATS)
    finally:
        baseline.close()
        sent = {name: run.ts for name, run in runs.items()}
        copies = {name: next(n.copies for n in run.close() if n.node_name == "mid") for name, run in runs.items()}
    fps = {name: count / s for name, s in secs.items()}
    print(f"# frames: {count} 1080p uint8 frames per round (new_buffer, send; the in-place kernel writes 4 "
          "pixels); copies: the middle node's copy-on-write copies per frame (node stats)", flush=True)
    for name in ("forward", "in place"):
        per_frame = copies[name] / sent[name]
        line("frames", f"{name}: flowplex {fps[name]:.1f} frames/s ({per_frame:.2f} copies/frame), mp.Queue "
             f"{fps['mp.Queue']:.1f} frames/s", fps[name] / fps["mp.Queue"], 10, f"{name}/mp.Queue")


# -- main -----------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", choices=("cpu", "overhead", "frames"), help="run one comparison")
    parser.add_argument("--packets", type=int, default=400, help="packets per round of the cpu comparison")
    parser.add_argument("--calls", type=int, default=2000, help="invocations per round of the overhead comparison")
    parser.add_argument("--frames", type=int, default=100, help="frames per round of the frames comparison")
    args = parser.parse_args()
    logging.getLogger("flowplex").setLevel(logging.ERROR)
    from flowplex import _native

    flowplex.Graph  # noqa: B018  (loads the scheduler, so the mode below is the one measured)
    print(f"# flowplex {flowplex.__version__}; Python {platform.python_version()}; {os.cpu_count()} CPUs; "
          f"{platform.machine()}; scheduler {_native.mode}; workers start with spawn; best of {REPEATS} "
          "interleaved rounds after a warm-up", flush=True)
    if args.only in (None, "cpu"):
        bench_cpu(args.packets)
    if args.only in (None, "overhead"):
        bench_overhead(args.calls)
    if args.only in (None, "frames"):
        bench_frames(args.frames)


if __name__ == "__main__":
    main()
