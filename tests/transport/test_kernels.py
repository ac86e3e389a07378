"""RingSink and RingSource: a graph in one process sends text and bytes to a graph in another."""

from __future__ import annotations

import multiprocessing as mp
import os
import time

import flowplex
from flowplex.transport import (
    AgentType,
    _kernels,  # noqa: F401  (registers RingSink and RingSource)
)

from . import _workers

CTX = mp.get_context("spawn")

SOURCE_GRAPH = """
nodes:
  - name: from_ring
    kernel: RingSource
    output_ports: [received]
    options: {{ ring: {ring}, capacity: 64, expect_producers: 1, poll_s: 0.02 }}
output_ports: [received]
"""


def test_packets_travel_from_a_graph_in_another_process() -> None:
    ring = f"fpx-test-graph-{os.getpid()}"
    g = flowplex.Graph.from_yaml(SOURCE_GRAPH.format(ring=ring))
    out = g.add_poller("received")
    g.start()
    try:
        deadline = time.monotonic() + 10
        while not os.path.exists(f"/dev/shm/{ring}") and time.monotonic() < deadline:
            time.sleep(0.01)
        proc = CTX.Process(target=_workers.sink_graph, args=(ring, 50))
        proc.start()
        packets = list(out)
        got = [(p.timestamp, p.as_str() if p.as_str() is not None else p.as_bytes()) for p in packets]
        # who sent it travels too (the agent-stream metadata convention), not only the text
        who = {(p.metadata("stream_id"), p.metadata("agent_type"), p.metadata("producer_id")) for p in packets}
        proc.join(30)
        assert proc.exitcode == 0
        g.wait_done()
    finally:
        if g.state != flowplex.GraphState.TERMINATED:
            g.cancel()
    expected = [(i * 10, f"token {i} " + "é" * i if i % 2 == 0 else bytes([i]) * 300) for i in range(50)]
    assert got == expected
    assert who == {(7, int(AgentType.USER), 0)}
    assert not os.path.exists(f"/dev/shm/{ring}")
