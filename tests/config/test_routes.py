"""``type: route`` nodes: parsing into ``RouteSpec``/``PredicateSpec`` and every validation rule."""

from __future__ import annotations

import pytest

from flowplex.config import load_yaml
from flowplex.spec import PredicateSpec, RouteRuleSpec, RouteSpec, build_plan
from flowplex.spec._specs import ROUTE_KERNEL

from ._util import assert_error, dedent

ROUTE = (
    "input_ports: [i]\noutput_ports: [x, y]\n"
    "nodes: [{name: r, type: route, input_ports: [i], output_ports: [x, y], %s}]\n"
)


def route_of(fields: str) -> RouteSpec:
    route = load_yaml(ROUTE % fields).nodes[0].route
    assert route is not None
    return route


def test_route_node_parses() -> None:
    spec = load_yaml(
        dedent(
            """
            input_ports: [dets]
            nodes:
              - name: route
                type: route
                input_ports: [dets]
                output_ports: [high, low]
                mode: all
                unmatched: error
                routes:
                  - {to: high, when: {metadata: confidence, op: gte, value: 0.8}}
                  - to: high
                    when:
                      all:
                        - {metadata: label, op: contains, value: "car"}
                        - not: {metadata: occluded, op: exists}
                        - any: [{timestamp: {op: gt, value: 10}}, {metadata: forced, op: eq, value: true}]
                  - {to: low, default: true}
            output_ports: [high, low]
            """
        )
    )
    node = spec.nodes[0]
    assert node.kernel == ROUTE_KERNEL
    assert node.route == RouteSpec(
        mode="all",
        unmatched="error",
        rules=(
            RouteRuleSpec(
                to="high", when=PredicateSpec(kind="metadata", key="confidence", op="gte", value=0.8)
            ),
            RouteRuleSpec(
                to="high",
                when=PredicateSpec(
                    kind="all",
                    children=(
                        PredicateSpec(kind="metadata", key="label", op="contains", value="car"),
                        PredicateSpec(
                            kind="not",
                            children=(PredicateSpec(kind="metadata", key="occluded", op="exists"),),
                        ),
                        PredicateSpec(
                            kind="any",
                            children=(
                                PredicateSpec(kind="timestamp", op="gt", value=10),
                                PredicateSpec(kind="metadata", key="forced", op="eq", value=True),
                            ),
                        ),
                    ),
                ),
            ),
            RouteRuleSpec(to="low", default=True),
        ),
    )


def test_value_types_are_kept() -> None:
    route = route_of(
        "routes: [{to: x, when: {metadata: k, op: eq, value: 1}}, {to: y, when: {metadata: k, op: eq, "
        "value: 1.0}}]"
    )
    values = [rule.when.value for rule in route.rules if rule.when is not None]
    assert [type(v) for v in values] == [int, float]


@pytest.mark.parametrize("unmatched", ["error", "x"])
def test_no_rules_is_fine_when_unmatched_is_not_drop(unmatched: str) -> None:
    assert route_of(f"unmatched: {unmatched}").rules == ()


@pytest.mark.parametrize(
    ("fields", "pattern"),
    [
        (
            "kernel: Foo, routes: [{to: x, default: true}]",
            r"^nodes\[0\]\.kernel \(node `r`\): route node must not declare `kernel`",
        ),
        (
            "routes: [{to: z, default: true}]",
            r"^nodes\[0\]\.routes\[0\]\.to \(node `r`\): unknown output port `z`; did you mean `x`\?$",
        ),
        (
            "routes: [{to: qqq, default: true}]",
            r"^nodes\[0\]\.routes\[0\]\.to \(node `r`\): unknown output port `qqq`$",
        ),
        ("routes: [{to: x}]", r"^nodes\[0\]\.routes\[0\] \(node `r`\): non-default route requires `when`$"),
        (
            "routes: [{to: x, default: false}]",
            r"^nodes\[0\]\.routes\[0\] \(node `r`\): non-default route requires `when`$",
        ),
        (
            "routes: [{to: x, default: true, when: {metadata: c, op: exists}}]",
            r"^nodes\[0\]\.routes\[0\] \(node `r`\): default route must not declare `when`$",
        ),
        (
            "routes: [{to: x, default: true}, {to: y, default: true}]",
            r"^nodes\[0\]\.routes\[1\] \(node `r`\): at most one default route is allowed$",
        ),
        (
            "unmatched: zz, routes: [{to: x, default: true}]",
            r"^nodes\[0\]\.unmatched \(node `r`\): expected `drop`, `error`, or an output port, got `zz`$",
        ),
        ("unmatched: dropp, routes: [{to: x, default: true}]", r"got `dropp`; did you mean `drop`\?$"),
        ("routes: []", r"^nodes\[0\]\.routes \(node `r`\): at least one route rule is required"),
        ("mode: all", r"^nodes\[0\]\.routes \(node `r`\): at least one route rule is required"),
        ("unmatched: drop", r"at least one route rule is required"),
        (
            "mode: firstt, routes: [{to: x, default: true}]",
            (
                r"^nodes\[0\]\.mode \(node `r`\): unknown route mode `firstt`; did you mean `first`\? "
                r"\(expected "
                r"`first` or `all`\)$"
            ),
        ),
    ],
)
def test_route_rules(fields: str, pattern: str) -> None:
    assert_error(ROUTE % fields, pattern)


