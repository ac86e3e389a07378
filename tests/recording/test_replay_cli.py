"""``flowplex replay``: printing paced by ``--rate`` with ``--loop``/``--start``/``--end``, and
``--graph``, which runs a graph with recorded streams in place of its nodes."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

import flowplex.recording as recording

S = 1_000_000_000
GRAPH = """
nodes:
  - { name: src, kernel: RangeSourceKernel, output_ports: [n], options: { count: 30 } }
  - { name: keep, kernel: FilterKernel, input_ports: [n], output_ports: [k], options: { threshold: 20 } }
  - { name: dbl, kernel: ScaleKernel, input_ports: [k], output_ports: [d], options: { factor: 2 } }
output_ports: [d]
"""


def _cli(*args: str, cwd: Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "flowplex", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=timeout, stdin=subprocess.DEVNULL, check=False)


def _ticks(path: Path, n: int = 4, gap_s: float = 0.1) -> Path:
    with recording.Recorder(path) as rec:
        rec.add_stream("t", kind="i64")
        for i in range(n):
            rec.write_value("t", i, i * 10, wall_ns=int(i * gap_s * S))
    return path


def test_print_is_unpaced_by_default_and_paced_with_rate(tmp_path: Path) -> None:
    _ticks(tmp_path / "t.mcap", n=4, gap_s=0.3)  # 0.9 s as recorded
    t0 = time.monotonic()
    fast = _cli("replay", "t.mcap", "--json", cwd=tmp_path)
    fast_s = time.monotonic() - t0
    t0 = time.monotonic()
    paced = _cli("replay", "t.mcap", "--json", "--rate", "1", cwd=tmp_path)
    paced_s = time.monotonic() - t0
    assert fast.returncode == paced.returncode == 0, (fast.stderr, paced.stderr)
    assert fast.stdout == paced.stdout
    assert [json.loads(line)["value"] for line in paced.stdout.splitlines()] == [0, 10, 20, 30]
    assert paced_s - fast_s >= 0.6, (paced_s, fast_s)  # 0.9 s as recorded; slack for a loaded machine


def test_print_loop_shifts_timestamps_and_n_stops_it(tmp_path: Path) -> None:
    _ticks(tmp_path / "t.mcap", n=3)
    done = _cli("replay", "t.mcap", "--loop", "-n", "7", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    assert [e["ts"] for e in events] == [0, 1, 2, 3, 4, 5, 6]  # period: span 2 + step 1
    assert [e["value"] for e in events] == [0, 10, 20] * 2 + [0]


def test_print_window(tmp_path: Path) -> None:
    _ticks(tmp_path / "t.mcap", n=10, gap_s=1.0)
    done = _cli("replay", "t.mcap", "--start", "3", "--end", "5.5", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert [json.loads(line)["ts"] for line in done.stdout.splitlines()] == [3, 4, 5]


def test_graph_replay_of_the_sources_records_an_equal_run(tmp_path: Path) -> None:
    (tmp_path / "g.yaml").write_text(GRAPH)
    live = _cli("run", "g.yaml", "--record", "a.mcap", "--no-control", cwd=tmp_path)
    assert live.returncode == 0, live.stderr
    again = _cli("replay", "a.mcap", "--graph", "g.yaml", "--rate", "max", "--record", "b.mcap", "--no-control",
                 cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert again.stdout == live.stdout and "d\tts=29\t58" in again.stdout
    same = _cli("diff", "a.mcap", "b.mcap", cwd=tmp_path)
    assert same.returncode == 0, same.stdout + same.stderr
    assert "equal: 3 stream(s)" in same.stdout
    changed = _cli("replay", "a.mcap", "--graph", "g.yaml", "--rate", "max", "--record", "c.mcap",
                   "--set", "dbl.factor=3", "--no-control", cwd=tmp_path)
    assert changed.returncode == 0, changed.stderr
    differ = _cli("diff", "a.mcap", "c.mcap", cwd=tmp_path)
    assert (differ.returncode == 1 and "stream 'd'" in differ.stdout) or "`d`" in differ.stdout, differ.stdout


def test_graph_replay_of_an_inner_node_feeds_what_is_downstream(tmp_path: Path) -> None:
    (tmp_path / "g.yaml").write_text(GRAPH)
    assert _cli("run", "g.yaml", "--record", "a.mcap", "--no-control", cwd=tmp_path).returncode == 0
    (tmp_path / "other.yaml").write_text(GRAPH.replace("factor: 2", "factor: 5"))
    done = _cli("replay", "a.mcap", "--graph", "other.yaml", "--replace", "keep", "--rate", "max", "-o", "out.jsonl",
                "--no-control", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    values = [json.loads(line)["value"] for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert values == [5 * v for v in range(20, 30)]  # the filter keeps >= 20


def test_replace_picks_another_channel(tmp_path: Path) -> None:
    (tmp_path / "g.yaml").write_text(GRAPH)
    _ticks(tmp_path / "t.mcap", n=25, gap_s=0.001)
    done = _cli("replay", "t.mcap", "--graph", "g.yaml", "--replace", "src=t", "--rate", "max", "-o", "out.jsonl",
                "--no-control", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    values = [json.loads(line)["value"] for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert values == [2 * 10 * i for i in range(25) if 10 * i >= 20]


@pytest.mark.parametrize(("args", "message"), [
    (["--graph", "g.yaml", "--replace", "sr"], r"--replace sr: the graph has no node `sr`; did you mean `src`\?"),
    (["--graph", "g.yaml", "--replace", "src=zz"], r"--replace src: the recording has no stream `zz`; it has t"),
    (["--graph", "g.yaml"], r"--replace src: the recording has no stream `n`.*NODE=CHANNEL picks another"),
    (["--graph", "g.yaml", "--replace", "src=t,t"], r"node `src` has 1 output port\(s\) \(n\)"),
    (["--graph", "g.yaml", "--replace", "src", "--replace", "src=t"], r"node `src` is replaced twice"),
    (["--graph", "g.yaml", "--replace", "=t"], r"expected NODE or NODE=CHANNEL"),
    (["--graph", "g.yaml", "-n", "3"], r"-n is for printing a recording"),
    (["--graph", "nope.yaml"], r"--graph nope\.yaml: no such file"),
    (["--replace", "src"], r"--replace goes with --graph"),
    (["--rate", "fast"], r"--rate: expected a positive number or max, got 'fast'"),
    (["--start", "3", "--end", "1"], r"--end \(1\) must come after --start \(3\)"),
])
def test_bad_replay_arguments_are_one_line_exit_2(tmp_path: Path, args: list[str], message: str) -> None:
    import re

    (tmp_path / "g.yaml").write_text(GRAPH)
    _ticks(tmp_path / "t.mcap")
    done = _cli("replay", "t.mcap", *args, cwd=tmp_path)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert re.search(message, done.stderr), done.stderr
    assert "Traceback" not in done.stderr
