"""Runs one budget case in a fresh process and prints what it measured, as one JSON line.

Usage: python -m tests.hostile._budget_driver CASE EXECUTOR [ARG]; the tests run it under a
memory cap and a timeout (``run_limited``), so that a budget that does not hold fails the
test instead of the machine. Cases:

- ``burst KIND``: a source emits 8 fresh 1 MiB payloads of KIND (bytes, str, numpy) per call
  into a slow consumer until the queues have held half the bound for 1 s, under the default
  budget (4096 packets, 64 MiB); prints the peaks of ``stats().counted`` and ``counted_bytes``.
- ``flood N``: a source emits N small ints in one ``process`` call into a sink on the same
  executor that checks their order; prints what arrived and the peak of ``counted``.
- ``flood-input N``: the same from a node whose one input packet (a graph-input ``send``)
  triggers the N emits.
- ``flood-pool N``: ``flood N`` with the source alone on a process pool (the sink, on the host,
  is the slower side); also prints the peak of counted packets the pool's receiving thread saw.
- ``flood-poller N``: a source emits N ints in one call into a graph output that the host
  reads only after ``wait_done``: nothing can make room while the call runs, so it must
  finish unheld (lm-flow's run-then-read program), with every packet in order.
"""

from __future__ import annotations

import json
import resource
import sys
import threading
import time

import flowplex
from flowplex.testing import default_executor

IMPORTS = "imports: [tests.hostile.engine_kernels, tests.hostile.budget_kernels]\n"


def _peak_rss_mib() -> float:
    """This program's peak resident memory (VmHWM, not ``ru_maxrss``: see ``_config_driver``)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _sampler(g: flowplex.Graph, peaks: dict[str, int], stop: threading.Event) -> None:
    while not stop.is_set():
        s = g.stats()
        peaks["counted"] = max(peaks["counted"], s.counted)
        peaks["counted_bytes"] = max(peaks["counted_bytes"], s.counted_bytes)
        time.sleep(0.002)


def burst(kind: str) -> dict[str, object]:
    text = f"""{IMPORTS}nodes:
  - {{ name: src, kernel: BudgetBurst, output_ports: [chunks],
      options: {{ kind: {kind}, per_call: 8, calls: 100000 }} }}
  - {{ name: slow, kernel: HostileSlow, input_ports: [chunks], output_ports: [n], options: {{ sleep_us: 1000 }} }}
"""
    peaks = {"counted": 0, "counted_bytes": 0}
    with flowplex.Graph.from_yaml(text) as g:
        base = _peak_rss_mib()
        g.start()
        stop = threading.Event()
        sampler = threading.Thread(target=_sampler, args=(g, peaks, stop))
        sampler.start()
        # Until the queues have held half the bound for 1 s (a pool's start-up on a loaded
        # machine takes part of that), 10 s at most: unbounded, the cap ends it first.
        limit = g.stats().queue_bytes_limit
        full_since = deadline = time.monotonic() + 10
        while (now := time.monotonic()) < min(deadline, full_since + 1.0):
            if peaks["counted_bytes"] >= limit // 2:
                full_since = min(full_since, now)
            time.sleep(0.01)
        stop.set()
        sampler.join()
        processed = next(n.processed for n in g.node_stats() if n.node_name == "slow")
        g.cancel()
    return {**peaks, "limit_bytes": limit, "processed": processed, "grown_mib": _peak_rss_mib() - base}


def flood(count: int, on_input: bool, pool: bool = False) -> dict[str, object]:
    if pool:
        text = f"""{IMPORTS}executors: [{{ name: pool, type: ProcessPoolExecutor, num_processes: 1 }}]
nodes:
  - {{ name: src, kernel: BudgetFlood, executor: pool, output_ports: [a], options: {{ count: {count} }} }}
  - {{ name: sink, kernel: BudgetCheck, input_ports: [a] }}
"""
    elif on_input:
        text = f"""{IMPORTS}input_ports: [go]
nodes:
  - {{ name: src, kernel: BudgetFloodOnInput, input_ports: [go], output_ports: [a], options: {{ count: {count} }} }}
  - {{ name: sink, kernel: BudgetCheck, input_ports: [a] }}
"""
    else:
        text = f"""{IMPORTS}nodes:
  - {{ name: src, kernel: BudgetFlood, output_ports: [a], options: {{ count: {count} }} }}
  - {{ name: sink, kernel: BudgetCheck, input_ports: [a] }}
"""
    peaks = {"counted": 0, "counted_bytes": 0}
    start = time.monotonic()
    with flowplex.Graph.from_yaml(text) as g:
        base = _peak_rss_mib()
        stop = threading.Event()
        sampler = threading.Thread(target=_sampler, args=(g, peaks, stop))
        g.start()
        sampler.start()
        if on_input:
            g.send("go", 0, 0)
            g.close_input("go")
        g.wait_done(timeout=60)
        stop.set()
        sampler.join()
        seen, disorder = g.counter_value("seen"), g.counter_value("disorder")
    return {**peaks, "seen": seen, "disorder": disorder, "grown_mib": _peak_rss_mib() - base,
            "elapsed_s": time.monotonic() - start}


def flood_poller(count: int) -> dict[str, object]:
    text = f"""{IMPORTS}nodes:
  - {{ name: src, kernel: BudgetFlood, output_ports: [y], options: {{ count: {count} }} }}
output_ports: [y]
"""
    start = time.monotonic()
    with flowplex.Graph.from_yaml(text) as g:
        out = g.add_poller("y")
        g.start()
        g.wait_done(timeout=60)
        got = [p.as_int() for p in iter(lambda: out.next(timeout=1), None)]
    return {"seen": len(got), "disorder": int(got != list(range(count))), "elapsed_s": time.monotonic() - start}


def main() -> None:
    case, executor, arg = sys.argv[1], sys.argv[2], sys.argv[3]
    with default_executor(executor):
        if case == "burst":
            result = burst(arg)
        elif case == "flood-poller":
            result = flood_poller(int(arg))
        else:
            result = flood(int(arg), on_input=case == "flood-input", pool=case == "flood-pool")
    print(json.dumps(result))


if __name__ == "__main__":  # a process pool's workers import this module
    main()
