"""The integer-stream built-ins: Scale, Sum, Filter, Zip, FeedbackAdd, BatchSum."""

from __future__ import annotations

import pytest

import flowplex
from flowplex import TS_DONE, TS_POST_STREAM, KernelError

from .conftest import NO_GRAPH, GraphFactory, drain_runner, ints, run_graph, run_once

I64_MAX = 2**63 - 1
I64_MIN = -(2**63)
NOT_INT = r"input is not an integer packet"


# --- ScaleKernel -------------------------------------------------------------------------------


@NO_GRAPH
@pytest.mark.parametrize(
    ("options", "value", "expected"),
    [
        ({"factor": 3}, 5, 15),
        ({"factor": -2}, 7, -14),
        (None, 7, 7),                          # default factor 1
        ({"factor": 2.5}, 7, 7),               # a float is not an int option: default
        ({"factor": 4}, 2**62, 0),             # wraps at 64 bits like C++
        ({"factor": 2}, I64_MAX, -2),
    ],
)
def test_scale_multiplies_at_the_input_timestamp(options: object, value: int, expected: int) -> None:
    (out,) = run_once("ScaleKernel", {0: value}, options=options, ts=9)
    assert ints(out) == [(9, expected)]


@NO_GRAPH
def test_scale_processes_many_invocations() -> None:
    with flowplex.KernelRunner("ScaleKernel", options={"factor": 10}) as r:
        for ts in range(3):
            r.add_input(0, ts + 1)
            r.process(ts)
        assert ints(drain_runner(r)) == [(0, 10), (1, 20), (2, 30)]


@NO_GRAPH
def test_scale_rejects_an_empty_input() -> None:
    message = rf"\[kernel_runner\] ValueError: {NOT_INT} \(input 0 holds nothing\)"
    with pytest.raises(KernelError, match=message):
        run_once("ScaleKernel", {})


@NO_GRAPH
@pytest.mark.parametrize("kernel", ["ScaleKernel", "SumKernel", "FilterKernel", "BatchSumKernel"])
@pytest.mark.parametrize(("value", "actual"), [(1.5, "F64"), ("7", "Str"), (True, "Bool")])
def test_integer_kernels_declare_i64_inputs(kernel: str, value: object, actual: str) -> None:
    message = rf"input port 0 type mismatch: contract declares I64, actual {actual}"
    with pytest.raises(ValueError, match=message):
        run_once(kernel, {0: value})


@NO_GRAPH
@pytest.mark.parametrize("kernel", ["ScaleKernel", "SumKernel", "FilterKernel", "BatchSumKernel"])
def test_integer_kernels_need_their_ports(kernel: str) -> None:
    with pytest.raises(ValueError, match=r"contract: input port index 0 is out of range \(num_inputs=0\)"):
        flowplex.KernelRunner(kernel, input_ports=0)
    with pytest.raises(ValueError, match=r"contract: output port index 0 is out of range \(num_outputs=0\)"):
        flowplex.KernelRunner(kernel, output_ports=0)


@NO_GRAPH
def test_scale_output_type_is_checked_at_build(make_graph: GraphFactory) -> None:
    with pytest.raises(ValueError, match=r"type mismatch on edge `y`.*declares I64.*declares Buffer"):
        make_graph("""
input_ports: [x]
nodes:
  - { name: s, kernel: ScaleKernel, input_ports: [x], output_ports: [y] }
  - { name: c, kernel: CastKernel, input_ports: [y], output_ports: [z] }
output_ports: [z]
""")


def test_scale_in_a_graph(make_graph: GraphFactory) -> None:
    g = make_graph("""
input_ports: [x]
nodes:
  - { name: s, kernel: ScaleKernel, input_ports: [x], output_ports: [y], options: { factor: 3 } }
output_ports: [y]
""")
    out = run_graph(g, [("x", v, ts) for ts, v in enumerate([1, -2, 14])], ["y"])
    assert ints(out["y"]) == [(0, 3), (1, -6), (2, 42)]


def test_scale_graph_input_of_the_wrong_type_fails_the_graph(make_graph: GraphFactory) -> None:
    g = make_graph("""
input_ports: [x]
nodes:
  - { name: s, kernel: ScaleKernel, input_ports: [x], output_ports: [y] }
output_ports: [y]
""")
    g.add_poller("y")
    g.start()
    g.send("x", "seven", ts=0)
    g.close_all_inputs()
    message = r"\[s\] input port `x` type mismatch: contract declares I64, actual Str"
    with pytest.raises(KernelError, match=message):
        g.wait_done(timeout=10)


# --- SumKernel ---------------------------------------------------------------------------------


@NO_GRAPH
def test_sum_emits_the_total_at_post_stream_on_close() -> None:
    with flowplex.KernelRunner("SumKernel") as r:
        for ts, v in enumerate([1, 2, 3, 4]):
            r.add_input(0, v)
            r.process(ts)
        assert drain_runner(r) == []           # silent while accumulating
        r.close()
        assert ints(drain_runner(r)) == [(TS_POST_STREAM, 10)]


