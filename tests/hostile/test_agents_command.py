"""CommandSource and ``flowplex agents`` against commands that flood, never end a line, or hide
their children: bounded memory, and no process outlives flowplex."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import tracemalloc

import pytest

from flowplex.agents import read_chunk
from flowplex.terminal import LogRenderer, TermCaps, Writer

from ..agents.conftest import alive, source_graph
from .conftest import CLI, run_limited

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PTYs, /proc and prctl are Linux's")

LONG_LINE = "x" * 999


def _wait_gone(pids: list[int], timeout_s: float = 10.0) -> list[int]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        left = [p for p in pids if alive(p)]
        if not left:
            return []
        time.sleep(0.02)
    return [p for p in pids if alive(p)]


def test_a_flooding_command_is_held_back_not_buffered() -> None:
    """`yes` writes far faster than the log renderer can keep up; with nothing read ahead, the
    PTY fills and `yes` blocks, so flowplex's memory stays flat while it runs (stopped by
    SIGTERM after 3 s, as a user would; unbounded, the backlog would be gigabytes by then)."""
    result = run_limited([*CLI, "agents", "--mode", "log", "--", "sh", "-c", f"yes {LONG_LINE} | head -c 2000000000"],
                         mem_mb=2048, timeout_s=60, stop_after_s=3.0)
    assert not result.hung, result.stderr
    assert result.rc == 128 + signal.SIGTERM, result.stderr  # its own exit for SIGTERM: not a signal death
    assert result.maxrss_mb < 300, f"peak RSS {result.maxrss_mb:.0f} MB"
    assert "Traceback" not in result.stderr


def test_a_command_reads_at_most_one_bounded_chunk_per_turn() -> None:
    got: list[int] = []
    g = source_graph("CommandSource", {"argv": ["sh", "-c", f"yes {LONG_LINE} | head -c 3000000"]})
    with g:
        g.observe("out", lambda p: got.append(len(read_chunk(p).text.encode())))
        g.start()
        g.wait_done(timeout=60)
    assert sum(got) >= 3_000_000  # the PTY turns each \n into \r\n
    assert max(got) <= 64 * 1024


def test_a_progress_line_without_end_is_cut_and_counted() -> None:
    """A ``\\r`` progress bar that then grows without another ``\\r`` or a newline (20 MB of it)
    is cut into log lines of ``max_line_chars`` and counted; what the renderer holds stays small."""
    out = open(os.devnull, "wb")  # noqa: SIM115  (closed below; the writer needs a real descriptor)
    # Few pending lines, so that what the renderer may hold is small next to the 20 MB fed.
    display = LogRenderer(Writer(out.fileno()), TermCaps(is_tty=False), overflow="block", block_timeout_s=None,
                          max_pending_lines=50)
    piece = b"=" * 65536
    tracemalloc.start()
    try:
        with display:
            display.feed(1, b"\rstarting", name="bar")
            for _ in range(320):
                display.feed(1, piece)
            _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        out.close()
    assert peak < 8 * 1024 * 1024, f"peak {peak / 1e6:.1f} MB of Python memory"
    st = display.stats()
    assert st.cut_lines >= 320 * 65536 // display.max_line_chars - 1
    assert st.dropped == 0


def test_cut_lines_are_in_the_summary() -> None:
    result = run_limited([*CLI, "agents", "--mode", "log", "--", "sh", "-c",
                          "printf '\\rgo'; head -c 300000 /dev/zero | tr '\\0' '='"],
                         stdout_path=None, timeout_s=60)
    assert result.rc == 0, result.stderr
    summary = [line for line in result.stdout.splitlines() if line.startswith("flowplex agents:")]
    assert summary and " long lines cut; " in summary[0], result.stdout[-500:]


def _pids_from(stream: object, count: int, timeout_s: float = 15.0) -> list[int]:
    """Read ``label | <pid>`` log lines from a pipe until ``count`` pids came."""
    import select

    fd = stream.fileno()  # type: ignore[attr-defined]
    buf = b""
    deadline = time.monotonic() + timeout_s
    pids: list[int] = []
    while len(pids) < count and time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.1)
        if ready:
            data = os.read(fd, 4096)
            if not data:
                break
            buf += data
            tails = [line.rsplit(b"|", 1)[-1].strip() for line in buf.splitlines()]
            pids = [int(t) for t in tails if t.isdigit()]
    assert len(pids) >= count, buf
    return pids[:count]


@pytest.mark.parametrize("how", ["sigterm", "exits"])
def test_no_descendant_outlives_flowplex_agents(how: str) -> None:
    """A child that called setsid (out of the process group) and a double-forked orphan are
    both gone when ``flowplex agents`` ends: stopped by SIGTERM, or after the command exited."""
    script = "setsid sleep 301 & echo $!; (sleep 302 & echo $!) ; " + ("wait" if how == "sigterm" else "sleep 0.3")
    pids: list[int] = []
    with subprocess.Popen([*CLI, "agents", "--mode", "log", "--", "sh", "-c", script], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, stdin=subprocess.DEVNULL) as proc:
        try:
            pids = _pids_from(proc.stdout, 2)
            if how == "sigterm":
                proc.send_signal(signal.SIGTERM)
            _, err = proc.communicate(timeout=30)
            assert proc.returncode == (128 + signal.SIGTERM if how == "sigterm" else 0), err
            assert _wait_gone(pids) == [], "a descendant survived flowplex agents"
        finally:
            proc.kill()
            for pid in pids:
                if alive(pid):
                    os.kill(pid, signal.SIGKILL)


def test_commands_die_with_a_sigkilled_flowplex() -> None:
    """No one is left to send a signal: the death signal (PR_SET_PDEATHSIG) ends the command,
    even one that ignores the hang-up of its terminal, and the hang-up ends the jobs of another."""
    pids: list[int] = []
    argv = [*CLI, "agents", "--mode", "log", "--", "sh", "-c", "trap '' HUP; echo $$; exec sleep 303",
            "--", "sh", "-c", "sleep 305 & echo $!; wait"]
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL) as proc:
        try:
            pids = _pids_from(proc.stdout, 2)
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=10)
            assert _wait_gone(pids) == [], "a command survived a SIGKILLed flowplex"
        finally:
            proc.kill()
            for pid in pids:
                if alive(pid):
                    os.kill(pid, signal.SIGKILL)


def test_setsid_children_are_killed_when_the_graph_stops() -> None:
    got: list[str] = []
    g = source_graph("CommandSource", {"argv": ["sh", "-c", "setsid sleep 304 & echo $!; wait"], "kill_timeout_s": 0.5})
    with g:
        g.observe("out", lambda p: got.append(read_chunk(p).text))
        g.start()
        deadline = time.monotonic() + 10
        while "\n" not in "".join(got) and time.monotonic() < deadline:
            time.sleep(0.01)
        pid = int("".join(got).split()[0])
        assert alive(pid)
        g.cancel()
    try:
        assert _wait_gone([pid]) == [], "the setsid child survived the graph"
    finally:
        if alive(pid):
            os.kill(pid, signal.SIGKILL)


def test_a_command_outlives_the_thread_that_started_the_graph() -> None:
    """The death signal fires when the *forking thread* ends: commands are forked by flowplex's
    long-lived spawner thread, so a graph started from a short-lived thread keeps its command."""
    got: list[str] = []
    g = source_graph("CommandSource", {"argv": ["sh", "-c", "echo $$; sleep 30"], "kill_timeout_s": 0.2})
    with g:
        g.observe("out", lambda p: got.append(read_chunk(p).text))
        starter = threading.Thread(target=g.start)
        starter.start()
        starter.join()
        deadline = time.monotonic() + 10
        while "\n" not in "".join(got) and time.monotonic() < deadline:
            time.sleep(0.01)
        pid = int("".join(got).split()[0])
        time.sleep(0.3)
        assert alive(pid), "the command died with the thread that started the graph"
        g.cancel()
    assert _wait_gone([pid]) == []
