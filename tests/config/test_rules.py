"""Semantic rules of the YAML format, through ``load_yaml`` (schema + expansion + plan)."""

from __future__ import annotations

import pytest

from flowplex.config import load_yaml

from ._util import assert_error

SRC = "nodes: [{name: a, kernel: Src, output_ports: [x]%s}]\noutput_ports: [x]\n"
ONE = (
    "input_ports: [i]\nnodes: [{name: a, kernel: K, input_ports: [i], output_ports: [x]%s}]\noutput_ports: "
    "[x]\n"
)
TWO = (
    "input_ports: [i, j]\nnodes: [{name: a, kernel: K,"
    " input_ports: [i, j], output_ports: [x]%s}]\noutput_ports: "
    "[x]\n"
)
LOOP = (
    "input_ports: [i]\nnodes: [{name: a, kernel: K,"
    " input_ports: [i, x], output_ports: [x]%s}]\noutput_ports: "
    "[x]\n"
)


def ex(executors: str, node: str) -> str:
    return f"executors: [{executors}]\n" + ONE % node


@pytest.mark.parametrize(
    ("text", "pattern"),
    [
        (
            "executors: [{type: ThreadPoolExecutor}]",
            r"^executors\[0\]\.name: executor entry must have a name; nodes select an executor by it$",
        ),
        ("executors: [{name: ''}]", r"^executors\[0\]\.name: executor entry must have a name"),
        (
            "executors: [{name: default}]",
            r"^executors\[0\]\.name: `default` is reserved for the implicit executor$",
        ),
        ("executors: [{name: a}, {name: a}]", r"^executors\[1\]\.name: executor `a` defined more than once$"),
        (
            "executors: [{name: h, type: DelegatingExecutor, num_threads: 2}]",
            (
                r"^executors\[0\]: DelegatingExecutor owns no threads, so `num_threads`, `affinity`, and "
                r"`priority` are meaningless"
            ),
        ),
        (
            "executors: [{name: h, type: DelegatingExecutor, affinity: [1]}]",
            r"^executors\[0\]: DelegatingExecutor owns no threads",
        ),
        (
            "executors: [{name: h, type: DelegatingExecutor, priority: 3}]",
            r"^executors\[0\]: DelegatingExecutor owns no threads",
        ),
        (
            ex("{name: cpu}", ", executor: cpx"),
            r"^nodes\[0\]\.executor \(node `a`\): undefined executor `cpx`; did you mean `cpu`\?$",
        ),
        (
            ex("{name: cpu}", ", executor: zzzzzz"),
            r"^nodes\[0\]\.executor \(node `a`\): undefined executor `zzzzzz`$",
        ),
        (
            "executors: [{name: h, type: DelegatingExecutor}]\n" + SRC % ", executor: h",
            r"^nodes\[0\]\.executor \(node `a`\): source nodes cannot run on DelegatingExecutor$",
        ),
        (
            ex("{name: c, num_threads: 1}", ", executor: c, max_in_flight: 2"),
            (
                r"^nodes\[0\]\.max_in_flight \(node `a`\): max_in_flight=2 needs an executor with more "
                r"than one thread, but executor `c` provides 1"
            ),
        ),
        (
            ex("{name: c}", ", executor: c, max_in_flight: 2"),
            (
                r"^nodes\[0\]\.max_in_flight \(node `a`\): max_in_flight=2 needs an executor with more "
                r"than one thread"
            ),
        ),
        (
            ex("{name: h, type: DelegatingExecutor}", ", executor: h, max_in_flight: 2"),
            r"^nodes\[0\]\.max_in_flight \(node `a`\): max_in_flight=2 needs an executor",
        ),
    ],
)
def test_executor_rules(text: str, pattern: str) -> None:
    assert_error(text, pattern)


def test_max_in_flight_is_allowed_on_the_default_executor_and_on_pools() -> None:
    assert load_yaml(ONE % ", max_in_flight: 8").nodes[0].max_in_flight == 8
    assert (
        load_yaml(ex("{name: c, num_threads: 2}", ", executor: c, max_in_flight: 2")).nodes[0].max_in_flight
        == 2
    )


def test_executor_default_may_be_named_explicitly() -> None:
    assert load_yaml(ONE % ", executor: default").nodes[0].executor == "default"


