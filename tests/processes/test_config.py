"""``type: ProcessPoolExecutor`` in YAML, the ``default_executor`` key and ``--default-executor``."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import flowplex
from flowplex.config import load_yaml
from flowplex.config._load import load_plan
from flowplex.config._schema import json_schema
from flowplex.diagnostics._check import check_config
from flowplex.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
MAIN = "import sys; sys.path[:0] = [p for p in sys.argv.pop(1).split(':') if p]; from flowplex.cli import main; main()"

ONE = """
nodes: [{ name: n, kernel: ScaleKernel, input_ports: [x], output_ports: [y]%s }]
input_ports: [x]
output_ports: [y]
"""


def error_of(text: str) -> str:
    with pytest.raises(ConfigError) as info:
        flowplex.Graph.from_yaml(text)
    return str(info.value)


@pytest.mark.parametrize(
    ("executors", "node", "pattern"),
    [
        ("{ name: p, type: ProcessPoolExecutor, num_processes: -1 }", "",
         r"^executors\[0\]\.num_processes: expected a non-negative integer"),
        ("{ name: p, type: ProcessPoolExecutor, num_processes: '2' }", "",
         r"^executors\[0\]\.num_processes: expected an integer"),
        ("{ name: t, num_threads: 2 }, { name: p, type: ProcessPoolExecutor, num_processes: true }", "",
         r"^executors\[1\]\.num_processes: expected an integer"),
        ("{ name: p, type: ProcessPoolExecutor, num_process: 2 }", "",
         r"^executors\[0\]: unknown field `num_process`; did you mean `num_processes`\?"),
        ("{ name: p, type: ProcessPoolExecuter }", "",
         r"^executors\[0\]\.type: unknown executor type `ProcessPoolExecuter`; did you mean `ProcessPoolExecutor`\? "
         r"\(supported: ThreadPoolExecutor, DelegatingExecutor, ProcessPoolExecutor, RayExecutor\)$"),
        ("{ name: p, type: ProcessPoolExecutor, num_threads: 2 }", "",
         r"^executors\[0\]: ProcessPoolExecutor runs kernels in worker processes, so `num_threads`, `affinity`, "
         r"and `priority` do not apply; set `num_processes` instead$"),
        ("{ name: t, type: ThreadPoolExecutor }, { name: u, type: ThreadPoolExecutor, num_processes: 2 }", "",
         r"^executors\[1\]\.num_processes: `num_processes` applies to ProcessPoolExecutor only \(this executor is "
         r"a ThreadPoolExecutor; drop the field or change its `type`\)$"),
        ("{ name: d, type: DelegatingExecutor, num_processes: 2 }", "",
         r"^executors\[0\]\.num_processes: `num_processes` applies to ProcessPoolExecutor only \(this executor is "
         r"a DelegatingExecutor;"),
        ("{ name: p, type: ProcessPoolExecutor, arena_bytes: 1000 }", "",
         r"^executors\[0\]\.arena_bytes: arena_bytes must be 0 \(the default, 1 GiB\) or at least 65536 "
         r"\(64 KiB\), got 1000$"),
        ("{ name: t, type: ThreadPoolExecutor, arena_bytes: 1048576 }", "",
         r"^executors\[0\]\.arena_bytes: `arena_bytes` applies to ProcessPoolExecutor only \(this executor is "
         r"a ThreadPoolExecutor;"),
    ],
)
def test_executor_options_are_validated_with_their_path(executors: str, node: str, pattern: str) -> None:
    message = error_of(f"executors: [{executors}]\n" + ONE % node)
    assert re.search(pattern, message), message


def test_a_pool_spec_and_its_defaults() -> None:
    spec = load_yaml("executors: [{ name: p, type: ProcessPoolExecutor }, "
                     "{ name: q, type: ProcessPoolExecutor, num_processes: 2 }]\n" + ONE % ", executor: q")
    assert [(e.type, e.num_processes, e.num_threads) for e in spec.executors] == [
        ("ProcessPoolExecutor", 0, 0), ("ProcessPoolExecutor", 2, 0)]
    with flowplex.Graph.from_yaml("executors: [{ name: p, type: ProcessPoolExecutor }]\n" + ONE % ", executor: p") as g:
        pool = next(s for s in g.stats().executors if s.name == "p")  # built, not started: no process yet
    assert (pool.kind, pool.threads, pool.capacity) == ("processes", 1, os.cpu_count() or 1)
    properties = json_schema()["$defs"]["ExecutorModel"]["properties"]
    assert "0 means one per CPU" in properties["num_processes"]["description"]
    assert "ProcessPoolExecutor" in properties["type"]["enum"]


GRAPH = """
executors:
  - { name: cpu, type: ProcessPoolExecutor, num_processes: 1 }
  - { name: io, type: ThreadPoolExecutor }
