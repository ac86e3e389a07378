"""The motion example's frames/s against a hand-written PyAV + numpy loop, in one process run (issue 17).

Usage: python benchmarks/media.py [--size 640x360] [--seconds 4] [--json PATH]

The work, the same in every case: decode an H.264 clip of moving shapes (made here by
``examples/video/make_clip.py``) to RGB, grayscale, difference with the previous frame,
threshold, find and draw boxes around what moved, encode to H.264 (libx264's defaults, or
MPEG-4 where the bundled FFmpeg lacks it). The numpy functions are those of
``examples/video/motion_kernels.py`` in all three cases:

* ``flowplex inline``: ``examples/video/motion.yaml`` as it is (every node on the default
  executor: the source's thread runs the whole chain);
* ``hand-written loop``: one Python thread, ``for frame in container.decode(...)`` doing the
  same calls and encoding with PyAV directly (the baseline; FFmpeg's own decoder and encoder
  threads work for both);
* ``flowplex pool``: the same graph with ``default_executor: pool`` (a ProcessPoolExecutor of 2
  processes, as ``flowplex run --default-executor pool`` does), frames crossing in its
  shared-memory arena.

Each figure is the best of ``REPEATS`` interleaved rounds after a warm-up. ``run`` counts the
whole run, from ``Graph.start`` (or the loop's first line) to the last frame encoded and the
file closed: for the pool that includes starting its worker processes (``spawn``, about a
second here). ``after start`` counts from ``Graph.start`` returning (the workers are up, every
kernel opened) to the end; for the loop it is the same as ``run``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import sys
import tempfile
import time
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path
from types import ModuleType
from typing import Any, Final

import numpy as np
from _rounds import interleaved  # benchmarks/ is on sys.path: the script runs from there

import flowplex

ROOT: Final = Path(__file__).resolve().parents[1]
EXAMPLE: Final = ROOT / "examples" / "video"
REPEATS: Final = 3
LEVEL: Final = 30
"""The threshold of motion.yaml."""

sys.path.insert(0, str(EXAMPLE))
from make_clip import make_clip  # noqa: E402  (examples/video is not a package)


def graph_yaml(clip: Path, out: Path, executor: str | None) -> Path:
    """motion.yaml with this run's input and output (and default executor), written next to ``out``."""
    text = (EXAMPLE / "motion.yaml").read_text()
    text = text.replace("imports: [motion_kernels.py]", f"imports: ['{EXAMPLE / 'motion_kernels.py'}']")
    text = text.replace("path: examples/video/clip.mp4", f"path: '{clip}'")
    text = text.replace("path: examples/video/motion.mp4", f"path: '{out}'")
    if executor:
        text = f"default_executor: {executor}\n{text}"
    path = out.with_suffix(f".{executor or 'inline'}.yaml")
    path.write_text(text)
    return path


class Timed:
    """One round's times: the whole run, and the run after start-up."""

    def __init__(self) -> None:
        self.run_s = 0.0
        self.after_start_s = 0.0
        self.frames = 0


def run_graph(yaml: Path, timed: Timed) -> float:
    """Run the graph once; returns its seconds (start to done) and fills ``timed``."""
    with flowplex.Graph.from_yaml_file(yaml) as g:
        out = g.add_poller("box_count")
        t0 = time.perf_counter()
        g.start()
        started = time.perf_counter()
        count = sum(1 for _ in out)
        g.wait_done()
        t1 = time.perf_counter()
    timed.run_s, timed.after_start_s, timed.frames = t1 - t0, t1 - started, count
    return t1 - t0


def run_loop(kernels: ModuleType, clip: Path, dst: Path, timed: Timed) -> float:
    """The hand-written loop: PyAV decode, the same numpy calls, PyAV encode, on this thread."""
    import av

    from flowplex.media._video_sink import default_codec

    t0 = time.perf_counter()
    count = 0
    with av.open(str(clip)) as src, av.open(str(dst), "w") as sink:
        stream = src.streams.video[0]
        stream.thread_type = "AUTO"
        enc: Any = None
        previous: np.ndarray | None = None
        tb = Fraction(1, 1_000_000)
        first_us: int | None = None
        for frame in src.decode(stream):
            rgb = frame.to_ndarray(format="rgb24")
            h, w = rgb.shape[:2]
            gray = np.empty((h, w, 1), np.uint8)
            kernels.to_gray(rgb, gray)
            diff = np.zeros_like(gray)
            if previous is not None:
                kernels.frame_diff(gray, previous, diff)
            previous = gray
            mask = np.empty_like(diff)
            kernels.threshold(diff, LEVEL, mask)
            kernels.draw_boxes(rgb, kernels.find_boxes(mask), (255, 255, 0))
            if enc is None:
                enc = sink.add_stream(default_codec(av), rate=30)
                enc.width, enc.height, enc.pix_fmt = w, h, "yuv420p"
                enc.codec_context.time_base = enc.time_base = tb
            us = round(frame.pts * stream.time_base * 1_000_000)
            first_us = us if first_us is None else first_us
            out = av.VideoFrame.from_ndarray(rgb, format="rgb24")
            out.pts, out.time_base = us - first_us, tb
            for packet in enc.encode(out):
                sink.mux(packet)
            count += 1
        for packet in enc.encode(None):
            sink.mux(packet)
    t1 = time.perf_counter()
    timed.run_s = timed.after_start_s = t1 - t0
    timed.frames = count
    return t1 - t0


