"""Node ``conditions`` and long-form input ports (``{name, timeout_ms}``), through ``load_yaml``.

Only the YAML side: what parses to which ``ConditionSpec`` / ``PortSpec.timeout_ms``, and every
build error with its path. What the engine does with them is tested with the engine.
"""

from __future__ import annotations

import json

import pytest

from flowplex.config import json_schema, load_yaml
from flowplex.errors import ConfigError
from flowplex.spec import ConditionSpec, PortSpec

from ._util import assert_error, dedent

SRC = "nodes: [{name: s, kernel: Src, output_ports: [x]%s}]\noutput_ports: [x]\n"
"""One source node; ``%s`` adds keys to it."""
JOIN = (
    "input_ports: [i, j]\n"
    "nodes: [{name: a, kernel: K, input_ports: %s, output_ports: [x]%s}]\n"
    "output_ports: [x]\n"
)
"""One node with inputs; the first ``%s`` is its ``input_ports``, the second adds keys."""


def conds(text: str) -> str:
    return SRC % f", conditions: {text}"


def test_every_kind_parses_to_its_spec() -> None:
    text = dedent("""
        nodes:
          - name: tick
            kernel: CounterSource
            output_ports: [t]
            conditions:
              - periodic: { period_ms: 100 }
              - count: 10
              - boolean: { name: armed }
              - event: { name: go.now-1 }
        output_ports: [t]
    """)
    assert load_yaml(text).nodes[0].conditions == (
        ConditionSpec("periodic", "nodes[0].conditions[0]", period_s=0.1),
        ConditionSpec("count", "nodes[0].conditions[1]", count=10),
        ConditionSpec("boolean", "nodes[0].conditions[2]", name="armed", initial=True),
        ConditionSpec("event", "nodes[0].conditions[3]", name="go.now-1"),
    )


def test_boolean_initial_and_integer_period() -> None:
    spec = load_yaml(conds("[{boolean: {name: armed, initial: false}}, {periodic: {period_ms: 2}}]"))
    assert spec.nodes[0].conditions == (
        ConditionSpec("boolean", "nodes[0].conditions[0]", name="armed", initial=False),
        ConditionSpec("periodic", "nodes[0].conditions[1]", period_s=0.002),
    )


def test_no_conditions_by_default() -> None:
    assert load_yaml(SRC % "").nodes[0].conditions == ()


def test_conditions_on_a_node_with_inputs() -> None:
    spec = load_yaml(JOIN % ("[i, j]", ", conditions: [{periodic: {period_ms: 5}}, {boolean: {name: on}}]"))
    assert [c.kind for c in spec.nodes[0].conditions] == ["periodic", "boolean"]


def test_the_same_boolean_name_on_two_nodes_is_one_switch() -> None:
    text = dedent("""
        nodes:
          - {name: a, kernel: Src, output_ports: [x], conditions: [{boolean: {name: armed}}]}
          - {name: b, kernel: K, input_ports: [x], output_ports: [y], conditions: [{boolean: {name: armed}}]}
        output_ports: [y]
    """)
    assert [n.conditions[0].name for n in load_yaml(text).nodes] == ["armed", "armed"]


