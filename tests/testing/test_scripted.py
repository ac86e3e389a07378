"""``ScriptedSource``, ``scripted``, ``run_graph`` and ``CollectSink`` on real graphs and executors."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

import flowplex
from flowplex import testing
from flowplex.errors import ConfigError, KernelError, Timeout, UnknownPortError, UsageError
from flowplex.testing import At, CollectSink, EndOfStream, Fail, Gap, Outputs, run_graph, scripted

KINDS = ("inline", "threads", "loopback")


@flowplex.kernel("tests.testing.AddTwo")
class AddTwo(flowplex.Kernel):
    """Adds its two integer inputs (a kernel that aligns two ports by timestamp)."""

    def process(self, cc: flowplex.Context) -> None:
        cc.emit(0, cc.input(0).as_int() + cc.input(1).as_int())  # type: ignore[operator]


def through(*sources: dict[str, Any], kernel: str = "PassThroughKernel", **node: Any) -> dict[str, Any]:
    """A graph dict: the sources, then one node reading their outputs, its output `y` the graph's."""
    ports = [s["output_ports"][0] for s in sources]
    return {"nodes": [*sources, {"name": "k", "kernel": kernel, "input_ports": ports, "output_ports": ["y"], **node}],
            "output_ports": ["y"]}


@pytest.mark.parametrize("kind", KINDS)
def test_values_come_out_in_order_with_their_timestamps_and_types(kind: str) -> None:
    items = [1, 2.5, "hi", True, b"\x00\xff", [1, 2, 3], np.array([0.5, 1.5], np.float32), At(10, 7), 8]
    out = run_graph(through(scripted("src", items)), executor=kind)
    assert out.timestamps_of("y") == [0, 1, 2, 3, 4, 5, 6, 10, 11]
    values = out.values_of("y")
    assert values[:5] == [1, 2.5, "hi", True, b"\x00\xff"]
    assert [type(v) for v in values[:5]] == [int, float, str, bool, bytes]
    assert values[5].dtype == np.int64 and values[5].tolist() == [1, 2, 3]  # type: ignore[attr-defined]
    assert values[6].dtype == np.float32 and values[6].tolist() == [0.5, 1.5]  # type: ignore[attr-defined]
    assert values[7:] == [7, 8]


def test_start_and_step_stamp_plain_values() -> None:
    out = run_graph(through(scripted("src", ["a", "b", At(100, "c"), "d"], start=5, step=10)))
    assert out["y"] == [(5, "a"), (15, "b"), (100, "c"), (110, "d")]


def test_end_of_stream_stops_the_script_and_the_graph_finishes() -> None:
    out = run_graph(through(scripted("src", [1, EndOfStream(), 2])))
    assert out["y"] == [(0, 1)]
    assert run_graph(through(scripted("src", [])))["y"] == []


@pytest.mark.parametrize("kind", ("inline", "threads"))
def test_a_gap_waits_without_holding_the_engine(kind: str) -> None:
    # Two sources: `slow` pauses 0.3 s after its first value; `fast` keeps going meanwhile,
    # so the gap parks only its own source (no worker sleeps through it).
    graph = {"nodes": [scripted("slow", [1, Gap(0.3), 2], output="a"), scripted("fast", [10, 20, 30], output="b"),
                       {"name": "k", "kernel": "CollectSink", "input_ports": ["a", "b"],
                        "input_policy": {"type": "immediate"}, "options": {"key": f"gap-{kind}"}}],
             "output_ports": []}
    began = time.monotonic()
    run_graph(graph, executor=kind)
    took = time.monotonic() - began
    assert 0.3 <= took < 3.0
    got = CollectSink.records(f"gap-{kind}")
    assert [(r.port, r.ts, r.value) for r in got if r.port == "a"] == [("a", 0, 1), ("a", 1, 2)]
    assert [r.value for r in got if r.port == "b"] == [10, 20, 30]
    order = [r.value for r in got]
    assert order.index(30) < order.index(2)  # fast finished inside slow's gap


