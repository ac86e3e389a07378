"""What live control costs a running graph, and how fast it answers (issue 27's figures).

Usage: python benchmarks/control.py [--count 300000] [--rounds 5] [--graphs 10]

1. Throughput of a 4-stage chain (source, two pass-throughs, sink) with its control socket on:
   no client, one ``echo`` client tapping the middle edge and reading everything it is sent (as
   ``flowplex echo NAME b > /dev/null`` does), and one stalled ``echo`` client that never reads.
   Rounds interleave the three, so the ratios hold on a noisy machine; each ratio is against the
   no-client run of the same round. (No client attached costs nothing per packet: the engine's
   path is untouched; ``benchmarks/instructions.py`` is the figure for that.)
2. ``ps`` and ``top --once`` with ``--graphs`` live graphs (subprocesses running
   ``flowplex run``): the answer time of the library call the commands make
   (``live_graphs()``, one ``top`` request), and the wall time of the commands themselves
   (Python start-up and imports included).
3. ``flowplex attach``: from starting the command in a pseudo-terminal to its first frame
   (the first byte it writes after entering the alternate screen), against a background
   agents server of two agents, one of them with 2,000 lines of history.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

CHAIN = """
nodes:
  - {{ name: src, kernel: RangeSourceKernel, output_ports: [a], options: {{ count: {count} }} }}
  - {{ name: p1, kernel: PassThroughKernel, input_ports: [a], output_ports: [b] }}
  - {{ name: p2, kernel: PassThroughKernel, input_ports: [b], output_ports: [c] }}
  - {{ name: sink, kernel: SinkKernel, input_ports: [c] }}
"""


def _chain_rate(count: int, client: str) -> tuple[float, int]:
    """Packets per second through the chain with ``client`` (none, reader, stalled) on edge ``b``."""
    import flowplex
    g = flowplex.Graph.from_yaml(CHAIN.format(count=count))
    g.pause()  # no packet moves until the tap is attached
    g.start(control=f"bench-{os.getpid()}")
    tapped = 0
    proc = None
    if client != "none":  # the client is another process, as `flowplex echo` is
        proc = subprocess.Popen([sys.executable, "-c", CLIENT, g.control_name or "", client],
                                stdout=subprocess.PIPE, text=True)
        assert proc.stdout is not None
        proc.stdout.readline()  # "attached"
    started = time.perf_counter()
    g.resume()
    g.wait_done(timeout=600)
    elapsed = time.perf_counter() - started
    g.close()
    if proc is not None:
        if client == "stalled":
            proc.kill()
        out, _ = proc.communicate(timeout=30)
        tapped = int(out.split()[-1]) if out.split() else 0
    return count / elapsed, tapped


CLIENT = """
import socket, sys, time
from flowplex.control import connect
c = connect(sys.argv[1], timeout=None)
c.request("echo", stream="b")
if sys.argv[2] == "stalled":
    c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
print("attached", flush=True)
n = 0
if sys.argv[2] == "stalled":
    time.sleep(3600)  # never reads: killed when the run is over
for frame in c.events():
    if isinstance(frame, dict) and frame.get("ev") == "packet":
        n += 1
