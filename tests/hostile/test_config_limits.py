"""Hostile graph files: each is refused with one ``ConfigError`` line, quickly and in little memory.

The issue-18 examples (alias bombs, a subgraph bomb, devices and FIFOs as ``include``, absurd
numbers, control characters in names) are written to files and loaded in one subprocess that
runs under an address-space limit, by the Python API and by ``flowplex check``. Before the
limits, the bombs took gigabytes (the subprocess would die of ``MemoryError``) and the FIFO hung.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Final

import pytest

DRIVER: Final = Path(__file__).with_name("_config_driver.py")
LIMIT_MIB: Final = 768
"""The subprocess's address space: the interpreter with flowplex and its CLI need about 150 MiB."""
MAX_GROWTH_MIB: Final = 200
MAX_SECONDS: Final = 2.0
"""Per load; each takes milliseconds (the margin is for a loaded CI machine)."""

SOURCE: Final = "- {name: s, kernel: RangeSourceKernel, output_ports: [x]}\n"


def _nested(anchor: str, leaf: str, wrap: Callable[[str], str], levels: int, copies: int) -> str:
    """``&a0 LEAF`` wrapped ``levels`` times, each level holding ``copies`` aliases of the one below."""
    value = f"&{anchor}0 {leaf}"
    for i in range(1, levels + 1):
        aliases = ", ".join([f"*{anchor}{i - 1}"] * copies)
        value = f"&{anchor}{i} {wrap(f'{value}, {aliases}')}"
    return value


def _route_bomb() -> str:
    when = _nested("a", "{timestamp: {op: gt, value: 1}}", lambda items: f"{{all: [{items}]}}", 9, 8)
    return (f"nodes:\n  {SOURCE}  - {{name: r, type: route, input_ports: [x], output_ports: [y], "
            f"routes: [{{to: y, when: {when}}}]}}\noutput_ports: [y]\n")


def _options_bomb() -> str:
    value = _nested("o", "[x, x, x, x, x, x, x, x]", lambda items: f"[{items}]", 9, 8)
    return f"nodes:\n  - {{name: s, kernel: RangeSourceKernel, output_ports: [x], options: {{a: {value}}}}}\n"


def _subgraph_bomb() -> str:
    subs = ["  L0: {nodes: [{kernel: RangeSourceKernel, output_ports: [x]}]}\n"]
    for i in range(1, 7):
        instances = ", ".join(f"{{name: i{k}, type: L{i - 1}}}" for k in range(10))
        subs.append(f"  L{i}: {{nodes: [{instances}]}}\n")
    return "subgraphs:\n" + "".join(subs) + "nodes: [{type: L6}]\n"


def _subgraph_chain(depth: int) -> str:
    subs = ["  S0: {nodes: [{kernel: RangeSourceKernel, output_ports: [x]}]}\n"]
    subs += [f"  S{i}: {{nodes: [{{type: S{i - 1}}}]}}\n" for i in range(1, depth)]
    return "subgraphs:\n" + "".join(subs) + f"nodes: [{{type: S{depth - 1}}}]\n"


def _graph(head: str, node: str = "{name: s, kernel: RangeSourceKernel, output_ports: [x]}") -> str:
    return f"{head}\nnodes: [{node}]\noutput_ports: [x]\n"


SHADOW_HASH: Final = "$6$Zp0Q4dT1$uUfRJmH2bC1kQ0yX9Jm4eDq8b2wGfVrK7s3nLtP5aHcE"


