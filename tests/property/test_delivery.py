"""Properties: a linear chain and a diamond lose, duplicate and reorder nothing, on every executor.

The executor is the kind under test (tests/conftest.py runs each property once per kind).
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

import flowplex
import tests.graph.conftest  # noqa: F401  (registers TForward, TAddPair)

STARTS_MANY_GRAPHS = pytest.mark.in_process(
    reason="60 examples, each starting workers on a process pool (40 s); tests/processes/test_same_outputs.py "
           "checks delivery there")

timestamps = st.lists(st.integers(min_value=-(2**40), max_value=2**40), max_size=60, unique=True).map(sorted)


def chain_yaml(depth: int) -> str:
    nodes = "\n".join(
        f"  - {{ name: n{i}, kernel: TForward, input_ports: [e{i}], output_ports: [e{i + 1}] }}"
        for i in range(depth)
    )
    return f"nodes:\n{nodes}\ninput_ports: [e0]\noutput_ports: [e{depth}]\n"


@STARTS_MANY_GRAPHS
@given(
    stamps=timestamps,
    depth=st.integers(min_value=1, max_value=6),
    values=st.data(),
)
def test_chain_preserves_every_packet_in_order(stamps: list[int], depth: int, values: st.DataObject) -> None:
    payload = [values.draw(st.integers(min_value=-(2**63), max_value=2**63 - 1)) for _ in stamps]
    with flowplex.Graph.from_yaml(chain_yaml(depth)) as g:
        out = g.add_poller(f"e{depth}")
        g.start()
        for ts, v in zip(stamps, payload, strict=True):
            g.send("e0", v, ts=ts)
        g.close_all_inputs()
        got = [(p.timestamp, p.as_int()) for p in out]
        g.wait_done(timeout=30)
    assert got == list(zip(stamps, payload, strict=True))


@STARTS_MANY_GRAPHS
@given(left=timestamps, right=timestamps)
def test_diamond_join_pairs_by_timestamp(left: list[int], right: list[int]) -> None:
    text = """nodes:
  - { name: l, kernel: TForward, input_ports: [a], output_ports: [la] }
  - { name: r, kernel: TForward, input_ports: [b], output_ports: [rb] }
  - { name: j, kernel: TAddPair, input_ports: [la, rb], output_ports: [y] }
input_ports: [a, b]
output_ports: [y]
"""
    with flowplex.Graph.from_yaml(text) as g:
        out = g.add_poller("y")
        g.start()
        # Interleave the two inputs the way two independent producers might.
        i = j = 0
        while i < len(left) or j < len(right):
            if j >= len(right) or (i < len(left) and (i + j) % 3 != 2):
                g.send("a", 1, ts=left[i])
                i += 1
            else:
                g.send("b", 2, ts=right[j])
                j += 1
        g.close_all_inputs()
        got = [(p.timestamp, p.as_int()) for p in out]
        g.wait_done(timeout=30)
    # Reference model: one output per distinct timestamp, in order, pairing what was present.
    expected = [(ts, (1000 if ts in left else 0) + (2 if ts in right else 0))
                for ts in sorted(set(left) | set(right))]
    assert got == expected


@STARTS_MANY_GRAPHS
@given(stamps=timestamps)
def test_diamond_fan_out_and_join(stamps: list[int]) -> None:
    text = """nodes:
  - { name: l, kernel: TForward, input_ports: [x], output_ports: [lx] }
  - { name: r, kernel: TEvenOnly, input_ports: [x], output_ports: [rx] }
  - { name: j, kernel: TAddPair, input_ports: [lx, rx], output_ports: [y] }
input_ports: [x]
output_ports: [y]
"""
    values = [ts % 97 for ts in stamps]
    with flowplex.Graph.from_yaml(text) as g:
        out = g.add_poller("y")
        g.start()
        for ts, v in zip(stamps, values, strict=True):
            g.send("x", v, ts=ts)
        g.close_all_inputs()
        got = [(p.timestamp, p.as_int()) for p in out]
        g.wait_done(timeout=30)
    expected = [(ts, v * 1000 + (v if v % 2 == 0 else 0)) for ts, v in zip(stamps, values, strict=True)]
    assert got == expected
