"""``flowplex agents --mode log`` into a file or a pipe loses nothing (issue 16), run for real.

Each test starts the real command line in a subprocess, with real commands in real PTYs; the
commands are plain ``sys.executable -c`` one-liners so that they start fast.
"""

from __future__ import annotations

import array
import fcntl
import os
import re
import signal
import subprocess
import sys
import termios
import threading
import time
from pathlib import Path

import pytest

CLI = [sys.executable, "-c", "from flowplex.cli import main; main()"]
ENV = {**os.environ, "LANG": "C.UTF-8"}
ENV.pop("PYTHONUNBUFFERED", None)  # the commands write a line at a time to their PTY, not a write per print
LINES = 20_000
COUNT = f"for i in range({LINES}): print(i)"
LINE = re.compile(r"(\S+) *\| (.*)")


def agents_argv(*commands: list[str]) -> list[str]:
    argv = [*CLI, "agents", "--mode", "log"]
    for cmd in commands:
        argv += ["--", *cmd]
    return argv


def counters(n: int) -> list[list[str]]:
    return [[sys.executable, "-c", COUNT] for _ in range(n)]


def by_agent(text: str) -> tuple[dict[str, list[str]], list[str]]:
    """The log's lines per agent label, in order, and the lines that are not an agent's."""
    lines: dict[str, list[str]] = {}
    other: list[str] = []
    for line in text.splitlines():
        m = LINE.fullmatch(line)
        if m is None:
            other.append(line)
        else:
            lines.setdefault(m.group(1), []).append(m.group(2))
    return lines, other


def assert_every_line(text: str, agents: int) -> None:
    lines, other = by_agent(text)
    assert len(lines) == agents, sorted(lines)
    for label, got in lines.items():
        assert got[-1] == "── exit 0", (label, got[-3:])
        numbers = got[:-1]
        if numbers != [str(i) for i in range(LINES)]:  # say where, not a 20,000-line diff
            missing = sorted(set(range(LINES)) - {int(x) for x in numbers if x.isdigit()})
            pytest.fail(f"{label}: {len(numbers)} lines, {len(missing)} missing (first {missing[:5]}), in order: "
                        f"{numbers == sorted(numbers, key=int)}")
    # The summary line, then the closing roster: one row per agent, each with all its lines.
    assert len(other) == 1 + agents and other[0].startswith(f"flowplex agents: {agents} agents"), other[:5]
    assert all(re.search(rf"exited \(0\)\s+{LINES} lines", row) for row in other[1:]), other[1:]
    assert "[flowplex]" not in text and "backpressure" not in text and "backlogged" not in text


class Run:
    """One ``flowplex agents --mode log`` run of ``agents`` counters, into a file or a slow pipe."""

    def __init__(self, agents: int, into: str, tmp_path: Path) -> None:
        self.agents, self.into = agents, into
        self.path = tmp_path / f"{agents}-{into}.txt"
        self.out = b""
        self.started = time.monotonic()
        with self.path.open("wb") as f:
            self.proc = subprocess.Popen(agents_argv(*counters(agents)), stderr=subprocess.PIPE, env=ENV,
                                         stdin=subprocess.DEVNULL, bufsize=0,  # unbuffered: see finish
                                         stdout=f if into == "file" else subprocess.PIPE)
        self.reader = threading.Thread(target=self._read_slowly) if into == "pipe" else None
        if self.reader is not None:
            self.reader.start()
        self.err = b""

    def _read_slowly(self) -> None:
        """A reader that stops for a second: the pipe fills, everything upstream waits."""
        assert self.proc.stdout is not None
        self.out = self.proc.stdout.read(4096)
        time.sleep(1.0)
        self.out += self.proc.stdout.read()

    def finish(self) -> str:
        """Wait for the run; what went wrong with it, or "" (and print its figures)."""
        assert self.proc.stderr is not None
        self.err = self.proc.stderr.read()
        code = self.proc.wait(timeout=120)
        if self.reader is not None:
            self.reader.join(timeout=120)
        else:
            self.out = self.path.read_bytes()
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()
        print(f"{self.agents} x {LINES} lines into a {self.into}: {time.monotonic() - self.started:.1f} s")
        if code != 0:
            return f"exit status {code}: {self.err.decode()[-500:]}"
        if self.err:  # no warning anywhere: back-pressure is the design, not news
            return f"stderr: {self.err.decode()[-500:]}"
        try:
            assert_every_line(self.out.decode("utf-8"), self.agents)
        except (AssertionError, pytest.fail.Exception) as exc:
            return str(exc)[:500]
        return ""


def test_into_a_file_or_a_slow_pipe_every_line_arrives_in_order(tmp_path: Path) -> None:
    """1 and 16 agents x 20,000 lines, into a file and into a pipe whose reader pauses. The four
    runs go at once (they are independent; it keeps the test fast on two cores)."""
    runs = [Run(agents, into, tmp_path) for agents in (16, 1) for into in ("file", "pipe")]
    failures = {f"{run.agents} agents into a {run.into}": run.finish() for run in runs}
    assert {what: why for what, why in failures.items() if why} == {}


