"""Peak memory of a slow consumer: 1000 1080p frames through a 4-stage chain.

Usage: python benchmarks/memory_slow_consumer.py [--frames N] [--sink-ms MS] [--poller-ms MS] [--quick]

The graph is ``x -> f1 -> f2 -> f3 -> sink``: three forwarding stages and a sink that sleeps
``--sink-ms`` per frame, so a sender that pushes 1080x1920x3 uint8 frames as fast as it can
outruns it. Every scenario runs in a fresh subprocess (peaks never mix) and reports the peak
RSS above the baseline taken just before the first send (after imports, graph build, start).

Three placements of the slow consumer:

* ``pool``: the sink runs on a one-thread ThreadPoolExecutor, so the sender really can run
  ahead and the engine's queue bounds are what limits memory;
* ``default``: every node on the default executor. flowplex's default runs downstream work on
  the sending thread (memory is then bounded trivially); lm-lmflow's default is a thread pool.
* ``poller``: no sink: the chain ends in a graph output that the main thread reads with a
  poller, sleeping ``--poller-ms`` after each frame, while a producer thread sends. The
  backlog then waits in the poller's queue, which counts toward the same bounds.

Two configurations: default settings, and ``max_queued_packets: 8``. lm-lmflow (``pip install
lm-lmflow``) runs in the same invocation when it is installed; otherwise its column says "-".
The flowplex target is at most 100 MB above baseline with default settings.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import threading
import time
from typing import Any

SHAPE = (1080, 1920, 3)
FRAME_MB = 1080 * 1920 * 3 / 1e6
PLACEMENTS = ("pool", "default", "poller")
CONFIGS = ("default settings", "max_queued_packets: 8")
TARGET_MB = 100.0


def _status_kb(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


class PeakSampler:
    """Peak RSS from a 1 ms sampling thread and, where the kernel allows, VmHWM after a reset."""

    def __init__(self) -> None:
        self.hwm_reset = False
        try:  # "5" resets the peak RSS (VmHWM) of this process (Linux >= 4.0)
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")
            self.hwm_reset = True
        except OSError:
            pass
        self.baseline_kb = _status_kb("VmRSS")
        self.peak_kb = self.baseline_kb
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.001):
            self.peak_kb = max(self.peak_kb, _status_kb("VmRSS"))

    def stop(self) -> float:
        """Stop sampling; the peak above baseline in MB."""
        self._stop.set()
        self._thread.join()
        peak = max(self.peak_kb, _status_kb("VmHWM") if self.hwm_reset else 0)
        return (peak - self.baseline_kb) * 1024 / 1e6


def _yaml(placement: str, config: str, sink_ms: int) -> str:
    head = "max_queued_packets: 8\n" if config == CONFIGS[1] else ""
    if placement == "poller":
        return head + """nodes:
  - { name: f1, kernel: MemForward, input_ports: [x], output_ports: [a] }
  - { name: f2, kernel: MemForward, input_ports: [a], output_ports: [b] }
  - { name: f3, kernel: MemForward, input_ports: [b], output_ports: [c] }
  - { name: f4, kernel: MemForward, input_ports: [c], output_ports: [y] }
input_ports: [x]
output_ports: [y]
"""
    sink_place = ""
    if placement == "pool":
        head += "executors: [{ name: slow, type: ThreadPoolExecutor, num_threads: 1 }]\n"
        sink_place = "executor: slow, "
    return head + f"""nodes:
  - {{ name: f1, kernel: MemForward, input_ports: [x], output_ports: [a] }}
  - {{ name: f2, kernel: MemForward, input_ports: [a], output_ports: [b] }}
  - {{ name: f3, kernel: MemForward, input_ports: [b], output_ports: [c] }}
  - {{ name: sink, {sink_place}kernel: MemSlowSink, input_ports: [c], options: {{ ms: {sink_ms} }} }}
