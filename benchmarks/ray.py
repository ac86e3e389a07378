"""flowplex's RayExecutor against a raw Ray actor chain, in one process run.

Usage: python benchmarks/ray.py [--only chain|frames] [--packets N] [--frames N]

Two comparisons, one line each, with the figures, the ratio and the ratio's target:

* ``chain``: small int packets through a 4-stage ``PassThroughKernel`` chain, each node on a
  ``RayExecutor`` (one actor per node, ``num_cpus: 0.5``, ``max_batch: 256``), sent by the host
  while a host thread reads them at a poller: packets/s from the first send to the last read.
  Against a raw Ray chain: 4 actors (``num_cpus=0.5``) whose method returns its argument, the
  driver chaining references (``r = a.f.remote(r)`` for each actor) for every packet, all
  submitted, then one ``ray.get`` of the final references (target >= 10x its packets/s). The
  raw chain runs a tenth of the packets per round (at least 200): it is that much slower.
* ``frames``: 1080p uint8 frames (1080x1920x3, a new one per send, stamped with its number)
  through the same 4-stage chain on a ``RayExecutor`` with ``max_batch: 8`` (each call in
  flight holds a frame); the host puts each frame in Ray's object store once, the actors pass
  the reference on, the host reads the data at the poller. Against the raw chain: the driver
  ``ray.put``s each frame and chains it through the 4 actors (each returns the array: a new
  object per stage), all submitted, then ``ray.get`` of each final reference in order (target:
  at least its frames/s). Both sides check the stamps of every frame they read.

One local Ray instance for both engines (``ray.init`` here, ``NUM_CPUS`` logical CPUs so that
every actor fits, an object store of ``OBJECT_STORE_BYTES``); the RayExecutor uses it and leaves
it running at ``Graph.close``. Start-up (``ray.init``, actors, ``Graph.start``) is not timed.
Every figure is the best of ``REPEATS`` rounds of the same running graph or actors after a
warm-up round, and the cases of one comparison take turns round by round, so that load from
elsewhere on a shared 2-core machine falls on all of them alike. The kernels are built-in, and
everything runs under ``if __name__ == "__main__":`` (Ray's workers never import this file). This
file's folder leaves ``sys.path`` before ``import ray``: the file itself is named ``ray``.
"""

from __future__ import annotations

import argparse
import logging
import os
import platform
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, Final

import numpy as np
from _rounds import interleaved  # benchmarks/ is on sys.path: the script runs from there

import flowplex

REPEATS: Final = 3
"""Rounds per figure, in one graph (actors start once); the best one is shown."""
STAGES: Final = 4
FRAME_SHAPE: Final = (1080, 1920, 3)
NUM_CPUS: Final = 8
"""Logical CPUs of the local Ray instance: 2 graphs' and the baseline's actors ask 0.5 each."""
ACTOR_CPUS: Final = 0.5
OBJECT_STORE_BYTES: Final = 2 * 1024**3
CHAIN_MAX_BATCH: Final = 256
FRAMES_MAX_BATCH: Final = 8
READ_TIMEOUT_S: Final = 60.0


# -- helpers --------------------------------------------------------------------------------------


def line(name: str, figures: str, ratio: float, target: float, what: str) -> None:
    verdict = "ok" if ratio >= target else "BELOW TARGET"
    print(f"{name:<8} {figures} | {what} {ratio:.2f}x (target >= {target:g}x: {verdict})", flush=True)


def chain_yaml(max_batch: int) -> str:
    """``STAGES`` pass-through nodes in a chain from ``x`` to ``y``, each in a Ray actor."""
    ports = ["x", *(f"e{k}" for k in range(STAGES - 1)), "y"]
    body = "\n".join(
        f"  - {{ name: s{k}, kernel: PassThroughKernel, executor: cluster, input_ports: [{ports[k]}], "
        f"output_ports: [{ports[k + 1]}] }}"
        for k in range(STAGES))
    return (f"executors:\n  - {{ name: cluster, type: RayExecutor, num_cpus: {ACTOR_CPUS}, max_batch: {max_batch}, "
            f"max_batch_delay_ms: 2 }}\ninput_ports: [x]\noutput_ports: [y]\nnodes:\n{body}\n")