%s
nodes:
  - { name: a, kernel: ScaleKernel, input_ports: [x], output_ports: [y] }
  - { name: b, kernel: ScaleKernel, input_ports: [y], output_ports: [z], executor: io }
  - { name: c, kernel: ScaleKernel, input_ports: [z], output_ports: [w], executor: default }
  - { name: s, type: Pair, input_ports: [w], output_ports: [v] }
subgraphs:
  Pair:
    input_ports: [i]
    output_ports: [o]
    nodes:
      - { name: p, kernel: ScaleKernel, input_ports: [i], output_ports: [o] }
input_ports: [x]
output_ports: [v]
"""


def placement(text: str, **kwargs: str) -> dict[str, str]:
    plan = load_plan(text, **kwargs)
    return {n.name: plan.executors[e].name for n, e in zip(plan.spec.nodes, plan.node_executor, strict=True)}


def test_default_executor_places_every_node_that_names_none() -> None:
    assert placement(GRAPH % "default_executor: cpu") == {"a": "cpu", "b": "io", "c": "default", "s/p": "cpu"}
    assert placement(GRAPH % "") == {"a": "default", "b": "io", "c": "default", "s/p": "default"}
    assert placement(GRAPH % "default_executor: default") == placement(GRAPH % "")
    assert placement(GRAPH % "", default_executor="io") == {"a": "io", "b": "io", "c": "default", "s/p": "io"}
    assert placement(GRAPH % "default_executor: cpu", default_executor="io")["a"] == "io"  # the flag wins
    assert load_yaml(GRAPH % "default_executor: cpu").default_executor == "cpu"


def test_check_reports_a_pool_and_where_the_nodes_run(tmp_path: Path) -> None:
    graph = tmp_path / "g.yaml"
    graph.write_text(GRAPH % "default_executor: cpu")
    report = check_config(graph).to_json()
    assert report["executors"][1] == {"name": "cpu", "type": "ProcessPoolExecutor", "threads": 0, "affinity": [],
                                      "priority": 0, "processes": 1}
    assert [n["executor"] for n in report["nodes"]] == ["cpu", "io", "default", "cpu"]


def test_an_unknown_default_executor_is_an_error_with_a_suggestion(tmp_path: Path) -> None:
    assert error_of(GRAPH % "default_executor: cpuu") == (
        "default_executor: undefined executor `cpuu`; did you mean `cpu`? (declare it under `executors`, "
        "or drop `default_executor`)")
    graph = tmp_path / "g.yaml"
    graph.write_text(GRAPH % "default_executor: cpuu")
    with pytest.raises(ConfigError, match=rf"^{re.escape(str(graph))}:5: default_executor: undefined executor"):
        flowplex.Graph.from_yaml_file(graph)


def flowplex_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", MAIN, str(ROOT / "src"), *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=60, check=False)


CLI_GRAPH = """
executors: [{ name: cpu, type: ProcessPoolExecutor, num_processes: 1 }]
nodes:
  - { name: src, kernel: RangeSourceKernel, output_ports: [n], options: { count: 3 } }
  - { name: dbl, kernel: ScaleKernel, input_ports: [n], output_ports: [y], options: { factor: 2 } }
output_ports: [y]
"""


def test_run_with_default_executor_puts_the_graph_on_the_pool(tmp_path: Path) -> None:
    graph = tmp_path / "g.yaml"
    graph.write_text(CLI_GRAPH)
    dot = tmp_path / "g.dot"
    result = flowplex_cli("run", str(graph), "--default-executor", "cpu", "--no-live", "--dot", str(dot))
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["y\tts=0\t0", "y\tts=1\t2", "y\tts=2\t4"]
    text = dot.read_text()
    assert "\\n@cpu\\n" in text and "\\n@default\\n" not in text  # both nodes on the pool
    assert 'label="cpu\\n1 worker process\\n' in text


def test_run_with_an_unknown_default_executor_exits_2(tmp_path: Path) -> None:
    graph = tmp_path / "g.yaml"
    graph.write_text(CLI_GRAPH)
    result = flowplex_cli("run", str(graph), "--default-executor", "cp")
    assert result.returncode == 2
    assert result.stderr.strip() == ("flowplex: error: --default-executor cp: the graph has no executor `cp`; did you "
                                     "mean `cpu`? (executors: `default`, `cpu`)")
