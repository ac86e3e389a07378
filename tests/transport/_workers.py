"""Code that runs in child processes (spawned, so it must be importable by name)."""

from __future__ import annotations

import hashlib
import os
import random
import sys
import time
from multiprocessing.connection import Connection

from flowplex.transport import Ring, _ordering

MAX_LEN = 4096


def messages(seed: int, n: int) -> tuple[list[int], bytes]:
    """The lengths and the random pool a stress producer draws its messages from."""
    rng = random.Random(seed)
    return [rng.randint(1, MAX_LEN) for _ in range(n)], rng.randbytes(1 << 16)


def chain(h: hashlib._Hash, data: bytes) -> None:
    """Fold one message into an order-sensitive content hash."""
    h.update(len(data).to_bytes(4, "little"))
    h.update(data)


def stress_producer(name: str, k: int, n: int, weak: bool, out: Connection) -> None:
    """Send ``n`` random messages (1 B..4 KiB) on stream ``k``; report the content hash."""
    if weak:
        _ordering.set_memory_model("weak")
    lengths, pool = messages(k, n)
    h = hashlib.blake2b()
    with Ring.attach(name) as ring, ring.producer() as p:
        for i, length in enumerate(lengths):
            off = (i * 7919) % (len(pool) - length)
            data = pool[off : off + length]
            chain(h, data)
            p.send(data, stream_id=k, timeout=60)
    out.send((k, n, h.hexdigest()))
    out.close()


def send_then_hang(name: str, count: int, ready: Connection) -> None:
    """Send ``count`` messages, say so, then wait to be killed."""
    ring = Ring.attach(name)
    p = ring.producer()
    for i in range(count):
        p.send(b"before death %d" % i)
    ready.send(p.lane)
    time.sleep(600)


def consume_then_hang(name: str, ready: Connection) -> None:
    """Become the ring's consumer, read nothing, wait to be killed."""
    ring = Ring.attach(name)
    ring.consumer()
    ready.send(os.getpid())
    time.sleep(600)


def create_then_hang() -> None:
    """Entry point for ``python -c``: create a ring, print its name, wait to be killed."""
    ring = Ring.create(capacity=8)
    sys.stdout.write(ring.name + "\n")
    sys.stdout.flush()
    time.sleep(600)


SINK_GRAPH = """
nodes:
  - name: to_ring
    kernel: RingSink
    input_ports: [text]
    options: {{ ring: {ring}, agent_type: user, stream_id: 7 }}
input_ports: [text]
"""


def sink_graph(ring: str, count: int) -> None:
    """A graph whose input goes into ``ring``: even packets str, odd bytes (fragmented)."""
    import flowplex
    from flowplex.transport import _kernels  # noqa: F401

    g = flowplex.Graph.from_yaml(SINK_GRAPH.format(ring=ring))
    g.start()
    for i in range(count):
        g.send("text", f"token {i} " + "é" * i if i % 2 == 0 else bytes([i]) * 300, ts=i * 10)
    g.close_all_inputs()
    g.wait_done()
