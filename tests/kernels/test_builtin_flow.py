"""The plumbing built-ins: PassThrough, Split, Mux, Sink, RangeSource, Stringify."""

from __future__ import annotations

import logging

import numpy as np
import pytest

import flowplex
from flowplex import KernelError

from .conftest import NO_GRAPH, GraphFactory, drain_runner, ints, run_graph, run_once

# --- PassThroughKernel -------------------------------------------------------------------------


@NO_GRAPH
@pytest.mark.parametrize("value", [7, 2.5, "text", b"raw", True])
def test_pass_through_forwards_any_type(value: object) -> None:
    (out,) = run_once("PassThroughKernel", {0: value}, ts=3)
    assert len(out) == 1
    assert out[0].timestamp == 3
    assert out[0].payload == value


@NO_GRAPH
def test_pass_through_forwards_a_buffer_without_copying() -> None:
    arr = np.arange(6, dtype=np.float32).reshape(2, 3)
    (out,) = run_once("PassThroughKernel", {0: arr})
    assert np.shares_memory(out[0].as_numpy(), arr)


@NO_GRAPH
def test_pass_through_without_input_emits_nothing() -> None:
    assert run_once("PassThroughKernel", {}) == [[]]


@NO_GRAPH
@pytest.mark.parametrize("kernel", ["PassThroughKernel", "NormalizeKernel", "InvertKernel"])
def test_any_typed_kernels_still_need_one_input_and_one_output(kernel: str) -> None:
    with pytest.raises(ValueError, match=r"contract: input port index 0 is out of range \(num_inputs=0\)"):
        flowplex.KernelRunner(kernel, input_ports=0)
    with pytest.raises(ValueError, match=r"contract: output port index 0 is out of range \(num_outputs=0\)"):
        flowplex.KernelRunner(kernel, output_ports=0)


# --- SplitKernel -------------------------------------------------------------------------------


@NO_GRAPH
def test_split_forwards_to_every_output_sharing_the_payload() -> None:
    arr = np.ones(4, dtype=np.uint8)
    outs = run_once("SplitKernel", {0: arr}, output_ports=3, ts=8)
    assert [len(o) for o in outs] == [1, 1, 1]
    assert all(o[0].timestamp == 8 and np.shares_memory(o[0].as_numpy(), arr) for o in outs)


@NO_GRAPH
def test_split_without_input_or_outputs() -> None:
    assert run_once("SplitKernel", {}, output_ports=2) == [[], []]
    assert run_once("SplitKernel", {0: 1}, output_ports=0) == []
    with pytest.raises(ValueError, match=r"input port index 0 is out of range"):
        flowplex.KernelRunner("SplitKernel", input_ports=0)


def test_split_in_a_graph(make_graph: GraphFactory) -> None:
    g = make_graph("""
input_ports: [x]
nodes:
  - { name: s, kernel: SplitKernel, input_ports: [x], output_ports: [a, b] }
  - { name: d, kernel: ScaleKernel, input_ports: [b], output_ports: [c], options: { factor: 2 } }
output_ports: [a, c]
""")
    out = run_graph(g, [("x", v, v) for v in range(3)], ["a", "c"])
    assert ints(out["a"]) == [(0, 0), (1, 1), (2, 2)]
    assert ints(out["c"]) == [(0, 0), (1, 2), (2, 4)]


# --- MuxKernel ---------------------------------------------------------------------------------


@NO_GRAPH
@pytest.mark.parametrize(("selector", "expected"), [(0, "a"), (1, "b")])
def test_mux_forwards_the_selected_input(selector: int, expected: str) -> None:
    (out,) = run_once("MuxKernel", {0: selector, 1: "a", 2: "b"}, input_ports=3, ts=4)
    assert [(p.timestamp, p.as_str()) for p in out] == [(4, expected)]


@NO_GRAPH
def test_mux_emits_nothing_when_the_selected_input_is_missing() -> None:
    assert run_once("MuxKernel", {0: 1, 1: "a"}, input_ports=3) == [[]]


@NO_GRAPH
@pytest.mark.parametrize("selector", [2, -1])
def test_mux_rejects_a_selector_out_of_range(selector: int) -> None:
    with pytest.raises(
        KernelError,
        match=rf"mux selector out of range \(not enough data ports\): selector {selector}, "
              r"data inputs 0\.\.1",
    ):
        run_once("MuxKernel", {0: selector, 1: "a", 2: "b"}, input_ports=3)


@NO_GRAPH
def test_mux_needs_a_selector() -> None:
    with pytest.raises(KernelError, match=r"mux control port \(input 0\) must be an I64 selector"):
        run_once("MuxKernel", {1: "a"}, input_ports=2)
    with pytest.raises(ValueError, match=r"input port 0 type mismatch: contract declares I64, actual Str"):
        run_once("MuxKernel", {0: "1", 1: "a"}, input_ports=2)
    with pytest.raises(ValueError, match=r"output port index 0 is out of range"):
        flowplex.KernelRunner("MuxKernel", input_ports=2, output_ports=0)


