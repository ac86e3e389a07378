"""Condition and timeout rules on specs built in Python, ``Contract.add_condition`` and ``merge_conditions``.

The same rules as the YAML's (tests/config/test_conditions.py), from the other two doors: a
``NodeSpec`` built by hand goes through ``build_plan``, and a kernel's ``get_contract`` conditions
through ``merge_conditions``, which the build calls.
"""

from __future__ import annotations

import re

import pytest

from flowplex.errors import ConfigError
from flowplex.kernels._contract import Contract, declare_contract
from flowplex.kernels._ports import PortTable
from flowplex.spec import ConditionSpec, GraphSpec, InputPolicySpec, NodeSpec, PortSpec, build_plan
from flowplex.spec._conditions import condition_names_problem
from flowplex.spec._plan import merge_conditions
from flowplex.spec._specs import PolicyType


def source(*conditions: ConditionSpec, rate: float = 0.0) -> NodeSpec:
    return NodeSpec(name="s", kernel="K", path="nodes[0]", output_ports=(PortSpec("x"),), rate=rate,
                    conditions=conditions)


def join(*inputs: PortSpec, policy: PolicyType = "sync", back_edges: tuple[str, ...] = (),
         conditions: tuple[ConditionSpec, ...] = ()) -> NodeSpec:
    return NodeSpec(name="j", kernel="K", path="nodes[1]", input_ports=inputs, output_ports=(PortSpec("y"),),
                    input_policy=InputPolicySpec(type=policy, capacity=2), back_edges=back_edges,
                    conditions=conditions)


def plan_error(*nodes: NodeSpec) -> str:
    with pytest.raises(ConfigError) as info:
        build_plan(GraphSpec(nodes=nodes, output_ports=(PortSpec("x"),)))
    return str(info.value)


# -- hand-built specs go through the plan's rules ---------------------------------------------------


def test_valid_conditions_plan() -> None:
    spec = source(ConditionSpec("periodic", period_s=0.01), ConditionSpec("count", count=3),
                  ConditionSpec("boolean", name="on", initial=False), ConditionSpec("event", name="go"))
    plan = build_plan(GraphSpec(nodes=(spec,), output_ports=(PortSpec("x"),)))
    assert plan.spec.nodes[0].conditions == spec.conditions


@pytest.mark.parametrize(
    ("cond", "pattern"),
    [
        (ConditionSpec("timer"), r"^nodes\[0\]\.conditions\[0\] \(node `s`\): unknown condition `timer` \(expected"),  # type: ignore[arg-type]
        (ConditionSpec("evnt", name="x"), r"unknown condition `evnt`; did you mean `event`\?"),  # type: ignore[arg-type]
        (ConditionSpec("periodic"), r"^nodes\[0\]\.conditions\[0\]\.periodic\.period_ms \(node `s`\): period_ms must "
                                    r"be a positive, finite number of milliseconds, got 0$"),
        (ConditionSpec("periodic", period_s=float("nan")), r"period_ms \(node `s`\): .* got NaN$"),
        (ConditionSpec("periodic", period_s=1e-12), r"period_ms must be in 1e-06\.\.86400000 ms .* got 1e-09$"),
        (ConditionSpec("periodic", period_s="1"), r"period_ms must be a number of milliseconds, got string"),  # type: ignore[arg-type]
        (ConditionSpec("count"), r"^nodes\[0\]\.conditions\[0\]\.count \(node `s`\): count must be >= 1"),
        (ConditionSpec("count", count=True), r"\.count \(node `s`\): count must be an integer .* got true$"),
        (ConditionSpec("boolean"), r"\.boolean\.name \(node `s`\): boolean condition needs a non-empty `name`"),
        (ConditionSpec("event", name="a\x1bb"), r"\.event\.name \(node `s`\): condition name `a\\x1bb` is not a plain"),
        (ConditionSpec("event", name="x" * 129), r"\.event\.name \(node `s`\): condition name `x+\.\.\.` is not"),
        (ConditionSpec("boolean", name="b", initial=1),  # type: ignore[arg-type]
         r"\.boolean\.initial \(node `s`\): initial must be true or false"),
    ],
)
def test_each_condition_is_checked(cond: ConditionSpec, pattern: str) -> None:
    message = plan_error(source(cond))
    assert re.search(pattern, message), message


