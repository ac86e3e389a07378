"""``include`` files and ``file:LINE:`` prefixes on every kind of error."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from flowplex.config import load_yaml_file
from flowplex.errors import ConfigError

from ._util import dedent

LIB = """
subgraphs:
  Foo:
    nodes: [{name: a, kernel: K, input_ports: [s], output_ports: [t]}]
    input_ports: [s]
    output_ports: [t]
"""

MAIN = """
include: [lib.yaml]
input_ports: [i]
nodes:
  - {name: d, type: Foo, input_ports: [i], output_ports: [o]}
output_ports: [o]
"""


def write(directory: Path, name: str, text: str) -> Path:
    path = directory / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(dedent(text))
    return path


def error_of(path: Path) -> str:
    with pytest.raises(ConfigError) as info:
        load_yaml_file(path)
    return str(info.value)


def test_include_merges_subgraphs_only(tmp_path: Path) -> None:
    write(
        tmp_path, "lib.yaml", LIB + "nodes: [{name: ignored, kernel: Nope}]\nexecutors: [{name: ignored}]\n"
    )
    spec = load_yaml_file(write(tmp_path, "main.yaml", MAIN))
    assert [n.name for n in spec.nodes] == ["d/a"]
    assert spec.executors == ()


def test_include_paths_are_relative_to_the_including_file(tmp_path: Path) -> None:
    write(tmp_path, "libs/lib.yaml", "include: [more/bar.yaml]\n" + LIB)
    write(
        tmp_path,
        "libs/more/bar.yaml",
        (
            "subgraphs: {Bar: {nodes: [{name: b, kernel: K, input_ports: [s], output_ports: [t]}], "
            "input_ports: "
            "[s], output_ports: [t]}}"
        ),
    )
    main = (
        MAIN.replace("[lib.yaml]", "[libs/lib.yaml]")
        .replace(
            "output_ports: [o]}\n",
            "output_ports: [o]}\n  - {name: e, type: Bar, input_ports: [o], output_ports: [p]}\n",
        )
        .replace("output_ports: [o]\n", "output_ports: [p]\n")
    )
    spec = load_yaml_file(write(tmp_path, "main.yaml", main))
    assert [n.name for n in spec.nodes] == ["d/a", "e/b"]


def test_diamonds_and_cycles_are_read_once(tmp_path: Path) -> None:
    write(tmp_path, "lib.yaml", "include: [other.yaml, main.yaml]\n" + LIB)
    write(tmp_path, "other.yaml", "include: [lib.yaml, ./lib.yaml]\nsubgraphs: {}\n")
    spec = load_yaml_file(
        write(tmp_path, "main.yaml", MAIN.replace("[lib.yaml]", "[lib.yaml, other.yaml, lib.yaml]"))
    )
    assert [n.name for n in spec.nodes] == ["d/a"]


def test_a_subgraph_defined_in_two_files_names_both(tmp_path: Path) -> None:
    write(tmp_path, "lib.yaml", LIB)
    main = write(tmp_path, "main.yaml", MAIN + "subgraphs:\n  Foo: {nodes: []}\n")
    message = error_of(main)
    expected = (
        rf"^{re.escape(str(tmp_path / 'lib.yaml'))}:2: subgraphs\.Foo: subgraph `Foo` defined more than "
        rf"once \(in `{re.escape(str(main))}` and `{re.escape(str(tmp_path / 'lib.yaml'))}`\)$"
    )
    assert re.search(expected, message), message


def test_a_missing_include_names_the_include(tmp_path: Path) -> None:
    main = write(tmp_path, "main.yaml", MAIN.replace("lib.yaml", "nope.yaml"))
    message = error_of(main)
    assert re.search(
        (
            rf"^{re.escape(str(main))}:1: include\[0\]: include `nope\.yaml` cannot be read: No such file "
            rf"or directory"
        ),
        message,
    ), message


def test_errors_inside_included_files_name_that_file_and_line(tmp_path: Path) -> None:
    write(tmp_path, "lib.yaml", LIB.replace("kernel: K", "kernal: K"))
    message = error_of(write(tmp_path, "main.yaml", MAIN))
    lib = re.escape(str(tmp_path / "lib.yaml"))
    assert re.search(
        (
            rf"^{lib}:3: subgraphs\.Foo\.nodes\[0\] \(node `a`\): unknown field `kernal`; did you mean "
            rf"`kernel`\?$"
        ),
        message,
    ), message


def test_parse_errors_inside_included_files(tmp_path: Path) -> None:
    write(tmp_path, "lib.yaml", "subgraphs: {Foo: [\n")
    message = error_of(write(tmp_path, "main.yaml", MAIN))
    assert re.search(rf"^{re.escape(str(tmp_path / 'lib.yaml'))}:\d+: YAML parse failed: ", message), message


def test_plan_errors_in_expanded_nodes_point_into_the_included_file(tmp_path: Path) -> None:
    write(tmp_path, "lib.yaml", LIB.replace("output_ports: [t]}]", "output_ports: [t], rate: 5}]"))
    message = error_of(write(tmp_path, "main.yaml", MAIN))
    lib = re.escape(str(tmp_path / "lib.yaml"))
    assert re.search(
        (
            rf"^{lib}:3: subgraphs\.Foo\.nodes\[0\]\.rate \(expanded node `d/a`\): rate only applies to "
            rf"source nodes"
        ),
        message,
    ), message


def test_include_with_a_relative_main_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path, "sub/lib.yaml", LIB.replace("kernel: K", "kernal: K"))
    write(tmp_path, "sub/main.yaml", MAIN)
    monkeypatch.chdir(tmp_path)
    message = error_of(Path("sub/main.yaml"))
    assert message.startswith("sub/lib.yaml:3: subgraphs.Foo.nodes[0]"), message


LINES = """
executors:
  - name: cpu
    num_threads: 2
input_ports: [i]
nodes:
  - name: a
    kernel: K
    input_ports: [i]
    output_ports: [x]
    executor: cpx
  - name: b
    kernel: K
    input_ports: [x, y]
    output_ports: [z]
output_ports: [z, w]
"""


@pytest.mark.parametrize(
    ("edit", "pattern"),
    [
        (
            ("executor: cpx", "executor: cpu"),
            r":13: nodes\[1\]\.input_ports\[1\] \(node `b`\): port `y` has no producer",
        ),
        (
            ("executor: cpx", "executr: cpu"),
            r":10: nodes\[0\] \(node `a`\): unknown field `executr`; did you mean `executor`\?$",
        ),
        (
            ("", ""),
            r":10: nodes\[0\]\.executor \(node `a`\): undefined executor `cpx`; did you mean `cpu`\?$",
        ),
        (
            ("num_threads: 2", "num_threads: -2"),
            r":3: executors\[0\]\.num_threads: expected a non-negative integer",
        ),
        (
            ("  - name: cpu\n", "  - name: default\n"),
            r":2: executors\[0\]\.name: `default` is reserved for the implicit executor$",
        ),
    ],
)
def test_every_error_carries_the_line(tmp_path: Path, edit: tuple[str, str], pattern: str) -> None:
    path = write(tmp_path, "g.yaml", LINES.replace(*edit))
    message = error_of(path)
    assert message.startswith(f"{path}:"), message
    assert re.search(pattern, message), message


def test_graph_level_errors_carry_the_line(tmp_path: Path) -> None:
    path = write(tmp_path, "g.yaml", LINES.replace("executor: cpx", "executor: cpu").replace("[x, y]", "[x]"))
    assert re.search(r":15: output_ports\[1\]: graph output `w` has no producer", error_of(path))