def _write_cases(root: Path) -> dict[str, tuple[Path, str]]:
    """Each case: its file and the pattern its one-line message must match."""
    cases: dict[str, tuple[str, str]] = {
        "route_alias_bomb": (_route_bomb(), r"nodes\[1\]\.routes\[0\]\.when\.all\[\d+\].*more than 100000 YAML "
                                            r"values once its aliases are expanded \(limit max_yaml_values="),
        "options_alias_bomb": (_options_bomb(), r"nodes\[0\]\.options\.a.*\(limit max_yaml_values=100000;"),
        "subgraph_bomb": (_subgraph_bomb(), r"expands to more than 10000 nodes and subgraph instances "
                                            r"\(limit max_nodes=10000; raise it with Limits\(max_nodes=\.\.\.\) "
                                            r"or FLOWPLEX_MAX_NODES\)"),
        "subgraph_chain_2000": (_subgraph_chain(2000),
                                r"subgraph instances nested more than 64 deep \(limit max_depth"),
        "deep_yaml": ("nodes: " + "[" * 200 + "]" * 200 + "\n",
                      r":1: nodes(\[0\])+: YAML lists and mappings nested more than 64 deep \(limit max_depth=64"),
        # libyaml stops at 1000 levels itself, before the nesting limit is seen.
        "deeper_yaml": ("nodes: " + "[" * 50_000 + "]" * 50_000 + "\n",
                        r":1: YAML parse failed: .*exceeded maximum nesting depth at line 1 column \d+$"),
        "big_document": ("# padding\n" * 200_000 + "nodes: []\n",
                         r"graph file `.*big_document.yaml` is 2000010 bytes, more than 1048576 "
                         r"\(limit max_document_bytes="),
        "include_dev_zero": ("include: [/dev/zero]\n", r":1: include\[0\]: include `/dev/zero` is a device, not a "
                                                       r"regular file \(/dev/zero\)$"),
        "include_fifo": ("include: [fifo]\n", r":1: include\[0\]: include `fifo` is a FIFO, not a regular file"),
        "include_directory": ("include: [.]\n", r"include\[0\]: include `\.` is a directory, not a regular file"),
        "include_not_yaml": ("include: [shadow]\n", r"shadow:1: unknown field \(a \d+-character key that is not a "
                                                    r"field name\)$"),
        "include_nul_byte": ('include: ["a\\0b"]\n', r":1: include\[0\]: `a\\x00b` contains the control "
                                                     r"character \\x00; names must be printable$"),
        "include_chain_3000": ("include: [chain1.yaml]\n", r"`include` chain longer than 16 files "
                                                           r"\(limit max_include_depth=16;"),
        "trace_capacity_huge": (_graph("trace_capacity: 100000000000000000000"),
                                r":1: trace_capacity: must be in 0\.\.100000000 events \(0: off\), "
                                r"got 100000000000000000000$"),
        "trace_capacity_float": (_graph("trace_capacity: 1e20"), r":1: trace_capacity: expected an integer, got float"),
        "num_threads_huge": (_graph("executors: [{name: p, num_threads: 100000}]",
                                    "{name: s, kernel: RangeSourceKernel, output_ports: [x], executor: p}"),
                             r":1: executors\[0\]\.num_threads: must be in 0\.\.1024, got 100000$"),
        "affinity_huge": (_graph("executors: [{name: p, affinity: [100000000000000000000]}]",
                                 "{name: s, kernel: RangeSourceKernel, output_ports: [x], executor: p}"),
                          r":1: executors\[0\]\.affinity\[0\]: must be in 0\.\.8191 \(a CPU id\), "
                          r"got 100000000000000000000$"),
        "rate_tiny": (_graph("", "{name: s, kernel: RangeSourceKernel, output_ports: [x], rate: 1.0e-300}"),
                      r"nodes\[0\]\.rate \(node `s`\): must be in 1e-06\.\.1e\+09 Hz \(0: unpaced\), got 1e-300$"),
        "escape_in_node_name": (_graph("", '{name: "a\\e[2Jb", kernel: RangeSourceKernel, output_ports: [x]}'),
                                r"nodes\[0\]\.name \(node `a\\x1b\[2Jb`\): `a\\x1b\[2Jb` contains the control "
                                r"character \\x1b; names must be printable$"),
    }
    written: dict[str, tuple[Path, str]] = {}
    for name, (text, pattern) in cases.items():
        path = root / f"{name}.yaml"
        path.write_text(text, encoding="utf-8")
        written[name] = (path, pattern)
    os.mkfifo(root / "fifo")
    (root / "shadow").write_text(f"root:{SHADOW_HASH}:19000:0:99999:7:::\nbin:*:19000:0:99999:7:::\n")
    for i in range(1, 3001):
        (root / f"chain{i}.yaml").write_text(f"include: [chain{i + 1}.yaml]\n" if i < 3000 else "{}\n")
    return written


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[dict[str, object], str]]:
    """Every case loaded in one subprocess (each start costs ~0.5 s): its result and its pattern."""
    root = tmp_path_factory.mktemp("hostile")
    cases = _write_cases(root)
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLOWPLEX_MAX_")}
    proc = subprocess.run(
        [sys.executable, str(DRIVER), str(LIMIT_MIB), *(str(path) for path, _ in cases.values())],
        capture_output=True, text=True, timeout=90, env=env, cwd=root, check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = [json.loads(line) for line in proc.stdout.splitlines()]
    assert len(results) == len(cases), proc.stderr[-3000:]
    return {name: (result, pattern) for (name, (_, pattern)), result in zip(cases.items(), results, strict=True)}


CASES: Final = [
    "route_alias_bomb", "options_alias_bomb", "subgraph_bomb", "subgraph_chain_2000", "deep_yaml", "deeper_yaml",
    "big_document",
    "include_dev_zero", "include_fifo", "include_directory", "include_not_yaml", "include_nul_byte",
    "include_chain_3000", "trace_capacity_huge", "trace_capacity_float", "num_threads_huge", "affinity_huge",
    "rate_tiny", "escape_in_node_name",
]


@pytest.mark.parametrize("case", CASES)
def test_hostile_file_is_one_config_error_line(
    outcomes: dict[str, tuple[dict[str, object], str]], case: str
) -> None:
    result, pattern = outcomes[case]
    message = str(result.get("api_message", ""))
    assert result["api"] == "ConfigError", message
    assert "\n" not in message
    assert re.search(pattern, message), f"{message!r} does not match {pattern!r}"
    stderr = str(result["cli_stderr"])
    assert "Traceback" not in stderr
    assert stderr.endswith("\n") and "\n" not in stderr[:-1], stderr
    assert message in stderr  # the CLI prints the library's line, not its own rewording
    assert result["cli_code"] == 1
    assert float(result["api_s"]) < MAX_SECONDS  # type: ignore[arg-type]
    assert float(result["cli_s"]) < MAX_SECONDS  # type: ignore[arg-type]
    assert float(result["rss_growth_mib"]) < MAX_GROWTH_MIB  # type: ignore[arg-type]


def test_a_file_that_is_not_yaml_is_not_quoted(outcomes: dict[str, tuple[dict[str, object], str]]) -> None:
    result, _ = outcomes["include_not_yaml"]
    assert SHADOW_HASH not in str(result["api_message"]) + str(result["cli_stderr"])
    assert "root:" not in str(result["api_message"])


def test_every_case_is_run(outcomes: dict[str, tuple[dict[str, object], str]]) -> None:
    assert sorted(outcomes) == sorted(CASES)