def test_rules_between_a_node_and_its_conditions() -> None:
    message = plan_error(source(ConditionSpec("periodic", period_s=0.5), rate=4.0))
    assert message.startswith("nodes[0].conditions[0].periodic (node `s`): `periodic` and `rate` both pace the node")
    message = plan_error(source(ConditionSpec("event", name="a"), ConditionSpec("event", name="b")))
    assert message == ("nodes[0].conditions[1] (node `s`): a second `event` condition (the first is conditions[0]); "
                       "a node takes at most one condition of each kind")
    message = plan_error(source(), join(PortSpec("x"), conditions=(ConditionSpec("count", count=1),)))
    assert message.startswith("nodes[1].conditions[0].count (node `j`): `count` is only for source-like nodes")


def test_timeouts_on_hand_built_ports() -> None:
    assert build_plan(GraphSpec(nodes=(source(), join(PortSpec("x", timeout_ms=5.0))),
                                output_ports=(PortSpec("y"),))).spec.nodes[1].input_ports[0].timeout_ms == 5.0
    message = plan_error(source(), join(PortSpec("x", timeout_ms=-2.0)))
    assert message.startswith("nodes[1].input_ports[0].timeout_ms (node `j`): timeout_ms must be a positive, finite")
    message = plan_error(source(), join(PortSpec("x", timeout_ms=5.0), policy="fixed_size"))
    assert "this node's input_policy is `fixed_size`, which never waits" in message
    message = plan_error(source(), join(PortSpec("x"), PortSpec("y", index=1, timeout_ms=5.0), back_edges=("y",)))
    assert message.startswith("nodes[1].input_ports[1].timeout_ms (node `j`): timeout_ms does not apply to back edge")
    out = NodeSpec(name="s", kernel="K", path="nodes[0]", output_ports=(PortSpec("x", timeout_ms=1.0),))
    assert plan_error(out) == ("nodes[0].output_ports[0] (node `s`): timeout_ms applies to input ports only "
                               "(a node waits on its inputs, not its outputs)")


def test_names_are_one_kind_across_the_graph() -> None:
    a = [ConditionSpec("event", "nodes[0].conditions[0]", name="go")]
    b = [ConditionSpec("boolean", name="x"), ConditionSpec("boolean", "get_contract", name="go")]
    assert condition_names_problem([a, b], ["a", "b"]) == (
        1, 1, "`go` is already the name of an event condition (node `a`, at nodes[0].conditions[0]); a name is "
        "either a boolean or an event across the graph",
    )
    assert condition_names_problem([b, a], ["b", "a"]) == (
        1, 0, "`go` is already the name of a boolean condition (node `b`, declared by the kernel's get_contract); "
        "a name is either a boolean or an event across the graph",
    )
    assert condition_names_problem([a, a], ["a", "b"]) is None


# -- Contract.add_condition -------------------------------------------------------------------------


def contract(inputs: int = 0) -> Contract:
    return Contract(PortTable(tuple(PortSpec(f"i{k}") for k in range(inputs))), PortTable((PortSpec("o"),)))


def test_add_condition_mirrors_the_yaml() -> None:
    c = contract()
    c.add_condition("count", 5)
    c.add_condition("periodic", period_ms=10)
    c.add_condition("boolean", name="armed", initial=False)
    c.add_condition("event", {"name": "go"})
    assert c.first_error() is None
    assert c.conditions == [
        ConditionSpec("count", "get_contract", count=5),
        ConditionSpec("periodic", "get_contract", period_s=0.01),
        ConditionSpec("boolean", "get_contract", name="armed", initial=False),
        ConditionSpec("event", "get_contract", name="go"),
    ]