def test_no_route_fields_at_all() -> None:
    assert_error(
        (
            "input_ports: [i]\nnodes: [{name: r, type: route,"
            " input_ports: [i], output_ports: [x]}]\noutput_ports:"
            " "
            "[x]"
        ),
        r"^nodes\[0\]\.routes \(node `r`\): at least one route rule is required",
    )


@pytest.mark.parametrize(
    ("ports", "pattern"),
    [
        (
            "input_ports: [i, j], output_ports: [x]",
            r"^nodes\[0\]\.input_ports \(node `r`\): route nodes require exactly one input port$",
        ),
        (
            "output_ports: [x]",
            r"^nodes\[0\]\.input_ports \(node `r`\): route nodes require exactly one input port$",
        ),
        (
            "input_ports: [i]",
            r"^nodes\[0\]\.output_ports \(node `r`\): route nodes require at least one output port$",
        ),
    ],
)
def test_route_port_counts(ports: str, pattern: str) -> None:
    text = f"input_ports: [i, j]\nnodes: [{{name: r, type: route, {ports}, unmatched: error}}]\n"
    assert_error(text, pattern)


def when(predicate: str) -> str:
    return ROUTE % f"routes: [{{to: x, when: {predicate}}}]"


@pytest.mark.parametrize(
    ("predicate", "pattern"),
    [
        (
            "{metadata: '', op: exists}",
            (
                r"^nodes\[0\]\.routes\[0\]\.when\.metadata \(node `r`\): metadata condition key must not "
                r"be empty$"
            ),
        ),
        (
            "{metadata: c, op: exists, value: 1}",
            (
                r"^nodes\[0\]\.routes\[0\]\.when\.value \(node `r`\): metadata `exists` condition must "
                r"not declare `value`$"
            ),
        ),
        (
            "{metadata: c, op: eq}",
            r"^nodes\[0\]\.routes\[0\]\.when \(node `r`\): metadata `eq` condition requires `value`$",
        ),
        ("{metadata: c, op: eq, value: null}", r"metadata `eq` condition requires `value`$"),
        (
            "{metadata: c, op: contains, value: 1}",
            (
                r"^nodes\[0\]\.routes\[0\]\.when\.value \(node `r`\): metadata `contains` condition requires "
                r"a string value$"
            ),
        ),
        (
            "{metadata: c, op: gtt, value: 1}",
            (
                r"^nodes\[0\]\.routes\[0\]\.when\.op \(node `r`\): unknown operator `gtt`; did you mean "
                r"`gt`\? \(valid: eq, ne, gt, gte, lt, lte, exists, contains\)$"
            ),
        ),
        ("{metadata: c}", r"^nodes\[0\]\.routes\[0\]\.when \(node `r`\): metadata condition requires `op`$"),
        (
            "{timestamp: {op: exists}}",
            (
                r"^nodes\[0\]\.routes\[0\]\.when\.timestamp\.op \(node `r`\): timestamp condition does "
                r"not support `exists`$"
            ),
        ),
        ("{timestamp: {op: contains, value: 1}}", r"timestamp condition does not support `contains`$"),
        (
            "{timestamp: {op: gt}}",
            r"^nodes\[0\]\.routes\[0\]\.when\.timestamp \(node `r`\): timestamp condition requires `value`$",
        ),
        (
            "{timestamp: {op: gt, value: 1.5}}",
            (
                r"^nodes\[0\]\.routes\[0\]\.when\.timestamp\.value \(node `r`\): expected an integer, got "
                r"float `1\.5`$"
            ),
        ),
        (
            "{timestamp: {op: gt, value: true}}",
            r"timestamp\.value \(node `r`\): expected an integer, got boolean `true`$",
        ),
        (
            "{all: []}",
            r"^nodes\[0\]\.routes\[0\]\.when\.all \(node `r`\): `all` condition must not be empty$",
        ),
        (
            "{any: []}",
            r"^nodes\[0\]\.routes\[0\]\.when\.any \(node `r`\): `any` condition must not be empty$",
        ),
        (
            "{all: [], any: []}",
            (
                r"^nodes\[0\]\.routes\[0\]\.when \(node `r`\): a condition needs exactly one of `all`, "
                r"`any`, `not`, `timestamp`, `metadata`, got `all` and `any`$"
            ),
        ),
        (
            "{}",
            (
                r"^nodes\[0\]\.routes\[0\]\.when \(node `r`\): a condition needs exactly one of `all`, "
                r"`any`, `not`, `timestamp`, `metadata`$"
            ),
        ),
        ("{timestamp: {op: gt, value: 1}, op: eq}", r"`op` and `value` belong to a `metadata` condition"),
        (
            "{all: [{metadata: c, op: exists}, {not: {metadata: '', op: exists}}]}",
            (
                r"^nodes\[0\]\.routes\[0\]\.when\.all\[1\]\.not\.metadata \(node `r`\): metadata condition "
                r"key must not be empty$"
            ),
        ),
        (
            "{foo: 1}",
            (
                r"^nodes\[0\]\.routes\[0\]\.when \(node `r`\): unknown field `foo`, expected one of `all`, "
                r"`any`, `not`"
            ),
        ),
    ],
)
def test_predicate_rules(predicate: str, pattern: str) -> None:
    assert_error(when(predicate), pattern)


