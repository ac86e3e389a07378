"""The schema layer: unknown keys, value types, defaults and the JSON Schema."""

from __future__ import annotations

import json
import re

import pytest

from flowplex.config import json_schema, load_yaml
from flowplex.spec import InputPolicySpec, InputQueuesSpec
from flowplex.spec._specs import DEFAULT_EXECUTOR

from ._util import assert_error

SRC = "nodes: [{kernel: Src, output_ports: [x]%s}]\noutput_ports: [x]\n"
ONE = (
    "input_ports: [i]\nnodes: [{name: a, kernel: K, input_ports: [i], output_ports: [x]%s}]\noutput_ports: "
    "[x]\n"
)
ROUTE = (
    "input_ports: [i]\noutput_ports: [x, y]\n"
    "nodes: [{name: r, type: route, input_ports: [i], output_ports: [x, y], routes: [%s]}]\n"
)


@pytest.mark.parametrize(
    ("text", "pattern"),
    [
        ("nodes: [{kernal: X}]", r"^nodes\[0\]: unknown field `kernal`; did you mean `kernel`\?$"),
        (
            "nodes: [{name: a, kernal: X}]",
            r"^nodes\[0\] \(node `a`\): unknown field `kernal`; did you mean `kernel`\?$",
        ),
        ("nodez: []", r"^unknown field `nodez`; did you mean `nodes`\?$"),
        (
            "foo: 1",
            r"^unknown field `foo`, expected one of `include`, `imports`, `executors`, `nodes`, .*`trace_capacity`, "
            r"`strict_ports`, `control`$",
        ),
        (
            "executors: [{name: a, num_thread: 2}]",
            r"^executors\[0\]: unknown field `num_thread`; did you mean `num_threads`\?$",
        ),
        (
            ONE % ", input_policy: {type: batch, capacty: 2}",
            r"^nodes\[0\]\.input_policy \(node `a`\): unknown field `capacty`; did you mean `capacity`\?$",
        ),
        (
            ONE % ", input_queues: {packet: 2}",
            r"^nodes\[0\]\.input_queues \(node `a`\): unknown field `packet`; did you mean `packets`\?$",
        ),
        (
            ONE % ", input_queues: {ports: {i: {packet: 2}}}",
            (
                r"^nodes\[0\]\.input_queues\.ports\.i \(node `a`\): unknown field `packet`; did you mean "
                r"`packets`\?$"
            ),
        ),
        (
            ROUTE % "{to: x, defualt: true}",
            r"^nodes\[0\]\.routes\[0\] \(node `r`\): unknown field `defualt`; did you mean `default`\?$",
        ),
        (
            ROUTE % "{to: x, when: {metdata: k, op: exists}}",
            r"^nodes\[0\]\.routes\[0\]\.when \(node `r`\):"
            r" unknown field `metdata`; did you mean `metadata`\?$",
        ),
        (
            ROUTE % "{to: x, when: {timestamp: {op: gt, valeu: 1}}}",
            (
                r"^nodes\[0\]\.routes\[0\]\.when\.timestamp \(node `r`\): unknown field `valeu`; did you "
                r"mean `value`\?$"
            ),
        ),
        ("subgraphs: {A: {nodez: []}}", r"^subgraphs\.A: unknown field `nodez`; did you mean `nodes`\?$"),
        (
            "subgraphs: {A: {nodes: [{name: q, kernal: z}]}}",
            r"^subgraphs\.A\.nodes\[0\] \(node `q`\): unknown field `kernal`; did you mean `kernel`\?$",
        ),
    ],
)
def test_unknown_fields(text: str, pattern: str) -> None:
    assert_error(text, pattern)


@pytest.mark.parametrize(
    ("text", "pattern"),
    [
        (
            "max_queued_bytes: 5",
            r"^unknown field `max_queued_bytes` \(the byte"
            r" watermark was removed; use `max_queued_packets`\)$",
        ),
        (
            SRC % ", input_queue_capacity: 3",
            r"^nodes\[0\] \(node `Src#0`\): unknown field `input_queue_capacity`",
        ),
        (
            ONE % ", input_queues: {bytes: 3}",
            (
                r"^nodes\[0\]\.input_queues \(node `a`\): unknown field `bytes` \(byte capacities are not "
                r"supported; use `packets`\)$"
            ),
        ),
        (
            ONE % ", input_queues: {ports: {i: {bytes: 3}}}",
            r"^nodes\[0\]\.input_queues\.ports\.i \(node `a`\): unknown field `bytes`",
        ),
    ],
)
def test_explicitly_rejected_keys(text: str, pattern: str) -> None:
    assert_error(text, pattern)


