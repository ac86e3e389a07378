"""What the graph's byte budget counts: every payload that holds memory, each by an O(1) size.

Exact counts on a graph whose packets wait in a poller nobody reads yet, so ``counted_bytes``
is the sum over the queued packets; then the reads give every byte back.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest

import flowplex
from flowplex.engine._engine_common import payload_bytes
from flowplex.packets import to_packet

GRAPH = """input_ports: [x]
output_ports: [x]
nodes: []
"""


@pytest.mark.parametrize(("value", "size"), [
    (b"\x00" * 1000, 1000),
    ("a" * 1000, sys.getsizeof("a" * 1000)),
    ("\U0001F600" * 1000, sys.getsizeof("\U0001F600" * 1000)),  # 4 bytes a character, not 1
    (np.zeros(1000, np.float32), 4000),
    (7, 0),
    (1.5, 0),
    (True, 0),
])
def test_payload_bytes_sizes_each_kind(value: object, size: int) -> None:
    assert payload_bytes(to_packet(value, 0)) == size


def test_an_empty_packet_counts_no_bytes() -> None:
    assert payload_bytes(flowplex.Packet()) == 0


@pytest.mark.parametrize("kind", ["bytes", "str", "numpy"])
def test_queued_payloads_count_and_reads_give_them_back(kind: str) -> None:
    values: list[object] = {
        "bytes": [bytes(100 * (i + 1)) for i in range(5)],
        "str": ["x" * (100 * (i + 1)) for i in range(5)],
        "numpy": [np.zeros(100 * (i + 1), np.uint8) for i in range(5)],
    }[kind]
    with flowplex.Graph.from_yaml(GRAPH) as g:
        out = g.add_poller("x")
        g.start()
        for i, v in enumerate(values):
            g.send("x", v, i)
        want = sum(payload_bytes(to_packet(v, 0)) for v in values)
        assert want >= 1500
        s = g.stats()
        assert (s.counted, s.counted_bytes) == (5, want)
        for _ in values:
            assert out.next(timeout=5) is not None
        s = g.stats()
        assert (s.counted, s.counted_bytes) == (0, 0)
        g.close_input("x")
        g.wait_done(timeout=5)


@flowplex.kernel("BudgetTestFlood")
class _Flood(flowplex.Kernel):
    def process(self, cc: flowplex.Context) -> None:
        for i in range(5000):
            cc.emit(0, i, i)


def test_a_kernel_runner_stages_a_whole_call() -> None:
    # Spilling is the engine's: the runner has none, so a call's output is staged whole (and
    # read in order) as before.
    with flowplex.KernelRunner("BudgetTestFlood", input_ports=0) as r:
        r.process(0)
        got = [p.as_int() for p in iter(r.try_next, None)]
    assert got == list(range(5000))