class Running:
    """A started graph with a poller on ``y``, closed by ``close`` (inputs, then the graph)."""

    def __init__(self, yaml_text: str) -> None:
        self.graph = g = flowplex.Graph.from_yaml(yaml_text)
        try:
            self.poller = g.add_poller("y")
            g.start()
        except BaseException:
            g.close()
            raise
        self.ts = 0
        """The next timestamp (strictly increasing)."""

    def round(self, count: int, make: Callable[[int], object], check: Callable[[int, Any], None]) -> float:
        """Seconds to send ``make(i)`` for ``count`` packets while a reader thread takes them from
        the poller, ``check(i, packet)`` on each (the first failure is raised here)."""
        g, poller = self.graph, self.poller
        failure: list[BaseException] = []

        def read() -> None:
            try:
                for i in range(count):
                    packet = poller.next(READ_TIMEOUT_S)
                    if packet is None:
                        msg = f"benchmark: the graph's stream ended early ({i} of {count} packets read)"
                        raise RuntimeError(msg)
                    check(i, packet)
                    del packet
            except BaseException as exc:
                failure.append(exc)

        reader = threading.Thread(target=read, name="bench-reader")
        t0 = time.perf_counter()
        reader.start()  # read on another thread: a send never waits for room in the poller
        for i in range(count):
            g.send("x", make(i), ts=self.ts)
            self.ts += 1
        reader.join()
        dt = time.perf_counter() - t0
        if failure:
            raise failure[0]
        return dt

    def close(self) -> None:
        g = self.graph
        try:
            g.close_all_inputs()
            g.wait_done(timeout=60.0)
        finally:
            g.close()


class RawChain:
    """The baseline: ``STAGES`` Ray actors whose ``f`` returns its argument, chained by the driver."""

    def __init__(self, ray: Any) -> None:
        @ray.remote(num_cpus=ACTOR_CPUS)
        class Stage:
            def f(self, x: object) -> object:
                return x

        self.ray = ray
        self.actors = [Stage.remote() for _ in range(STAGES)]
        ray.get([a.f.remote(0) for a in self.actors])  # every actor up

    def submit(self, x: object) -> object:
        """The final reference of ``x`` chained through every actor."""
        r = x
        for a in self.actors:
            r = a.f.remote(r)
        return r

    def close(self) -> None:
        for a in self.actors:
            self.ray.kill(a)


# -- 1. small packets ---------------------------------------------------------------------------


def raw_chain_round(raw: RawChain, count: int) -> float:
    t0 = time.perf_counter()
    refs = [raw.submit(i) for i in range(count)]
    got = raw.ray.get(refs)
    dt = time.perf_counter() - t0
    if got != list(range(count)):
        msg = "benchmark: the raw Ray chain delivered wrong values"
        raise RuntimeError(msg)
    return dt