@NO_GRAPH
def test_sum_wraps_at_64_bits() -> None:
    with flowplex.KernelRunner("SumKernel") as r:
        for ts, v in enumerate([I64_MAX, 1]):
            r.add_input(0, v)
            r.process(ts)
        r.close()
        assert ints(drain_runner(r)) == [(TS_POST_STREAM, I64_MIN)]


@NO_GRAPH
def test_sum_skips_an_invocation_without_a_packet() -> None:
    (out,) = run_once("SumKernel", {})
    assert ints(out) == [(TS_POST_STREAM, 0)]


def test_sum_in_a_graph_feeds_downstream_after_the_stream(make_graph: GraphFactory) -> None:
    g = make_graph("""
input_ports: [x]
nodes:
  - { name: sum, kernel: SumKernel, input_ports: [x], output_ports: [s] }
  - { name: str, kernel: StringifyKernel, input_ports: [s], output_ports: [t] }
output_ports: [s, t]
""")
    out = run_graph(g, [("x", v, v) for v in range(1, 5)], ["s", "t"])
    assert ints(out["s"]) == [(TS_POST_STREAM, 10)]
    assert [(p.timestamp, p.as_str()) for p in out["t"]] == [(TS_POST_STREAM, "10")]


def test_sum_emits_nothing_when_the_graph_is_cancelled(make_graph: GraphFactory) -> None:
    g = make_graph("""
input_ports: [x]
nodes:
  - { name: sum, kernel: SumKernel, input_ports: [x], output_ports: [s] }
output_ports: [s]
""")
    seen: list[flowplex.Packet] = []
    g.observe("s", seen.append)
    g.start()
    g.send("x", 5, ts=0)
    g.wait_until_idle(timeout=10)
    g.cancel()
    with pytest.raises(flowplex.GraphCancelled):
        g.wait_done(timeout=10)
    assert seen == []


def test_sum_emits_nothing_when_the_graph_fails(make_graph: GraphFactory) -> None:
    g = make_graph("""
input_ports: [x, y]
nodes:
  - { name: sum, kernel: SumKernel, input_ports: [x], output_ports: [s] }
  - { name: bad, kernel: StringifyKernel, input_ports: [y], output_ports: [t] }
output_ports: [s, t]
""")
    seen: list[flowplex.Packet] = []
    g.observe("s", seen.append)
    g.start()
    g.send("x", 5, ts=0)
    g.wait_until_idle(timeout=10)
    g.send("y", 1.5, ts=0)          # fails `bad`, and with it the whole graph
    g.close_all_inputs()
    with pytest.raises(KernelError, match=r"\[bad\]"):
        g.wait_done(timeout=10)
    assert seen == []


# --- FilterKernel ------------------------------------------------------------------------------


@NO_GRAPH
@pytest.mark.parametrize(
    ("threshold", "expected"),
    [(3, [3, 4, 5]), (None, [0, 3, 4, 5]), (-5, [-1, 0, 3, 4, 5]), (100, [])],
)
def test_filter_keeps_values_at_or_above_the_threshold(threshold: int | None, expected: list[int]) -> None:
    options = None if threshold is None else {"threshold": threshold}
    with flowplex.KernelRunner("FilterKernel", options=options) as r:
        for ts, v in enumerate([-1, 0, 3, 4, 5]):
            r.add_input(0, v)
            r.process(ts)
        assert [p.as_int() for p in drain_runner(r)] == expected


@NO_GRAPH
def test_filter_forwards_the_packet_itself() -> None:
    packet = flowplex.Packet.from_int(8, ts=4)
    (out,) = run_once("FilterKernel", {0: packet}, options={"threshold": 8}, ts=4)
    assert ints(out) == [(4, 8)]


@NO_GRAPH
def test_filter_rejects_an_empty_input() -> None:
    with pytest.raises(KernelError, match=NOT_INT):
        run_once("FilterKernel", {})


def test_filter_moves_the_bound_past_dropped_packets(make_graph: GraphFactory) -> None:
    g = make_graph("""
input_ports: [x]
nodes:
  - { name: f, kernel: FilterKernel, input_ports: [x], output_ports: [y], options: { threshold: 3 } }
output_ports: [y]
""")
    out = g.add_poller("y", observe_timestamp_bounds=True)
    g.start()
    for ts, v in enumerate([5, 1, 4, 1]):
        g.send("x", v, ts=ts)
    g.wait_until_idle(timeout=10)
    seen = []
    while (p := out.try_next()) is not None:
        seen.append((p.timestamp, p.as_int()))
    # Dropping ts 3 still promises "nothing before 4" downstream, before the input closes.
    assert [s for s in seen if s[1] is not None] == [(0, 5), (2, 4)]
    assert seen[-1] == (4, None)
    g.close_all_inputs()
    g.wait_done(timeout=10)
    assert [(p.timestamp, p.as_int()) for p in out] == [(TS_DONE, None)]