@pytest.mark.parametrize(
    ("fields", "code", "message"),
    [
        (
            (
                "routes: [{to: x, when: {metadata: c, op: eq, value: 1}}, {to: y, when: {metadata: c, op: "
                "eq, value: 1}}]"
            ),
            "route_shadowed_rule",
            "route node `r` rule 2 duplicates earlier rule 1; first mode makes it unreachable",
        ),
        (
            (
                "mode: all, routes: [{to: x, when: {metadata: c, op: eq, value: 1}}, {to: x, when: "
                "{metadata: "
                "c, op: eq, value: 1}}]"
            ),
            "route_duplicate_emit",
            "route node `r` rule 2 duplicates an earlier rule and may emit the same packet twice to `x`",
        ),
        (
            (
                "unmatched: error, routes: [{to: x, when: {metadata: c, op: eq, value: 1}}, {to: y, default: "
                "true}]"
            ),
            "route_unreachable_unmatched",
            "route node `r` has a default rule, so unmatched policy `error` is unreachable",
        ),
    ],
)
def test_route_diagnostics(fields: str, code: str, message: str) -> None:
    diagnostics = build_plan(load_yaml(ROUTE % fields)).diagnostics
    assert [(d.code, d.message) for d in diagnostics] == [(code, message)]


@pytest.mark.parametrize(
    "fields",
    [
        # different types are different conditions: 1, 1.0 and true
        (
            "routes: [{to: x, when: {metadata: c, op: eq, value: 1}}, {to: y, when: {metadata: c, op: eq, "
            "value: 1.0}}]"
        ),
        (
            "routes: [{to: x, when: {metadata: c, op: eq, value: 1}}, {to: y, when: {metadata: c, op: eq, "
            "value: true}}]"
        ),
        # all mode: same condition to different ports is intended fan-out
        (
            "mode: all, routes: [{to: x, when: {metadata: c, op: exists}}, {to: y, when: {metadata: c, "
            "op: exists}}]"
        ),
        # a default with unmatched: drop is the normal case
        "routes: [{to: x, when: {metadata: c, op: exists}}, {to: y, default: true}]",
    ],
)
def test_no_route_diagnostic(fields: str) -> None:
    assert build_plan(load_yaml(ROUTE % fields)).diagnostics == ()