def test_mux_in_a_graph_consumes_the_unselected_inputs(make_graph: GraphFactory) -> None:
    g = make_graph("""
input_ports: [sel, a, b]
nodes:
  - { name: m, kernel: MuxKernel, input_ports: [sel, a, b], output_ports: [y] }
output_ports: [y]
""")
    sends: list[tuple[str, object, int]] = [("sel", ts % 2, ts) for ts in range(4)]
    sends += [("a", f"a{ts}", ts) for ts in range(4)] + [("b", f"b{ts}", ts) for ts in range(4)]
    out = run_graph(g, sends, ["y"])
    assert [(p.timestamp, p.as_str()) for p in out["y"]] == [(0, "a0"), (1, "b1"), (2, "a2"), (3, "b3")]


# --- SinkKernel --------------------------------------------------------------------------------


def test_sink_counts_and_logs(make_graph: GraphFactory, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="flowplex")
    g = make_graph("""
input_ports: [x]
nodes:
  - { name: sk, kernel: SinkKernel, input_ports: [x] }
""")
    run_graph(g, [("x", v, v * 10) for v in range(3)], [])
    assert g.counter_value("sink.packets") == 3
    assert g.counter_value("sink.closed") == 1
    records = [(r.levelno, r.getMessage()) for r in caplog.records if r.getMessage().startswith("[sk]")]
    assert records == [
        (logging.DEBUG, "[sk] received packet @ ts=0"),
        (logging.DEBUG, "[sk] received packet @ ts=10"),
        (logging.DEBUG, "[sk] received packet @ ts=20"),
        (logging.INFO, "[sk] processed 3 packets in total"),
    ]


def test_sink_reaches_the_lmflow_log_callback(make_graph: GraphFactory) -> None:
    seen: list[tuple[int, str]] = []
    flowplex.set_log_callback(lambda level, msg: seen.append((level, msg)))
    try:
        g = make_graph("""
input_ports: [x]
nodes:
  - { name: sk, kernel: SinkKernel, input_ports: [x] }
""")
        run_graph(g, [("x", 1, 0)], [])
    finally:
        flowplex.set_log_callback(None)
    assert (flowplex.LogLevel.DEBUG, "[sk] received packet @ ts=0") in seen
    assert (flowplex.LogLevel.INFO, "[sk] processed 1 packets in total") in seen


@NO_GRAPH
def test_sink_has_no_outputs() -> None:
    assert run_once("SinkKernel", {0: "anything"}, output_ports=0) == []


# --- RangeSourceKernel -------------------------------------------------------------------------


def test_range_source_counts_then_finishes(make_graph: GraphFactory) -> None:
    g = make_graph("""
nodes:
  - { name: r, kernel: RangeSourceKernel, output_ports: [n], options: { count: 4 } }
  - { name: s, kernel: ScaleKernel, input_ports: [n], output_ports: [y], options: { factor: 10 } }
output_ports: [n, y]
""")
    out = run_graph(g, [], ["n", "y"])
    assert ints(out["n"]) == [(0, 0), (1, 1), (2, 2), (3, 3)]
    assert ints(out["y"]) == [(0, 0), (1, 10), (2, 20), (3, 30)]


@pytest.mark.parametrize(("options", "count"), [(None, 10), ({"count": 0}, 0), ({"count": -3}, 0)])
def test_range_source_count_option(make_graph: GraphFactory, options: object, count: int) -> None:
    opts = "" if options is None else f", options: {options}"
    g = make_graph(f"""
nodes:
  - {{ name: r, kernel: RangeSourceKernel, output_ports: [n]{opts} }}
output_ports: [n]
""")
    out = run_graph(g, [], ["n"])
    assert [p.as_int() for p in out["n"]] == list(range(count))


@NO_GRAPH
def test_range_source_in_a_runner() -> None:
    with flowplex.KernelRunner("RangeSourceKernel", input_ports=0, options={"count": 2}) as r:
        for ts in (100, 101, 102):
            r.process(ts)
        assert ints(drain_runner(r)) == [(100, 0), (101, 1)]


@NO_GRAPH
def test_range_source_declares_i64() -> None:
    with pytest.raises(ValueError, match=r"output port index 0 is out of range"):
        flowplex.KernelRunner("RangeSourceKernel", input_ports=0, output_ports=0)


# --- StringifyKernel ---------------------------------------------------------------------------


@NO_GRAPH
@pytest.mark.parametrize(("value", "text"), [(-42, "-42"), (0, "0"), (2**63 - 1, "9223372036854775807")])
def test_stringify(value: int, text: str) -> None:
    (out,) = run_once("StringifyKernel", {0: value}, ts=6)
    assert [(p.timestamp, p.type_name, p.as_str()) for p in out] == [(6, "Str", text)]


@NO_GRAPH
def test_stringify_rejects_bad_input() -> None:
    with pytest.raises(KernelError, match=r"input is not an integer packet"):
        run_once("StringifyKernel", {})
    with pytest.raises(ValueError, match=r"contract declares I64, actual F64"):
        run_once("StringifyKernel", {0: 1.0})


@NO_GRAPH
def test_stringify_output_is_declared_str(make_graph: GraphFactory) -> None:
    with pytest.raises(ValueError, match=r"type mismatch on edge `t`.*declares Str.*declares I64"):
        make_graph("""
input_ports: [x]
nodes:
  - { name: q, kernel: StringifyKernel, input_ports: [x], output_ports: [t] }
  - { name: s, kernel: ScaleKernel, input_ports: [t], output_ports: [y] }
output_ports: [y]
""")