# --- ZipKernel ---------------------------------------------------------------------------------


@NO_GRAPH
def test_zip_adds_both_inputs() -> None:
    (out,) = run_once("ZipKernel", {0: 1, 1: 2}, input_ports=2, ts=3)
    assert ints(out) == [(3, 3)]


@NO_GRAPH
@pytest.mark.parametrize("inputs", [{0: 1}, {1: 2}, {}])
def test_zip_emits_nothing_when_an_input_is_missing(inputs: dict[int, int]) -> None:
    assert run_once("ZipKernel", inputs, input_ports=2) == [[]]


@NO_GRAPH
def test_zip_wraps_and_ignores_extra_inputs() -> None:
    (out,) = run_once("ZipKernel", {0: I64_MAX, 1: 2, 2: 1000}, input_ports=3)
    assert [p.as_int() for p in out] == [I64_MIN + 1]


@NO_GRAPH
def test_zip_needs_two_inputs() -> None:
    with pytest.raises(ValueError, match=r"input port index 1 is out of range \(num_inputs=1\)"):
        flowplex.KernelRunner("ZipKernel", input_ports=1)


def test_zip_finds_its_inputs_by_tag(make_graph: GraphFactory) -> None:
    # B is declared first: the tags, not the positions, say which is which.
    g = make_graph("""
input_ports: [a, b]
nodes:
  - { name: z, kernel: ZipKernel, input_ports: ["B:b", "A:a"], output_ports: [s] }
output_ports: [s]
""")
    sends = [("a", 1, 0), ("b", 100, 0), ("a", 2, 1), ("b", 200, 2), ("a", 3, 3), ("b", 300, 3)]
    out = run_graph(g, sends, ["s"])
    assert ints(out["s"]) == [(0, 101), (3, 303)]


@NO_GRAPH
@pytest.mark.parametrize(
    ("ports", "typed"),
    [
        (['"B:t"', '"A:a"'], True),          # B is the tagged port 0
        (["a", "t"], True),                  # no tags: inputs 0 and 1
        (['"A:a"', "t"], True),              # no B tag: B falls back to input 1
        (['"A:a"', '"B:b"', "t"], False),    # a third input is not read, so not typed
        (["t", '"A:a"', '"B:b"'], False),
    ],
)
def test_zip_declares_i64_on_the_ports_it_reads(
    make_graph: GraphFactory, ports: list[str], typed: bool
) -> None:
    text = f"""
input_ports: [a, b, x]
nodes:
  - {{ name: q, kernel: StringifyKernel, input_ports: [x], output_ports: [t] }}
  - {{ name: z, kernel: ZipKernel, input_ports: [{", ".join(ports)}], output_ports: [o] }}
output_ports: [o]
"""
    if typed:
        message = r"type mismatch on edge `t`.*declares Str.*input port `t` declares I64"
        with pytest.raises(ValueError, match=message):
            make_graph(text)
    else:
        make_graph(text)


# --- FeedbackAddKernel -------------------------------------------------------------------------


@NO_GRAPH
@pytest.mark.parametrize(
    ("inputs", "expected"),
    [({0: 1, 1: 2}, [3]), ({0: 1}, [1]), ({1: 2}, []), ({0: I64_MAX, 1: 1}, [I64_MIN])],
)
def test_feedback_add(inputs: dict[int, int], expected: list[int]) -> None:
    (out,) = run_once("FeedbackAddKernel", inputs, input_ports=2)
    assert [p.as_int() for p in out] == expected


def test_feedback_add_self_loop_is_a_running_sum(make_graph: GraphFactory) -> None:
    g = make_graph("""
input_ports: [x]
nodes:
  - { name: acc, kernel: FeedbackAddKernel, input_ports: [x, y], output_ports: [y], back_edges: [y] }
output_ports: [y]
""")
    out = run_graph(g, [("x", 1, ts) for ts in range(5)], ["y"])
    assert ints(out["y"]) == [(0, 1), (1, 2), (2, 3), (3, 4), (4, 5)]


# --- BatchSumKernel ----------------------------------------------------------------------------


def test_batch_sum_sums_each_batch(make_graph: GraphFactory) -> None:
    g = make_graph("""
input_ports: [x]
nodes:
  - { name: b, kernel: BatchSumKernel, input_ports: [x], output_ports: [y],
      input_policy: { type: batch, capacity: 3 } }
output_ports: [y]
""")
    out = run_graph(g, [("x", v, v) for v in range(1, 8)], ["y"])
    # batches [1,2,3], [4,5,6], then [7] flushed when the input closes; ts = last of the batch
    assert ints(out["y"]) == [(3, 6), (6, 15), (7, 7)]


@NO_GRAPH
def test_batch_sum_under_a_single_packet_policy() -> None:
    assert [ints(o) for o in run_once("BatchSumKernel", {0: 4}, ts=2)] == [[(2, 4)]]
    assert [ints(o) for o in run_once("BatchSumKernel", {}, ts=2)] == [[(2, 0)]]   # lm-flow's result
