"""`flowplex demo` and `flowplex agents`, run for real: without a TTY, and inside tmux."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator

import pytest

from flowplex.terminal._commands import split_commands

CLI = [sys.executable, "-c", "from flowplex.cli import main; main()"]
ENV = {**os.environ, "LANG": "C.UTF-8", "PYTHONUNBUFFERED": "1"}
ENV.pop("NO_COLOR", None)


def test_split_commands() -> None:
    assert split_commands(["--", "ls", "-l", "--", "date"]) == [["ls", "-l"], ["date"]]
    assert split_commands([]) == []


def test_demo_without_a_tty_prints_plain_lines_and_a_summary() -> None:
    start = time.monotonic()
    proc = subprocess.run([*CLI, "demo", "--duration", "2"], capture_output=True, env=ENV, timeout=60,
                          stdin=subprocess.DEVNULL)
    elapsed = time.monotonic() - start
    assert proc.returncode == 0, proc.stderr.decode()
    out = proc.stdout
    assert b"\x1b" not in out  # no escape sequence at all, not even from mallory
    lines = out.decode().splitlines()
    labels = {line.split(" | ", 1)[0].strip() for line in lines[:-1]}
    assert {"planner", "coder", "reviewer", "mallory", "tests", "shell"} <= labels
    assert re.fullmatch(r"flowplex demo: 7 agents, \d+ messages, .* in; \d+ frames, .* out \(\d+ B/frame\); "
                        r"\d+ skipped, \d+ coalesced, 0 dropped; \d+\.\d s", lines[-1]), lines[-1]
    assert elapsed < 2 + 15


def test_agents_in_log_mode_report_exit_status() -> None:
    proc = subprocess.run(
        [*CLI, "agents", "--mode", "log", "--", "sh", "-c", "echo hello from sh", "--",
         sys.executable, "-c", "import sys; print('bye'); sys.exit(3)"],
        capture_output=True, env=ENV, timeout=60, stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 3, proc.stderr.decode()
    lines = proc.stdout.decode().splitlines()
    assert any(re.fullmatch(r"sh +\| hello from sh", line) for line in lines), lines
    assert any(re.fullmatch(r"python\S* +\| bye", line) for line in lines), lines
    assert any(line.endswith("── exit 3") for line in lines)
    assert lines[-3].startswith("flowplex agents: 2 agents")
    # The closing roster: every agent with its state, lines, bytes and run time.
    assert re.fullmatch(r" +1 +sh +exited \(0\) +1 lines +\d+ B +\d+\.\d s", lines[-2]), lines[-2]
    assert re.fullmatch(r" +2 +python\S* +exited \(3\) +1 lines +\d+ B +\d+\.\d s", lines[-1]), lines[-1]
    assert "flowplex agents: failed: 2 python" in proc.stderr.decode()


def test_agents_without_commands_is_a_usage_error() -> None:
    proc = subprocess.run([*CLI, "agents"], capture_output=True, env=ENV, timeout=60)
    assert proc.returncode == 2
    assert b"usage: flowplex agents" in proc.stderr


@pytest.fixture
def tmux() -> Iterator[list[str]]:
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed: the end-to-end terminal test needs it")
    socket = f"flowplex-test-{os.getpid()}"  # a private server: the user's tmux is never touched
    base = ["tmux", "-u", "-L", socket, "-f", "/dev/null"]
    try:
        yield base
    finally:
        subprocess.run([*base, "kill-server"], capture_output=True, timeout=10, env=ENV)


def capture(base: list[str]) -> str:
    return subprocess.run([*base, "capture-pane", "-p", "-t", "demo"], capture_output=True, timeout=10,
                          text=True, env=ENV).stdout


def wait_for(base: list[str], predicate: object, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    screen = ""
    while time.monotonic() < deadline:
        screen = capture(base)
        if predicate(screen):  # type: ignore[operator]
            return screen
        time.sleep(0.1)
    raise AssertionError(f"timed out; the screen was:\n{screen}")


def test_demo_in_tmux(tmux: list[str]) -> None:
    command = " ".join([*(f"'{a}'" for a in CLI), "demo", "--duration", "3"]) + "; echo EXIT=$?; sleep 60"
    subprocess.run([*tmux, "new-session", "-d", "-x", "160", "-y", "50", "-s", "demo",
                    f"env LANG=C.UTF-8 TERM=xterm-256color {command}"], check=True, timeout=10, env=ENV)
    screen = wait_for(tmux, lambda s: "mallory" in s and "Hi!" in s, 20)
    lines = screen.splitlines()
    assert lines[0].startswith("┏━ 1 planner · assistant")
    for title in ("2 coder · assistant", "3 reviewer · user", "4 tests · info", "5 monitor · debug",
                  "6 shell · system", "7 mallory · warning"):
        assert title in screen
    assert "flowplex demo · 7 agents · grid" in lines[-1] or "flowplex demo · 7 agents · grid" in lines[-2]
    # Every row of the grid is exactly as wide as the terminal: borders stay aligned.
    assert all(len(line) <= 160 for line in lines)
    subprocess.run([*tmux, "send-keys", "-t", "demo", "z"], check=True, timeout=10, env=ENV)
    zoomed = wait_for(tmux, lambda s: "zoom" in s.splitlines()[-1] if s.strip() else False, 5)
    assert zoomed.splitlines()[0].startswith("┏━ 1 planner · assistant")
    done = wait_for(tmux, lambda s: "EXIT=" in s, 20)
    assert "EXIT=0" in done
    assert re.search(r"flowplex demo: 7 agents, \d+ messages", done)
    assert "┏" not in done  # the alternate screen is gone: the shell's screen is back
    assert "pwned" not in done  # mallory never renamed anything


def test_a_closed_pipe_ends_the_demo_quietly() -> None:
    proc = subprocess.Popen([*CLI, "demo", "--duration", "30"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=ENV, stdin=subprocess.DEVNULL)
    assert proc.stdout is not None and proc.stderr is not None
    first = proc.stdout.readline()
    assert b" | " in first
    proc.stdout.close()  # like `flowplex demo | head -1`
    start = time.monotonic()
    assert proc.wait(timeout=30) == 0
    assert time.monotonic() - start < 15
    with proc.stderr:
        assert proc.stderr.read() == b""


def test_agents_ring_shows_what_another_process_sends() -> None:
    """`flowplex agents --ring NAME`: a separate process sends two streams through the ring."""
    name = f"fp-agents-{os.getpid()}"
    producer = textwrap.dedent(f"""
        import time
        from flowplex.agents import AgentChunk, to_ring
        from flowplex.transport import AgentType, Ring
        deadline = time.monotonic() + 20
        while True:  # the viewer creates the ring: wait for it
            try:
                ring = Ring.attach({name!r})
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        with ring, ring.producer() as p:
            for i in range(200):
                to_ring(p, AgentChunk(f"alpha {{i}}\\n", 7, AgentType.ASSISTANT, "", ts=i), timeout=10)
                to_ring(p, AgentChunk(f"beta {{i}}\\n", 9, AgentType.ERROR, "", ts=i), timeout=10)
    """)
    viewer = subprocess.Popen([*CLI, "agents", "--mode", "log", "--ring", name], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, env=ENV, stdin=subprocess.DEVNULL)
    sender = subprocess.run([sys.executable, "-c", producer], env=ENV, timeout=60, capture_output=True)
    assert sender.returncode == 0, sender.stderr.decode()
    out, err = viewer.communicate(timeout=30)
    assert viewer.returncode == 0, err.decode()
    lines = out.decode().splitlines()
    # One agent per stream id, every line in order, each labelled by its stream.
    alpha = [line.split(" | ", 1)[1] for line in lines if line.startswith("agent-7")]
    beta = [line.split(" | ", 1)[1] for line in lines if line.startswith("agent-9")]
    assert alpha == [f"alpha {i}" for i in range(200)]
    assert beta == [f"beta {i}" for i in range(200)]