@pytest.mark.parametrize(
    ("text", "pattern"),
    [
        (
            "nodes: [{input_ports: [a]}]",
            r"^nodes\[0\]: node has neither `kernel` nor `type` -- one is required$",
        ),
        (
            "nodes: [{name: a, kernel: '', type: ''}]",
            r"^nodes\[0\] \(node `a`\): node has neither `kernel` nor `type` -- one is required$",
        ),
        (
            "nodes: [{name: a, kernel: X, type: Y}]",
            r"^nodes\[0\] \(node `a`\): node has both `kernel` and `type` -- only one is allowed$",
        ),
        (SRC % ", mode: all", r"^nodes\[0\] \(node `a`\): route fields are only valid when `type: route`$"),
        (
            SRC % ", unmatched: error",
            r"^nodes\[0\] \(node `a`\): route fields are only valid when `type: route`$",
        ),
        (SRC % ", routes: [{to: x, default: true}]", r"route fields are only valid when `type: route`$"),
        (
            SRC % "}, {name: a, kernel: Src, output_ports: [y]",
            (
                r"^nodes\[1\]\.name \(node `a`\): node `a` is"
                r" defined more than once \(first at nodes\[0\]\); "
                r"node names must be unique$"
            ),
        ),
        (
            "nodes: [{type: Prep}]\nsubgraphs: {Prepp: {nodes: []}}",
            r"^nodes\[0\]\.type \(node `Prep`\): unknown subgraph `Prep`; did you mean `Prepp`\?$",
        ),
        ("nodes: [{name: a, type: Foo}]", r"^nodes\[0\]\.type \(node `a`\): unknown subgraph `Foo`$"),
    ],
)
def test_node_rules(text: str, pattern: str) -> None:
    assert_error(text, pattern)


def test_route_fields_equal_to_the_defaults_are_accepted_on_any_node() -> None:
    assert load_yaml(SRC % ", mode: first, unmatched: drop, routes: []").nodes[0].route is None


@pytest.mark.parametrize(
    ("text", "pattern"),
    [
        (
            "input_ports: [a, a]\noutput_ports: [a]",
            r"^input_ports\[1\]: graph input port `a` is declared more than once$",
        ),
        (
            "input_ports: [a]\noutput_ports: [a, a]",
            r"^output_ports\[1\]: graph output port `a` is declared more than once$",
        ),
        (
            "input_ports: ['a:b:c:d']",
            (
                r"^input_ports\[0\]: port declaration `a:b:c:d` has an invalid number of segments \(expected "
                r"name / TAG:name / TAG:index:name\)$"
            ),
        ),
        (
            "output_ports: ['a:x:b']",
            r"^output_ports\[0\]: port declaration `a:x:b`: index `x` is not a non-negative integer$",
        ),
        ("input_ports: ['a:']", r"^input_ports\[0\]: port declaration `a:` has an empty name$"),
        (
            "input_ports: [a]\nnodes: [{name: s, kernel: Src, output_ports: [a]}]",
            r"^nodes\[0\]\.output_ports\[0\] \(node `s`\): port `a` is also a graph input$",
        ),
        (
            "nodes: [{name: p, kernel: S, output_ports: [x]}, {name: q, kernel: S, output_ports: [x]}]",
            (
                r"^nodes\[1\]\.output_ports\[0\] \(node `q`\): port `x` has multiple producers \(node `p` "
                r"and node `q`\)$"
            ),
        ),
        (
            "input_ports: [abc]\noutput_ports: [abd]",
            r"^output_ports\[0\]: graph output `abd` has no producer; did you mean `abc`\?$",
        ),
        ("output_ports: [zzz]", r"^output_ports\[0\]: graph output `zzz` has no producer$"),
        (
            (
                "input_ports: [x]\nnodes: [{name: a, kernel: K,"
                " input_ports: [y], output_ports: [z]}]\noutput_port"
                "s: "
                "[z]"
            ),
            r"^nodes\[0\]\.input_ports\[0\] \(node `a`\): port `y` has no producer; did you mean `x`\?$",
        ),
        (
            ONE.replace("[i], output", "[i, i], output") % "",
            r"^nodes\[0\]\.input_ports\[1\] \(node `a`\): port"
            r" `i` is declared more than once in `input_ports`$",
        ),
        (
            SRC.replace("[x]%s", "[x, x]%s") % "",
            r"^nodes\[0\]\.output_ports\[1\] \(node `a`\): port"
            r" `x` is declared more than once in `output_ports`$",
        ),
        (
            ONE.replace("[i], output", "['T:1:i'], output") % "",
            r"^nodes\[0\]\.input_ports \(node `a`\): tag `T` index must be contiguous from 0, got \[1\]$",
        ),
        (
            TWO.replace("[i, j], output", "['T:j', 'T:0:i'], output") % "",
            (
                r"^nodes\[0\]\.input_ports\[1\] \(node `a`\): port `i` \(tag=`T`, index=0\) is a duplicate "
                r"of port `j`$"
            ),
        ),
        (
            ONE.replace("[i], output", "['T:1:i:j'], output") % "",
            (
                r"^nodes\[0\]\.input_ports\[0\] \(node `a`\): port declaration `T:1:i:j` has an invalid "
                r"number of segments"
            ),
        ),
    ],
)
def test_port_rules(text: str, pattern: str) -> None:
    assert_error(text, pattern)