def test_a_failing_agent_sets_the_status_and_is_named() -> None:
    proc = subprocess.run(
        agents_argv([sys.executable, "-c", "print('fine')"],
                    [sys.executable, "-c", "import sys; print('about to fail'); sys.exit(3)"]),
        capture_output=True, env=ENV, timeout=60, stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 3
    lines, _ = by_agent(proc.stdout.decode())
    name = next(label for label, got in lines.items() if "about to fail" in got)
    assert lines[name][-1] == "── exit 3"
    assert re.search(rf"flowplex agents: failed: \d+ {re.escape(name)} \(exit 3\)", proc.stderr.decode()), proc.stderr


def test_an_engine_warning_goes_to_stderr_not_into_the_log(tmp_path: Path) -> None:
    """A command that cannot start makes the engine log a warning: stderr has it, the log has
    no ``stderr`` pseudo-agent."""
    out = tmp_path / "out.txt"
    with out.open("wb") as f:
        proc = subprocess.run(agents_argv([str(tmp_path / "no-such-program")], [sys.executable, "-c", "print(1)"]),
                              stdout=f, stderr=subprocess.PIPE, env=ENV, timeout=60, stdin=subprocess.DEVNULL)
    log = out.read_text(encoding="utf-8")
    lines, _ = by_agent(log)
    assert "stderr" not in lines and "command.start.failed" not in log
    assert "command.start.failed" in proc.stderr.decode()
    assert proc.returncode == 127


def test_an_engine_warning_with_stderr_on_the_log_is_a_notice_line() -> None:
    """``2>&1``: the warning cannot go around the log, so it is a whole ``[flowplex]`` line."""
    proc = subprocess.run(agents_argv(["/nonexistent/program"]), stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, env=ENV, timeout=60, stdin=subprocess.DEVNULL)
    text = proc.stdout.decode()
    assert re.search(r"^\[flowplex\] command\.start\.failed node='cmd0'", text, re.M), text
    assert "stderr |" not in text


def test_lines_after_a_clear_are_logged() -> None:
    proc = subprocess.run(
        agents_argv(["bash", "-c", "echo before; clear; echo line 1; echo line 2; echo after"]),
        capture_output=True, env=ENV, timeout=60, stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stderr.decode()
    lines, _ = by_agent(proc.stdout.decode())
    assert lines == {"bash": ["before", "line 1", "line 2", "after", "── exit 0"]}
    assert b"\x1b" not in proc.stdout


def test_a_program_redrawing_the_screen_does_not_flood_the_log() -> None:
    paint = ("import sys, time\nprint('start', flush=True)\nfor i in range(30):\n"
             "    sys.stdout.write(f'\\x1b[H\\x1b[2Jframe {i}\\nrow 2\\n'); sys.stdout.flush(); time.sleep(0.01)\n")
    proc = subprocess.run(agents_argv([sys.executable, "-c", paint]), capture_output=True, env=ENV, timeout=60,
                          stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr.decode()
    lines, _ = by_agent(proc.stdout.decode())
    (got,) = lines.values()
    assert got == ["start", "row 2", "── exit 0"]  # the last frame's last line stays as its last line


def test_a_reader_that_closes_the_pipe_ends_the_run_quietly_and_kills_the_commands() -> None:
    marker = f"flowplex-head-{os.getpid()}"
    argv = agents_argv([sys.executable, "-c", "for i in range(10**9): print(i)"],
                       [sys.executable, "-c", f"import time; time.sleep(300)  # {marker}"])
    start = time.monotonic()
    proc = subprocess.run(f"{subprocess.list2cmdline(argv)} | head -5", shell=True, capture_output=True, env=ENV,
                          timeout=60, stdin=subprocess.DEVNULL)
    assert time.monotonic() - start < 30
    lines, other = by_agent(proc.stdout.decode())
    assert list(lines.values()) == [[str(i) for i in range(5)]] and not other
    assert proc.stderr == b"", proc.stderr.decode()  # no traceback, no BrokenPipeError
    time.sleep(0.2)
    left = subprocess.run(["pgrep", "-f", marker], capture_output=True)
    assert left.stdout == b"", "the commands outlived flowplex"


def test_ctrl_c_while_blocked_on_a_full_pipe_ends_the_run(tmp_path: Path) -> None:
    """SIGINT while every producer is held back by a reader that stopped reading: the run
    ends (130) in bounded time and the commands are killed."""
    marker = f"flowplex-sigint-{os.getpid()}"
    cmd = [sys.executable, "-c", f"for i in range(10**9): print(i)  # {marker}"]
    proc = subprocess.Popen(agents_argv(cmd, cmd), stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV,
                            stdin=subprocess.DEVNULL, bufsize=0,  # SIGINT not ignored, unlike a background job:
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert proc.stdout is not None
    proc.stdout.read(65536)
    # The pipe fills (then everything upstream waits): wait until it holds all it can (to a
    # page: a write that does not fit the last page waits for a free one) and stops growing.
    fd, capacity = proc.stdout.fileno(), fcntl.fcntl(proc.stdout.fileno(), fcntl.F_GETPIPE_SZ)
    unread, before = array.array("i", [0]), -1
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        fcntl.ioctl(fd, termios.FIONREAD, unread)
        if unread[0] >= capacity - 4096 and unread[0] == before:
            break
        before = unread[0]
        time.sleep(0.1)
    assert unread[0] >= capacity - 4096, f"the pipe never filled: {unread[0]} of {capacity} bytes"
    time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    start = time.monotonic()
    _, err = proc.communicate(timeout=60)  # reading again lets the summary out
    assert proc.returncode == 130, err.decode()
    assert time.monotonic() - start < 20
    left = subprocess.run(["pgrep", "-f", marker], capture_output=True)
    assert left.stdout == b"", "the commands outlived flowplex"