def bench_chain(ray: Any, packets: int) -> None:
    raw_packets = max(200, packets // 10)
    run = Running(chain_yaml(CHAIN_MAX_BATCH))
    raw = RawChain(ray)
    try:
        def check(i: int, packet: Any) -> None:
            if packet.payload != i:
                msg = f"benchmark: packet {i} of the round came out as {packet.payload!r}"
                raise RuntimeError(msg)

        secs = interleaved({
            "flowplex": lambda: run.round(packets, lambda i: i, check),
            "raw": lambda: raw_chain_round(raw, raw_packets),
        }, REPEATS)
    finally:
        raw.close()
        run.close()
    fp, rr = packets / secs["flowplex"], raw_packets / secs["raw"]
    print(f"# chain: {STAGES} stages of a pass-through, one Ray actor each ({ACTOR_CPUS:g} CPU); flowplex "
          f"{packets} int packets per round (max_batch {CHAIN_MAX_BATCH}), the raw chain {raw_packets} (submit "
          "all, then one ray.get)", flush=True)
    line("chain", f"flowplex {fp:.0f} pkt/s, raw Ray chain {rr:.0f} pkt/s", fp / rr, 10, "flowplex/raw")


# -- 2. 1080p frames ----------------------------------------------------------------------------


def new_frame(i: int) -> np.ndarray:
    """A zero-filled 1080p frame stamped with ``i`` in three pixels."""
    frame = np.zeros(FRAME_SHAPE, np.uint8)
    frame[0, 0, 0] = i & 0xFF
    frame[0, 0, 1] = (i >> 8) & 0xFF
    frame[-1, -1, 2] = (i * 7 + 3) & 0xFF
    return frame


def check_frame(i: int, frame: np.ndarray, who: str) -> None:
    if (frame.shape != FRAME_SHAPE or frame.dtype != np.uint8 or frame[0, 0, 0] != i & 0xFF
            or frame[0, 0, 1] != (i >> 8) & 0xFF or frame[-1, -1, 2] != (i * 7 + 3) & 0xFF
            or frame[540, 960, 1] != 0):
        msg = f"benchmark: {who} delivered a wrong frame for frame {i} of the round"
        raise RuntimeError(msg)


def raw_frames_round(raw: RawChain, count: int) -> float:
    ray = raw.ray
    t0 = time.perf_counter()
    refs: list[Any] = [raw.submit(ray.put(new_frame(i))) for i in range(count)]
    for i in range(count):
        check_frame(i, ray.get(refs[i]), "the raw Ray chain")
        refs[i] = None  # its object may go
    return time.perf_counter() - t0


def bench_frames(ray: Any, count: int) -> None:
    run = Running(chain_yaml(FRAMES_MAX_BATCH))
    raw = RawChain(ray)
    try:
        secs = interleaved({
            "flowplex": lambda: run.round(count, new_frame,
                                          lambda i, packet: check_frame(i, packet.as_numpy(), "flowplex")),
            "raw": lambda: raw_frames_round(raw, count),
        }, REPEATS)
    finally:
        raw.close()
        run.close()
    fp, rr = count / secs["flowplex"], count / secs["raw"]
    print(f"# frames: {count} 1080p uint8 frames per round, a new one per send; flowplex max_batch "
          f"{FRAMES_MAX_BATCH} (the host puts each frame once, actors pass the reference); the raw chain ray.puts "
          "each frame, every stage returns a new object", flush=True)
    line("frames", f"flowplex {fp:.1f} frames/s, raw Ray chain {rr:.1f} frames/s", fp / rr, 1, "flowplex/raw")


# -- main -----------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", choices=("chain", "frames"), help="run one comparison")
    parser.add_argument("--packets", type=int, default=20000,
                        help="packets per round of flowplex's chain (the raw chain: a tenth)")
    parser.add_argument("--frames", type=int, default=80, help="frames per round of the frames comparison")
    args = parser.parse_args()
    logging.getLogger("flowplex").setLevel(logging.ERROR)
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]  # else this file is `ray`
    import ray

    from flowplex import _native

    flowplex.Graph  # noqa: B018  (loads the scheduler, so the mode below is the one measured)
    ray.init(num_cpus=NUM_CPUS, object_store_memory=OBJECT_STORE_BYTES, include_dashboard=False,
             logging_level=logging.WARNING)
    try:
        print(f"# flowplex {flowplex.__version__}; Ray {ray.__version__}; Python {platform.python_version()}; "
              f"{os.cpu_count()} CPUs; {platform.machine()}; scheduler {_native.mode}; a local Ray instance "
              f"({NUM_CPUS} logical CPUs, object store {OBJECT_STORE_BYTES / 1024**3:g} GiB); best of {REPEATS} "
              "interleaved rounds after a warm-up", flush=True)
        if args.only in (None, "chain"):
            bench_chain(ray, args.packets)
        if args.only in (None, "frames"):
            bench_frames(ray, args.frames)
    finally:
        ray.shutdown()


if __name__ == "__main__":
    main()
