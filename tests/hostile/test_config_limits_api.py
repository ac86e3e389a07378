"""``Limits``: the bounds can be raised and lowered, from code and from the environment, and are exact."""

from __future__ import annotations

import re

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

import flowplex
from flowplex.config import Limits, load_yaml
from flowplex.config._marks import parse_document
from flowplex.errors import ConfigError, UsageError


def _instances(fanout: int, levels: int) -> str:
    """Subgraphs ``L0..L{levels}``; an instance of the top one expands to ``fanout ** levels`` source nodes."""
    subs = ["  L0: {nodes: [{kernel: RangeSourceKernel, output_ports: [x]}]}\n"]
    for i in range(1, levels + 1):
        subs.append(f"  L{i}: {{nodes: [{', '.join(f'{{name: i{k}, type: L{i - 1}}}' for k in range(fanout))}]}}\n")
    return "subgraphs:\n" + "".join(subs) + f"nodes: [{{type: L{levels}}}]\n"


def test_max_nodes_counts_nodes_and_instances() -> None:
    text = _instances(3, 3)  # 1 + 3 + 9 + 27 instances and 27 nodes
    assert len(load_yaml(text, limits=Limits(max_nodes=67)).nodes) == 27
    with pytest.raises(ConfigError, match=r"more than 66 nodes and subgraph instances \(limit max_nodes=66;"):
        load_yaml(text, limits=Limits(max_nodes=66))


def test_a_subgraph_bomb_is_counted_before_it_is_built() -> None:
    """A million nodes are refused at the top-level instance, from the library's counts, before expansion."""
    with pytest.raises(ConfigError, match=r"^nodes\[0\] \(node `L6`\): the graph expands to more than 10000 nodes"):
        load_yaml(_instances(10, 6))


def test_the_environment_sets_the_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    text = _instances(3, 3)
    monkeypatch.setenv("FLOWPLEX_MAX_NODES", "66")
    with pytest.raises(ConfigError, match=r"limit max_nodes=66"):
        load_yaml(text)
    assert len(load_yaml(text, limits=Limits()).nodes) == 27  # explicit limits win over the environment
    monkeypatch.setenv("FLOWPLEX_MAX_NODES", "lots")
    with pytest.raises(ConfigError, match=r"^FLOWPLEX_MAX_NODES='lots': expected a positive integer \(the limit "
                                          r"`max_nodes`\)$"):
        load_yaml(text)


def test_graph_factories_take_limits(tmp_path: pytest.TempPathFactory) -> None:
    text = _instances(2, 2)
    with pytest.raises(ConfigError, match=r"limit max_nodes=3"):
        flowplex.Graph.from_yaml(text, limits=Limits(max_nodes=3))
    path = tmp_path / "g.yaml"  # type: ignore[operator]
    path.write_text(text)
    with pytest.raises(ConfigError, match=r"g\.yaml:\d+: .*limit max_nodes=3"):
        flowplex.Graph.from_yaml_file(path, limits=Limits(max_nodes=3))
    with pytest.raises(ConfigError, match=r"graph file `.*g\.yaml` is \d+ bytes, more than 10 \(limit "
                                          r"max_document_bytes=10;"):
        flowplex.Graph.from_yaml_file(path, limits=Limits(max_document_bytes=10))


@pytest.mark.parametrize("bad", [0, -1, True, 2.5, "5"])
def test_limits_are_positive_integers(bad: object) -> None:
    with pytest.raises(UsageError, match=r"^Limits\(max_nodes=\.\.\.\): expected a positive integer"):
        Limits(max_nodes=bad)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match=r"^Limits\(max_depth=257\): at most 256$"):
        Limits(max_depth=257)
    with pytest.raises(UsageError, match=r"^limits: expected a flowplex.config.Limits, got dict$"):
        load_yaml("{}", limits={"max_nodes": 5})  # type: ignore[arg-type]


def test_text_size_counts_utf8_bytes() -> None:
    text = "# " + "é" * 10 + "\n"  # 23 bytes, 13 characters
    load_yaml(text, limits=Limits(max_document_bytes=23))
    with pytest.raises(ConfigError, match=r"^the YAML document is 23 bytes, more than 22 \(limit max_document_bytes"):
        load_yaml(text, limits=Limits(max_document_bytes=22))


def test_depth_limit_is_exact() -> None:
    text = "nodes: [{kernel: K, options: " + "[" * 10 + "]" * 10 + "}]"  # 1 + 1 + 1 + 10 levels
    parse_document(text, None, Limits(max_depth=13))
    with pytest.raises(ConfigError, match=r"^nodes\[0\]\.options(\[0\]){9}: YAML lists and mappings nested more "
                                          r"than 12 deep"):
        parse_document(text, None, Limits(max_depth=12))


# -- the expanded size: counted from events, checked against the built data ---------------------------------

_leaves = st.one_of(st.integers(-5, 5), st.sampled_from(["a", "b", ""]), st.none(), st.booleans())


@st.composite
def _shared_trees(draw: st.DrawFn) -> object:
    """Nested lists and mappings in which some subtrees appear several times (dumped as anchors and aliases)."""
    pool: list[object] = []
    def tree(depth: int) -> object:
        if depth == 0 or draw(st.integers(0, 3)) == 0:
            if pool and draw(st.booleans()):
                return draw(st.sampled_from(pool))  # the same object again: an alias
            return draw(_leaves)
        if draw(st.booleans()):
            value: object = [tree(depth - 1) for _ in range(draw(st.integers(0, 3)))]
        else:
            value = {f"k{i}": tree(depth - 1) for i in range(draw(st.integers(0, 3)))}
        pool.append(value)
        return value
    return {"root": tree(5)}


def _expanded(value: object) -> int:
    """Values in ``value`` with every shared subtree counted where it appears (keys count 1 each)."""
    if isinstance(value, list):
        return 1 + sum(_expanded(v) for v in value)
    if isinstance(value, dict):
        return 1 + sum(1 + _expanded(v) for v in value.values())
    return 1


@given(_shared_trees())
def test_the_value_limit_is_the_expanded_size(data: object) -> None:
    text = yaml.safe_dump(data)
    size = _expanded(data)
    parsed, _ = parse_document(text, None, Limits(max_yaml_values=size))
    assert parsed == data
    with pytest.raises(ConfigError, match=re.escape(f"more than {size - 1} YAML values")):
        parse_document(text, None, Limits(max_yaml_values=size - 1))


def test_a_graph_file_that_is_not_a_regular_file_is_refused_unread(tmp_path: pytest.TempPathFactory) -> None:
    import os

    fifo = tmp_path / "fifo"  # type: ignore[operator]
    os.mkfifo(fifo)
    with pytest.raises(ConfigError, match=r"^graph file `.*fifo` is a FIFO, not a regular file \(.*fifo\)$"):
        flowplex.Graph.from_yaml_file(fifo)  # opened non-blocking: no writer, no hang
    with pytest.raises(ConfigError, match=r"^graph file `/dev/zero` is a device, not a regular file"):
        flowplex.Graph.from_yaml_file("/dev/zero")
    with pytest.raises(ConfigError, match=r"^graph file `a\\x00b` cannot be read: the path contains a NUL byte$"):
        flowplex.Graph.from_yaml_file("a\0b")