def test_port_tags_and_indices_are_kept() -> None:
    node = load_yaml(TWO.replace("[i, j], output", "['T:1:i', 'T:j'], output") % "").nodes[0]
    assert [(p.name, p.tag, p.index) for p in node.input_ports] == [("i", "T", 1), ("j", "T", 0)]


def test_graph_ports_only_use_the_name() -> None:
    spec = load_yaml("input_ports: ['T:a']\noutput_ports: ['Q:3:a']")
    assert [p.name for p in spec.input_ports] == ["a"] == [p.name for p in spec.output_ports]


def test_a_consumer_may_come_before_its_producer() -> None:
    spec = load_yaml(
        "nodes: [{name: b, kernel: K, input_ports: [x], output_ports: [y]},"
        " {name: a, kernel: S, output_ports: [x]}]\n"
        "output_ports: [y]"
    )
    assert [n.name for n in spec.nodes] == ["b", "a"]


@pytest.mark.parametrize(
    ("text", "pattern"),
    [
        (
            ONE % ", input_policy: {type: fixed_size}",
            r"^nodes\[0\]\.input_policy\.capacity \(node `a`\): fixed_size policy capacity must be >= 1$",
        ),
        (
            ONE % ", input_policy: {type: batch, capacity: 0}",
            (
                r"^nodes\[0\]\.input_policy\.capacity \(node `a`\): batch policy capacity \(the batch size\) "
                r"must be >= 1$"
            ),
        ),
        (
            ONE % ", input_policy: {type: sync_set}",
            (
                r"^nodes\[0\]\.input_policy\.sets \(node `a`\): sync_set policy must provide sets \(input "
                r"port groups\)$"
            ),
        ),
        (
            TWO % ", input_policy: {type: sync_set, sets: [[i]]}",
            (
                r"^nodes\[0\]\.input_policy\.sets \(node `a`\): input port `j` is not assigned to a group; "
                r"put it in its own group \(\[j\]\)"
            ),
        ),
        (
            TWO % ", input_policy: {type: sync_set, sets: [[i], [jj]]}",
            (
                r"^nodes\[0\]\.input_policy\.sets\[1\] \(node `a`\): unknown input port `jj`; did you mean "
                r"`j`\?$"
            ),
        ),
        (
            TWO % ", input_policy: {type: sync_set, sets: [[i, j], [j]]}",
            r"^nodes\[0\]\.input_policy\.sets\[1\] \(node `a`\): input port `j` appears in multiple groups$",
        ),
        (
            TWO % ", input_policy: {type: sync_set, sets: [[i, j], []]}",
            r"^nodes\[0\]\.input_policy\.sets\[1\] \(node `a`\): group must not be empty$",
        ),
        (
            LOOP % ", back_edges: [x], input_policy: {type: sync_set, sets: [[i], [x]]}",
            (
                r"^nodes\[0\]\.input_policy\.sets\[1\] \(node `a`\): back_edge `x` must not appear in a "
                r"sync_set group$"
            ),
        ),
    ],
)
def test_input_policy_rules(text: str, pattern: str) -> None:
    assert_error(text, pattern)


def test_input_policies_parse() -> None:
    node = load_yaml(LOOP % ", back_edges: [x], input_policy: {type: sync_set, sets: [[i]]}").nodes[0]
    assert (node.input_policy.type, node.input_policy.sets) == ("sync_set", (("i",),))
    node = load_yaml(ONE % ", input_policy: {type: batch, capacity: 3}").nodes[0]
    assert (node.input_policy.type, node.input_policy.capacity) == ("batch", 3)


@pytest.mark.parametrize(
    ("text", "pattern"),
    [
        (
            ONE % ", input_queues: {ports: {j: {packets: 3}}}",
            (
                r"^nodes\[0\]\.input_queues\.ports\.j \(node `a`\): input queue capacity override references "
                r"unknown input port `j`; did you mean `i`\?$"
            ),
        ),
        (
            LOOP % ", back_edges: [x], input_queues: {ports: {x: {packets: 3}}}",
            (
                r"^nodes\[0\]\.input_queues\.ports\.x \(node `a`\): input queue capacity override for "
                r"back-edge "
                r"input `x` is not supported"
            ),
        ),
        (
            ONE % ", input_policy: {type: fixed_size, capacity: 2}, input_queues: {packets: 3}",
            (
                r"^nodes\[0\]\.input_queues \(node `a`\): lossless input queue capacities cannot be combined "
                r"with input_policy=fixed_size \(lossy drop-oldest\)$"
            ),
        ),
        (
            ONE % ", input_policy: {type: fixed_size, capacity: 2}, input_queues: {ports: {i: {packets: 3}}}",
            r"cannot be combined with input_policy=fixed_size",
        ),
    ],
)
def test_input_queue_rules(text: str, pattern: str) -> None:
    assert_error(text, pattern)


