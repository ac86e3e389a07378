"""YAML parsing: parse errors, duplicate keys, YAML 1.2 scalars and ``file:LINE:`` prefixes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from flowplex.config import load_yaml, load_yaml_file
from flowplex.errors import ConfigError

from ._util import assert_error, dedent, load_error


def test_parse_error_has_line_and_column() -> None:
    message = load_error("nodes: [{kernel: A,\nfoo")
    assert re.fullmatch(r"YAML parse failed: .* at line \d+ column \d+", message), message


def test_parse_error_in_a_file_is_prefixed_with_the_file(tmp_path: Path) -> None:
    path = tmp_path / "g.yaml"
    path.write_text("nodes:\n  - {kernel: A\n  - x\n")
    with pytest.raises(
        ConfigError, match=rf"^{re.escape(str(path))}:\d+: YAML parse failed: .* at line \d+ column \d+$"
    ):
        load_yaml_file(path)


def test_source_names_the_text_in_messages() -> None:
    with pytest.raises(ConfigError, match=r"^graph\.yaml:2: nodes\[0\]: unknown field `kernal`"):
        load_yaml("nodes:\n  - kernal: A\n", source="graph.yaml")


def test_more_than_one_document_is_rejected() -> None:
    assert_error(
        "nodes: []\n---\nnodes: []\n", r"^YAML parse failed: .*more than one document is not supported"
    )


def test_duplicate_keys_are_rejected_with_the_line_of_the_second(tmp_path: Path) -> None:
    path = tmp_path / "dup.yaml"
    path.write_text("nodes:\n  - name: a\n    kernel: K\n    name: b\n")
    with pytest.raises(ConfigError, match=rf"^{re.escape(str(path))}:4: nodes\[0\]: duplicate field `name`$"):
        load_yaml_file(path)


def test_duplicate_top_level_key() -> None:
    assert_error("max_queue_size: 1\nmax_queue_size: 2\n", r"^duplicate field `max_queue_size`$")


def test_the_document_must_be_a_mapping() -> None:
    assert_error("- a\n- b\n", r"^a graph document must be a mapping of top-level fields, got a list$")
    # A string document is named by its type only: it may be a file that is no YAML (issue 18).
    assert_error("just text\n", r"got a string$")


def test_empty_document_is_an_empty_graph() -> None:
    assert load_yaml("").nodes == ()
    assert load_yaml("# only a comment\n").nodes == ()


def test_stats_off_is_the_string_off() -> None:
    # YAML 1.1 would read `off` as false; lm-flow (YAML 1.2) reads the string.
    assert load_yaml("stats: off").stats == "off"


def test_scalars_follow_the_yaml_1_2_core_schema() -> None:
    spec = load_yaml(
        dedent(
            """
            nodes:
              - kernel: Src
                output_ports: [x]
                options: {yes: yes, on: on, dec: 017, oct: 0o17, hex: 0x1f, date: 2001-12-14,
                          float: 1e3, inf: .inf, none: ~, t: true, under: 1_000}
            output_ports: [x]
            """
        )
    )
    assert spec.nodes[0].options == {
        "yes": "yes",
        "on": "on",
        "dec": 17,
        "oct": 15,
        "hex": 31,
        "date": "2001-12-14",
        "float": 1000.0,
        "inf": float("inf"),
        "none": None,
        "t": True,
        "under": "1_000",
    }


def test_anchors_aliases_and_merge_keys_work() -> None:
    spec = load_yaml(
        dedent(
            """
            input_ports: [i]
            nodes:
              - &pt {name: a, kernel: PassThroughKernel, on_error: skip, input_ports: [i], output_ports: [m]}
              - {<<: *pt, name: b, input_ports: [m], output_ports: [o]}
            output_ports: [o]
            """
        )
    )
    assert [(n.name, n.on_error, n.kernel) for n in spec.nodes] == [
        ("a", "skip", "PassThroughKernel"),
        ("b", "skip", "PassThroughKernel"),
    ]


def test_unsupported_tagged_values_in_options_are_rejected() -> None:
    assert_error(
        "nodes: [{kernel: Src, output_ports: [x], options: {blob: !!binary aGVsbG8=}}]\noutput_ports: [x]",
        r"^nodes\[0\]\.options\.blob \(node `Src#0`\): unsupported option value \(a bytes\)",
    )


def test_integer_option_keys_become_strings_other_keys_are_rejected() -> None:
    spec = load_yaml("nodes: [{kernel: Src, output_ports: [x], options: {1: a}}]\noutput_ports: [x]")
    assert spec.nodes[0].options == {"1": "a"}
    assert_error(
        "nodes: [{kernel: Src, output_ports: [x], options: {1.5: a}}]\noutput_ports: [x]",
        r"^nodes\[0\]\.options \(node `Src#0`\): option keys must be strings, got float `1.5`",
    )


def test_a_file_that_is_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_bytes(b"nodes: [\xff]\n")
    with pytest.raises(ConfigError, match=r"^graph file `.*bad\.yaml` is not UTF-8 text"):
        load_yaml_file(path)


def test_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(
        ConfigError, match=r"^graph file `.*nope\.yaml` cannot be read: No such file or directory"
    ):
        load_yaml_file(tmp_path / "nope.yaml")


def test_load_yaml_file_accepts_str_and_path(tmp_path: Path) -> None:
    path = tmp_path / "g.yaml"
    path.write_text("nodes: [{kernel: Src, output_ports: [x]}]\noutput_ports: [x]\n")
    assert load_yaml_file(path).source == str(path)
    assert load_yaml_file(str(path)).nodes[0].name == "Src#0"


def test_recursive_aliases_are_rejected() -> None:
    assert_error(
        "nodes: [{kernel: K, output_ports: [x], options: &a [*a]}]",
        r"^nodes\[0\]\.options\[0\]: a YAML alias refers to its own anchor \(recursive data\)$",
    )


def test_shared_aliases_are_fine() -> None:
    spec = load_yaml(
        "nodes: [{kernel: K, output_ports: [x], options: {p: &a [1], r: *a}}]\noutput_ports: [x]"
    )
    assert spec.nodes[0].options == {"p": [1], "r": [1]}


def test_number_keys_are_unknown_fields() -> None:
    assert_error("nodes: [{1: x}]", r"^nodes\[0\]: unknown field `1`, expected one of `name`, `kernel`")