@pytest.mark.parametrize(
    ("text", "pattern"),
    [
        ("max_queue_size: 1.5", r"^max_queue_size: expected an integer, got float `1\.5`$"),
        ("max_queue_size: '5'", r'^max_queue_size: expected an integer, got string "5"$'),
        (
            "max_queued_packets: -1",
            r"^max_queued_packets: expected a non-negative integer, got integer `-1`$",
        ),
        ("watchdog_ms: true", r"^watchdog_ms: expected an integer, got boolean `true`$"),
        ("stats_timing: 1", r"^stats_timing: expected `true` or `false`, got integer `1`$"),
        ("nodes: null", r"^nodes: expected a list, got null$"),
        ("nodes: [a]", r'^nodes\[0\]: expected a mapping, got string "a"$'),
        ("include: lib.yaml", r'^include: expected a list, got string "lib\.yaml"$'),
        (
            "executors: [{name: a, num_threads: -1}]",
            r"^executors\[0\]\.num_threads: expected a non-negative integer",
        ),
        ("executors: [{name: a, priority: 100}]", r"^executors\[0\]\.priority: must be <= 99, got 100$"),
        (
            "executors: [{name: a, affinity: [-1]}]",
            r"^executors\[0\]\.affinity\[0\]: expected a non-negative integer",
        ),
        (SRC % ", rate: '5'", r'^nodes\[0\]\.rate \(node `Src#0`\): expected a number, got string "5"$'),
        (
            SRC % ", max_in_flight: -1",
            r"^nodes\[0\]\.max_in_flight \(node `Src#0`\): expected a non-negative integer",
        ),
        (SRC % ", name: [a]", r"^nodes\[0\]\.name \(node `Src#0`\): expected a string, got a list$"),
        (
            ONE % ", input_queues: {packets: -3}",
            r"^nodes\[0\]\.input_queues\.packets \(node `a`\): expected a non-negative integer",
        ),
        (
            ROUTE % "{to: x, when: {metadata: c, op: eq, value: [1]}}",
            (
                r"^nodes\[0\]\.routes\[0\]\.when\.value \(node `r`\): expected a boolean, number or string, "
                r"got a list$"
            ),
        ),
        (
            ROUTE % "{when: {metadata: c, op: exists}}",
            r"^nodes\[0\]\.routes\[0\] \(node `r`\): missing field `to`$",
        ),
    ],
)
def test_value_types(text: str, pattern: str) -> None:
    assert_error(text, pattern)


@pytest.mark.parametrize(
    ("text", "pattern"),
    [
        (
            "stats: fulll",
            (
                r"^stats: unknown stats level `fulll`; did you mean `full`\? \(expected `off`, `basic` "
                r"or `full`\)$"
            ),
        ),
        (
            "executors: [{name: a, type: ThreadPolExecutor}]",
            (
                r"^executors\[0\]\.type: unknown executor type"
                r" `ThreadPolExecutor`; did you mean `ThreadPoolExecut"
                r"or`\?"
                r" \(supported: ThreadPoolExecutor, DelegatingExecutor, ProcessPoolExecutor, RayExecutor\)$"
            ),
        ),
        (
            "executors: [{name: a, type: Foo}]",
            (
                r"^executors\[0\]\.type: unknown executor type `Foo` \(supported: ThreadPoolExecutor, "
                r"DelegatingExecut"
                r"or, ProcessPoolExecutor, RayExecutor\)$"
            ),
        ),
        (
            ONE % ", input_policy: {type: synk}",
            (
                r"^nodes\[0\]\.input_policy\.type \(node `a`\): unknown input_policy `synk`; did you mean "
                r"`sync`\? \(valid: sync / immediate / fixed_size / sync_set / batch\)$"
            ),
        ),
        (
            ONE % ", input_policy: {type: ''}",
            r"^nodes\[0\]\.input_policy\.type \(node `a`\): unknown input_policy `` \(valid: ",
        ),
        (
            SRC % ", on_error: skp",
            (
                r"^nodes\[0\]\.on_error \(node `Src#0`\): unknown on_error `skp`; did you mean `skip`\? "
                r'\(expected "abort" or "skip"\)$'
            ),
        ),
        (
            SRC % ", on_error: ignore",
            (
                r'^nodes\[0\]\.on_error \(node `Src#0`\): unknown on_error `ignore` \(expected "abort" '
                r'or "skip"\)$'
            ),
        ),
    ],
)
def test_enumerations_suggest_the_closest_value(text: str, pattern: str) -> None:
    assert_error(text, pattern)


