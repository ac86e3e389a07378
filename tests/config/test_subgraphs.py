"""Subgraph expansion: boundary mapping, namespacing, remapping, recursion and error paths."""

from __future__ import annotations

import pytest

from flowplex.config import load_yaml
from flowplex.spec import PortSpec

from ._util import assert_error, dedent

FOO = """
subgraphs:
  Foo:
    nodes:
      - {name: a, kernel: K, input_ports: [sin], output_ports: [mid]}
      - {name: b, kernel: K, input_ports: [mid], output_ports: [sout]%s}
    input_ports: [sin]
    output_ports: [sout]
"""
USE = (
    "input_ports: [i]\nnodes: [{name: d, type: Foo, input_ports: [i], output_ports: [o]%s}]\noutput_ports: "
    "[o]\n"
)


def foo(inner: str = "", instance: str = "") -> str:
    return dedent(FOO % inner) + USE % instance


def test_expansion_names_and_edges() -> None:
    spec = load_yaml(foo())
    assert [(n.name, n.path) for n in spec.nodes] == [
        ("d/a", "subgraphs.Foo.nodes[0] (expanded node `d/a`)"),
        ("d/b", "subgraphs.Foo.nodes[1] (expanded node `d/b`)"),
    ]
    assert [p.name for p in spec.nodes[0].input_ports] == ["i"]
    assert [p.name for p in spec.nodes[0].output_ports] == ["d/mid"]
    assert [p.name for p in spec.nodes[1].output_ports] == ["o"]


def test_two_instances_never_share_inner_edges() -> None:
    text = dedent(FOO % "") + (
        "input_ports: [i]\n"
        "nodes: [{name: d, type: Foo, input_ports: [i], output_ports: [o]},"
        " {name: e, type: Foo, input_ports: [o], output_ports: [p]}]\n"
        "output_ports: [p]\n"
    )
    spec = load_yaml(text)
    assert [n.name for n in spec.nodes] == ["d/a", "d/b", "e/a", "e/b"]
    assert [n.output_ports[0].name for n in spec.nodes] == ["d/mid", "o", "e/mid", "p"]


def test_every_port_valued_field_is_remapped_and_tags_are_kept() -> None:
    spec = load_yaml(
        dedent(
            """
            subgraphs:
              Loop:
                nodes:
                  - name: a
                    kernel: Zip
                    input_ports: ['X:sin', 'X:fb']
                    output_ports: [sout]
                    back_edges: [fb]
                    input_policy: {type: sync_set, sets: [[sin]]}
                    input_queues: {packets: 1, ports: {sin: {packets: 2}, fb: {packets: 0}}}
                  - name: r
                    type: route
                    input_ports: [sout]
                    output_ports: [fb, spill]
                    unmatched: spill
                    routes: [{to: fb, when: {metadata: again, op: exists}}]
                input_ports: ['Q:sin']
                output_ports: [sout, spill]
            input_ports: [i]
            nodes: [{name: d, type: Loop, input_ports: ['Z:i'], output_ports: [o, s]}]
            output_ports: [o, s]
            """
        )
    )
    a, r = spec.nodes
    assert a.input_ports == (PortSpec("i", "X", 0), PortSpec("d/fb", "X", 1))
    assert a.back_edges == ("d/fb",)
    assert a.input_policy.sets == (("i",),)
    assert a.input_queues.ports == (("i", 2), ("d/fb", 0))
    assert r.name == "d/r"
    assert r.route is not None
    assert r.route.unmatched == "s"
    assert [rule.to for rule in r.route.rules] == ["d/fb"]
    assert [p.name for p in r.output_ports] == ["d/fb", "s"]


def test_nested_subgraphs_accumulate_prefixes_and_use_main_executors() -> None:
    spec = load_yaml(
        dedent(
            """
            executors: [{name: cpu, num_threads: 2}]
            subgraphs:
              Inner:
                nodes: [{name: k, kernel: K, executor: cpu, input_ports: [x], output_ports: [y]}]
                input_ports: [x]
                output_ports: [y]
              Outer:
                nodes:
                  - {name: e, type: Inner, input_ports: [p], output_ports: [q]}
                  - {kernel: K, input_ports: [q], output_ports: [r]}
                input_ports: [p]
                output_ports: [r]
            input_ports: [i]
            nodes: [{name: d, type: Outer, input_ports: [i], output_ports: [o]}]
            output_ports: [o]
            """
        )
    )
    assert [n.name for n in spec.nodes] == ["d/e/k", "d/K"]
    assert spec.nodes[0].executor == "cpu"
    assert spec.nodes[0].path == "subgraphs.Inner.nodes[0] (expanded node `d/e/k`)"
    assert [p.name for p in spec.nodes[0].output_ports] == ["d/q"]