@pytest.mark.parametrize(
    ("text", "pattern"),
    [
        (
            conds("[{periodc: {period_ms: 1}}]"),
            r"^nodes\[0\]\.conditions\[0\] \(node `s`\): unknown condition `periodc`; did you mean `periodic`\? "
            r"\(expected one of `periodic`, `count`, `boolean`, `event`\)$",
        ),
        (
            conds("[{timer: 3}]"),
            r"^nodes\[0\]\.conditions\[0\] \(node `s`\): unknown condition `timer` \(expected one of",
        ),
        (
            conds("[{}]"),
            r"^nodes\[0\]\.conditions\[0\] \(node `s`\): a condition is a mapping with exactly one key, one of "
            r"`periodic`, `count`, `boolean`, `event`$",
        ),
        (
            conds("[{count: 1, periodic: {period_ms: 3}}]"),
            r"^nodes\[0\]\.conditions\[0\] \(node `s`\): a condition is a mapping with exactly one key, .*, "
            r"got `periodic` and `count`$",
        ),
        (
            conds("[count]"),
            r"^nodes\[0\]\.conditions\[0\] \(node `s`\): expected a condition \(a mapping with one key, "
            r"e\.g\. `\{count: 10\}`\), got string \"count\"$",
        ),
        (conds("{count: 3}"), r"^nodes\[0\]\.conditions \(node `s`\): expected a list, got a mapping$"),
        (
            conds("[{periodic: {period_ms: 0}}]"),
            r"^nodes\[0\]\.conditions\[0\]\.periodic\.period_ms \(node `s`\): period_ms must be a positive, finite "
            r"number of milliseconds, got 0$",
        ),
        (
            conds("[{periodic: {period_ms: -5}}]"),
            r"^nodes\[0\]\.conditions\[0\]\.periodic\.period_ms \(node `s`\): .* got -5$",
        ),
        (conds("[{periodic: {period_ms: .nan}}]"), r"period_ms \(node `s`\): period_ms must be .*, got NaN$"),
        (conds("[{periodic: {period_ms: .inf}}]"), r"period_ms \(node `s`\): period_ms must be .*, got inf$"),
        (
            conds("[{periodic: {period_ms: 1e12}}]"),
            r"period_ms \(node `s`\): period_ms must be in 1e-06\.\.86400000 ms \(1 ns to one day\), got 1e\+12$",
        ),
        (
            conds("[{periodic: {period_ms: '5'}}]"),
            r"^nodes\[0\]\.conditions\[0\]\.periodic\.period_ms \(node `s`\): expected a number, got string",
        ),
        (
            conds("[{periodic: {period: 5}}]"),
            r"^nodes\[0\]\.conditions\[0\]\.periodic \(node `s`\): unknown field `period`, "
            r"expected one of `period_ms`$",
        ),
        (conds("[{periodic: {}}]"), r"^nodes\[0\]\.conditions\[0\]\.periodic \(node `s`\): missing field `period_ms`$"),
        (
            conds("[{count: 0}]"),
            r"^nodes\[0\]\.conditions\[0\]\.count \(node `s`\): count must be >= 1 \(how many times the node runs\), "
            r"got 0$",
        ),
        (conds("[{count: true}]"), r"^nodes\[0\]\.conditions\[0\]\.count \(node `s`\): expected an integer, got bool"),
        (conds("[{count: 2.5}]"), r"^nodes\[0\]\.conditions\[0\]\.count \(node `s`\): expected an integer, got float"),
        (
            JOIN % ("[i]", ", conditions: [{count: 3}]"),
            r"^nodes\[0\]\.conditions\[0\]\.count \(node `a`\): `count` is only for source-like nodes \(nodes without "
            r"input ports\), and this node has 1 input port\(s\)",
        ),
        (
            SRC % ", rate: 10, conditions: [{periodic: {period_ms: 3}}]",
            r"^nodes\[0\]\.conditions\[0\]\.periodic \(node `s`\): `periodic` and `rate` both pace the node; pick one "
            r"\(drop `rate`, or this condition: `rate: 10` is a period of 100 ms\)$",
        ),
        (
            conds("[{count: 3}, {event: {name: go}}, {count: 4}]"),
            r"^nodes\[0\]\.conditions\[2\] \(node `s`\): a second `count` condition \(the first is at "
            r"nodes\[0\]\.conditions\[0\]\); a node takes at most one condition of each kind$",
        ),
        (
            conds("[{boolean: {name: ''}}]"),
            r"^nodes\[0\]\.conditions\[0\]\.boolean\.name \(node `s`\): boolean condition needs a non-empty `name` "
            r"\(the name `Graph\.set_condition` uses\)$",
        ),
        (
            conds("[{event: {name: ''}}]"),
            r"^nodes\[0\]\.conditions\[0\]\.event\.name \(node `s`\): event condition needs a non-empty `name` "
            r"\(the name `Graph\.notify` uses\)$",
        ),
        (
            conds("[{boolean: {name: 'a b'}}]"),
            r"^nodes\[0\]\.conditions\[0\]\.boolean\.name \(node `s`\): condition name `a b` is not a plain name "
            r"\(use letters, digits, `_`, `-` and `\.`",
        ),
        (conds("[{event: {name: -go}}]"), r"^nodes\[0\]\.conditions\[0\]\.event\.name \(node `s`\): .* not a plain"),
        (conds("[{event: {name: 'a/b'}}]"), r"event\.name \(node `s`\): condition name `a/b` is not a plain name"),
        (conds("[{boolean: {}}]"), r"^nodes\[0\]\.conditions\[0\]\.boolean \(node `s`\): missing field `name`$"),
        (conds("[{boolean: {name: a, initial: 1}}]"), r"boolean\.initial \(node `s`\): expected `true` or `false`"),
        (
            conds("[{event: {name: go, initial: true}}]"),
            r"^nodes\[0\]\.conditions\[0\]\.event \(node `s`\): unknown field `initial`, expected one of `name`$",
        ),
        (
            dedent("""
                nodes:
                  - {name: a, kernel: Src, output_ports: [x], conditions: [{boolean: {name: go}}]}
                  - {name: b, kernel: K, input_ports: [x], output_ports: [y], conditions: [{event: {name: go}}]}
                output_ports: [y]
            """),
            r"^nodes\[1\]\.conditions\[0\]\.event\.name \(node `b`\): `go` is already the name of a boolean condition "
            r"\(node `a`, at nodes\[0\]\.conditions\[0\]\); a name is either a boolean or an event across the graph$",
        ),
    ],
)
def test_condition_errors(text: str, pattern: str) -> None:
    assert_error(text, pattern)