@pytest.mark.parametrize(
    ("args", "fields", "message"),
    [
        (("periodc",), {"period_ms": 1},
         "add_condition: unknown condition `periodc`; did you mean `periodic`? (expected one of `periodic`, `count`, "
         "`boolean`, `event`)"),
        (("count", 0), {}, "add_condition('count'): count must be >= 1 (how many times the node runs), got 0"),
        (("count", True), {},
         "add_condition('count'): count must be an integer (how many times the node runs), got True"),
        (("count",), {"count": 3}, "add_condition('count'): takes the count alone (`add_condition('count', 10)`), "
                                   "got keyword arguments"),
        (("periodic",), {}, "add_condition('periodic'): needs `period_ms`, a number of milliseconds (got None)"),
        (("periodic",), {"period_ms": 0}, "add_condition('periodic'): period_ms must be a positive, finite number of "
                                          "milliseconds, got 0"),
        (("periodic",), {"period_s": 1}, "add_condition('periodic'): unknown field `period_s`; did you mean "
                                         "`period_ms`? (expected `period_ms`)"),
        (("periodic", 10), {}, "add_condition('periodic'): give its fields by keyword (period_ms=...)"),
        (("boolean",), {"name": ""}, "add_condition('boolean'): boolean condition needs a non-empty `name` (the name "
                                     "`Graph.set_condition` uses)"),
        (("boolean",), {"name": "a", "initial": "no"}, "add_condition('boolean'): initial must be True or False, "
                                                       "got 'no'"),
        (("event",), {"name": 3}, "add_condition('event'): name must be a string, got 3"),
        (("event",), {"name": "a b"},
         "add_condition('event'): condition name `a b` is not a plain name (use letters, "
         "digits, `_`, `-` and `.`, not starting with `-` or `.`, at most 128 characters)"),
    ],
)
def test_add_condition_mistakes_are_collected(
    args: tuple[object, ...], fields: dict[str, object], message: str
) -> None:
    c = contract()
    c.add_condition(*args, **fields)  # type: ignore[arg-type]
    c.add_condition("count", -1)  # a later mistake does not replace the first
    assert c.first_error() == message
    assert c.conditions == []


class _Counted:
    @staticmethod
    def get_contract(c: Contract) -> None:
        c.add_condition("count", 0)


def test_a_contract_mistake_fails_the_build_naming_the_node() -> None:
    where = "nodes[0].kernel (node `s`)"
    with pytest.raises(ConfigError, match=r"^nodes\[0\]\.kernel \(node `s`\): add_condition\('count'\): count must"):
        declare_contract(_Counted, PortTable(()), PortTable((PortSpec("x"),)), where)


# -- merge_conditions -------------------------------------------------------------------------------


def test_merge_appends_the_contract_conditions() -> None:
    yaml = ConditionSpec("boolean", "nodes[0].conditions[0]", name="armed")
    extra = [ConditionSpec("count", "get_contract", count=2)]
    assert merge_conditions(source(yaml), extra) == (yaml, extra[0])
    assert merge_conditions(source(), []) == ()


def test_merge_rejects_what_the_combination_breaks() -> None:
    yaml = ConditionSpec("periodic", "nodes[0].conditions[0]", period_s=0.1)
    with pytest.raises(ConfigError) as info:
        merge_conditions(source(yaml), [ConditionSpec("periodic", "get_contract", period_s=0.2)])
    assert str(info.value) == (
        "nodes[0].kernel (node `s`): get_contract: condition `periodic`: a second `periodic` condition (the first is "
        "at nodes[0].conditions[0]); a node takes at most one condition of each kind"
    )
    with pytest.raises(ConfigError, match=r"^nodes\[1\]\.kernel \(node `j`\): get_contract: condition `count`: "
                                          r"`count` is only for source-like nodes"):
        merge_conditions(join(PortSpec("x")), [ConditionSpec("count", "get_contract", count=2)])
    with pytest.raises(ConfigError, match=r"get_contract: condition `periodic`: `periodic` and `rate` both pace"):
        merge_conditions(source(rate=5.0), [ConditionSpec("periodic", "get_contract", period_s=0.2)])
    with pytest.raises(ConfigError, match=r"^nodes\[0\]\.kernel \(node `s`\): get_contract: condition `event`: "
                                          r"event condition needs a non-empty `name`"):
        merge_conditions(source(), [ConditionSpec("event", "get_contract")])


def test_merge_names_an_expanded_node_by_its_path() -> None:
    node = NodeSpec(name="d/s", kernel="K", path="subgraphs.F.nodes[0] (expanded node `d/s`)",
                    output_ports=(PortSpec("x"),), conditions=(ConditionSpec("count", count=1),))
    with pytest.raises(ConfigError, match=r"^subgraphs\.F\.nodes\[0\]\.kernel \(expanded node `d/s`\): get_contract: "
                                          r"condition `count`: a second `count` condition \(the first is "
                                          r"conditions\[0\]\)"):
        merge_conditions(node, [ConditionSpec("count", "get_contract", count=2)])
