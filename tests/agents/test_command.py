"""CommandSource: real commands in a real PTY."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import time

import pytest

import flowplex
from flowplex.agents import AgentChunk, read_chunk
from flowplex.terminal import PaneRenderer, TermCaps, Writer, register_display

from .conftest import alive, run_source, source_graph, text_of


def test_output_and_exit_status_of_a_command_in_a_pty() -> None:
    chunks = run_source("CommandSource", {
        "argv": ["{python}", "-c", "import sys; print('tty' if sys.stdout.isatty() else 'pipe'); "
                 "print('h\\u00e9llo \\x1b[31mred\\x1b[0m'); sys.exit(3)"],
        "name": "py", "stream_id": 9,
    })
    text = text_of(chunks)
    assert text == "tty\r\nhéllo \x1b[31mred\x1b[0m\r\n"  # a real terminal: CRLF, colours kept
    end = chunks[-1][1]
    assert end.is_end and end.exit_code == 3 and not end.ok and end.text == "exit 3"
    first = chunks[0][1]
    assert (first.name, first.stream_id, first.pty, first.agent_type.name) == ("py", 9, True, "INFO")
    stamps = [c.ts for _, c in chunks]
    assert stamps == sorted(stamps) and len(set(stamps)) == len(stamps)


def test_pty_size_option() -> None:
    chunks = run_source("CommandSource", {"argv": ["{python}", "-c", "import os; print(tuple(os.get_terminal_size()))"],
                                          "columns": 40, "rows": 10})
    assert text_of(chunks) == "(40, 10)\r\n"


def test_command_string_and_successful_exit() -> None:
    chunks = run_source("CommandSource", {"command": "sh -c 'echo one; echo two'"})
    assert text_of(chunks) == "one\r\ntwo\r\n"
    assert chunks[-1][1].exit_code == 0 and chunks[-1][1].ok and chunks[-1][1].name == "sh"


def test_killed_when_the_graph_stops_with_its_children() -> None:
    got: list[str] = []
    g = source_graph("CommandSource", {"argv": ["sh", "-c", "echo $$; sleep 60 & echo $!; wait"],
                                       "kill_timeout_s": 0.5})
    with g:
        g.observe("out", lambda p: got.append(read_chunk(p).text))
        g.start()
        deadline = time.monotonic() + 10
        while "".join(got).count("\n") < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        shell, sleeper = (int(x) for x in "".join(got).split())
        assert alive(shell) and alive(sleeper)
        g.cancel()
        deadline = time.monotonic() + 10
        while (alive(shell) or alive(sleeper)) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not alive(shell), "the command survived the graph"
        assert not alive(sleeper), "the command's child survived the graph"


def test_a_command_ignoring_sigterm_gets_sigkill() -> None:
    got: list[str] = []
    g = source_graph("CommandSource", {
        "argv": ["{python}", "-c", "import os, signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                 "print(os.getpid(), flush=True); time.sleep(60)"],
        "kill_timeout_s": 0.2,
    })
    with g:
        g.observe("out", lambda p: got.append(read_chunk(p).text))
        g.start()
        deadline = time.monotonic() + 10
        while not "".join(got).strip() and time.monotonic() < deadline:
            time.sleep(0.01)
        pid = int("".join(got))
        g.cancel()
        deadline = time.monotonic() + 10
        while alive(pid) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not alive(pid)


def test_a_missing_program_is_reported_in_the_stream() -> None:
    chunks = run_source("CommandSource", {"argv": ["definitely-not-a-program-xyz", "--flag"]})
    assert len(chunks) == 1
    end = chunks[0][1]
    assert end.is_end and not end.ok and end.exit_code == 127
    assert end.text.startswith("cannot start definitely-not-a-program-xyz --flag:")


def test_fail_on_error_fails_the_graph() -> None:
    with pytest.raises(flowplex.KernelError, match="exit 2"):
        run_source("CommandSource", {"argv": ["sh", "-c", "exit 2"], "fail_on_error": True})


@pytest.mark.parametrize(("options", "message"), [
    ({}, r"node 'src' \(CommandSource\): options.argv: missing"),
    ({"command": "echo 'unterminated"}, r"options.command: cannot split"),
    ({"argv": ["true"], "columns": 0}, r"PTY size must be positive"),
    ({"argv": ["true"], "agent_type": "wizard"}, r"options.agent_type: unknown agent type 'wizard'"),
    ({"argv": ["true"], "stream_id": -4}, r"options.stream_id: expected an integer in 0..4294967295"),
])
def test_option_errors(options: dict[str, object], message: str) -> None:
    with pytest.raises(flowplex.KernelError, match=message):
        run_source("CommandSource", options)


def test_pty_follows_the_pane_size_and_draining_stops_the_command() -> None:
    caps = TermCaps(is_tty=True, columns=90, rows=24, colour=True)
    display = PaneRenderer(Writer(io.BytesIO()), caps, keys=False)
    script = ("import os, sys, time\n"
              "for _ in range(600):\n"
              "    print(os.get_terminal_size(), flush=True); time.sleep(0.02)\n")
    got: list[str] = []
    ends: list[str] = []
    g = source_graph("CommandSource", {"argv": [sys.executable, "-c", script], "stream_id": 1, "display": "d",
                                       "columns": 40, "rows": 10})

    def collect(p: flowplex.Packet) -> None:
        chunk = read_chunk(p)
        (ends if chunk.is_end else got).append(chunk.text)

    with register_display("d", display), display, g:
        g.observe("out", collect)
        g.start()
        display.add_agent(1, "sizes")  # the display lays out a pane for it: the PTY follows
        assert display.flush()
        want = display.pane_size(1)
        assert want is not None and want != (40, 10)
        deadline = time.monotonic() + 10
        while f"columns={want[0]}, lines={want[1]}" not in "".join(got) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert f"columns={want[0]}, lines={want[1]}" in "".join(got)
        display.draining.set()
        g.wait_done(timeout=10)  # the source ends by itself: no cancel needed
    assert ends == ["stopped (killed by SIGTERM)"]


def _supervised(argv: list[str]) -> tuple[flowplex.Graph, list[AgentChunk], int, int]:
    """Start ``argv`` (which prints ``$$`` first); the graph, its chunks, the command's pid and its
    supervisor's (its parent)."""
    got: list[AgentChunk] = []
    g = source_graph("CommandSource", {"argv": argv, "kill_timeout_s": 0.2})
    g.observe("out", lambda p: got.append(read_chunk(p)))
    g.start()
    try:
        deadline = time.monotonic() + 10
        while "\n" not in "".join(c.text for c in got if not c.is_end) and time.monotonic() < deadline:
            time.sleep(0.01)
        command = int("".join(c.text for c in got if not c.is_end).split()[0])
        with open(f"/proc/{command}/stat") as f:
            supervisor = int(f.read().rsplit(")", 1)[1].split()[1])
    except BaseException:
        g.close()  # stops the command
        raise
    return g, got, command, supervisor


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the supervisor is Linux's (prctl)")
def test_a_command_runs_under_a_supervisor_that_passes_signals_on() -> None:
    """The command leads its own process group in the PTY's session, led by its supervisor; a
    SIGTERM sent to the supervisor alone, by another process, reaches the command, and the end
    packet carries the command's own death by it."""
    g, got, command, supervisor = _supervised(["sh", "-c", "echo $$; sleep 30"])
    with g:
        assert os.getpgid(command) == command
        assert os.getsid(command) == supervisor == os.getpgid(supervisor) != command
        subprocess.run(["kill", "-TERM", str(supervisor)], check=True)
        g.wait_done(timeout=10)
    ends = [c for c in got if c.is_end]
    assert [c.exit_code for c in ends] == [-int(signal.SIGTERM)], ends
    assert not alive(command) and not alive(supervisor)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the supervisor is Linux's (prctl)")
def test_a_sigkilled_supervisor_takes_its_command_along() -> None:
    g, got, command, supervisor = _supervised(["sh", "-c", "trap '' HUP TERM; echo $$; sleep 30"])
    with g:
        os.kill(supervisor, signal.SIGKILL)
        g.wait_done(timeout=10)
    assert [c.exit_code for c in got if c.is_end] == [-int(signal.SIGKILL)]
    assert not alive(command), "the command outlived its supervisor"