def test_input_queue_zero_overrides_are_allowed_where_capacities_are_not() -> None:
    node = load_yaml(LOOP % ", back_edges: [x], input_queues: {packets: 2, ports: {x: {packets: 0}}}").nodes[
        0
    ]
    assert node.input_queues.ports == (("x", 0),)
    load_yaml(ONE % ", input_policy: {type: fixed_size, capacity: 2}, input_queues: {ports: {i: {}}}")


@pytest.mark.parametrize(
    ("text", "pattern"),
    [
        (
            LOOP % ", back_edges: [xx]",
            (
                r"^nodes\[0\]\.back_edges\[0\] \(node `a`\): back_edge `xx` is not one of this node's input "
                r"ports; did you mean `x`\?$"
            ),
        ),
        (
            "nodes: [{name: a, kernel: K, input_ports: [x], output_ports: [x], back_edges: [x]}]",
            (
                r"^nodes\[0\]\.back_edges \(node `a`\): every input port is a back_edge -- a node needs "
                r"at least one forward input to ever fire$"
            ),
        ),
        (
            LOOP % "",
            (
                r"^nodes\[0\]\.input_ports\[1\] \(node `a`\): topology cycle: node `a` -> `a`; mark "
                r"a feedback "
                r"input with `back_edges` \(e\.g\. `back_edges: \[x\]` on node `a`\)$"
            ),
        ),
        (
            "input_ports: [i]\nnodes: [{name: a, kernel: K, input_ports: [i, y], output_ports: [x]},"
            " {name: b, kernel: K, input_ports: [x], output_ports: [y]}]\noutput_ports: [x]",
            (
                r"^nodes\[0\]\.input_ports\[1\] \(node `a`\): topology cycle: node `a` -> `b` -> `a`; mark "
                r"a feedback input with `back_edges`"
            ),
        ),
        (
            "input_ports: [i]\nnodes: [{name: s, kernel: K, input_ports: [i], output_ports: [p]},"
            " {name: c, kernel: K, input_ports: [p, z], output_ports: [q]},"
            " {name: b, kernel: K, input_ports: [q], output_ports: [z]}]\noutput_ports: [q]",
            r"^nodes\[1\]\.input_ports\[1\] \(node `c`\): topology cycle: node `c` -> `b` -> `c`;",
        ),
    ],
)
def test_back_edge_and_cycle_rules(text: str, pattern: str) -> None:
    assert_error(text, pattern)


def test_back_edges_break_cycles() -> None:
    node = load_yaml(LOOP % ", back_edges: [x]").nodes[0]
    assert node.back_edges == ("x",)


@pytest.mark.parametrize(
    ("text", "pattern"),
    [
        (
            ONE % ", rate: 5",
            (
                r"^nodes\[0\]\.rate \(node `a`\): rate only applies to source nodes \(no input ports\); "
                r"a non-source is driven by upstream data$"
            ),
        ),
        (
            SRC % ", rate: -1",
            r"^nodes\[0\]\.rate \(node `a`\): rate must be a positive, finite number \(Hz\), got -1$",
        ),
        (
            SRC % ", rate: .nan",
            r"^nodes\[0\]\.rate \(node `a`\): rate must be a positive, finite number \(Hz\), got NaN$",
        ),
        (
            SRC % ", rate: .inf",
            r"^nodes\[0\]\.rate \(node `a`\): rate must be a positive, finite number \(Hz\), got inf$",
        ),
    ],
)
def test_rate_rules(text: str, pattern: str) -> None:
    assert_error(text, pattern)


def test_rate_on_a_source() -> None:
    assert load_yaml(SRC % ", rate: 30").nodes[0].rate == 30.0
    assert load_yaml(SRC % ", rate: 0").nodes[0].rate == 0.0


def test_on_error_skip() -> None:
    assert load_yaml(SRC % ", on_error: skip").nodes[0].on_error == "skip"


def test_include_in_text_is_an_error() -> None:
    assert_error("include: [a.yaml]", r"^include: `include` is only supported when loading from a file")
    assert load_yaml("include: []").nodes == ()
