"""`flowplex agents -d`, `flowplex attach`, `agents ls` and `agents send`: real servers, PTYs and sockets.

A background agents server is started by the real CLI (`agents -d`) in a runtime directory of
the test's own; `flowplex attach` runs in a real PTY (ptyprocess sets its size), and what it
writes drives a pyte screen of the same size, as a terminal would show it. Every server is
stopped at the end, and the test checks that it and its agents are gone.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pyte
import pytest
from ptyprocess import PtyProcess

from flowplex.control import connect, live_graphs
from flowplex.errors import ControlError
from flowplex.terminal._history import CAN, AgentLog

CLI = [sys.executable, "-c", "from flowplex.cli import main; main()"]
LAUNCH = [sys.executable, "-c",
          "import sys\nfrom flowplex._launch import main\nsys.argv = ['flowplex', *sys.argv[1:]]\n"
          "try:\n    main()\nfinally:\n    print('typer was ' + ('loaded' if 'typer' in sys.modules else 'not loaded'),"
          " file=sys.stderr)"]
"""The console script's way in (``flowplex._launch``), saying at exit whether it loaded the CLI framework."""
ENV = {**os.environ, "LANG": "C.UTF-8", "TERM": "xterm-256color", "PYTHONUNBUFFERED": "1"}
ENV.pop("NO_COLOR", None)
NAME = "crew"
HELLO = ["sh", "-c", "echo hello; exec cat"]
COUNTER = ["sh", "-c", "i=0; while :; do i=$((i+1)); echo count $i; sleep 0.1; done"]

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PTYs and /proc: Linux")


def cli(*args: str, timeout: float = 30.0) -> subprocess.CompletedProcess[str]:
    """The real CLI, in the runtime directory the test set (``FLOWPLEX_RUNTIME_DIR`` is inherited)."""
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=timeout, check=False,
                          env={**ENV, "FLOWPLEX_RUNTIME_DIR": os.environ["FLOWPLEX_RUNTIME_DIR"]})


def gone(pid: int) -> bool:
    """Whether process ``pid`` ended (a zombie nobody reaped counts as ended)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0] == "Z"
    except OSError:
        return True


def wait_until(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.02)


def rows(name: str) -> list[dict[str, Any]]:
    result = cli("agents", "ls", name, "--json")
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout)
    assert answer["name"] == name
    return list(answer["agents"])


def history(name: str, sid: int) -> str:
    """Everything the server kept of agent ``sid``'s output, read as an attached view reads it."""
    out = bytearray()
    with connect(name) as client:
        client.request("attach")
        target = None
        while True:
            frame = client.next_frame()
            if isinstance(frame, bytes):
                if target == sid:
                    out += frame
                target = None
            elif frame.get("ev") == "output":
                target = frame["sid"]
            elif frame.get("ev") == "synced":
                return out.decode("utf-8", "replace")


def stop(name: str) -> None:
    """Stop server ``name`` (the ``stop`` op; SIGKILL if it does not end) and check that it and
    its agents are gone, its socket too."""
    try:
        with connect(name) as client:
            pid = client.request("info")["pid"]
            pids = [r["pid"] for r in client.request("agents")["agents"] if r["pid"]]
            client.request("stop")
    except ControlError:
        return
    try:
        wait_until(lambda: gone(pid), 10.0, f"server {name} (pid {pid}) to end")
    finally:
        if not gone(pid):
            os.kill(pid, signal.SIGKILL)
    wait_until(lambda: all(gone(p) for p in pids), 5.0, f"the agents of {name} to end")
    assert not os.path.exists(os.path.join(os.environ["FLOWPLEX_RUNTIME_DIR"], f"{name}.sock"))


@pytest.fixture(scope="module")
def runtime() -> Iterator[str]:
    """A fresh runtime directory of this module's (short: a socket path has 107 bytes at most)."""
    directory = tempfile.mkdtemp(prefix="fpx-", dir="/tmp")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("FLOWPLEX_RUNTIME_DIR", directory)
        yield directory
    shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture(autouse=True)