@pytest.mark.parametrize("kind", KINDS)
def test_fail_fails_the_graph_naming_the_node(kind: str) -> None:
    graph = through(scripted("cam", [1, 2, Fail("boom"), 3]))
    with pytest.raises(KernelError, match=r"\[cam\] RuntimeError: boom") as info:
        run_graph(graph, executor=kind)
    assert info.value.node == "cam"
    out = run_graph(graph, executor=kind, raise_on_error=False)
    assert isinstance(out.error, KernelError) and out.error.node == "cam"
    assert out["y"] == [(0, 1), (1, 2)]  # what came before the failure


def test_run_graph_feeds_inputs_in_timestamp_order_across_ports() -> None:
    yaml_text = """
nodes:
  - { name: add, kernel: tests.testing.AddTwo, input_ports: [a, b], output_ports: [y] }
input_ports: [a, b]
output_ports: [y]
"""
    out = run_graph(yaml_text, {"a": [1, 2, (10, 3)], "b": [(0, 100), (1, 200), (10, 300)]})
    assert out == {"y": [(0, 101), (1, 202), (10, 303)]}
    assert isinstance(out, Outputs) and out.error is None


def test_run_graph_takes_a_file_a_dict_and_a_graph(tmp_path: Path) -> None:
    graph = through(scripted("src", [4, 5]), kernel="ScaleKernel", options={"factor": 3})
    path = tmp_path / "g.yaml"
    path.write_text(yaml.safe_dump(graph))
    want = [(0, 12), (1, 15)]
    assert run_graph(path)["y"] == want
    assert run_graph(str(path))["y"] == want
    with flowplex.Graph.from_yaml(yaml.safe_dump(graph)) as g:
        assert run_graph(g)["y"] == want
        with pytest.raises(UsageError, match="executor= applies to graphs run_graph builds"):
            run_graph(g, executor="threads")


def test_run_graph_rejects_unknown_ports_and_bad_inputs() -> None:
    text = "nodes:\n  - {name: s, kernel: ScaleKernel, input_ports: [x], output_ports: [y]}\ninput_ports: [x]\n" \
           "output_ports: [y]\n"
    with pytest.raises(UnknownPortError, match="graph input port `z` does not exist; did you mean `x`"):
        run_graph(text, {"z": [1]})
    with pytest.raises(UsageError, match=r"inputs\['x'\]\[1\]: a tuple must be \(ts, value\), got \(1, 2, 3\)"):
        run_graph(text, {"x": [1, (1, 2, 3)]})
    with pytest.raises(KeyError, match="no graph output port `q`"):
        run_graph(text, {"x": [1]})["q"]


def test_run_graph_times_out_when_the_graph_does_not_finish() -> None:
    with pytest.raises(Timeout, match=r"did not finish within 0\.2 s"):
        run_graph(through(scripted("src", [1, Gap(5.0), 2])), timeout=0.2)


@pytest.mark.parametrize(("entry", "where", "message"), [
    ({"gpa": 1}, "", r"an entry needs exactly one of value, bytes, gap, fail, end, got keys gpa$"),
    ({"vaule": 1}, "", r"got keys vaule; did you mean `value`\?$"),
    ({"gap": -1}, ".gap", r"expected seconds >= 0, got -1$"),
    ({"value": 1, "tz": 3}, "", r"`value` does not take `tz` \(it takes ts, dtype\); did you mean `ts`\?$"),
    ({"value": [1, "a"]}, ".value", r"a list must hold numbers only \(it becomes an array\), got \[1, 'a'\]$"),
    ({"value": [1, 2], "dtype": "complex64"}, ".value", r"dtype 'complex64' is not a numeric numpy dtype"),
    ({"bytes": "zz"}, ".bytes", r"'zz' is not hex text"),
    ({"end": False}, ".end", r"write `end: true`, got False$"),
    ({"value": 1, "ts": 1}, "", r"timestamp 1 does not increase \(the previous value was at 2\)$"),
    ([True, 1], "", r"a list must hold numbers only"),
    ({"value": 2**64}, ".value", r"does not fit a 64-bit integer$"),
])
def test_a_bad_entry_is_a_config_error_naming_its_path(entry: object, where: str, message: str) -> None:
    text = yaml.safe_dump({"nodes": [{"name": "src", "kernel": "ScriptedSource", "output_ports": ["o"],
                                      "options": {"script": [0, 1, 2, entry]}}], "output_ports": ["o"]})
    path = r"^nodes\[0\]\.options\.script\[3\]" + re.escape(where) + r" \(node `src`\): .*"
    with pytest.raises(ConfigError, match=path + message):
        run_graph(text)