print(n)
"""


def throughput(count: int, rounds: int) -> None:
    print(f"4-stage chain, {count} packets, {rounds} rounds (rates in packets/s)")
    ratios: dict[str, list[float]] = {"reader": [], "stalled": []}
    for r in range(rounds):
        base, _ = _chain_rate(count, "none")
        line = [f"round {r + 1}: no client {base:,.0f}"]
        for kind in ("reader", "stalled"):
            rate, tapped = _chain_rate(count, kind)
            ratios[kind].append(rate / base)
            line.append(f"{kind} {rate:,.0f} ({rate / base:.3f}x" + (f", {tapped} shown" if kind == "reader" else "")
                        + ")")
        print("  " + "; ".join(line))
    for kind, values in ratios.items():
        med = statistics.median(values)
        print(f"echo client {kind}: median {med:.3f}x the no-client rate ({100 * (1 - med):+.1f}% lost)")


def answers(graphs: int) -> None:
    from flowplex.control import connect, live_graphs

    yaml_path = os.path.join(os.environ["FLOWPLEX_RUNTIME_DIR"], "slow.yaml")
    with open(yaml_path, "w") as f:
        f.write("nodes:\n  - { name: src, kernel: RangeSourceKernel, output_ports: [a], "
                "options: { count: 1000000000 }, rate: 1000 }\n"
                "  - { name: sink, kernel: SinkKernel, input_ports: [a] }\n")
    procs = [subprocess.Popen([sys.executable, "-m", "flowplex", "run", "--name", f"live{i}", yaml_path],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for i in range(graphs)]
    try:
        deadline = time.monotonic() + 60
        while len(live_graphs()) < graphs and time.monotonic() < deadline:
            time.sleep(0.1)
        n = len(live_graphs())
        lib_ps = [_timed(live_graphs) for _ in range(20)]
        with connect("live0") as c:
            lib_top = [_timed(lambda: c.request("top")) for _ in range(20)]
        cli = [sys.executable, "-m", "flowplex"]
        cmd_ps = [_timed(lambda: subprocess.run([*cli, "ps"], capture_output=True, check=True)) for _ in range(5)]
        cmd_top = [_timed(lambda: subprocess.run([*cli, "top", "live0", "--once"], capture_output=True, check=True))
                   for _ in range(5)]
        print(f"{n} live graphs:")
        print(f"  ps answer (live_graphs(), median of 20): {1e3 * statistics.median(lib_ps):.1f} ms")
        print(f"  top answer (one request, median of 20): {1e3 * statistics.median(lib_top):.1f} ms")
        print(f"  flowplex ps command (median of 5, start-up included): {1e3 * statistics.median(cmd_ps):.0f} ms")
        print(f"  flowplex top --once command (median of 5): {1e3 * statistics.median(cmd_top):.0f} ms")
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait(timeout=10)


def attach_first_frame(rounds: int = 5) -> None:
    import pty
    import select

    cli = [sys.executable, "-m", "flowplex"]
    script = "i=0; while [ $i -lt 2000 ]; do i=$((i+1)); echo line $i; done; exec cat"
    started = subprocess.run([*cli, "agents", "-d", "--name", f"bench{os.getpid()}", "--", "sh", "-c", script,
                              "--", "sh", "-c", "exec cat"], capture_output=True, text=True, check=True)
    name = started.stdout.strip()
    times = []
    try:
        time.sleep(1.0)  # the history is written
        for _ in range(rounds):
            pid, fd = pty.fork()
            if pid == 0:
                os.environ["TERM"] = "xterm-256color"
                os.execv(sys.executable, [*cli, "attach", name])
            t0 = time.perf_counter()
            seen = b""
            while b"\x1b[?1049h" not in seen or not seen.split(b"\x1b[?1049h", 1)[1]:
                if select.select([fd], [], [], 10)[0]:
                    seen += os.read(fd, 65536)
                else:
                    break
            times.append(time.perf_counter() - t0)
            os.write(fd, b"d")
            os.waitpid(pid, 0)
            os.close(fd)
    finally:
        subprocess.run([*cli, "stop", name], capture_output=True, check=False)
    print(f"flowplex attach, start to first frame (median of {rounds}): {1e3 * statistics.median(times):.0f} ms "
          f"(min {1e3 * min(times):.0f} ms)")


def _timed(fn: object) -> float:
    started = time.perf_counter()
    fn()  # type: ignore[operator]
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=300_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--graphs", type=int, default=10)
    parser.add_argument("--only", choices=("throughput", "answers", "attach"))
    args = parser.parse_args()
    os.environ.setdefault("FLOWPLEX_RUNTIME_DIR", tempfile.mkdtemp(prefix="fpxb", dir="/tmp"))
    if args.only in (None, "throughput"):
        throughput(args.count, args.rounds)
    if args.only in (None, "answers"):
        answers(args.graphs)
    if args.only in (None, "attach"):
        attach_first_frame()


if __name__ == "__main__":
    main()
