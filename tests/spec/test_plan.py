"""Planning: tables, topological order, cycle reports, static diagnostics and spec-level checks."""

from __future__ import annotations

import re
import textwrap

import pytest

from flowplex.config import load_yaml
from flowplex.errors import ConfigError
from flowplex.spec import (
    EdgePlan,
    ExecutorSpec,
    GraphSpec,
    InputPolicySpec,
    NodeSpec,
    PortSpec,
    PredicateSpec,
    RouteRuleSpec,
    RouteSpec,
    build_plan,
)
from flowplex.spec._plan import DEFAULT_EXECUTOR_SPEC, node_where
from flowplex.spec._specs import ROUTE_KERNEL


def plan_of(text: str):  # type: ignore[no-untyped-def]
    return build_plan(load_yaml(textwrap.dedent(text)))


def ports(*names: str) -> tuple[PortSpec, ...]:
    return tuple(PortSpec(name) for name in names)


def node(
    name: str, inputs: tuple[str, ...] = (), outputs: tuple[str, ...] = (), **fields: object
) -> NodeSpec:
    return NodeSpec(
        name=name,
        kernel=str(fields.pop("kernel", "K")),
        path=str(fields.pop("path", f"nodes[{name}]")),
        input_ports=ports(*inputs),
        output_ports=ports(*outputs),
        **fields,  # type: ignore[arg-type]
    )


def plan_error(spec: GraphSpec) -> str:
    with pytest.raises(ConfigError) as info:
        build_plan(spec)
    return str(info.value)


DIAMOND = """
executors:
  - {name: cpu, num_threads: 4}
  - {name: host, type: DelegatingExecutor}
input_ports: [frames]
nodes:
  - {name: sink, kernel: K, input_ports: [left, right], output_ports: [merged], executor: host}
  - {name: split, kernel: K, input_ports: [frames], output_ports: [left, right], executor: cpu}
  - {name: fb, kernel: K, input_ports: [merged, loop], output_ports: [loop, out], back_edges: [loop]}
output_ports: [out, frames]
"""


def test_tables() -> None:
    plan = plan_of(DIAMOND)
    assert plan.executors[0] == DEFAULT_EXECUTOR_SPEC
    assert [e.name for e in plan.executors] == ["default", "cpu", "host"]
    assert plan.node_executor == (2, 1, 0)
    assert plan.graph_inputs == ("frames",)
    assert plan.graph_outputs == ("out", "frames")
    assert list(plan.edges) == ["frames", "merged", "left", "right", "loop", "out"]
    assert plan.edges["frames"] == EdgePlan("frames", None, 0, ((1, 0),), True)
    assert plan.edges["right"] == EdgePlan("right", 1, 1, ((0, 1),), False)
    assert plan.edges["loop"] == EdgePlan("loop", 2, 0, ((2, 1),), False)
    assert plan.edges["out"] == EdgePlan("out", 2, 1, (), True)
    assert plan.diagnostics == ()


def test_topological_order_ignores_back_edges_and_prefers_low_indices() -> None:
    assert plan_of(DIAMOND).topo_order == (1, 0, 2)


def test_consumers_are_listed_in_node_order() -> None:
    plan = plan_of(
        """
        input_ports: [i]
        nodes:
          - {name: c, kernel: K, input_ports: [x]}
          - {name: a, kernel: K, input_ports: [i], output_ports: [x]}
          - {name: b, kernel: K, input_ports: [x, i]}
        """
    )
    assert plan.edges["x"].consumers == ((0, 0), (2, 0))
    assert plan.edges["i"].consumers == ((1, 0), (2, 1))
    assert plan.topo_order == (1, 0, 2)


def test_a_long_chain_declared_backwards() -> None:
    count = 1000
    nodes = tuple(node(f"n{i}", (f"e{i}",), (f"e{i + 1}",)) for i in reversed(range(count)))
    plan = build_plan(GraphSpec(nodes=nodes, input_ports=ports("e0"), output_ports=ports(f"e{count}")))
    assert plan.topo_order == tuple(reversed(range(count)))


def test_a_long_cycle_is_reported_from_its_first_node() -> None:
    count = 500
    nodes = [node(f"n{i}", (f"e{i}",), (f"e{i + 1}",)) for i in range(count)]
    nodes[0] = node("n0", (f"e{count}",), ("e1",))
    message = plan_error(GraphSpec(nodes=tuple(nodes)))
    assert message.startswith("nodes[n0].input_ports[0] (node `n0`): topology cycle: node `n0` -> `n1` -> ")
    assert message.count("->") == count


def test_diagnostics() -> None:
    plan = plan_of(
        """
        executors:
          - {name: cpu, num_threads: 3}
          - {name: one}
          - {name: host, type: DelegatingExecutor}
        input_ports: [i, j, k]
        nodes:
          - {name: a, kernel: K, input_ports: [i], output_ports: [x, z]}
        output_ports: [x, k]
        """
    )
    assert [(d.code, d.message) for d in plan.diagnostics] == [
        (
            "unconsumed_graph_input",
            "graph input port `j` is consumed by no node; packets sent in will be dropped",
        ),
        (
            "unconsumed_node_output",
            "node `a` output port `z` has no downstream consumer and is not a graph output; output "
            "will be dropped",
        ),
        ("unused_executor", "executor `cpu` is defined but not used by any node (3 threads will idle)"),
        ("unused_executor", "executor `one` is defined but not used by any node (1 thread will idle)"),
    ]