def test_an_unnamed_instance_is_named_after_its_subgraph() -> None:
    spec = load_yaml(dedent(FOO % "") + USE.replace("name: d, ", "") % "")
    assert [n.name for n in spec.nodes] == ["Foo/a", "Foo/b"]


def test_unnamed_inner_nodes_use_kernel_or_type() -> None:
    spec = load_yaml(
        dedent(
            """
            subgraphs:
              S:
                nodes:
                  - {kernel: K, input_ports: [x], output_ports: [y]}
                  - {type: route, input_ports: [y], output_ports: [z], routes: [{to: z, default: true}]}
                input_ports: [x]
                output_ports: [z]
            input_ports: [i]
            nodes: [{name: d, type: S, input_ports: [i], output_ports: [o]}]
            output_ports: [o]
            """
        )
    )
    assert [n.name for n in spec.nodes] == ["d/K", "d/route"]


def test_top_level_names_stay_as_written() -> None:
    spec = load_yaml(
        dedent(FOO % "")
        + USE.replace("nodes: [", "nodes: [{name: top, kernel: K, input_ports: [o], output_ports: [t]}, ")
        % ""
    )
    assert spec.nodes[0].name == "top"


def test_source_subgraph_without_inputs() -> None:
    spec = load_yaml(
        "subgraphs: {Gen: {nodes: [{name: s, kernel: Src, output_ports: [v]}], output_ports: [v]}}\n"
        "nodes: [{name: g, type: Gen, output_ports: [o]}]\noutput_ports: [o]\n"
    )
    assert spec.nodes[0].name == "g/s"
    assert spec.nodes[0].is_source


@pytest.mark.parametrize(
    ("text", "pattern"),
    [
        (
            foo("", "")
            .replace("input_ports: [i], output", "input_ports: [i, j], output")
            .replace("input_ports: [i]\n", "input_ports: [i, j]\n"),
            (
                r"^nodes\[0\]\.input_ports \(node `d`\): subgraph `Foo` instance provides 2 input port\(s\) "
                r"but the subgraph declares 1$"
            ),
        ),
        (
            foo().replace("output_ports: [o]}", "output_ports: []}").replace("output_ports: [o]\n", ""),
            (
                r"^nodes\[0\]\.output_ports \(node `d`\): subgraph `Foo` instance provides 0 output "
                r"port\(s\) "
                r"but the subgraph declares 1$"
            ),
        ),
        (
            foo("", "").replace("input_ports: [i], output", "input_ports: [i, i], output"),
            r"^nodes\[0\]\.input_ports\[1\] \(node `d`\): port"
            r" `i` is declared more than once in `input_ports`$",
        ),
        (
            foo("", ", executor: cpu"),
            (
                r"^nodes\[0\]\.executor \(node `d`\): `executor` does not apply to a subgraph instance "
                r"\(only `name`, `type`, `input_ports` and `output_ports` do"
            ),
        ),
        (
            foo("", ", mode: all"),
            r"^nodes\[0\] \(node `d`\): route fields are only valid when `type: route`$",
        ),
        (
            foo(", rate: 3"),
            r"^subgraphs\.Foo\.nodes\[1\]\.rate \(expanded node `d/b`\): rate only applies to source nodes",
        ),
        (
            foo(", executor: cpx").replace(
                "input_ports: [i]\n", "executors: [{name: cpu}]\ninput_ports: [i]\n"
            ),
            (
                r"^subgraphs\.Foo\.nodes\[1\]\.executor \(expanded node `d/b`\): undefined executor `cpx`; "
                r"did you mean `cpu`\?$"
            ),
        ),
        (
            foo(", back_edges: [zz]"),
            (
                r"^subgraphs\.Foo\.nodes\[1\]\.back_edges\[0\] \(expanded node `d/b`\): back_edge `d/zz` "
                r"is not one of this node's input ports"
            ),
        ),
        (
            foo().replace("[mid], output_ports: [sout]", "[mdi], output_ports: [sout]"),
            (
                r"^subgraphs\.Foo\.nodes\[1\]\.input_ports\[0\] \(expanded node `d/b`\): port `d/mdi` has "
                r"no producer; did you mean `d/mid`\?$"
            ),
        ),
        (
            foo().replace("input_ports: [i]\n", ""),
            (
                r"^subgraphs\.Foo\.nodes\[0\]\.input_ports\[0\] \(expanded node `d/a`\): port `i` has no "
                r"producer"
            ),
        ),
        (
            foo().replace("output_ports: [sout]\n", "output_ports: [zzz]\n"),
            r"^subgraphs\.Foo\.output_ports\[0\]: subgraph output `zzz` has no producer inside the subgraph$",
        ),
        (
            foo().replace("output_ports: [sout]\n", "output_ports: [sou]\n"),
            (
                r"^subgraphs\.Foo\.output_ports\[0\]: subgraph output `sou` has no producer inside the "
                r"subgraph; did you mean `sout`\?$"
            ),
        ),
        (
            foo().replace("input_ports: [sin]\n", "input_ports: [sin, sin]\n"),
            r"^subgraphs\.Foo\.input_ports\[1\]: subgraph input port `sin` is declared more than once$",
        ),
        (
            foo().replace("output_ports: [sout]\n", "output_ports: [sin]\n"),
            (
                r"^subgraphs\.Foo\.output_ports\[0\]: port `sin` is also a subgraph input; a subgraph cannot "
                r"pass an input straight through$"
            ),
        ),
        (
            foo().replace("input_ports: [sin]\n", "input_ports: ['a:b:c:sin']\n"),
            (
                r"^subgraphs\.Foo\.input_ports\[0\]: port declaration `a:b:c:sin` has an invalid number "
                r"of segments"
            ),
        ),
    ],
)
def test_expansion_errors(text: str, pattern: str) -> None:
    assert_error(text, pattern)