def test_bad_options_are_config_errors_too() -> None:
    def graph(options: object) -> str:
        return yaml.safe_dump({"nodes": [{"name": "s", "kernel": "ScriptedSource", "output_ports": ["o"],
                                          "options": options}], "output_ports": ["o"]})

    with pytest.raises(ConfigError, match=r"^nodes\[0\]\.options \(node `s`\): unknown option `scrpit`; "
                                          r"did you mean `script`\?"):
        run_graph(graph({"scrpit": [1]}))
    with pytest.raises(ConfigError, match=r"^nodes\[0\]\.options\.step \(node `s`\): .* must be >= 1, got 0"):
        run_graph(graph({"script": [1], "step": 0}))


def test_a_graph_started_directly_checks_the_script_in_open() -> None:
    text = yaml.safe_dump({"nodes": [{"name": "src", "kernel": "ScriptedSource", "output_ports": ["o"],
                                      "options": {"script": [{"gap": "soon"}]}}], "output_ports": ["o"]})
    with flowplex.Graph.from_yaml(text) as g, pytest.raises(KernelError, match="open failed") as info:
        g.start()
    assert isinstance(info.value.__cause__, ConfigError)
    assert str(info.value.__cause__).startswith("options.script[0].gap (node `src`): expected seconds >= 0")


def test_scripted_checks_python_items_where_they_are_written() -> None:
    with pytest.raises(UsageError, match=r"items\[1\]: cannot script a dict value"):
        scripted("src", [1, {"a": 1}])
    with pytest.raises(ConfigError, match=r"options\.script\[1\] \(scripted node `src`\): timestamp 0 does not"):
        scripted("src", [1, At(0, 2)])
    node = testing.ScriptedSource.node("s", [Gap(0.5), Fail("x"), EndOfStream, b"hi", At(3, [1.5])], output="o")
    assert node["options"] == {"script": [{"gap": 0.5}, {"fail": "x"}, {"end": True}, {"bytes": "6869"},
                                          {"value": [1.5], "ts": 3}]}


def test_a_reset_graph_plays_the_script_again() -> None:
    with flowplex.Graph.from_yaml(yaml.safe_dump(through(scripted("src", [1, 2])))) as g:
        first = run_graph(g)
        g.reset()
        assert run_graph(g) == first == {"y": [(0, 1), (1, 2)]}


def test_collect_sink_records_port_timestamp_and_value_under_its_key() -> None:
    graph = {"nodes": [scripted("src", [1, At(5, "x")]),
                       {"name": "sink", "kernel": "CollectSink", "input_ports": ["out"], "options": {"key": "k1"}}],
             "output_ports": []}
    assert run_graph(graph) == {}
    assert CollectSink.records("k1") == [("out", 0, 1), ("out", 5, "x")]
    run_graph(graph)  # open clears the key: a second run does not append to the first
    assert len(CollectSink.records("k1")) == 2
    CollectSink.clear("k1")
    assert CollectSink.records("k1") == []


def test_the_same_scripted_graph_runs_on_the_process_pool() -> None:
    # One test only: each start spawns the pool's workers. The script travels as options.
    graph = through(scripted("src", [1, Gap(0.05), At(7, 2)]), kernel="ScaleKernel", options={"factor": 10})
    assert run_graph(graph, executor="processes", timeout=60)["y"] == [(0, 10), (7, 20)]
    with pytest.raises(KernelError, match=r"\[src\] RuntimeError: boom"):
        run_graph(through(scripted("src", [Fail("boom")])), executor="processes", timeout=60)


def test_testing_all_is_pinned() -> None:
    assert sorted(testing.__all__) == sorted({
        "EXECUTOR_KINDS", "EXTRA_KINDS", "At", "CollectSink", "EndOfStream", "Fail", "FakeClock", "Gap",
        "LoopbackExecutor", "Outputs", "Record", "ScriptedSource", "default_executor", "run_graph", "scripted"})
    assert testing.EndOfStream is flowplex.errors.EndOfStream  # the clean-end marker, not a look-alike
