"""A name written as a bare number that names nothing is a type error, not an undefined name.

``default_executor: 5`` used to say ``undefined executor `5```: the number was read as the name
"5" (as lm-flow's YAML reader does) and then looked up. A number that does name something
(``executors: [{name: 5}]`` with ``executor: 5``) still works; one that names nothing says what
was expected, what was found and where.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from flowplex.config import load_yaml
from flowplex.errors import ConfigError

from .conftest import CLI, run_limited

SRC = "{name: s, kernel: RangeSourceKernel, output_ports: [x]%s}"
SINK = "{name: k, kernel: PassThroughKernel, input_ports: [x], output_ports: [y]%s}"


def _two(src: str = "", sink: str = "", head: str = "") -> str:
    return f"{head}nodes: [{SRC % src}, {SINK % sink}]\noutput_ports: [y]\n"


CASES = {
    "default_executor": (_two(head="default_executor: 5\n"),
                         r"^default_executor: expected the name of an executor \(a string\), got integer `5`$"),
    "executor": (_two(src=", executor: 7", head="executors: [{name: cpu}]\n"),
                 r"^nodes\[0\]\.executor \(node `s`\): expected the name of an executor \(a string\), "
                 r"got integer `7`$"),
    "kernel": ("nodes: [{name: s, kernel: 5, output_ports: [x]}]\noutput_ports: [x]\n",
               r"^nodes\[0\]\.kernel \(node `s`\): expected the name of a kernel \(a string\), got integer `5`$"),
    "type": ("nodes: [{name: s, type: 3, output_ports: [x]}]\noutput_ports: [x]\n",
             r"^nodes\[0\]\.type \(node `s`\): expected the name of a subgraph \(a string\), got integer `3`$"),
    "input_ports": (_two().replace("input_ports: [x]", "input_ports: [5]"),
                    r"^nodes\[1\]\.input_ports\[0\] \(node `k`\): expected the name of a stream \(a string\), "
                    r"got integer `5`$"),
    "graph output_ports": (f"nodes: [{SRC % ''}]\noutput_ports: [9]\n",
                           r"^output_ports\[0\]: expected the name of a stream \(a string\), got integer `9`$"),
    "back_edges": (_two(sink=", back_edges: [4]"),
                   r"^nodes\[1\]\.back_edges\[0\] \(node `k`\): expected the name of an input port of the node "
                   r"\(a string\), got integer `4`$"),
    "input_policy.sets": (_two(sink=", input_policy: {type: sync_set, sets: [[x], [2]]}"),
                          r"^nodes\[1\]\.input_policy\.sets\[1\]\[0\] \(node `k`\): expected the name of an input "
                          r"port of the node \(a string\), got integer `2`$"),
    "routes.to": (f"nodes: [{SRC % ''}, {{name: r, type: route, input_ports: [x], output_ports: [y], "
                  "routes: [{to: 1, default: true}]}]\noutput_ports: [y]\n",
                  r"^nodes\[1\]\.routes\[0\]\.to \(node `r`\): expected the name of an output port \(a string\), "
                  r"got integer `1`$"),
    "unmatched": (f"nodes: [{SRC % ''}, {{name: r, type: route, input_ports: [x], output_ports: [y], "
                  "unmatched: 0, routes: [{to: y, when: {metadata: k, op: exists}}]}]\noutput_ports: [y]\n",
                  r"^nodes\[1\]\.unmatched \(node `r`\): expected the name of an output port \(a string\), "
                  r"got integer `0`$"),
    "in a subgraph": ("subgraphs:\n  sub:\n    input_ports: [a]\n    output_ports: [b]\n"
                      "    nodes: [{name: n, kernel: PassThroughKernel, input_ports: [a], output_ports: [b], "
                      "executor: 12}]\n"
                      f"nodes: [{SRC % ''}, {{name: i, type: sub, input_ports: [x], output_ports: [y]}}]\n"
                      "output_ports: [y]\n",
                      r"^subgraphs\.sub\.nodes\[0\]\.executor \(node `n`\): expected the name of an executor "
                      r"\(a string\), got integer `12`$"),
}


@pytest.mark.parametrize("text,pattern", list(CASES.values()), ids=list(CASES))
def test_a_number_where_a_name_is_expected_is_a_type_error(text: str, pattern: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_yaml(text)
    assert re.search(pattern, str(info.value)), str(info.value)


def test_check_reports_the_type_with_the_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "g.yaml"
    path.write_text(_two(head="executors: [{name: cpu}]\ndefault_executor: 5\n"))
    run = run_limited([*CLI, "check", str(path)], mem_mb=1024, timeout_s=30.0, stdout_path=None)
    assert not run.hung and run.rc != 0
    lines = [line for line in (run.stdout + run.stderr).splitlines() if line.strip()]
    assert len(lines) == 1, lines
    assert re.search(rf"{re.escape(str(path))}:2: default_executor: expected the name of an executor \(a string\), "
                     r"got integer `5`$", lines[0]), lines[0]

