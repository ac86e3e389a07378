"""Recording and replaying streams (issue 28): four figures against their targets, in one process run.

Usage: python benchmarks/record.py [--quick] [--dir DIR]

Every file goes to ``DIR`` (default ``/dev/shm``, so that the figures are the recorder's and
not a disk's) and is deleted after its round. The rows:

1. ``1080p frames, Recorder.write``: 1080x1920x3 uint8 frames written uncompressed by
   ``Recorder.write`` (one stream, one packet per frame), against the same bytes written by
   ``numpy.ndarray.tofile`` into one file. Target: >= 0.8x. The row under it sends the same
   frames through a graph recorded by ``flowplex.recording.record`` (encoded, that is copied, on
   the graph's thread, written by the capture's thread) for comparison; it has no target.
2. ``small int packets, record(graph)``: ints sent into a running graph (one input stream, one
   sink node) recorded by ``flowplex.recording.record`` with its default compression (zstd);
   packets recorded per second, from the first send to the capture closed (the file complete).
   The same graph without the recording, and the recording uncompressed, are shown for
   comparison. Target: >= 200,000/s.
3. ``4-stage 1080p chain, record every edge``: the 4-forwarding-stage chain of
   ``benchmarks/vs_lmflow.py`` (frames sent from the host into ``e0``, 4 nodes that forward,
   a sink), run with and without ``record(graph, path, compression="none")`` of every edge (5
   streams); the cost is the share of throughput lost. Target: <= 10%.
4. ``replay --rate max``: the recording of row 1 replayed by a YAML graph ``ReplaySource
   (rate: max) -> sink`` (what ``flowplex replay FILE --rate max`` runs), its wall time (build,
   start, run to the end) against the recording's own recorded span (first to last wall time in
   the file). Target: >= 2x faster.

Each figure is the best of ``REPEATS`` interleaved rounds after a warm-up (``_rounds.py``).
"""

from __future__ import annotations

import argparse
import gc
import logging
import os
import platform
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Final

import numpy as np
from _rounds import interleaved  # benchmarks/ is on sys.path: the script runs from there

import flowplex
import flowplex.recording as recording
from flowplex import Packet

REPEATS: Final = 3
FRAME_SHAPE: Final = (1080, 1920, 3)


@flowplex.kernel("RecordBenchFwd")
class RecordBenchFwd(flowplex.Kernel):
    """Forwards its input packet, as vs_lmflow.py's BenchFwd."""

    def process(self, cc: flowplex.Context) -> None:
        cc.forward(0, 0)


@flowplex.kernel("RecordBenchSink")
class RecordBenchSink(flowplex.Kernel):
    """Takes its input and does nothing with it."""

    def process(self, cc: flowplex.Context) -> None:
        pass


def chain_yaml(stages: int) -> str:
    """``e0 -> f0 -> ... -> f{stages-1} -> sink``; the host sends into ``e0``."""
    lines = [f"  - {{ name: f{i}, kernel: RecordBenchFwd, input_ports: [e{i}], output_ports: [e{i + 1}] }}"
             for i in range(stages)]
    lines.append(f"  - {{ name: sink, kernel: RecordBenchSink, input_ports: [e{stages}] }}")
    return "nodes:\n" + "\n".join(lines) + "\ninput_ports: [e0]\noutput_ports: []\n"


def fresh(directory: Path, name: str) -> Path:
    path = directory / f"flowplex-bench-{os.getpid()}-{name}"
    path.unlink(missing_ok=True)
    return path


# -- 1. frames -----------------------------------------------------------------------------------


def tofile_s(directory: Path, frame: np.ndarray, n: int) -> float:
    path = fresh(directory, "tofile.bin")
    t0 = time.perf_counter()
    with open(path, "wb") as f:
        for _ in range(n):
            frame.tofile(f)
    dt = time.perf_counter() - t0
    path.unlink()
    return dt


def recorder_s(directory: Path, frame: np.ndarray, n: int, keep: Path | None = None) -> float:
    path = keep or fresh(directory, "frames.mcap")
    t0 = time.perf_counter()
    with recording.Recorder(path, compression="none") as rec:
        rec.add_stream("frames", kind="buffer")
        for i in range(n):
            rec.write("frames", Packet.from_numpy(frame, ts=i))
    dt = time.perf_counter() - t0
    if keep is None:
        path.unlink()
    return dt


def graph_run_s(yaml_text: str, n: int, make: Callable[[int], object], path: Path | None,
                compression: str) -> float:
    """Seconds to send ``n`` packets into ``e0`` and finish: the graph done and, when ``path`` is
    given, every stream recorded into it and the file closed."""
    g = flowplex.Graph.from_yaml(yaml_text)
    try:
        capture = recording.record(g, path, compression=compression) if path is not None else None
        g.start()
        inp = g.input("e0")
        gc.disable()
        t0 = time.perf_counter()
        for i in range(n):
            inp.send(make(i), ts=i)
        inp.close()
        g.wait_done()
        if capture is not None:
            capture.close()
        dt = time.perf_counter() - t0
        gc.enable()
    finally:
        g.close()
    if path is not None:
        path.unlink()
    return dt


# -- 4. replay -----------------------------------------------------------------------------------


