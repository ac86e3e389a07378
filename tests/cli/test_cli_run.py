"""``flowplex run`` and ``flowplex dot`` through real subprocesses (and a real pseudo-terminal)."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import re
import select
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import pytest

from flowplex.cli import apply_overrides, parse_override
from flowplex.config import load_yaml
from flowplex.diagnostics import graphviz_available

from .._cli import flowplex_commands as cli_commands

ROOT = Path(__file__).resolve().parents[2]
HELLO = "examples/hello_world.yaml"
NO_DOT = "Graphviz's `dot` is not installed (the DOT text is tested without it)"
MAIN = "import sys; sys.path[:0] = [p for p in sys.argv.pop(1).split(':') if p]; from flowplex.cli import main; main()"

PACED = """
nodes:
  - { name: src, kernel: RangeSourceKernel, output_ports: [n], options: { count: 100000 }, rate: 40 }
  - { name: dbl, kernel: ScaleKernel, input_ports: [n], output_ports: [y], options: { factor: 2 } }
output_ports: [y]
"""

SLOW_KERNEL = """
import time
import flowplex

@flowplex.kernel("CliSlow")
class CliSlow(flowplex.Kernel):
    def process(self, cc):
        time.sleep(0.3)
        cc.forward(0, 0)
"""


def command(*args: str, path: str = "") -> list[str]:
    return [sys.executable, "-c", MAIN, path, *args]


def flowplex(*args: str, path: str = "", env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command(*args, path=path), capture_output=True, text=True, cwd=ROOT, timeout=60,
                          check=False, env=env)


def flowplex_commands(*commands: list[str]) -> list[subprocess.CompletedProcess[str]]:
    """Each of ``commands`` run in turn by one interpreter, as if by ``flowplex`` (``tests/_cli``)."""
    return cli_commands(*commands, cwd=ROOT)


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


class Lines:
    """Reads a pipe on a thread so tests can wait for a line with a deadline; closes it at EOF."""

    def __init__(self, stream: IO[str]) -> None:
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        self._thread = threading.Thread(target=self._pump, args=(stream,), daemon=True)
        self._thread.start()

    def _pump(self, stream: IO[str]) -> None:
        with stream:
            for line in stream:
                self.lines.put(line)

    def wait_for(self, pattern: str, timeout_s: float = 20.0) -> str:
        deadline = time.monotonic() + timeout_s
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                pytest.fail(f"no line matching {pattern!r} within {timeout_s} s; got {self.seen}")
            try:
                line = self.lines.get(timeout=remaining)
            except queue.Empty:
                continue
            self.seen.append(line)
            if re.search(pattern, line):
                return line

    def rest(self) -> str:
        """Everything read so far and up to EOF (call once the process has exited)."""
        self._thread.join(timeout=10)
        while not self.lines.empty():
            self.seen.append(self.lines.get())
        return "".join(self.seen)


@contextlib.contextmanager
def spawn(argv: list[str]) -> Iterator[tuple[subprocess.Popen[str], Lines, Lines]]:
    """A running subprocess with line readers; always killed and reaped at the end."""
    proc = subprocess.Popen(argv, cwd=ROOT, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = Lines(proc.stdout), Lines(proc.stderr)  # type: ignore[arg-type]
    try:
        yield proc, out, err
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=10)
        out.rest()
        err.rest()


# -- --set ------------------------------------------------------------------------------------------

def test_set_overrides_options_with_yaml_typed_values() -> None:
    result, typed = flowplex_commands(["run", HELLO, "--set", "count.count=3", "-s", "triple.factor=5"],
                                      ["run", HELLO, "--set", "count.count=2", "--set", "triple.factor=5.0"])
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["tripled\tts=0\t0", "tripled\tts=1\t5", "tripled\tts=2\t10",
                                          "total\tts=PostStream\t15"]
    assert typed.stdout.splitlines()[1] == "tripled\tts=1\t1"  # a float factor is ignored by ScaleKernel


def test_set_unknown_node_is_one_line_with_a_suggestion() -> None:
    result, malformed = flowplex_commands(["run", HELLO, "--set", "tripel.factor=2"], ["run", HELLO, "--set", "triple"])
    assert result.returncode == 2
    assert result.stderr == "flowplex: error: --set 'tripel.factor=2': no node named `tripel`; " \
                            "did you mean `triple`?\n"
    assert malformed.returncode == 2 and "expected NODE.OPTION=VALUE" in malformed.stderr


def test_parse_override_rules() -> None:
    nodes = ["a", "p/a.b", "p/a"]
    assert parse_override("p/a.b.x=[1, 2]", nodes) == ("p/a.b", ("x",), [1, 2])
    assert parse_override("p/a.k=true", nodes) == ("p/a", ("k",), True)
    assert parse_override("a.m.n=off", nodes) == ("a", ("m", "n"), False)
    assert parse_override("a.s=", nodes) == ("a", ("s",), "")
    with pytest.raises(ValueError, match="not valid YAML"):
        parse_override("a.s=[1", nodes)
    with pytest.raises(ValueError, match="must be a number, bool, string"):
        parse_override("a.s=2024-01-01", nodes)
    with pytest.raises(ValueError, match="empty option name"):
        parse_override("a.=1", nodes)


def test_apply_overrides_merges_nested_options() -> None:
    spec = load_yaml("nodes:\n  - { name: a, kernel: K, input_ports: [x], output_ports: [y], "
                     "options: { keep: 1, deep: { b: 2 } } }\ninput_ports: [x]\noutput_ports: [y]\n")
    new = apply_overrides(spec, ["a.deep.c=3", "a.keep=4"])
    assert new.nodes[0].options == {"keep": 4, "deep": {"b": 2, "c": 3}}
    assert spec.nodes[0].options == {"keep": 1, "deep": {"b": 2}}  # the original is untouched
    with pytest.raises(ValueError, match="option `keep` of node `a` is not a mapping"):
        apply_overrides(spec, ["a.keep.x=1"])


# -- outputs of a run ---------------------------------------------------------------------------------

def test_stats_dot_and_trace_files(tmp_path: Path) -> None:
    dot, trace = tmp_path / "g.dot", tmp_path / "g.json"
    result = flowplex("run", HELLO, "--stats", "--dot", str(dot), "--trace", str(trace))
    assert result.returncode == 0, result.stderr
    assert "graph state=TERMINATED stats=full nodes=3" in result.stderr  # --trace forces full stats
    assert re.search(r"^triple\s+closed\s+0\s+10\s+0", result.stderr, re.MULTILINE)
    assert result.stderr.rstrip().endswith("flowplex: 11 packet(s) from 2 output(s)")
    text = dot.read_text()
    assert text.startswith("digraph lmflow {") and "ports:" in text and "CLOSED · 10 pkts" in text
    events = json.loads(trace.read_text())["traceEvents"]
    assert sum(1 for e in events if e["ph"] == "X") == 30


def test_dot_view_option_and_bad_view(tmp_path: Path) -> None:
    dot = tmp_path / "g.dot"
    result, bad = flowplex_commands(["run", HELLO, "--dot", str(dot), "--dot-view", "compact"],
                                    ["run", HELLO, "--dot", str(tmp_path / "bad.dot"), "--dot-view", "flat"])
    assert result.returncode == 0 and "ports:" not in dot.read_text() and "hotspots" in dot.read_text()
    assert bad.returncode == 2 and bad.stderr.startswith("flowplex: error: --dot-view: to_dot: unknown view 'flat'")


@pytest.mark.skipif(not graphviz_available(), reason=NO_DOT)
def test_dot_svg_file_is_rendered(tmp_path: Path) -> None:
    svg = tmp_path / "g.svg"
    result = flowplex("run", HELLO, "--dot", str(svg))
    assert result.returncode == 0, result.stderr
    assert svg.read_text().lstrip().startswith("<?xml") and "ScaleKernel · Python" in svg.read_text()


def test_runtime_error_names_the_file_and_the_node(tmp_path: Path) -> None:
    graph = write(tmp_path, "fail.yaml", """