def test_locate_prefixes_messages() -> None:
    spec = GraphSpec(nodes=(node("a", ("nope",)),))
    calls: list[tuple[int | None, tuple[str | int, ...]]] = []

    def locate(index: int | None, field: tuple[str | int, ...]) -> str:
        calls.append((index, field))
        return "g.yaml:7: "

    with pytest.raises(
        ConfigError,
        match=r"^g\.yaml:7: nodes\[a\]\.input_ports\[0\] \(node `a`\): port `nope` has no producer$",
    ):
        build_plan(spec, locate=locate)
    assert calls == [(0, ("input_ports", 0))]


def test_node_where() -> None:
    top = node("a", path="nodes[3]")
    inner = node("d/b", path="subgraphs.Foo.nodes[1] (expanded node `d/b`)")
    assert node_where(top) == "nodes[3] (node `a`)"
    assert node_where(top, ("input_ports", 0)) == "nodes[3].input_ports[0] (node `a`)"
    assert node_where(inner, ("rate",)) == "subgraphs.Foo.nodes[1].rate (expanded node `d/b`)"


ROUTE = RouteSpec(rules=(RouteRuleSpec(to="x", default=True),))


@pytest.mark.parametrize(
    ("spec", "pattern"),
    [
        (GraphSpec(nodes=(node("", (), ("x",)),)), r"\.name \(node ``\): node name must not be empty$"),
        (
            GraphSpec(nodes=(node("a", (), ("x",), kernel=""),)),
            r"\.kernel \(node `a`\): node has no `kernel`$",
        ),
        (
            GraphSpec(nodes=(node("a", ("i",), ("x",), route=ROUTE),), input_ports=ports("i")),
            r"route fields are only valid when `type: route`$",
        ),
        (
            GraphSpec(nodes=(node("a", ("i",), ("x",), kernel=ROUTE_KERNEL),), input_ports=ports("i")),
            r"route node requires route fields",
        ),
        (GraphSpec(nodes=(node("a", (), ("x",), max_in_flight=0),)), r"max_in_flight must be >= 1, got 0$"),
        (GraphSpec(nodes=(node("a", (), ("x",), on_error="ignore"),)), r"unknown on_error `ignore`"),
        (
            GraphSpec(
                nodes=(node("a", ("i",), ("x",), input_policy=InputPolicySpec(type="zip")),),
                input_ports=ports("i"),
            ),
            r"unknown input_policy `zip`",
        ),  # type: ignore[arg-type]
        (
            GraphSpec(executors=(ExecutorSpec("cpu", num_threads=0),)),
            r"^executors\[0\]\.num_threads: num_threads must be >= 1, got 0$",
        ),
        (
            GraphSpec(executors=(ExecutorSpec("cpu", type="Ray"),)),
            r"^executors\[0\]\.type: unknown executor type `Ray`",
        ),  # type: ignore[arg-type]
        (
            GraphSpec(executors=(ExecutorSpec("cpu", priority=120),)),
            r"^executors\[0\]\.priority: priority must be in 0\.\.99, got 120$",
        ),
        (
            GraphSpec(nodes=(node("a", (), ("x",)),), output_ports=(PortSpec(""),)),
            r"^output_ports\[0\]: port name must not be empty$",
        ),
        (
            GraphSpec(nodes=(node("a", (), ("x",)), node("a", (), ("y",)))),
            r"node `a` is defined more than once \(first at nodes\[a\]\)",
        ),
        (
            GraphSpec(
                nodes=(
                    node(
                        "r",
                        ("i",),
                        ("x",),
                        kernel=ROUTE_KERNEL,
                        route=RouteSpec(
                            rules=(
                                RouteRuleSpec("x", PredicateSpec("metadata", key="k", op="like", value="a")),
                            )
                        ),
                    ),
                ),
                input_ports=ports("i"),
            ),
            r"routes\[0\]\.when\.op \(node `r`\): unknown operator `like`",
        ),
        (
            GraphSpec(
                nodes=(
                    node(
                        "r",
                        ("i",),
                        ("x",),
                        kernel=ROUTE_KERNEL,
                        route=RouteSpec(mode="most", rules=ROUTE.rules),
                    ),
                ),  # type: ignore[arg-type]
                input_ports=ports("i"),
            ),
            r"\.mode \(node `r`\): unknown route mode `most`",
        ),
        (
            GraphSpec(
                nodes=(
                    node(
                        "r",
                        ("i",),
                        ("x",),
                        kernel=ROUTE_KERNEL,
                        route=RouteSpec(rules=(RouteRuleSpec("x", PredicateSpec("not")),)),
                    ),
                ),
                input_ports=ports("i"),
            ),
            r"routes\[0\]\.when\.not \(node `r`\): `not` takes exactly one condition$",
        ),
    ],
)
def test_hand_built_specs_are_checked_too(spec: GraphSpec, pattern: str) -> None:
    message = plan_error(spec)
    assert re.search(pattern, message), message


def test_the_plan_keeps_the_spec() -> None:
    spec = load_yaml("nodes: [{kernel: S, output_ports: [x]}]\noutput_ports: [x]")
    assert build_plan(spec).spec is spec
