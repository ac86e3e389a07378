"""A process-pool graph that keeps running while another process fills ``/dev/shm``.

Run inside a private mount namespace whose ``/dev/shm`` is a small tmpfs of its own
(``test_arena_full`` starts it under ``unshare``): the real ``/dev/shm`` is never filled.
Prints one line, ``outputs N`` or ``error <Type>: <message>``, and exits 0 (a signal death is
the finding).

Modes: ``host`` (the host writes numpy frames into the arena), ``worker`` (a worker's kernel
makes its frames with ``new_buffer``); with ``-truncate`` (``host-truncate``...) the arena's file
is truncated to 0 instead of a fill (no namespace needed). ``CLI_GRAPH`` is the same for ``flowplex run``: the source
``ArenaFullSource`` fills ``/dev/shm`` (from another process) after its first frames, and
``ArenaFullKeep`` keeps every frame alive, so that each new one needs pages never touched.
"""

from __future__ import annotations

import glob
import os
import subprocess
import sys

import numpy as np

import flowplex
from flowplex.errors import FlowplexError

from ..processes import kernels as kernels  # PForward, PMake: workers import them by reference

MIB = 1 << 20
BEFORE = 2
"""Frames sent (and received) before the fill: the arena works."""
AFTER = 24
"""Frames sent after the fill, all in flight at once: each needs arena pages never touched."""

_FILL = r"""
import errno, os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
chunk = b"\xff" * (1 << 20)
while True:
    try:
        os.write(fd, chunk)
    except OSError as exc:
        if exc.errno != errno.ENOSPC:
            raise
        break
chunk = b"\xff" * 4096
while True:
    try:
        os.write(fd, chunk)
    except OSError:
        break
print(os.fstat(fd).st_size)
"""


CLI_GRAPH = """
executors: [{ name: pool, type: ProcessPoolExecutor, num_processes: 1 }]
nodes:
  - { name: src, kernel: ArenaFullSource, output_ports: [x] }
  - { name: fwd, kernel: PForward, input_ports: [x], output_ports: [y], executor: pool }
  - { name: keep, kernel: ArenaFullKeep, input_ports: [y], output_ports: [n] }
output_ports: [n]
"""


@flowplex.kernel("ArenaFullSource")
class ArenaFullSource(flowplex.Kernel):
    """Source: ``BEFORE + AFTER`` numpy frames of 1 MiB; fills ``/dev/shm`` after the first ``BEFORE``."""

    def process(self, cc: flowplex.Context) -> None:
        ts = cc.input_timestamp
        if ts >= BEFORE + AFTER:
            cc.source_done()
            return
        if ts == BEFORE:
            fill(os.path.join("/dev/shm", f"filler-{os.getpid()}"))
        cc.emit(0, np.full(MIB, ts % 251, np.uint8))


@flowplex.kernel("ArenaFullKeep")
class ArenaFullKeep(flowplex.Kernel):
    """Keeps every frame it gets (so the arena grows); emits how many it has, checking each."""

    def open(self, cc: flowplex.Context) -> None:
        self.kept: list[object] = []

    def process(self, cc: flowplex.Context) -> None:
        arr = cc.input(0).as_numpy()
        if not (arr == cc.input_timestamp % 251).all():
            msg = f"frame {cc.input_timestamp} arrived wrong"
            raise ValueError(msg)
        self.kept.append(arr)
        cc.emit(0, len(self.kept))


_CONSUME = r"""
import sys
from flowplex.errors import FlowplexError
from flowplex.transport import Ring
c = Ring.attach(sys.argv[1]).consumer()
n = 0
try:
    while c.recv(timeout=2).data == b"y" * 200:
        n += 1
except FlowplexError as exc:
    print(n, type(exc).__name__)
"""


def fill(path: str) -> int:
    """Fill the tmpfs from another process; the bytes it took."""
    out = subprocess.run([sys.executable, "-c", _FILL, path], capture_output=True, text=True, check=True, timeout=60)
    return int(out.stdout)