# -- defaults: one test per documented default -----------------------------------------------


def test_graph_defaults() -> None:
    spec = load_yaml("")
    assert spec.nodes == ()
    assert spec.input_ports == ()
    assert spec.output_ports == ()
    assert spec.executors == ()
    assert spec.source is None


def test_max_queue_size_defaults_to_100() -> None:
    assert load_yaml("").max_queue_size == 100
    assert load_yaml("max_queue_size: 0").max_queue_size == 0


def test_max_queued_packets_absent_is_none_and_zero_is_explicit() -> None:
    assert load_yaml("").max_queued_packets is None
    assert load_yaml("max_queued_packets: 0").max_queued_packets == 0
    assert load_yaml("max_queued_packets: 256").max_queued_packets == 256


def test_watchdog_and_buffer_pool_default_to_off() -> None:
    spec = load_yaml("")
    assert spec.watchdog_ms == 0
    assert spec.buffer_pool_max_bytes == 0
    assert spec.trace_capacity == 0


def test_stats_defaults_to_basic() -> None:
    assert load_yaml("").stats == "basic"


@pytest.mark.parametrize(("legacy", "level"), [("true", "full"), ("false", "basic")])
def test_stats_timing_is_the_legacy_spelling(legacy: str, level: str) -> None:
    assert load_yaml(f"stats_timing: {legacy}").stats == level


def test_stats_and_stats_timing_together_is_an_error() -> None:
    assert_error(
        "stats: full\nstats_timing: true", r"^`stats` and legacy `stats_timing` cannot be used together$"
    )


def test_node_defaults() -> None:
    node = load_yaml(SRC % "").nodes[0]
    assert node.name == "Src#0"
    assert node.executor == DEFAULT_EXECUTOR
    assert node.max_in_flight == 1
    assert node.options is None
    assert node.input_policy == InputPolicySpec(type="sync", capacity=0, sets=())
    assert node.input_queues == InputQueuesSpec(packets=0, ports=())
    assert node.back_edges == ()
    assert node.on_error == "abort"
    assert node.rate == 0.0
    assert node.route is None
    assert node.path == "nodes[0]"


def test_node_zero_and_empty_values_mean_the_defaults() -> None:
    node = load_yaml(SRC % ", max_in_flight: 0, executor: '', on_error: ''").nodes[0]
    assert (node.max_in_flight, node.executor, node.on_error) == (1, DEFAULT_EXECUTOR, "abort")


def test_unnamed_nodes_are_named_after_kernel_and_index() -> None:
    spec = load_yaml(
        "input_ports: [i]\n"
        "nodes: [{kernel: K, input_ports: [i], output_ports: [a]},"
        " {type: route, input_ports: [a], output_ports: [b], routes: [{to: b, default: true}]}]\n"
        "output_ports: [b]"
    )
    assert [n.name for n in spec.nodes] == ["K#0", "route#1"]


def test_a_number_is_accepted_as_a_name() -> None:
    assert load_yaml(SRC % ", name: 5").nodes[0].name == "5"


def test_executor_defaults() -> None:
    spec = load_yaml("executors: [{name: cpu}, {name: h, type: DelegatingExecutor}]")
    cpu, host = spec.executors
    assert (cpu.type, cpu.num_threads, cpu.affinity, cpu.priority) == ("ThreadPoolExecutor", 1, (), 0)
    assert (host.type, host.num_threads) == ("DelegatingExecutor", 0)


