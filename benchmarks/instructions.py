"""Instructions per packet of flowplex's hot paths, counted by valgrind's callgrind.

Usage: python benchmarks/instructions.py [--counts 2000 6000] [WORKLOAD ...]

Wall-clock rates on a shared VM move by several per cent from run to run; instruction counts
move by a few hundred per packet at most, so they show a change to the per-packet path that a
timing cannot. Each workload (``vs_lmflow``'s graphs and ``run_throughput``, one repeat) runs
in a fresh ``valgrind --tool=callgrind`` process at two packet counts; the difference divided
by the difference of the counts is the cost of one packet, start-up and shutdown cancelled
out. Needs valgrind; numpy's OpenBLAS threads are kept to one (they spin and add counts)
and the hash seed fixed (so that runs differ only in the packets).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
WORKLOADS = ("chain1", "chain16", "deleg1", "deleg16", "diamond")
"""``chainN``: default executor; ``delegN``: every node on a DelegatingExecutor; the diamond."""


def _worker(workload: str, count: int) -> None:
    sys.path.insert(0, HERE)
    import vs_lmflow as bench

    bench.REPEATS = 1
    if workload == "diamond":
        text = bench.diamond_yaml("flowplex", "default")
    else:
        mode = "host" if workload.startswith("deleg") else "default"
        text = bench.chain_yaml(int(workload.removeprefix("chain").removeprefix("deleg")), "flowplex", mode)
    bench.run_throughput("flowplex", text, count, int)


def _count(workload: str, count: int) -> int:
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", PYTHONHASHSEED="0")
    cmd = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
           sys.executable, os.path.abspath(__file__), "--worker", workload, str(count)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
    found = re.search(r"Collected : (\d+)", done.stderr)
    if found is None:
        msg = f"no callgrind total for {workload} x{count}:\n{done.stderr[-2000:]}"
        raise RuntimeError(msg)
    return int(found.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("workloads", nargs="*", default=list(WORKLOADS))
    parser.add_argument("--counts", nargs=2, type=int, default=[2000, 6000])
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        _worker(args.worker[0], int(args.worker[1]))
        return
    import flowplex
    from flowplex import _native

    flowplex.Graph  # noqa: B018  (loads the scheduler, so the mode below is the one measured)
    low, high = args.counts
    jobs = [(w, c) for w in args.workloads for c in (low, high)]
    with ThreadPoolExecutor(args.jobs) as pool:
        totals = dict(zip(jobs, pool.map(lambda job: _count(*job), jobs), strict=True))
    print(f"# flowplex scheduler: {_native.mode}; instructions per packet, counts {low} and {high}")
    for w in args.workloads:
        print(f"{w:<10} {(totals[(w, high)] - totals[(w, low)]) / (high - low):>10.0f}")


if __name__ == "__main__":
    main()