FILE_LINE_CASES = [
    (
        """
        nodes:
          - name: s
            kernel: Src
            output_ports: [x]
            conditions:
              - count: 3
              - periodic:
                  period_ms: 0
        output_ports: [x]
        """,
        r"^g\.yaml:8: nodes\[0\]\.conditions\[1\]\.periodic\.period_ms \(node `s`\)",
    ),
    (
        """
        input_ports: [i, j]
        nodes:
          - name: a
            kernel: K
            input_ports:
              - i
              - name: j
                timeout_ms: 10
            input_policy: {type: immediate}
            output_ports: [x]
        output_ports: [x]
        """,
        r"^g\.yaml:8: nodes\[0\]\.input_ports\[1\]\.timeout_ms \(node `a`\): ",
    ),
]


@pytest.mark.parametrize(("text", "pattern"), FILE_LINE_CASES, ids=["condition", "timeout"])
def test_errors_carry_the_file_line(text: str, pattern: str) -> None:
    with pytest.raises(ConfigError, match=pattern):
        load_yaml(dedent(text), source="g.yaml")


# -- long-form input ports ----------------------------------------------------------------------------


def test_long_form_ports_parse_with_their_timeout() -> None:
    spec = load_yaml(JOIN % ("[i, {name: 'T:j', timeout_ms: 200}]", ""))
    assert spec.nodes[0].input_ports == (
        PortSpec("i", "", 0, timeout_ms=0.0),
        PortSpec("j", "T", 0, timeout_ms=200.0),
    )


def test_a_long_form_port_without_timeout_is_the_short_form() -> None:
    long = load_yaml(JOIN % ("[{name: 'T:1:i'}, {name: 'T:0:j'}]", "")).nodes[0].input_ports
    short = load_yaml(JOIN % ("['T:1:i', 'T:0:j']", "")).nodes[0].input_ports
    assert long == short == (PortSpec("i", "T", 1), PortSpec("j", "T", 0))


@pytest.mark.parametrize("policy", ["sync", "sync_set, sets: [[i, j]]", "batch, capacity: 4"])
def test_timeouts_under_the_aligning_policies(policy: str) -> None:
    spec = load_yaml(JOIN % ("[i, {name: j, timeout_ms: 2.5}]", f", input_policy: {{type: {policy}}}"))
    assert spec.nodes[0].input_ports[1].timeout_ms == 2.5