def test_executor_empty_type_is_a_pool_and_zero_threads_is_one() -> None:
    (ex,) = load_yaml("executors: [{name: cpu, type: '', num_threads: 0}]").executors
    assert (ex.type, ex.num_threads) == ("ThreadPoolExecutor", 1)


def test_input_queue_override_without_packets_inherits() -> None:
    node = load_yaml(ONE % ", input_queues: {packets: 4, ports: {i: {}}}").nodes[0]
    assert node.input_queues.ports == (("i", None),)
    assert node.input_queues.capacity_of("i") == 4


def test_route_defaults() -> None:
    route = load_yaml(ROUTE % "{to: x, default: true}").nodes[0].route
    assert route is not None
    assert (route.mode, route.unmatched) == ("first", "drop")


# -- JSON Schema ------------------------------------------------------------------------------


def test_json_schema_is_serialisable_and_strict() -> None:
    schema = json_schema()
    json.dumps(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["additionalProperties"] is False
    for name, definition in schema["$defs"].items():
        assert definition.get("additionalProperties") is False, name


def test_json_schema_covers_route_nodes() -> None:
    schema = json_schema()
    node = schema["$defs"]["NodeModel"]["properties"]
    assert {"mode", "unmatched", "routes"} <= set(node)
    assert "route" in node["type"]["examples"]
    predicate = schema["$defs"]["PredicateModel"]
    assert {"all", "any", "not", "timestamp", "metadata", "op", "value"} == set(predicate["properties"])
    assert {"required": ["not"]} in predicate["oneOf"]


def test_json_schema_lists_every_top_level_field() -> None:
    assert set(json_schema()["properties"]) == {
        "include", "imports", "executors", "nodes", "subgraphs", "input_ports", "output_ports", "default_executor",
        "max_queue_size", "max_queued_packets", "watchdog_ms", "buffer_pool_max_bytes", "stats", "stats_timing",
        "trace_capacity", "strict_ports", "control",
    }  # fmt: skip


def test_json_schema_enumerates_policy_and_executor_types() -> None:
    text = json.dumps(json_schema())
    for value in ("fixed_size", "sync_set", "DelegatingExecutor", "ProcessPoolExecutor", "contains"):
        assert re.search(rf'"{value}"', text)


def test_the_problem_that_comes_first_in_the_document_is_reported() -> None:
    text = "max_queue_size: -1\nnodes:\n  - {name: a, kernel: K, rate: x}\n"
    assert_error(text, r"^max_queue_size: ")
    text = "nodes:\n  - {name: a, kernel: K, rate: x}\nmax_queue_size: -1\n"
    assert_error(text, r"^nodes\[0\]\.rate \(node `a`\): expected a number")


def _two_nodes(src: str = "", sink: str = "", head: str = "") -> str:
    return (f"{head}nodes: [{{name: s, kernel: RangeSourceKernel, output_ports: [x]{src}}}, "
            f"{{name: k, kernel: PassThroughKernel, input_ports: [x], output_ports: [y]{sink}}}]\noutput_ports: [y]\n")


def test_a_number_that_names_something_still_works() -> None:
    spec = load_yaml("executors: [{name: 5}]\ndefault_executor: 5\n"
                     "nodes: [{name: 1, kernel: RangeSourceKernel, output_ports: [7], executor: 5},"
                     " {name: 2, kernel: PassThroughKernel, input_ports: [7], output_ports: [8], back_edges: []}]\n"
                     "output_ports: [8]\n")
    assert [(n.name, n.executor) for n in spec.nodes] == [("1", "5"), ("2", "5")]
    assert spec.default_executor == "5"


def test_other_wrong_types_say_what_was_expected() -> None:
    for text, pattern in [
        (_two_nodes(head="default_executor: 1.5\n"), r"^default_executor: expected a string, got float `1\.5`$"),
        (_two_nodes(src=", executor: true"),
         r"^nodes\[0\]\.executor \(node `s`\): expected a string, got boolean `true`$"),
        (_two_nodes(src=", kernel: [a]").replace("kernel: RangeSourceKernel, ", ""),
         r"^nodes\[0\]\.kernel \(node `s`\): expected a string, got a list$"),
        (_two_nodes(head="default_executor: {a: 1}\n"), r"^default_executor: expected a string, got a mapping$"),
    ]:
        assert_error(text, pattern)