input_ports: [x]
"""


def child(engine: str, placement: str, config: str, frames: int, sink_ms: int) -> dict[str, Any]:
    """One scenario, in this (fresh) process."""
    import numpy as np

    mod: Any
    if engine == "flowplex":
        import flowplex as mod
    else:
        import lmflow as mod
    seen = [0]

    @mod.kernel("MemForward")
    class MemForward(mod.Kernel):  # type: ignore[misc,name-defined]
        def process(self, cc: Any) -> None:
            cc.forward(0, 0)

    @mod.kernel("MemSlowSink")
    class MemSlowSink(mod.Kernel):  # type: ignore[misc,name-defined]
        def process(self, cc: Any) -> None:
            time.sleep(cc.option_int("ms", 5) / 1000)
            seen[0] += 1

    g = mod.Graph.from_yaml(_yaml(placement, config, sink_ms))
    poller = g.add_poller("y") if placement == "poller" else None
    try:
        g.start()
        warm = np.full(SHAPE, 1, np.uint8)  # page in numpy's allocator paths before the baseline
        del warm
        sampler = PeakSampler()
        t0 = time.perf_counter()
        sent = [0.0]
        failure: list[str] = []

        def produce() -> None:
            try:
                for i in range(frames):
                    frame = np.full(SHAPE, i & 255, np.uint8)
                    g.send("x", frame, ts=i)
                    del frame
                sent[0] = time.perf_counter() - t0
                g.close_all_inputs()
            except Exception as exc:  # reported in the table (lm-lmflow's false deadlock, say)
                failure.append(f"{type(exc).__name__}: {exc}"[:160])
                g.close_all_inputs()

        if poller is None:
            produce()
        else:
            producer = threading.Thread(target=produce)
            producer.start()
            while True:
                try:
                    p = poller.next(timeout=1.0)
                except mod.Timeout:
                    continue
                if p is None:
                    if producer.is_alive():  # lm-lmflow's next() can return None before the end
                        time.sleep(0.001)
                        continue
                    break
                seen[0] += 1
                del p
                time.sleep(sink_ms / 1000)
            producer.join()
        if failure:
            raise RuntimeError(failure[0])
        sent_s = sent[0]
        g.wait_done()
        total_s = time.perf_counter() - t0
        peak_mb = sampler.stop()
    finally:
        g.close()
    return {"peak_mb": peak_mb, "sent_s": sent_s, "total_s": total_s, "received": seen[0],
            "hwm_reset": sampler.hwm_reset}


def run_scenario(engine: str, placement: str, config: str, frames: int, sink_ms: int) -> dict[str, Any] | None:
    cmd = [sys.executable, __file__, "--child", engine, placement, config, str(frames), str(sink_ms)]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        last = done.stderr.strip().splitlines()[-1:] or ["no output"]
        print(f"  {engine} / {placement} / {config}: failed (exit {done.returncode}): {last[0][:300]}")
        return None
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        engine, placement, config, frames, sink_ms = sys.argv[2:7]
        print(json.dumps(child(engine, placement, config, int(frames), int(sink_ms))))
        sys.stdout.flush()
        os._exit(0)  # lm-lmflow 0.3.3 can abort in interpreter teardown; the result is out already

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--frames", type=int, default=1000)
    parser.add_argument("--sink-ms", type=int, default=10, help="sleep per frame in the slow consumer")
    parser.add_argument("--poller-ms", type=int, default=5, help="sleep per frame of the slow poller reader")
    parser.add_argument("--quick", action="store_true", help="200 frames instead of 1000")
    args = parser.parse_args()
    frames = 200 if args.quick else args.frames

    import numpy as np

    import flowplex

    try:
        import lmflow

        engines = ["flowplex", "lm-lmflow"]
        baseline = f"lm-lmflow {lmflow.__version__}"
    except ImportError:
        engines = ["flowplex"]
        baseline = "lm-lmflow not installed"
    print(f"# flowplex {flowplex.__version__} vs {baseline}; Python {platform.python_version()}; "
          f"numpy {np.__version__}; {os.cpu_count()} CPUs; {platform.machine()}")
    print(f"# {frames} frames of {SHAPE} uint8 ({FRAME_MB:.1f} MB each, {frames * FRAME_MB / 1e3:.1f} GB in all); "
          f"4-stage chain; sink sleeps {args.sink_ms} ms/frame, poller reader {args.poller_ms} ms/frame; "
          "peak RSS above baseline, MB")
    print()
    header = f"{'sink placement':<15} {'config':<24} {'flowplex MB':>12} {'lm-lmflow MB':>13} {'ratio':>7}   notes"
    print(header)
    print("-" * len(header))
    worst_default = 0.0
    for placement in PLACEMENTS:
        for config in CONFIGS:
            delay = args.poller_ms if placement == "poller" else args.sink_ms
            results = {e: run_scenario("flowplex" if e == "flowplex" else "lmflow", placement, config, frames,
                                       delay) for e in engines}
            fp, lm = results.get("flowplex"), results.get("lm-lmflow")
            fp_mb = f"{fp['peak_mb']:.0f}" if fp else "failed"
            lm_mb = f"{lm['peak_mb']:.0f}" if lm else ("-" if len(engines) == 1 else "failed")
            ratio = f"{lm['peak_mb'] / max(fp['peak_mb'], 1.0):.1f}x" if fp and lm else "-"
            notes = []
            for name, r in results.items():
                if r:
                    notes.append(f"{name}: sent in {r['sent_s']:.1f} s, done in {r['total_s']:.1f} s, "
                                 f"{r['received']}/{frames} received")
            print(f"{placement:<15} {config:<24} {fp_mb:>12} {lm_mb:>13} {ratio:>7}   {'; '.join(notes)}")
            if config == CONFIGS[0]:
                complete = fp is not None and fp["received"] == frames  # every frame delivered, too
                worst_default = max(worst_default, fp["peak_mb"] if complete else float("inf"))
    print()
    print("ratio = lm-lmflow peak / flowplex peak (higher means flowplex uses less memory)")
    verdict = "meets" if worst_default <= TARGET_MB else "MISSES"
    print(f"flowplex with default settings: worst peak {worst_default:.0f} MB above baseline, every frame "
          f"delivered -- {verdict} the {TARGET_MB:.0f} MB target")


if __name__ == "__main__":
    main()