def frames_in(path: Path) -> int:
    import av

    with av.open(str(path)) as container:
        return sum(1 for _ in container.decode(video=0))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", default="640x360", help="WIDTHxHEIGHT of the clip (even numbers)")
    parser.add_argument("--seconds", type=float, default=4.0, help="length of the clip at 25 fps")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON to PATH")
    args = parser.parse_args()
    logging.getLogger("flowplex").setLevel(logging.ERROR)
    from flowplex import _native

    width, height = (int(v) for v in args.size.lower().split("x"))
    with tempfile.TemporaryDirectory(prefix="flowplex-media-bench-") as tmp:
        work = Path(tmp)
        clip = work / "clip.mp4"
        frames = make_clip(clip, width=width, height=height, seconds=args.seconds)
        inline_yaml = graph_yaml(clip, work / "inline.mp4", None)
        pool_yaml = graph_yaml(clip, work / "pool.mp4", "pool")
        with flowplex.Graph.from_yaml_file(inline_yaml):  # imports motion_kernels.py, as the graph names it
            pass
        kernels = sys.modules[flowplex.kernels.kernel_class("MotionGray").__module__]
        print(f"# flowplex {flowplex.__version__}; Python {platform.python_version()}; {os.cpu_count()} CPUs; "
              f"{platform.machine()}; scheduler {_native.mode}; {frames} frames of {width}x{height}; best of "
              f"{REPEATS} interleaved rounds after a warm-up", flush=True)
        timed = {name: Timed() for name in ("flowplex inline", "hand-written loop", "flowplex pool")}
        best_after = dict.fromkeys(timed, float("inf"))
        calls = dict.fromkeys(timed, 0)

        def case(name: str, fn: Callable[[Timed], float]) -> Callable[[], float]:
            def run() -> float:
                t = timed[name]
                seconds = fn(t)
                if t.frames != frames:
                    raise SystemExit(f"{name}: {t.frames} frames out, expected {frames}")
                calls[name] += 1
                if calls[name] > 1:  # as `interleaved` does, the warm-up round does not count
                    best_after[name] = min(best_after[name], t.after_start_s)
                return seconds
            return run

        best = interleaved({
            "flowplex inline": case("flowplex inline", lambda t: run_graph(inline_yaml, t)),
            "hand-written loop": case("hand-written loop", lambda t: run_loop(kernels, clip, work / "loop.mp4", t)),
            "flowplex pool": case("flowplex pool", lambda t: run_graph(pool_yaml, t)),
        }, REPEATS)
        for name in ("inline.mp4", "loop.mp4", "pool.mp4"):
            if frames_in(work / name) != frames:
                raise SystemExit(f"{name}: the encoded file does not hold {frames} frames")
    results: dict[str, dict[str, float]] = {}
    print(f"{'case':<18} {'run frames/s':>13} {'after start frames/s':>21}")
    for name in timed:
        run_fps, after_fps = frames / best[name], frames / best_after[name]
        results[name] = {"run_s": best[name], "run_fps": run_fps, "after_start_s": best_after[name],
                         "after_start_fps": after_fps}
        print(f"{name:<18} {run_fps:>13.1f} {after_fps:>21.1f}")
    base = results["hand-written loop"]
    ratios = {f"{name} / hand-written loop": {"run": results[name]["run_fps"] / base["run_fps"],
                                              "after_start": results[name]["after_start_fps"] / base["run_fps"]}
              for name in ("flowplex inline", "flowplex pool")}
    for name, ratio in ratios.items():
        print(f"{name}: {ratio['run']:.2f}x run, {ratio['after_start']:.2f}x after start")
    if args.json:
        report = {
            "benchmark": "media",
            "machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "arch": platform.machine(),
                        "scheduler": _native.mode, "flowplex": flowplex.__version__},
            "clip": {"frames": frames, "width": width, "height": height},
            "results": results,
            "ratios": ratios,
        }
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