@pytest.mark.parametrize(
    ("ports", "extra", "pattern"),
    [
        (
            "[i, {name: j, timeout_ms: 0}]", "",
            r"^nodes\[0\]\.input_ports\[1\]\.timeout_ms \(node `a`\): timeout_ms must be a positive, finite number "
            r"of milliseconds, got 0$",
        ),
        ("[i, {name: j, timeout_ms: -1}]", "", r"input_ports\[1\]\.timeout_ms \(node `a`\): .* got -1$"),
        ("[i, {name: j, timeout_ms: .inf}]", "", r"input_ports\[1\]\.timeout_ms \(node `a`\): .* got inf$"),
        ("[i, {name: j, timeout_ms: .nan}]", "", r"input_ports\[1\]\.timeout_ms \(node `a`\): .* got NaN$"),
        (
            "[i, {name: j, timeout_ms: 1e9}]", "",
            r"^nodes\[0\]\.input_ports\[1\]\.timeout_ms \(node `a`\): timeout_ms must be at most 86400000 ms "
            r"\(one day\), got 1e\+09$",
        ),
        ("[i, {name: j, timeout_ms: '5'}]", "", r"input_ports\[1\]\.timeout_ms \(node `a`\): expected a number"),
        (
            "[i, {name: j, timeout_ms: 10}]", ", input_policy: {type: immediate}",
            r"^nodes\[0\]\.input_ports\[1\]\.timeout_ms \(node `a`\): timeout_ms needs an input policy that waits to "
            r"align inputs \(sync, sync_set, batch\); this node's input_policy is `immediate`, which never waits$",
        ),
        (
            "[i, {name: j, timeout_ms: 10}]", ", input_policy: {type: fixed_size, capacity: 2}",
            r"timeout_ms \(node `a`\): .*this node's input_policy is `fixed_size`",
        ),
        (
            "[i, {name: x, timeout_ms: 5}]", ", back_edges: [x]",
            r"^nodes\[0\]\.input_ports\[1\]\.timeout_ms \(node `a`\): timeout_ms does not apply to back edge `x` "
            r"\(a back edge holds its latest value; the node never waits for it\)$",
        ),
        (
            "[i, {name: j, timeut_ms: 10}]", "",
            r"^nodes\[0\]\.input_ports\[1\] \(node `a`\): unknown field `timeut_ms`; did you mean `timeout_ms`\?$",
        ),
        ("[i, {timeout_ms: 10}]", "", r"^nodes\[0\]\.input_ports\[1\] \(node `a`\): missing field `name`$"),
        (
            "[i, [j]]", "",
            r"^nodes\[0\]\.input_ports\[1\] \(node `a`\): expected a port declaration \(a string, or a mapping with "
            r"`name` and `timeout_ms`\), got a list$",
        ),
        (
            "[i, {name: 'a:b:c:d'}]", "",
            r"^nodes\[0\]\.input_ports\[1\] \(node `a`\): port declaration `a:b:c:d` has an invalid number of segments",
        ),
        ("[i, {name: jj}]", "", r"^nodes\[0\]\.input_ports\[1\] \(node `a`\): port `jj` has no producer; did you mean"),
        ("[i, {name: i}]", "", r"^nodes\[0\]\.input_ports\[1\] \(node `a`\): port `i` is declared more than once"),
        (
            "[i, {name: 7}]", "",
            r"^nodes\[0\]\.input_ports\[1\]\.name \(node `a`\): expected the name of a stream \(a string\), "
            r"got integer",
        ),
        ("[i, 7]", "", r"^nodes\[0\]\.input_ports\[1\] \(node `a`\): expected the name of a stream \(a string\)"),
    ],
)
def test_input_port_errors(ports: str, extra: str, pattern: str) -> None:
    assert_error(JOIN % (ports, extra), pattern)


@pytest.mark.parametrize(
    ("text", "pattern"),
    [
        (
            "input_ports: [{name: i}]\nnodes: [{kernel: K, input_ports: [i], output_ports: [x]}]\noutput_ports: [x]\n",
            r"^input_ports\[0\]: expected a port declaration \(a string\), got a mapping; the long form "
            r"`\{name: \.\.\., timeout_ms: \.\.\.\}` is only for a node's `input_ports`$",
        ),
        (
            "nodes: [{name: s, kernel: Src, output_ports: [x]}]\noutput_ports: [{name: x}]\n",
            r"^output_ports\[0\]: expected a port declaration \(a string\), got a mapping; the long form",
        ),
        (
            "nodes: [{name: s, kernel: Src, output_ports: [{name: x, timeout_ms: 3}]}]\noutput_ports: [x]\n",
            r"^nodes\[0\]\.output_ports\[0\] \(node `s`\): expected a port declaration \(a string\), got a mapping; "
            r"the long form",
        ),
    ],
)
def test_only_node_inputs_take_the_long_form(text: str, pattern: str) -> None:
    assert_error(text, pattern)


# -- subgraphs ---------------------------------------------------------------------------------------