def replay_s(path: Path) -> float:
    """Build, start and run ``ReplaySource (rate: max) -> sink`` over the recording's frames."""
    yaml_text = (f"nodes:\n  - {{ name: rp, kernel: ReplaySource, output_ports: [frames], options: "
                 f"{{ path: '{path}', channel: frames, rate: max }} }}\n"
                 "  - { name: sink, kernel: RecordBenchSink, input_ports: [frames] }\noutput_ports: []\n")
    t0 = time.perf_counter()
    with flowplex.Graph.from_yaml(yaml_text) as g:
        g.start()
        g.wait_done()
    return time.perf_counter() - t0


def recorded_span_s(path: Path) -> float:
    with recording.open(path) as r:
        return r.summary().streams["frames"].wall_span_s


# -- the table -----------------------------------------------------------------------------------


def row(name: str, value: str, baseline: str, ratio: str, target: str, met: bool | None) -> None:
    verdict = "" if met is None else ("met" if met else "NOT MET")
    print(f"{name:<50} {value:>16} {baseline:>16} {ratio:>8} {target:>10} {verdict}")
    sys.stdout.flush()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="about 5x fewer frames and packets (smoke run)")
    parser.add_argument("--dir", default="/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir(),
                        help="where the recordings go (default /dev/shm)")
    args = parser.parse_args()
    logging.getLogger("flowplex").setLevel(logging.ERROR)
    directory = Path(args.dir)
    scale = 0.2 if args.quick else 1.0
    n_frames = max(10, int(100 * scale))
    n_ints = int(300_000 * scale)
    n_chain = max(10, int(60 * scale))
    frame = np.random.default_rng(1).integers(0, 255, FRAME_SHAPE, dtype=np.uint8)
    mb = frame.nbytes / 1e6

    from flowplex import _native

    print(f"# flowplex {flowplex.__version__}; Python {platform.python_version()}; {os.cpu_count()} CPUs; "
          f"{platform.machine()}; scheduler {_native.mode}; files in {directory}; "
          f"load average {os.getloadavg()[0]:.1f} at the start")
    print(f"{'figure':<50} {'flowplex':>16} {'baseline':>16} {'ratio':>8} {'target':>10}")

    # 1. frames, Recorder.write vs tofile (and the capture path, for comparison)
    one = chain_yaml(0)
    best = interleaved({
        "tofile": lambda: tofile_s(directory, frame, n_frames),
        "Recorder.write": lambda: recorder_s(directory, frame, n_frames),
        "record(graph)": lambda: graph_run_s(one, n_frames, lambda i: frame, fresh(directory, "g.mcap"), "none"),
    }, REPEATS)
    base = n_frames * mb / best["tofile"]
    rate = n_frames * mb / best["Recorder.write"]
    row("1080p frames uncompressed, Recorder.write", f"{rate:,.0f} MB/s", f"{base:,.0f} MB/s tofile",
        f"{rate / base:.2f}x", ">= 0.80x", rate / base >= 0.8)
    via = n_frames * mb / best["record(graph)"]
    row("  the same frames sent into a graph, record(graph)", f"{via:,.0f} MB/s", f"{base:,.0f} MB/s tofile",
        f"{via / base:.2f}x", "-", None)

    # 2. small ints through a running graph's recording
    best = interleaved({
        "zstd": lambda: graph_run_s(one, n_ints, int, fresh(directory, "ints.mcap"), "zstd"),
        "none": lambda: graph_run_s(one, n_ints, int, fresh(directory, "ints.mcap"), "none"),
        "alone": lambda: graph_run_s(one, n_ints, int, None, "zstd"),
    }, REPEATS)
    alone = f"{n_ints / best['alone']:,.0f}/s unrec."
    rate = n_ints / best["zstd"]
    row("small int packets, record(graph) (zstd), per second", f"{rate:,.0f}/s", alone,
        f"{rate / 200_000:.2f}x", ">= 200k/s", rate >= 200_000)
    rate = n_ints / best["none"]
    row("  the same, compression none", f"{rate:,.0f}/s", alone, f"{rate / 200_000:.2f}x", "-", None)

    # 3. the 4-stage chain, every edge recorded
    four = chain_yaml(4)
    best = interleaved({
        "recorded": lambda: graph_run_s(four, n_chain, lambda i: frame, fresh(directory, "chain.mcap"), "none"),
        "alone": lambda: graph_run_s(four, n_chain, lambda i: frame, None, "none"),
    }, REPEATS)
    with_fps, without_fps = n_chain / best["recorded"], n_chain / best["alone"]
    cost = 1 - with_fps / without_fps
    row("4-stage 1080p chain, every edge recorded (5 streams)", f"{with_fps:,.1f} frames/s",
        f"{without_fps:,.1f} frames/s", f"{cost:.0%} cost", "<= 10%", cost <= 0.10)

    # 4. replay at rate max, against the span it was recorded in
    path = fresh(directory, "replay.mcap")
    try:
        recorder_s(directory, frame, n_frames, keep=path)
        span = recorded_span_s(path)
        wall = min(replay_s(path) for _ in range(REPEATS + 1))
        row(f"replay --rate max of row 1's recording ({n_frames} frames)", f"{wall * 1e3:,.0f} ms",
            f"{span * 1e3:,.0f} ms recorded", f"{span / wall:.2f}x", ">= 2x", span / wall >= 2)
    except flowplex.FlowplexError as exc:  # the replay kernel is not there, or refuses the file
        row("replay --rate max", f"failed: {exc}"[:60], "", "", ">= 2x", False)
    finally:
        path.unlink(missing_ok=True)


if __name__ == "__main__":
    main()
