"""flowplex vs lm-lmflow on lm-flow's own workloads, Python kernels, in one process run.

Usage: python benchmarks/vs_lmflow.py [--quick] [--json PATH]

Needs `pip install lm-lmflow` (extra `bench`); it is never a dependency of flowplex. Every
workload builds the same YAML graph on both engines with the same kernel bodies and prints both
figures and the ratio flowplex / lm-lmflow (higher is better for rates, lower for costs).
``--json PATH`` also writes every row and the machine facts to PATH (the documentation site
draws its benchmark charts from that file: docs/benchmarks/vs_lmflow.json).
"""

from __future__ import annotations

import argparse
import datetime
import gc
import json
import logging
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import flowplex

try:
    import lmflow
except ImportError:  # pragma: no cover - the benchmark needs the baseline
    sys.exit("benchmarks/vs_lmflow.py needs lm-lmflow: pip install 'flowplex[bench]'")

ENGINES: dict[str, Any] = {"flowplex": flowplex, "lm-lmflow": lmflow}
REPEATS = 5
"""Best of this many runs per figure: shared 2-core VMs are noisy; the best run is the engine's cost."""
_cache: dict[tuple[str, str, int], float] = {}
ROWS: list[dict[str, Any]] = []
"""Every row printed, in order, for ``--json``."""


def cached_throughput(engine: str, yaml_text: str, count: int, make: Callable[[int], object]) -> float:
    """flowplex runs the same graph for both comparison rows: measure it once."""
    key = (engine, yaml_text, count)
    if key not in _cache:
        _cache[key] = run_throughput(engine, yaml_text, count, make)
    return _cache[key]


def register(mod: Any) -> None:
    """Register the same Python kernels on one engine."""

    @mod.kernel("BenchFwd")
    class BenchFwd(mod.Kernel):  # type: ignore[misc,name-defined]
        def process(self, cc: Any) -> None:
            cc.forward(0, 0)

    @mod.kernel("BenchJoin")
    class BenchJoin(mod.Kernel):  # type: ignore[misc,name-defined]
        def process(self, cc: Any) -> None:
            cc.forward(0, 0)

    @mod.kernel("BenchSink")
    class BenchSink(mod.Kernel):  # type: ignore[misc,name-defined]
        def process(self, cc: Any) -> None:
            pass

    @mod.kernel("BenchInPlace")
    class BenchInPlace(mod.Kernel):  # type: ignore[misc,name-defined]
        def process(self, cc: Any) -> None:
            p = cc.take_input(0)
            a = p.make_mutable()
            a[0, 0, 0] = 255 - a[0, 0, 0]
            cc.emit(0, p)


for _mod in ENGINES.values():
    register(_mod)


def placement(engine: str, mode: str) -> tuple[str, str]:
    """(executors YAML, per-node executor key) for `host` (host thread) or `default`."""
    if mode == "host":
        return "executors: [{ name: host, type: DelegatingExecutor }]\n", "executor: host, "
    return "", ""


def chain_yaml(n: int, engine: str, mode: str, kernel: str = "BenchFwd", sink: bool = True) -> str:
    head, place = placement(engine, mode)
    lines = [f"  - {{ name: f{i}, {place}kernel: {kernel if i == n - 1 else 'BenchFwd'}, "
             f"input_ports: [e{i}], output_ports: [e{i + 1}] }}" for i in range(n)]
    outputs = "[]"
    if sink:
        lines.append(f"  - {{ name: sink, {place}kernel: BenchSink, input_ports: [e{n}] }}")
    else:
        outputs = f"[e{n}]"
    return head + "nodes:\n" + "\n".join(lines) + f"\ninput_ports: [e0]\noutput_ports: {outputs}\n"


def diamond_yaml(engine: str, mode: str) -> str:
    head, place = placement(engine, mode)
    return head + f"""nodes:
  - {{ name: l, {place}kernel: BenchFwd, input_ports: [x], output_ports: [a] }}
  - {{ name: r, {place}kernel: BenchFwd, input_ports: [x], output_ports: [b] }}
  - {{ name: j, {place}kernel: BenchJoin, input_ports: [a, b], output_ports: [y] }}
  - {{ name: sink, {place}kernel: BenchSink, input_ports: [y] }}
input_ports: [x]
output_ports: []
"""


def run_throughput(engine: str, yaml_text: str, count: int, make: Callable[[int], object]) -> float:
    """Packets per second: send `count` packets, close, wait until done."""
    mod = ENGINES[engine]
    best = 0.0
    for _ in range(REPEATS):
        g = mod.Graph.from_yaml(yaml_text)
        try:
            g.start()
            inp = g.input("e0" if "e0" in yaml_text else "x")
            gc.disable()
            t0 = time.perf_counter()
            for i in range(count):
                inp.send(make(i), ts=i)
            inp.close()
            g.wait_done()
            dt = time.perf_counter() - t0
            gc.enable()
        finally:
            g.close()
        best = max(best, count / dt)
    return best