LIB = """
subgraphs:
  Fuse:
    nodes:
      - name: tick
        kernel: Src
        output_ports: [t]
        conditions: [{periodic: {period_ms: 50}}, {boolean: {name: armed, initial: false}}]
      - name: join
        kernel: K
        input_ports: [t, {name: sin, timeout_ms: 20}]
        output_ports: [sout]
        %s
    input_ports: [sin]
    output_ports: [sout]
input_ports: [i]
nodes:
  - {name: d, type: Fuse, input_ports: %s, output_ports: [o]}
output_ports: [o]
"""


def test_conditions_and_timeouts_on_inner_nodes() -> None:
    spec = load_yaml(dedent(LIB % ("", "[i]")))
    tick, join = spec.nodes
    assert tick.conditions == (
        ConditionSpec("periodic", "subgraphs.Fuse.nodes[0].conditions[0]", period_s=0.05),
        ConditionSpec("boolean", "subgraphs.Fuse.nodes[0].conditions[1]", name="armed", initial=False),
    )
    assert join.input_ports == (PortSpec("d/t", "", 0), PortSpec("i", "", 1, timeout_ms=20.0))


def test_an_instance_port_in_the_long_form() -> None:
    spec = load_yaml(dedent(LIB % ("", "[{name: i}]")))
    assert spec.nodes[1].input_ports[1] == PortSpec("i", "", 1, timeout_ms=20.0)


@pytest.mark.parametrize(
    ("inner", "instance", "pattern"),
    [
        (
            "conditions: [{count: 2}]", "[i]",
            r"^subgraphs\.Fuse\.nodes\[1\]\.conditions\[0\]\.count \(expanded node `d/join`\): `count` is only for "
            r"source-like nodes",
        ),
        (
            "conditions: [{event: {name: armed}}]", "[i]",
            r"^subgraphs\.Fuse\.nodes\[1\]\.conditions\[0\]\.event\.name \(expanded node `d/join`\): `armed` is "
            r"already the name of a boolean condition \(node `d/tick`, at "
            r"subgraphs\.Fuse\.nodes\[0\]\.conditions\[1\]\)",
        ),
        (
            "input_policy: {type: immediate}", "[i]",
            r"^subgraphs\.Fuse\.nodes\[1\]\.input_ports\[1\]\.timeout_ms \(expanded node `d/join`\): timeout_ms needs",
        ),
        (
            "", "[{name: i, timeout_ms: 5}]",
            r"^nodes\[0\]\.input_ports\[0\]\.timeout_ms \(node `d`\): `timeout_ms` does not apply to a subgraph "
            r"instance's port \(the instance does not wait; set it on the input port of the inner node",
        ),
    ],
)
def test_subgraph_errors(inner: str, instance: str, pattern: str) -> None:
    assert_error(LIB % (inner, instance), pattern)


def test_conditions_do_not_apply_to_an_instance() -> None:
    text = dedent(LIB % ("", "[i]")).replace("output_ports: [o]}", "output_ports: [o], conditions: [{count: 1}]}")
    assert_error(text, r"^nodes\[0\]\.conditions \(node `d`\): `conditions` does not apply to a subgraph instance")


# -- the JSON schema ---------------------------------------------------------------------------------


def test_the_schema_describes_conditions_and_long_form_ports() -> None:
    jsonschema = pytest.importorskip("jsonschema", reason="validates the published schema")
    schema = json_schema()
    node = schema["$defs"]["NodeModel"]["properties"]
    assert node["input_ports"]["items"]["anyOf"][0] == {"type": "string"}
    assert "conditions" in node
    validator = jsonschema.Draft202012Validator(schema)
    good = {
        "input_ports": ["i"],
        "nodes": [{"name": "a", "kernel": "K", "input_ports": ["i", {"name": "i2", "timeout_ms": 5}],
                   "conditions": [{"periodic": {"period_ms": 10}}, {"count": 3}, {"boolean": {"name": "b"}},
                                  {"event": {"name": "e"}}]}],
    }
    assert list(validator.iter_errors(good)) == []
    for bad in ({"count": 1, "event": {"name": "e"}}, {}, {"periodc": {"period_ms": 1}}, {"count": 0}):
        doc = {"nodes": [{"kernel": "K", "conditions": [bad]}]}
        assert list(validator.iter_errors(doc)), json.dumps(bad)