def _in_runtime(runtime: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test in the module's directory too (the suite's autouse fixture sets its own per test)."""
    monkeypatch.setenv("FLOWPLEX_RUNTIME_DIR", runtime)


@pytest.fixture(scope="module")
def server(runtime: str) -> Iterator[str]:
    """Server ``crew``: agent 1 says hello and echoes what it is sent, agent 2 counts."""
    result = cli("agents", "-d", "--name", NAME, "--", *HELLO, "--", *COUNTER)
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"{NAME}\n"
    try:
        yield NAME
    finally:
        stop(NAME)


class Terminal:
    """``flowplex attach`` in a real PTY of ``columns`` x ``rows``; its output drives a pyte screen."""

    def __init__(self, name: str, columns: int = 120, rows: int = 32, command: list[str] = CLI) -> None:
        self.columns, self.rows = columns, rows
        self.screen = pyte.Screen(columns, rows)
        self.stream = pyte.ByteStream(self.screen)
        self.raw = bytearray()
        self.lock = threading.Lock()
        self.started = time.monotonic()
        self.first_frame: float | None = None
        env = {**ENV, "FLOWPLEX_RUNTIME_DIR": os.environ["FLOWPLEX_RUNTIME_DIR"]}
        self.proc = PtyProcess.spawn([*command, "attach", name], env=env, dimensions=(rows, columns))
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        while True:
            try:
                data = self.proc.read(65536)
            except EOFError:
                return
            with self.lock:
                self.raw += data
                self.stream.feed(data)
                if self.first_frame is None and "hello" in "\n".join(self.screen.display):
                    self.first_frame = time.monotonic() - self.started

    def send(self, data: bytes) -> None:
        self.proc.write(data)
        self.proc.flush()

    def text(self) -> str:
        with self.lock:
            return "\n".join(self.screen.display)

    def wait_for(self, *words: str, timeout: float = 10.0) -> str:
        self.wait_until_shown(lambda screen: all(w in screen for w in words), f"{words}", timeout)
        return self.text()

    def wait_until_shown(self, predicate: Callable[[str], bool], what: str, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while not predicate(self.text()):
            if time.monotonic() > deadline:
                raise AssertionError(f"{what}: not shown after {timeout} s; the screen was:\n{self.text()}")
            time.sleep(0.03)

    def wait_exit(self, timeout: float = 10.0) -> int:
        deadline = time.monotonic() + timeout
        while self.proc.isalive() and time.monotonic() < deadline:
            time.sleep(0.03)
        assert not self.proc.isalive(), f"attach did not exit; the screen was:\n{self.text()}"
        self.thread.join(5)
        status = self.proc.exitstatus
        return int(status if status is not None else 128 + (self.proc.signalstatus or 0))

    def after_exit(self) -> str:
        """What attach wrote after it left the alternate screen."""
        with self.lock:
            raw = bytes(self.raw)
        cut = raw.rfind(b"\x1b[?1049l")
        return raw[cut:].decode("utf-8", "replace") if cut >= 0 else raw.decode("utf-8", "replace")

    def close(self) -> None:
        if self.proc.isalive():
            self.proc.terminate(force=True)
        self.thread.join(5)


@pytest.fixture
def terminals() -> Iterator[list[Terminal]]:
    made: list[Terminal] = []
    try:
        yield made
    finally:
        for term in made:
            term.close()


def test_ls_and_send_reach_the_agents(server: str) -> None:
    agents = rows(server)
    assert [(a["number"], a["name"]) for a in agents] == [(1, "sh"), (2, "sh#2")]
    assert all(not a["finished"] and isinstance(a["pid"], int) and a["exit_code"] is None for a in agents)
    assert all(a["state"] in ("running", "idle", "waiting") for a in agents)

    sent = cli("agents", "send", server, "1", "abc\\n")
    assert sent.returncode == 0, sent.stderr
    by_name = cli("agents", "send", server, "sh", "by name\\n", "--json")
    assert by_name.returncode == 0, by_name.stderr
    assert json.loads(by_name.stdout)["agent"] == {"number": 1, "name": "sh", "sid": 1}
    # After --, text is text (not an option); \\ is a backslash, \n (the two characters) is Enter.
    dashed = cli("agents", "send", server, "1", "--", r"-d\\n\n")
    assert dashed.returncode == 0, dashed.stderr
    wait_until(lambda: all(f"{typed}\r\n" in history(server, 1) for typed in ("abc", "by name", "-d\\n")), 5.0,
               "agent 1 to echo what it was sent")
    misplaced = cli("agents", "--mode", "log", "send", server, "1", "x")
    assert misplaced.returncode == 2 and "--mode is an option of flowplex agents itself" in misplaced.stderr

    table = cli("agents", "ls", server)
    assert table.returncode == 0 and table.stdout.splitlines()[0].split() == ["#", "NAME", "STATE", "PID", "EXIT"]

    missing = cli("agents", "send", server, "sh#3", "x")
    assert missing.returncode == 2
    assert "no agent 'sh#3'; did you mean `sh#2`? (agents: 1 sh, 2 sh#2)" in missing.stderr
    assert "Traceback" not in missing.stderr
    assert cli("agents", "send", server, "7", "x").returncode == 2

    nobody = cli("agents", "ls", "nobody-here")
    assert nobody.returncode == 1 and "no live graph named 'nobody-here'" in nobody.stderr
    assert "Traceback" not in nobody.stderr


def test_the_server_is_a_live_graph_of_kind_agents(server: str) -> None:
    info = next(i for i in live_graphs() if i["name"] == server)
    assert info["kind"] == "agents" and info["nodes"] == 2 and info["state"] == "RUNNING"
    assert sum(info["agents"].values()) == 2


def test_a_history_keeps_its_newest_output_and_a_slow_view_learns_what_it_lost() -> None:
    history = AgentLog(1000)
    early = history.start()
    for i in range(100):
        history.add("output", b"%03d.......\n" % i)
    history.add("exited", note="exit 0", ok=True, exit_code=0)
    items, lost = history.take(early, 1 << 20)
    (kind, kept), end = items
    assert kind == "output" and kept.startswith(CAN) and kept.endswith(b"099.......\n")
    assert end == ("exited", {"note": "exit 0", "ok": True, "exit_code": 0})
    assert lost > 0 and lost + len(kept) - len(CAN) == 1100  # every byte is either sent or counted
    assert history.size <= 1000
    again, lost_again = history.take(history.start(), 1 << 20)  # a new view: no loss, but a cut start
    assert lost_again == 0 and again == items
    assert history.take(early, 1 << 20) == ([], 0)  # nothing new for a view that is up to date


def test_commands_after_the_separator_are_never_subcommands(runtime: str) -> None:
    result = cli("agents", "--mode", "log", "--", "ls", "-d", "/tmp")
    assert result.returncode == 0, result.stderr
    assert "/tmp" in result.stdout


def test_detach_reattach_and_a_killed_terminal_lose_nothing(server: str, terminals: list[Terminal]) -> None:
    first = Terminal(server, command=LAUNCH)  # as the console script starts it: without typer
    terminals.append(first)
    screen = first.wait_for("hello", "count", "d detach")
    assert "flowplex attach crew" in screen.splitlines()[-1]
    first.send(b"\x01typed here\r\x01")  # typing mode: the keys reach the real agent in the server
    first.wait_for("typed here")
    first.send(b"d")
    assert first.wait_exit() == 0
    assert "detached from crew" in first.after_exit()
    assert "typer was not loaded" in first.after_exit()

    lines = rows(server)[1]["lines"]
    wait_until(lambda: rows(server)[1]["lines"] > lines, 5.0, "the counter to go on after the detach")

    second = Terminal(server)
    terminals.append(second)
    second.wait_for("hello", "typed here", "count")
    second.send(b"2" + b"\x1b[5~" * 8)  # focus the counter, page up: its scrollback reaches its first line
    second.wait_until_shown(lambda screen: re.search(r"[│┃]count 1 ", screen) is not None, "count 1 in the scrollback")
    os.kill(second.proc.pid, signal.SIGKILL)  # the terminal dies: nothing of the agents goes with it
    assert second.wait_exit() == 128 + signal.SIGKILL
    assert [a["finished"] for a in rows(server)] == [False, False]

    third = Terminal(server)
    terminals.append(third)
    third.wait_for("hello", "typed here", "count")
    assert "typed here" in history(server, 1)  # (this test's own: the others may run on another worker)
    third.send(b"\x01\x1c")  # Ctrl-\ detaches from typing mode too
    assert third.wait_exit() == 0


def test_two_terminals_at_once_each_at_its_own_size(server: str, terminals: list[Terminal]) -> None:
    big = Terminal(server, 100, 30)
    small = Terminal(server, 60, 20)
    terminals += [big, small]
    for term in (big, small):
        term.wait_for("hello", "count")
    with big.lock, small.lock:
        assert big.screen.display[0].rstrip().endswith(("┐", "┓")) and len(big.screen.display[0].rstrip()) == 100
        assert small.screen.display[0].rstrip().endswith(("┐", "┓")) and len(small.screen.display[0].rstrip()) == 60
    small.send(b"d")
    assert small.wait_exit() == 0
    big.wait_for("count")
    big.send(b"q")  # the view's quit detaches too
    assert big.wait_exit() == 0


def test_default_names_a_taken_name_and_stopping_under_a_view(runtime: str, terminals: list[Terminal]) -> None:
    started = []
    try:
        for expected in ("agents", "agents-2"):
            result = cli("agents", "-d", "--", "sh", "-c", "echo hello; sleep 30")
            assert result.returncode == 0, result.stderr
            assert result.stdout == f"{expected}\n"
            started.append(expected)
        taken = cli("agents", "-d", "--name", "agents", "--", "sleep", "30")
        assert taken.returncode != 0
        assert "a live graph is already named 'agents'" in taken.stderr and "Traceback" not in taken.stderr

        view = Terminal("agents-2")
        terminals.append(view)
        view.wait_for("hello")
        stop("agents-2")
        assert view.wait_exit() == 0
        assert "the agents of agents-2 stopped" in view.after_exit()
    finally:
        for name in started:
            stop(name)


def test_a_session_in_its_own_terminal_is_live_too(runtime: str) -> None:
    # `flowplex agents` without -d (log mode here: its output is a pipe) serves ls, send and stop.
    proc = subprocess.Popen([*CLI, "agents", "--mode", "log", "--name", "fg", "--", *HELLO], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**ENV, "FLOWPLEX_RUNTIME_DIR": runtime})
    try:
        wait_until(lambda: any(i["name"] == "fg" for i in live_graphs()), 20, "the session to serve")
        assert [(r["number"], r["name"]) for r in rows("fg")] == [(1, "sh")]
        sent = cli("agents", "send", "fg", "1", r"typed here\n")
        assert sent.returncode == 0, sent.stderr
        attach = cli("attach", "fg")  # no terminal here, and the session has its own: refused either way
        assert attach.returncode != 0
        with connect("fg") as client, pytest.raises(ControlError, match="runs in a terminal of its own"):
            client.request("attach")
        wait_until(lambda: rows("fg")[0]["lines"] >= 2, 10, "the typed line to come back")
        assert cli("stop", "fg").returncode == 0
        out, _ = proc.communicate(timeout=20)
        assert out.splitlines()[:3] == ["sh | hello", "sh | typed here", "sh | typed here"], out  # echo, then cat
        assert "sh | ── stopped (killed by SIGTERM)" in out, out  # it ended because it was stopped
        assert not (os.path.exists(os.path.join(runtime, "fg.sock")))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    no_control = cli("agents", "--no-control", "--name", "x", "--", "true")
    assert no_control.returncode == 2 and "which --no-control turns off: give one of them" in no_control.stderr