def run_latency(engine: str, mode: str, samples: int) -> tuple[float, float]:
    """Idle 4-stage chain: send one packet, wait for it at the poller; p50/p99 in µs."""
    mod = ENGINES[engine]
    g = mod.Graph.from_yaml(chain_yaml(4, engine, mode, sink=False))
    times = []
    try:
        out = g.add_poller("e4")
        g.start()
        inp = g.input("e0")
        for i in range(samples):
            t0 = time.perf_counter()
            inp.send(i, ts=i)
            p = out.next()
            times.append(time.perf_counter() - t0)
            assert p is not None
        inp.close()
        g.wait_done()
    finally:
        g.close()
    times.sort()
    return times[len(times) // 2] * 1e6, times[int(len(times) * 0.99)] * 1e6


def import_ms(module: str) -> float:
    """Best-of-REPEATS cumulative ``-X importtime`` of ``import module`` in a fresh interpreter, in ms."""
    best = float("inf")
    for _ in range(REPEATS):
        result = subprocess.run([sys.executable, "-X", "importtime", "-c", f"import {module}"],
                                capture_output=True, text=True, check=True)
        last = [line for line in result.stderr.splitlines() if line.rstrip().endswith(f"| {module}")][-1]
        best = min(best, int(last.split("|")[1]) / 1000)
    return best


def import_and_graph_ms(module: str) -> float:
    """Best-of-REPEATS wall time of ``import module`` plus the first use of ``module.Graph``, in ms.

    flowplex loads its engine on first use of an engine name, so this is the honest start-up
    cost of a program that builds a graph.
    """
    code = f"import time; t = time.perf_counter(); import {module}; {module}.Graph; print(time.perf_counter() - t)"
    best = float("inf")
    for _ in range(REPEATS):
        result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        best = min(best, float(result.stdout) * 1000)
    return best


def build_ms(engine: str, n: int) -> float:
    """Best-of-REPEATS time to build an ``n``-node chain graph from YAML (parse, plan, instantiate), in ms."""
    mod = ENGINES[engine]
    text = chain_yaml(n, engine, "default")
    best = float("inf")
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        g = mod.Graph.from_yaml(text)
        best = min(best, time.perf_counter() - t0)
        g.close()
    return best * 1000


def row(name: str, fp: float, lm: float, unit: str, higher_is_better: bool = True) -> None:
    ratio = fp / lm if lm else float("inf")
    better = "x faster" if higher_is_better else "x cost"
    ROWS.append({"workload": name, "flowplex": fp, "lm-lmflow": lm, "unit": unit, "ratio": ratio,
                 "higher_is_better": higher_is_better})
    print(f"{name:<64} {fp:>12.1f} {lm:>12.1f} {unit:<10} {ratio:>7.2f}{better}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer packets (smoke run)")
    parser.add_argument("--json", metavar="PATH", help="also write the rows and the machine facts to PATH")
    args = parser.parse_args()
    # Rows that pump a DelegatingExecutor only in wait_done queue every send first, past the
    # soft backlog limit on purpose: its warnings would bury the table.
    logging.getLogger("flowplex").setLevel(logging.ERROR)
    scale = 0.2 if args.quick else 1.0
    n_int = int(20000 * scale)
    n_pool = int(4000 * scale)
    n_frames = int(300 * scale)

    print(f"# flowplex {flowplex.__version__} vs lm-lmflow {lmflow.__version__}; Python {platform.python_version()}; "
          f"{os.cpu_count()} CPUs; {platform.machine()}")
    from flowplex import _native

    flowplex.Graph  # noqa: B018  (loads the scheduler, so the mode below is the one measured)
    print(f"# flowplex scheduler: {_native.mode} (FLOWPLEX_PURE_PYTHON=1 measures the Python sources)")
    print("# flowplex runs every row on its default executor (the calling thread), except the rows 'both on a")
    print("# DelegatingExecutor'; lm-lmflow on a DelegatingExecutor pumped by the host thread ('host thread')")
    print("# or on its default thread pool.")
    print(f"{'workload':<64} {'flowplex':>12} {'lm-lmflow':>12} {'unit':<10} {'ratio':>8}")

    frame = np.zeros((1080, 1920, 3), dtype=np.uint8)
    results: dict[tuple[str, str, str], float] = {}
    for fp_mode, lm_mode, label in (("default", "host", "host thread"), ("default", "default", "default executor")):
        for n in (1, 4, 16):
            count = n_int
            fp = cached_throughput("flowplex", chain_yaml(n, "flowplex", fp_mode), count, int)
            count = n_int if lm_mode == "host" else n_pool
            lm = run_throughput("lm-lmflow", chain_yaml(n, "lm-lmflow", lm_mode), count, int)
            results[("flowplex", label, str(n))] = fp
            results[("lm-lmflow", label, str(n))] = lm
            row(f"chain N={n}, int packets ({label})", fp, lm, "pkt/s")
        hop_fp = (1 / results[("flowplex", label, "16")] - 1 / results[("flowplex", label, "1")]) / 15 * 1e6
        hop_lm = (1 / results[("lm-lmflow", label, "16")] - 1 / results[("lm-lmflow", label, "1")]) / 15 * 1e6
        row(f"cost per extra hop ({label})", hop_fp, hop_lm, "us/hop", higher_is_better=False)

    # The same YAML on both engines: every node on a DelegatingExecutor pumped by the host thread
    # (lm-lmflow's figures are the 'host thread' rows above, from this run).
    label = "both on a DelegatingExecutor"
    for n in (1, 16):
        fp = cached_throughput("flowplex", chain_yaml(n, "flowplex", "host"), n_int, int)
        results[("flowplex", label, str(n))] = fp
        results[("lm-lmflow", label, str(n))] = lm = results[("lm-lmflow", "host thread", str(n))]
        row(f"chain N={n}, int packets ({label})", fp, lm, "pkt/s")
    hop_fp = (1 / results[("flowplex", label, "16")] - 1 / results[("flowplex", label, "1")]) / 15 * 1e6
    hop_lm = (1 / results[("lm-lmflow", label, "16")] - 1 / results[("lm-lmflow", label, "1")]) / 15 * 1e6
    row(f"cost per extra hop ({label}, host thread)", hop_fp, hop_lm, "us/hop", higher_is_better=False)

    for lm_mode, label in (("host", "host thread"), ("default", "default executor")):
        fp = cached_throughput("flowplex", diamond_yaml("flowplex", "default"), n_int, int)
        count = n_int if lm_mode == "host" else n_pool
        lm = run_throughput("lm-lmflow", diamond_yaml("lm-lmflow", lm_mode), count, int)
        row(f"diamond with a sync join ({label})", fp, lm, "pkt/s")

    fp50, fp99 = run_latency("flowplex", "default", int(3000 * scale))
    for lm_mode, label in (("host", "host thread"), ("default", "default executor")):
        lm50, lm99 = run_latency("lm-lmflow", lm_mode, int(3000 * scale))
        row(f"idle 4-stage chain latency p50 ({label})", fp50, lm50, "us", higher_is_better=False)
        row(f"idle 4-stage chain latency p99 ({label})", fp99, lm99, "us", higher_is_better=False)

    for lm_mode, label in (("host", "host thread"), ("default", "default executor")):
        fp = cached_throughput("flowplex", chain_yaml(4, "flowplex", "default"), n_frames, lambda i: frame)
        lm = run_throughput("lm-lmflow", chain_yaml(4, "lm-lmflow", lm_mode), n_frames, lambda i: frame)
        row(f"1080p uint8 frames, 4 forwarding stages ({label})", fp, lm, "frames/s")

    n_inplace = max(10, int(60 * scale))
    fp = run_throughput("flowplex", chain_yaml(4, "flowplex", "default", kernel="BenchInPlace"), n_inplace,
                        lambda i: np.zeros((1080, 1920, 3), dtype=np.uint8))
    lm = run_throughput("lm-lmflow", chain_yaml(4, "lm-lmflow", "host", kernel="BenchInPlace"), n_inplace,
                        lambda i: np.zeros((1080, 1920, 3), dtype=np.uint8))
    row("1080p frames, one stage writes in place (host)", fp, lm, "frames/s")
    print("# frames for the in-place row are allocated per send (np.zeros), on both engines")

    row("import time (-X importtime, cumulative)", import_ms("flowplex"), import_ms("lmflow"), "ms",
        higher_is_better=False)
    row("import + first use of Graph", import_and_graph_ms("flowplex"), import_and_graph_ms("lmflow"), "ms",
        higher_is_better=False)
    row("build a 1,000-node chain from YAML", build_ms("flowplex", 1000), build_ms("lm-lmflow", 1000), "ms",
        higher_is_better=False)
    print("# targets: import flowplex < 150 ms; 1,000-node build < 1000 ms")
    if args.json:
        write_json(args.json, quick=args.quick)


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo (Linux), else what ``platform`` knows."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def write_json(path: str, *, quick: bool) -> None:
    """Write the rows printed so far and the facts of this run (machine, versions, date) to ``path``."""
    from flowplex import _native

    doc = {
        "benchmark": "benchmarks/vs_lmflow.py",
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "quick": quick,
        "machine": {"cpus": os.cpu_count(), "cpu": cpu_model(), "arch": platform.machine(),
                    "system": platform.system(), "python": platform.python_version()},
        "versions": {"flowplex": flowplex.__version__, "lm-lmflow": lmflow.__version__},
        "flowplex_scheduler": _native.mode,
        "rows": ROWS,
    }
    with open(path, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")


if __name__ == "__main__":
    main()