nodes:
  - { name: src, kernel: RangeSourceKernel, output_ports: [n], options: { count: 3 } }
  - { name: mux, kernel: MuxKernel, input_ports: [n, m], output_ports: [y] }
  - { name: pass, kernel: PassThroughKernel, input_ports: [n], output_ports: [m] }
output_ports: [y]
""")
    dot = tmp_path / "after.dot"
    result, debug = flowplex_commands(["run", str(graph), "--dot", str(dot)], ["--debug", "run", str(graph)])
    assert result.returncode == 1
    assert result.stderr.startswith(f"flowplex: error: {graph}: kernel failed: [mux] ")
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert "ERROR" in dot.read_text()  # artifacts are still written after a failure
    assert debug.returncode == 1 and "Traceback" in debug.stderr


def test_config_error_has_the_yaml_path(tmp_path: Path) -> None:
    graph = write(tmp_path, "bad.yaml", "nodes:\n  - { name: a, kernel: NoSuchKernel, output_ports: [y] }\n"
                                        "output_ports: [y]\n")
    result = flowplex("run", str(graph))
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    assert result.stderr.startswith(f"flowplex: error: {graph}: nodes[0].kernel")


def test_unwritable_output_is_a_usage_error(tmp_path: Path) -> None:
    result = flowplex("run", HELLO, "--output", str(tmp_path / "missing" / "out.jsonl"))
    assert result.returncode == 2 and result.stderr.startswith("flowplex: error: cannot write --output")


# -- flowplex dot ---------------------------------------------------------------------------------------

def test_dot_command_prints_each_view() -> None:
    topology, compact, bad = flowplex_commands(["dot", HELLO], ["dot", HELLO, "--view", "compact", "--set",
                                                                  "triple.factor=9"], ["dot", HELLO, "--view", "nope"])
    assert topology.returncode == 0 and topology.stdout.startswith("digraph lmflow {")
    assert "cap numbers=unbounded" in topology.stdout
    assert "@default\\nCREATED" in compact.stdout and "cluster_node_state_legend" in compact.stdout
    assert bad.returncode == 2 and "unknown view 'nope'" in bad.stderr


@pytest.mark.skipif(not graphviz_available(), reason=NO_DOT)
def test_dot_command_renders_svg(tmp_path: Path) -> None:
    svg = tmp_path / "g.svg"
    result = flowplex("dot", HELLO, "--view", "diagnostics", "--svg", str(svg))
    assert result.returncode == 0 and result.stdout == ""
    assert "<svg" in svg.read_text()


def test_dot_command_without_graphviz(tmp_path: Path) -> None:
    env = dict(os.environ, PATH=str(tmp_path))  # no `dot` there
    result = flowplex("dot", HELLO, "--svg", str(tmp_path / "g.svg"), env=env)
    assert result.returncode == 1
    assert "needs Graphviz's `dot` program on PATH" in result.stderr and result.stderr.count("\n") == 1


# -- long runs: metrics, Ctrl-C, the live display ---------------------------------------------------------

def test_metrics_are_served_while_running(tmp_path: Path) -> None:
    graph = write(tmp_path, "paced.yaml", PACED)
    with spawn(command("run", str(graph), "--metrics-port", "0")) as (proc, _, err):
        url = err.wait_for(r"^flowplex: metrics on http://127\.0\.0\.1:\d+/metrics$").split()[-1]

        def scrape() -> tuple[float, str]:
            with urllib.request.urlopen(url, timeout=5) as response:
                body = response.read().decode()
            match = re.search(r'^flowplex_node_processed_total\{kernel="ScaleKernel",node="dbl"\} (\S+)$', body,
                              re.MULTILINE)
            assert match, body
            return float(match.group(1)), body

        # The server is up before the graph has started (its first scrape may still say so):
        # the state is checked once the counter has moved.
        first, _ = scrape()
        deadline = time.monotonic() + 10
        while (moved := scrape())[0] <= first:
            assert time.monotonic() < deadline, "the counter never moved"
            time.sleep(0.05)
        assert 'flowplex_graph_state{state="RUNNING"} 1.0' in moved[1]
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=20) == 130


def test_metrics_port_in_use_is_a_usage_error() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        result = flowplex("run", HELLO, "--metrics-port", str(taken.getsockname()[1]))
    assert result.returncode == 2 and result.stderr.startswith("flowplex: error: cannot serve metrics on 127.0.0.1:")


def test_ctrl_c_cancels_cleanly_and_says_what_was_in_flight(tmp_path: Path) -> None:
    write(tmp_path, "slowk.py", SLOW_KERNEL)
    graph = write(tmp_path, "slow.yaml", """
