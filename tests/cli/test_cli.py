"""The command line, through real subprocesses."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def flowplex(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", "from flowplex.cli import main; main()", *args],
        capture_output=True, text=True, cwd=cwd, timeout=60, check=False,
    )


def test_run_prints_the_hello_world_results() -> None:
    result = flowplex("run", "examples/hello_world.yaml")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[:3] == ["tripled\tts=0\t0", "tripled\tts=1\t3", "tripled\tts=2\t6"]
    assert lines[-1] == "total\tts=PostStream\t135"
    assert "11 packet(s)" in result.stderr


def test_run_writes_json_lines(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    result = flowplex("run", "examples/hello_world.yaml", "--output", str(out))
    assert result.returncode == 0, result.stderr
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["value"] for r in records if r["port"] == "tripled"] == [3 * i for i in range(10)]
    assert result.stdout == ""


def test_config_error_is_one_line_with_a_path(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("nodes:\n  - { name: a, kernal: ScaleKernel }\n")
    result = flowplex("run", str(bad))
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1
    assert "nodes[0]" in result.stderr and "did you mean `kernel`" in result.stderr
    assert "Traceback" not in result.stderr
    debug = flowplex("--debug", "run", str(bad))
    assert "Traceback" in debug.stderr


def test_kernel_failure_exits_1(tmp_path: Path) -> None:
    graph = tmp_path / "fail.yaml"
    graph.write_text("""
nodes:
  - { name: src, kernel: RangeSourceKernel, output_ports: [n], options: { count: 3 } }
  - { name: mux, kernel: MuxKernel, input_ports: [n, m], output_ports: [y] }
  - { name: pass, kernel: PassThroughKernel, input_ports: [n], output_ports: [m] }
output_ports: [y]
""")
    result = flowplex("run", str(graph))
    assert result.returncode == 1, result.stderr
    assert "[mux]" in result.stderr and "Traceback" not in result.stderr


def test_check_exit_codes_and_json(tmp_path: Path) -> None:
    ok = flowplex("check", "examples/hello_world.yaml")
    assert ok.returncode == 0 and ok.stdout.startswith("ok: ")
    report = flowplex("check", "--json", "examples/hello_world.yaml")
    data = json.loads(report.stdout)
    assert data["ok"] is True and [n["name"] for n in data["nodes"]] == ["count", "triple", "total"]
    bad = tmp_path / "bad.yaml"
    bad.write_text("nodes:\n  - { name: a, kernel: X, input_ports: [nope] }\n")
    invalid = flowplex("check", "--json", str(bad))
    assert invalid.returncode == 1 and json.loads(invalid.stdout)["ok"] is False
    missing = flowplex("check", str(tmp_path / "missing.yaml"))
    assert missing.returncode == 2


def test_schema_is_json_schema() -> None:
    result = flowplex("schema")
    assert result.returncode == 0
    schema = json.loads(result.stdout)
    assert "nodes" in json.dumps(schema)
    assert "$schema" in schema or "properties" in schema