def graph(mode: str) -> str:
    node = ("{ name: fwd, kernel: PForward, input_ports: [x], output_ports: [y], executor: pool }" if mode == "host"
            else "{ name: make, kernel: PMake, input_ports: [x], output_ports: [y], executor: pool }")
    return ("executors: [{ name: pool, type: ProcessPoolExecutor, num_processes: 1 }]\n"
            f"nodes:\n  - {node}\ninput_ports: [x]\noutput_ports: [y]\n")


def frame(mode: str, ts: int) -> object:
    return np.full(MIB, ts % 251, np.uint8) if mode == "host" else ts


def main(mode: str) -> None:
    got = 0
    filler = os.path.join("/dev/shm", f"filler-{os.getpid()}")
    if mode == "start":  # full before the pool starts: its arena cannot even reserve its tables
        fill(filler)
        mode = "host"
    truncate = mode.endswith("-truncate")  # the arena's file truncated to 0 instead of a fill
    mode = mode.removesuffix("-truncate")
    try:
        with flowplex.Graph.from_yaml(graph(mode)) as g:
            out = g.add_poller("y")
            g.start()
            for ts in range(BEFORE):
                g.send("x", frame(mode, ts), ts=ts)
                out.next(timeout=20)
                got += 1
            if truncate:  # another process's doing, as far as the pool can tell
                (path,) = (p for p in glob.glob("/dev/shm/flowplex-arena-*") if f"-{os.getpid()}-" in p)
                os.truncate(path, 0)
            elif not os.path.exists(filler):
                fill(filler)
            sent = BEFORE
            try:
                for ts in range(BEFORE, BEFORE + AFTER):
                    g.send("x", frame(mode, ts), ts=ts)
                    sent += 1
            except FlowplexError as exc:
                # The host could not write frame `sent`: the frames before it must still arrive.
                error = exc
                for ts in range(BEFORE, sent):
                    arr = out.next(timeout=20).as_numpy()
                    if not (arr == ts % 251).all():
                        print(f"wrong frame {ts}")
                        return
                    got += 1
                raise error from None
            kept = []
            for ts in range(BEFORE, BEFORE + AFTER):
                arr = out.next(timeout=20).as_numpy()
                if mode == "host" and not (arr == ts % 251).all():
                    print(f"wrong frame {ts}")
                    return
                kept.append(arr)  # every frame stays in flight
                got += 1
            g.close_all_inputs()
            g.wait_done(timeout=20)
    except FlowplexError as exc:
        print(f"error after {got} outputs {type(exc).__name__}: {exc}".replace("\n", " | "))
        return
    print(f"outputs {got}")


def ring(mode: str) -> None:
    """A ring on a full ``/dev/shm``: at ``create``, at the first ``producer()``, or ``send``s
    into a lane claimed before the fill. Prints what happened."""
    from flowplex.transport import Ring

    filler = os.path.join("/dev/shm", f"filler-{os.getpid()}")
    if mode == "create":
        fill(filler)
    try:
        with Ring.create(capacity=4096, max_producers=4) as r:
            if mode == "claim":
                fill(filler)
            p = r.producer()
            if mode == "send":
                fill(filler)
            sent = sum(p.send(b"y" * 200) for _ in range(r.capacity))
            p.close()
            # Another process reads: it sees the file's pages, not this process's mapping.
            got = subprocess.run([sys.executable, "-c", _CONSUME, r.name], capture_output=True, text=True,
                                 check=True, timeout=60).stdout.strip()
            print(f"sent {sent} received {got}")
    except (FlowplexError, OSError) as exc:
        print(f"error {type(exc).__name__}: {exc}")


if __name__ == "__main__":
    if sys.argv[1].startswith("ring-"):
        ring(sys.argv[1].removeprefix("ring-"))
    else:
        main(sys.argv[1])
