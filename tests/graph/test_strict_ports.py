"""Writes to output indexes a node lacks: ignored and counted as lm-flow does, or errors with ``strict_ports``.

lm-flow ignores an ``emit``/``forward`` to an output index the node does not have, silently;
flowplex ignores it too (lm-flow programs such as a sink that forwards keep running), but
never silently: a rate-limited warning names the node and the index, and the per-node
``ignored_emits`` counter shows in stats and DOT. ``strict_ports: true`` makes it an error.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import pytest

import flowplex

from .conftest import NO_RUN

GraphFactory = Callable[[str], flowplex.Graph]


@flowplex.kernel("TForwardSink")
class TForwardSink(flowplex.Kernel):
    """A node without outputs that forwards anyway (lm-flow's ``production_route_async`` shape)."""

    seen: list[int] = []  # noqa: RUF012  (class-level log of what the sink saw)

    def process(self, cc: flowplex.Context) -> None:
        TForwardSink.seen.append(cc.input(0).as_int() or 0)
        cc.forward(0, 0)


@flowplex.kernel("TWideEmit")
class TWideEmit(flowplex.Kernel):
    """Emits to its one output and to indexes 1 and 5 it lacks; sets a bound on index 9."""

    def process(self, cc: flowplex.Context) -> None:
        value = cc.input(0).as_int() or 0
        cc.emit(0, value * 10)
        cc.emit(1, value)
        cc.forward(0, 5)
        cc.set_next_timestamp_bound(9, cc.input_timestamp + 1)


@flowplex.kernel("TBadBound")
class TBadBound(flowplex.Kernel):
    """Promises a bound on an output index it lacks."""

    def process(self, cc: flowplex.Context) -> None:
        cc.set_next_timestamp_bound(2, 10)


SINK = """
nodes:
  - { name: fwd, kernel: PassThroughKernel, input_ports: [x], output_ports: [a] }
  - { name: sink, kernel: TForwardSink, input_ports: [a] }
input_ports: [x]
output_ports: []
"""

BOUND = """
nodes:
  - { name: bound, kernel: TBadBound, input_ports: [x], output_ports: [y] }
input_ports: [x]
output_ports: [y]
"""

WIDE = """
nodes:
  - { name: wide, kernel: TWideEmit, input_ports: [x], output_ports: [y] }
input_ports: [x]
output_ports: [y]
"""


@pytest.mark.in_process(reason="TForwardSink records what it sees in a class list of this interpreter")
def test_a_sink_that_forwards_runs_and_counts(make_graph: GraphFactory, caplog: pytest.LogCaptureFixture) -> None:
    TForwardSink.seen = []
    g = make_graph(SINK)
    g.start()
    with caplog.at_level(logging.WARNING, logger="flowplex.kernels"):
        for i in range(5):
            g.send("x", i, ts=i)
        g.close_all_inputs()
        g.wait_done(timeout=10)
    assert TForwardSink.seen == [0, 1, 2, 3, 4]
    stats = g.stats()
    assert stats.node("sink").ignored_emits == 5
    assert stats.node("sink").errors == 0
    assert stats.node("fwd").ignored_emits == 0
    warnings = [r.getMessage() for r in caplog.records if "ignored" in r.getMessage()]
    # Rate-limited: the 1st, 2nd and 4th occurrence, each naming node, call and index.
    assert len(warnings) == 3
    assert all(w.startswith("node `sink`: forward to output port index 0 ignored: the node has 0 output port(s)")
               for w in warnings)
    assert "4 ignored so far" in warnings[-1] and "strict_ports: true" in warnings[-1]


def test_emit_forward_and_bound_to_missing_indexes_keep_the_valid_output(make_graph: GraphFactory) -> None:
    g = make_graph(WIDE)
    out = g.add_poller("y")
    g.start()
    for i in range(3):
        g.send("x", i, ts=i)
    g.close_all_inputs()
    assert [(p.timestamp, p.as_int()) for p in out] == [(0, 0), (1, 10), (2, 20)]
    g.wait_done(timeout=10)
    assert g.stats().node("wide").ignored_emits == 9  # three per invocation


def test_the_counter_shows_in_dot_and_resets() -> None:
    with flowplex.Graph.from_yaml(WIDE) as g:
        g.start()
        g.send("x", 1, ts=0)
        g.close_all_inputs()
        g.wait_done(timeout=10)
        assert "ignored emits 3" in g.to_dot("diagnostics")
        assert "ignored emits 3" in g.to_dot("compact")
        g.reset()
        assert g.stats().node("wide").ignored_emits == 0


@pytest.mark.parametrize(("yaml_text", "node", "call", "index"), [
    (SINK, "sink", "forward", 0),
    (WIDE, "wide", "emit", 1),
    (BOUND, "bound", "set_next_timestamp_bound", 2),
])
def test_strict_ports_makes_it_the_error_it_was(make_graph: GraphFactory, yaml_text: str, node: str, call: str,
                                                index: int) -> None:
    g = make_graph("strict_ports: true\n" + yaml_text)
    g.start()
    g.send("x", 1, ts=0)
    g.close_all_inputs()
    expected = rf"\[{node}\] UsageError: {call}: output port index {index} is out of range"
    with pytest.raises(flowplex.KernelError, match=expected):
        g.wait_done(timeout=10)
    assert g.stats().node(node).ignored_emits == 0


@flowplex.kernel("TNegative")
class TNegative(flowplex.Kernel):
    def process(self, cc: flowplex.Context) -> None:
        cc.emit(-1, 1)


@flowplex.kernel("TNoInput")
class TNoInput(flowplex.Kernel):
    def process(self, cc: flowplex.Context) -> None:
        cc.forward(3, 7)  # neither index exists: the missing input is what is reported


def test_negative_indexes_and_missing_inputs_stay_errors() -> None:
    for kernel, expected in (("TNegative", r"emit: output port index -1 is out of range"),
                             ("TNoInput", r"forward: input port 3 has no packet")):
        with flowplex.Graph.from_yaml(f"nodes:\n  - {{ name: n, kernel: {kernel}, input_ports: [x], "
                                      "output_ports: [y] }\ninput_ports: [x]\noutput_ports: [y]\n") as g:
            g.start()
            g.send("x", 1, ts=0)
            g.close_all_inputs()
            with pytest.raises(flowplex.KernelError, match=expected):
                g.wait_done(timeout=10)


@NO_RUN
def test_strict_ports_is_validated_and_in_the_schema() -> None:
    from flowplex.config import json_schema

    assert json_schema()["properties"]["strict_ports"]["type"] == "boolean"
    with pytest.raises(ValueError, match=r"strict_ports"):
        flowplex.Graph.from_yaml("strict_ports: maybe\nnodes: []\n")