def test_a_cycle_inside_a_subgraph_names_the_expanded_nodes() -> None:
    text = dedent(
        """
        subgraphs:
          Foo:
            nodes:
              - {name: a, kernel: Zip, input_ports: [sin, fb], output_ports: [sout]}
              - {name: b, kernel: K, input_ports: [sout], output_ports: [fb]}
            input_ports: [sin]
            output_ports: [sout]
        input_ports: [i]
        nodes: [{name: d, type: Foo, input_ports: [i], output_ports: [o]}]
        output_ports: [o]
        """
    )
    assert_error(
        text,
        r"^subgraphs\.Foo\.nodes\[0\]\.input_ports\[1\] \(expanded node `d/a`\): topology cycle: node "
        r"`d/a` -> `d/b` -> `d/a`; "
        r"mark a feedback input with `back_edges` \(e\.g\. `back_edges: \[d/fb\]` on node `d/a`\)$",
    )


RECURSIVE = """
subgraphs:
  A:
    nodes: [{name: x, type: %s, input_ports: [ai], output_ports: [ao]}]
    input_ports: [ai]
    output_ports: [ao]
  B:
    nodes: [{name: y, type: A, input_ports: [bi], output_ports: [bo]}]
    input_ports: [bi]
    output_ports: [bo]
input_ports: [i]
nodes: [{name: d, type: A, input_ports: [i], output_ports: [o]}]
output_ports: [o]
"""


def test_mutual_recursion_reports_the_expansion_chain() -> None:
    assert_error(
        RECURSIVE % "B",
        (
            r"^subgraphs\.B\.nodes\[0\]\.type \(expanded node `d/x/y`\): subgraph `A` is recursive "
            r"\(expansion "
            r"cycle: A -> B -> A\)$"
        ),
    )


def test_self_recursion() -> None:
    assert_error(
        RECURSIVE % "A",
        (
            r"^subgraphs\.A\.nodes\[0\]\.type \(expanded node `d/x`\): subgraph `A` is recursive \(expansion "
            r"cycle: A -> A\)$"
        ),
    )


def test_unknown_subgraph_inside_a_subgraph() -> None:
    assert_error(
        RECURSIVE % "Bb",
        (
            r"^subgraphs\.A\.nodes\[0\]\.type \(expanded node `d/x`\): unknown subgraph `Bb`; did you mean "
            r"`B`\?$"
        ),
    )


def test_duplicate_names_after_expansion_are_rejected() -> None:
    text = dedent(FOO % "") + (
        "input_ports: [i]\n"
        "nodes: [{name: d/a, kernel: K, input_ports: [i], output_ports: [z]},"
        " {name: d, type: Foo, input_ports: [z], output_ports: [o]}]\n"
        "output_ports: [o]\n"
    )
    assert_error(
        text,
        (
            r"^subgraphs\.Foo\.nodes\[0\]\.name \(expanded node `d/a`\): node `d/a` is defined more than "
            r"once \(first at nodes\[0\]\)"
        ),
    )


def test_two_unnamed_instances_of_one_subgraph_need_names() -> None:
    text = dedent(FOO % "") + (
        "input_ports: [i]\n"
        "nodes: [{type: Foo, input_ports: [i], output_ports: [o]},"
        " {type: Foo, input_ports: [o], output_ports: [p]}]\n"
        "output_ports: [p]\n"
    )
    assert_error(
        text,
        r"^nodes\[1\]\.name \(node `Foo`\): subgraph instance `Foo` is defined more than once \(first "
        r"at nodes\[0\]\); "
        r"node names must be unique \(an unnamed instance is named after its subgraph: give it a `name`\)$",
    )


def test_unused_subgraphs_are_not_checked_beyond_the_schema() -> None:
    spec = load_yaml("subgraphs: {Unused: {nodes: [{name: a, kernel: K, input_ports: [nowhere]}]}}")
    assert spec.nodes == ()