executors: [ { name: pool, type: ThreadPoolExecutor, num_threads: 1 } ]
nodes:
  - { name: src, kernel: RangeSourceKernel, output_ports: [n], options: { count: 100000 }, rate: 20 }
  - { name: slow, kernel: CliSlow, executor: pool, input_ports: [n], output_ports: [y] }
output_ports: [y]
""")
    argv = [sys.executable, "-c", MAIN.replace("from flowplex", "import slowk; from flowplex"), str(tmp_path),
            "run", str(graph)]
    with spawn(argv) as (proc, out, err):
        out.wait_for(r"^y\tts=0\t0$")
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=20) == 130
        stderr = err.rest()
    assert "Traceback" not in stderr
    assert re.search(r"^flowplex: cancelled \(Ctrl-C\); in flight: .*slow \(RUNNING.*; \d+ packet\(s\) so far$",
                     stderr, re.MULTILINE), stderr


def _screen_text(screen: object) -> str:
    return "\n".join(line.rstrip() for line in screen.display)  # type: ignore[attr-defined]


def test_live_display_on_a_terminal_disappears_at_the_end(tmp_path: Path) -> None:
    pyte = pytest.importorskip("pyte", reason="pyte renders the pseudo-terminal")
    ptyprocess = pytest.importorskip("ptyprocess", reason="ptyprocess provides the pseudo-terminal")
    graph = write(tmp_path, "short.yaml", PACED.replace("100000", "16").replace("rate: 40", "rate: 12"))
    env = dict(os.environ, TERM="xterm-256color", COLUMNS="100", LINES="40")
    proc = ptyprocess.PtyProcess.spawn(command("run", str(graph)), cwd=str(ROOT), dimensions=(40, 100), env=env)
    screen = pyte.Screen(100, 40)
    stream = pyte.ByteStream(screen)
    mid = ""
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([proc.fd], [], [], 0.1)
            if ready:
                try:
                    stream.feed(proc.read(65536))
                except EOFError:
                    break
                text = _screen_text(screen)
                if not mid and "rate/s" in text and "flowplex · running" in text and re.search(r"^src ", text, re.M):
                    mid = text
            elif not proc.isalive():
                break
        proc.wait()
    finally:
        if proc.isalive():
            proc.terminate(force=True)
    final = _screen_text(screen)
    assert proc.exitstatus == 0, final
    assert re.search(r"^src\s+\S+\s+\d+", mid, re.MULTILINE) and "flowplex · running" in mid, mid
    assert "rate/s" not in final and "flowplex · " not in final  # the table is gone...
    assert "y       ts=15   30" in final  # ...and the outputs printed meanwhile stay
    assert "flowplex: 16 packet(s) from 1 output(s)" in final


def test_no_live_display_without_a_terminal() -> None:
    result = flowplex("run", HELLO)
    assert result.returncode == 0 and "\x1b[" not in result.stderr and "rate/s" not in result.stderr
