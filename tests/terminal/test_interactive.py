"""`flowplex agents` used interactively: real programs in real PTYs, the screen read through pyte.

Each test starts the real CLI in a pseudo-terminal (ptyprocess) and replays everything it
writes into a pyte screen of the same size, the way a terminal would show it; keys are
written to the PTY as a terminal would send them (raw bytes, SGR mouse reports, bracketed
paste). A Python REPL, bash, ``less`` and ``input()`` are the programs.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pyte
import pytest
from ptyprocess import PtyProcess

CLI = [sys.executable, "-c", "from flowplex.cli import main; main()"]
ENV = {**os.environ, "LANG": "C.UTF-8", "TERM": "xterm-256color", "PYTHONUNBUFFERED": "1"}
ENV.pop("NO_COLOR", None)
CTRL_A = b"\x01"


class Terminal:
    """flowplex in a real PTY; what it writes drives a pyte screen (a reader thread)."""

    def __init__(self, args: list[str], columns: int = 120, rows: int = 32, cwd: Path | None = None,
                 command: str = "agents") -> None:
        self.columns, self.rows = columns, rows
        self.screen = pyte.Screen(columns, rows)
        self.stream = pyte.ByteStream(self.screen)
        self.raw = bytearray()
        self.lock = threading.Lock()
        self.proc = PtyProcess.spawn([*CLI, command, *args], env=ENV, dimensions=(rows, columns),
                                     cwd=str(cwd) if cwd else None)
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

    def send(self, data: bytes) -> None:
        self.proc.write(data)
        self.proc.flush()

    def text(self) -> str:
        with self.lock:
            return "\n".join(self.screen.display)

    def status(self) -> str:
        with self.lock:
            return self.screen.display[-1]

    def wait_for(self, predicate: Callable[[str], bool], timeout: float = 10.0) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            screen = self.text()
            if predicate(screen):
                return screen
            time.sleep(0.05)
        raise AssertionError(f"timed out after {timeout} s; the screen was:\n{self.text()}")

    def settle_keys(self) -> None:
        """Wait until flowplex has acted on every key sent so far: keys are handled in order, so
        once ``t`` (the ticker view) shows, those before it were handled; ``g`` goes back to the
        grid. Outside typing mode only."""
        self.send(b"t")
        self.wait_for(lambda s: " · ticker · " in s.splitlines()[-1])
        self.send(b"g")
        self.wait_for(lambda s: " · grid · " in s.splitlines()[-1])

    def wait_running(self, *argv: str, timeout: float = 10.0) -> None:
        """Wait until a descendant of flowplex runs ``argv`` (it has exec'd: a shell's job is
        then in the foreground, ready for the terminal's Ctrl-C or Ctrl-Z)."""
        want = ("\0".join(argv) + "\0").encode()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if _descendant_running(self.proc.pid, want):
                return
            time.sleep(0.02)
        raise AssertionError(f"no {argv} under flowplex after {timeout} s; the screen was:\n{self.text()}")

    def wait_exit(self, timeout: float = 15.0) -> int:
        deadline = time.monotonic() + timeout
        while self.proc.isalive() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not self.proc.isalive(), f"flowplex did not exit; the screen was:\n{self.text()}"
        self.thread.join(5)
        return int(self.proc.exitstatus if self.proc.exitstatus is not None else 128 + self.proc.signalstatus)

    def output(self) -> str:
        """What was written after the alternate screen closed (the summary)."""
        with self.lock:
            raw = bytes(self.raw)
        cut = raw.rfind(b"\x1b[?1049l")
        return raw[cut:].decode("utf-8", "replace") if cut >= 0 else ""

    def close(self) -> None:
        if self.proc.isalive():
            self.proc.terminate(force=True)
        self.thread.join(5)


def _descendant_running(root: int, cmdline: bytes) -> bool:
    """Whether a descendant of process ``root`` has the command line ``cmdline`` (NUL-separated)."""
    parent: dict[int, int] = {}
    matches: list[int] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_bytes()
            line = (entry / "cmdline").read_bytes()
        except OSError:  # ended meanwhile
            continue
        pid = int(entry.name)
        parent[pid] = int(stat.rsplit(b")", 1)[1].split()[1])
        if line == cmdline:
            matches.append(pid)
    for pid in matches:
        seen: set[int] = set()
        while pid > 1 and pid not in seen:
            seen.add(pid)
            pid = parent.get(pid, 0)
            if pid == root:
                return True
    return False


@pytest.fixture
def term() -> Iterator[Callable[..., Terminal]]:
    started: list[Terminal] = []

    def start(*args: str, **kw: object) -> Terminal:
        t = Terminal(list(args), **kw)  # type: ignore[arg-type]
        started.append(t)
        return t

    yield start
    for t in started:
        t.close()


def test_typing_reaches_the_focused_python_repl(term: Callable[..., Terminal]) -> None:
    t = term("--", sys.executable, "-q", "-i")
    t.wait_for(lambda s: ">>>" in s)
    t.send(CTRL_A)
    t.wait_for(lambda s: "TYPING" in s.splitlines()[-1])
    t.send(b"print(6*7)\r")
    screen = t.wait_for(lambda s: "42" in pane_lines(s))
    assert "print(6*7)" in screen
    # `q` and `quit` while typing are the agent's: flowplex keeps running.
    t.send(b"q = 5; print(q * 2)\r")
    t.wait_for(lambda s: "10" in pane_lines(s))
    assert t.proc.isalive()
    t.send(b"quit()\r")
    t.wait_for(lambda s: "exited (0)" in s)
    t.send(CTRL_A)
    t.wait_for(lambda s: "TYPING" not in s.splitlines()[-1])
    t.send(b"q")
    assert t.wait_exit() == 0
    assert re.search(r"1\s+python\S*\s+exited \(0\)", t.output())


def test_ctrl_c_in_typing_mode_interrupts_the_agent_not_flowplex(term: Callable[..., Terminal]) -> None:
    t = term("--", "bash", "--norc", "--noprofile", "-i")
    t.wait_for(lambda s: "$" in s or "#" in s)
    t.send(CTRL_A + b"sleep 30; echo slept\r")
    t.wait_for(lambda s: "sleep 30" in s)
    t.wait_running("sleep", "30")  # bash's foreground job now, not bash reading the line
    t.send(b"\x03")  # to bash's foreground job: sleep dies, bash stays
    t.send(b"echo alive-$((6*7))\r")
    t.wait_for(lambda s: "alive-42" in s)
    assert "slept" not in pane_lines(t.text())
    assert t.proc.isalive()
    t.send(b"exit 3\r")
    t.wait_for(lambda s: "exited (3)" in s)
    t.send(CTRL_A + b"q")
    assert t.wait_exit() == 3
    assert "failed: 1 bash (exit 3)" in t.output()


def test_a_program_waiting_in_input_is_shown_waiting_within_two_seconds(term: Callable[..., Terminal]) -> None:
    code = "import time; print('working'); time.sleep(0.5); name = input('name? '); print('hello', name)"
    t = term("--", sys.executable, "-c", code, "--", sys.executable, "-c", "import time; time.sleep(30)")
    t.wait_for(lambda s: "name?" in s)
    began = time.monotonic()
    screen = t.wait_for(lambda s: "1 python" in s and "waiting" in s.splitlines()[0], timeout=2.0)
    assert time.monotonic() - began <= 2.0
    assert "1 waiting" in screen.splitlines()[-1]
    assert "needs input: 1 python" in screen.splitlines()[-1]
    assert b"\a" in t.raw  # the bell rang once it started waiting
    assert "waiting" not in _title_of(screen, "2 python")  # a sleeping program is not waiting
    t.send(b"t")  # the ticker view: the agent that needs the user comes first
    ticker = t.wait_for(lambda s: "ticker" in s.splitlines()[-1])
    assert ticker.splitlines()[0].lstrip().startswith("1 python"), ticker
    t.send(b"g")
    t.send(CTRL_A + b"ada\r" + CTRL_A)
    t.wait_for(lambda s: "hello ada" in s)
    t.wait_for(lambda s: "exited (0)" in s)
    t.send(b"q")
    t.wait_exit()


def test_less_gets_its_keys_and_quits(term: Callable[..., Terminal], tmp_path: Path) -> None:
    text = tmp_path / "numbers.txt"
    text.write_text("".join(f"line {i}\n" for i in range(1, 500)))
    t = term("--", "less", str(text))
    t.wait_for(lambda s: "line 1" in s)
    t.wait_for(lambda s: "waiting" in s.splitlines()[0])
    t.send(CTRL_A + b"G")  # less: to the end
    t.wait_for(lambda s: "line 499" in s)
    t.send(b"q")  # less quits, flowplex stays (typing mode)
    t.wait_for(lambda s: "exited (0)" in s)
    t.send(CTRL_A + b"q")
    assert t.wait_exit() == 0


def test_stop_restart_and_kill_from_keys(term: Callable[..., Terminal]) -> None:
    code = "import itertools, time\nfor i in itertools.count(): print('tick', i, flush=True); time.sleep(0.1)"
    t = term("--", sys.executable, "-c", code)
    t.wait_for(lambda s: "tick 3" in s)
    t.send(b"s")  # SIGTERM
    t.wait_for(lambda s: "killed (SIGTERM)" in s)
    t.send(b"r")
    t.wait_for(lambda s: "── restart" in s and "running" in s.splitlines()[0])
    t.wait_for(lambda s: s.count("tick 2") >= 2)  # the second run printed too
    t.send(b"k")
    t.wait_for(lambda s: "killed (SIGKILL)" in s)
    t.send(b"q")
    assert t.wait_exit() == 0  # stopped from the keys: not a failure
    out = t.output()
    assert re.search(r"1\s+python\S*\s+killed \(SIGKILL\), 1 restarts", out), out


def test_ctrl_c_outside_typing_mode_quits_with_130(term: Callable[..., Terminal]) -> None:
    t = term("--", sys.executable, "-c", "import time; print('up', flush=True); time.sleep(60)")
    t.wait_for(lambda s: "up" in s)
    t.send(b"\x03")
    assert t.wait_exit() == 130


def test_mouse_click_focuses_and_the_wheel_scrolls(term: Callable[..., Terminal]) -> None:
    lines = "for i in range(300): print('row', i)\nimport time; time.sleep(60)"
    t = term("--", sys.executable, "-c", lines, "--", sys.executable, "-c", "import time; time.sleep(60)",
             columns=120, rows=30)
    t.wait_for(lambda s: "row 299" in s)
    first = t.text().splitlines()[0]
    assert "┏" in first  # the first pane is focused (heavy border)
    right = t.columns - 10
    t.send(f"\x1b[<0;{right};5M\x1b[<0;{right};5m".encode())  # click in the second pane
    t.wait_for(lambda s: s.splitlines()[0].rstrip().endswith("┓") and s.splitlines()[0].count("┏") == 1
               and s.splitlines()[0].index("┏") > 10)
    t.send(b"\x1b[<64;5;5M" * 10)  # wheel up over the first pane: 30 lines back
    screen = t.wait_for(lambda s: "↑" in s.splitlines()[0])
    assert "row 299" not in screen
    t.send(b"\x1b[F")  # End: focused pane (the second) back to live; the first stays scrolled
    t.send(b"1\x1b[F")
    t.wait_for(lambda s: "row 299" in s and "↑" not in s.splitlines()[0])
    t.send(b"q")
    t.wait_exit()


def test_scrollback_and_search_in_a_pane(term: Callable[..., Terminal]) -> None:
    code = "for i in range(2000): print(f'entry {i:04d}')\nimport time; time.sleep(60)"
    t = term("--", sys.executable, "-c", code, columns=100, rows=24)
    t.wait_for(lambda s: "entry 1999" in s)
    t.send(b"\x1b[5~")  # PgUp
    screen = t.wait_for(lambda s: "entry 1999" not in s)
    assert "↑" in screen.splitlines()[0]
    t.send(b"/entry 0042\r")
    t.wait_for(lambda s: "entry 0042" in s)
    t.send(b"/no such text\r")
    t.wait_for(lambda s: "not found: no such text" in s.splitlines()[-1])
    t.send(b"\x1b[F")
    t.wait_for(lambda s: "entry 1999" in s)
    t.send(b"q")
    t.wait_exit()


def test_a_program_sees_its_pane_size_before_it_prints(term: Callable[..., Terminal]) -> None:
    code = "import os; print('size', *os.get_terminal_size()); import time; time.sleep(60)"
    t = term("--", sys.executable, "-c", code, "--", sys.executable, "-c", code, columns=120, rows=30)
    screen = t.wait_for(lambda s: s.count("size ") == 2)
    sizes = set(re.findall(r"size (\d+) (\d+)", screen))
    # Two panes side by side: each is half the width less its borders, the full height less
    # the status bar and the borders.
    assert sizes == {("58", "27")}, screen
    t.send(b"q")
    t.wait_exit()


def test_at_80x24_the_panes_stay_readable(term: Callable[..., Terminal]) -> None:
    code = "import time, sys; print('agent', sys.argv[1], 'is ready'); time.sleep(60)"
    args: list[str] = []
    for i in range(7):
        args += ["--", sys.executable, "-c", code, str(i)]
    t = term(*args, columns=80, rows=24)
    screen = t.wait_for(lambda s: s.count("is ready") >= 6)
    # Fewer, wider panes: at most two across, every shown line whole.
    assert screen.splitlines()[0].count("┏") + screen.splitlines()[0].count("┌") <= 2
    assert all(f"agent {i} is ready" in screen for i in range(6))
    t.send(b"7")  # the hidden seventh comes into view
    t.wait_for(lambda s: "agent 6 is ready" in s)
    t.send(b"q")
    t.wait_exit()


def test_an_agents_file_with_autostart_and_restart(term: Callable[..., Terminal], tmp_path: Path) -> None:
    marker = tmp_path / "runs.txt"
    (tmp_path / "agents.yaml").write_text(f"""
agents:
  flaky:
    cmd: "echo run >> {marker}; n=$(wc -l < {marker}); echo attempt $n; [ $n -ge 3 ]"
    restart: on_failure
    restart_delay_s: 0.1
  later:
    cmd: [{sys.executable!r}, "-c", "print('later ran')"]
    autostart: false
    agent_type: warning
""")
    t = term("-f", str(tmp_path / "agents.yaml"), cwd=tmp_path)
    t.wait_for(lambda s: "attempt 3" in s and "exited (0)" in s)
    assert "not started" in t.text()
    t.send(b"2s")  # focus `later`, start it
    t.wait_for(lambda s: "later ran" in s)
    t.send(b"q")
    assert t.wait_exit() == 0
    assert marker.read_text().count("run") == 3


def pane_lines(screen: str) -> list[str]:
    """The text lines inside pane borders (border characters and padding stripped)."""
    return [part.strip() for line in screen.splitlines() for part in re.split(r"[┃│]+", line) if part.strip()]


def _title_of(screen: str, label: str) -> str:
    for line in screen.splitlines():
        if label in line:
            return line[line.index(label):].split("━")[0].split("─")[0]
    return ""


def test_typing_in_tmux(tmp_path: Path) -> None:
    """The same REPL check through tmux: a real terminal emulator sends the keys."""
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed: the end-to-end terminal test needs it")
    base = ["tmux", "-u", "-L", f"flowplex-typing-{os.getpid()}", "-f", "/dev/null"]
    command = " ".join(f"'{a}'" for a in [*CLI, "agents", "--", sys.executable, "-q", "-i"])
    try:
        subprocess.run([*base, "new-session", "-d", "-x", "100", "-y", "30", "-s", "t",
                        f"env LANG=C.UTF-8 TERM=xterm-256color {command}; echo EXIT=$?; sleep 30"],
                       check=True, timeout=10, env=ENV)

        def screen() -> str:
            return subprocess.run([*base, "capture-pane", "-p", "-t", "t"], capture_output=True, text=True,
                                  timeout=10, env=ENV).stdout

        def wait(predicate: Callable[[str], bool], timeout: float = 10.0) -> str:
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                s = screen()
                if predicate(s):
                    return s
                time.sleep(0.1)
            raise AssertionError(f"timed out; the screen was:\n{screen()}")

        wait(lambda s: ">>>" in s)
        subprocess.run([*base, "send-keys", "-t", "t", "C-a"], check=True, timeout=10, env=ENV)
        subprocess.run([*base, "send-keys", "-t", "t", "-l", "print(6*7)"], check=True, timeout=10, env=ENV)
        subprocess.run([*base, "send-keys", "-t", "t", "Enter"], check=True, timeout=10, env=ENV)
        wait(lambda s: re.search(r"\b42\b", s) is not None and "TYPING" in s)
        subprocess.run([*base, "send-keys", "-t", "t", "C-d"], check=True, timeout=10, env=ENV)  # EOF to the REPL
        wait(lambda s: "exited (0)" in s)
        subprocess.run([*base, "send-keys", "-t", "t", "C-a", "q"], check=True, timeout=10, env=ENV)
        done = wait(lambda s: "EXIT=" in s, 15)
        assert "EXIT=0" in done
    finally:
        subprocess.run([*base, "kill-server"], capture_output=True, timeout=10, env=ENV)


ATTACK = (
    "import sys, time\n"
    "w = sys.stdout.write\n"
    "w('\\x1b[3J')\n"  # erase saved lines (its own pane's history: allowed, and not passed on)
    "for i in range(60): w(f'filler {i}\\n')\n"
    "w('\\x1b]52;c;aGVsbG8=\\x07\\x1b]0;pwned\\x07\\x1b]2;pwned\\x1b\\\\')\n"  # clipboard, title
    "w('\\x1bP+q544e\\x1b\\\\\\x1b[6n\\x1b[c\\x05\\x1b#8\\x1b[?3h')\n"  # queries, DECALN, 132 columns
    "w('\\x1b[?1000h\\x1b[?2004h')\n"  # mouse reports, bracketed paste
    "w('marker after the attack\\n')\n"
    "for i in range(60): w(f'more {i}\\n')\n"
    "sys.stdout.flush(); time.sleep(60)\n"
)
FORBIDDEN = (b"\x1b]", b"\x1bP", b"\x1bc", b"\x1b#8", b"\x1b[6n", b"\x1b[c", b"\x05", b"\x1b[3J", b"\x1b[?3h")


def test_hostile_output_stays_in_its_pane_while_typing_scrolling_and_searching(
        term: Callable[..., Terminal]) -> None:
    t = term("--", sys.executable, "-c", ATTACK, "--", sys.executable, "-q", "-i", columns=120, rows=30)
    t.wait_for(lambda s: "more 59" in s and ">>>" in s)
    t.send(b"/marker after\r")  # search back into the attack
    t.wait_for(lambda s: "marker after the attack" in s and "↑" in s.splitlines()[0])
    t.send(b"\x1b[5~\x1b[5~")  # and further back, over the attack's lines
    t.wait_for(lambda s: "filler" in s)
    t.send(b"2" + CTRL_A + b"print('typed')\r")  # typing mode into the other pane
    t.wait_for(lambda s: "typed" in pane_lines(s))
    t.send(CTRL_A + b"q")
    t.wait_exit()
    with t.lock:
        raw = bytes(t.raw)
    for forbidden in FORBIDDEN:
        assert forbidden not in raw, forbidden
    # Mouse reports and bracketed paste are flowplex's own modes, asked for once, at the start.
    assert raw.count(b"\x1b[?1000h") == 1 and raw.count(b"\x1b[?2004h") == 1
    assert raw.index(b"\x1b[?1000h") < raw.index(b"filler")


def test_paste_reaches_the_repl_as_typed_text(term: Callable[..., Terminal]) -> None:
    t = term("--", sys.executable, "-q", "-i")
    t.wait_for(lambda s: ">>>" in s)
    t.send(CTRL_A + b"\x1b[200~print(sum(range(10)))\x1b[201~\r")  # a terminal's bracketed paste
    screen = t.wait_for(lambda s: "45" in pane_lines(s))
    assert "200~" not in screen and "201~" not in screen  # the REPL did not ask for the markers
    # Still typing: Ctrl-a twice sends one Ctrl-a (readline: to the line's start).
    t.send(b"6*7)" + CTRL_A + CTRL_A + b"print(\r")
    t.wait_for(lambda s: "print(6*7)" in s and "42" in pane_lines(s))
    t.send(CTRL_A + b"q")
    t.wait_exit()


def test_an_exited_agent_keeps_its_pane_until_closed(term: Callable[..., Terminal]) -> None:
    t = term("--", sys.executable, "-c", "print('first done')", "--", sys.executable, "-c",
             "import time; print('second up', flush=True); time.sleep(60)")
    t.wait_for(lambda s: "exited (0)" in s and "second up" in s)
    assert "first done" in t.text()  # the pane stays, with its output and exit status
    t.send(b"x")  # close the focused (first) pane
    screen = t.wait_for(lambda s: "first done" not in s)
    assert "second up" in screen
    t.send(b"x")  # the second still runs: not closed
    t.wait_for(lambda s: "still runs" in s.splitlines()[-1])
    t.send(b"q")
    t.wait_exit()


def test_the_demo_layout_does_not_move_in_its_first_seconds(term: Callable[..., Terminal]) -> None:
    # Long enough that it never ends by itself while watched (that it does end is test_commands'
    # test_demo_in_tmux): `q` ends it once the layout was watched.
    t = term("--duration", "30", "--mode", "panes", command="demo", columns=160, rows=50)
    t.wait_for(lambda s: "flowplex demo" in s.splitlines()[-1])
    seen: set[tuple[tuple[int, int, str], ...]] = set()
    deadline = time.monotonic() + 1.5
    while time.monotonic() < deadline:
        places = []
        for y, line in enumerate(t.text().splitlines()):
            places += [(y, m.start(), m.group(1)) for m in re.finditer(r"[━─] (\d \S+) ·", line)]
        seen.add(tuple(places))
        time.sleep(0.05)
    assert len(seen) == 1, seen  # every pane kept its place and number from the first frame
    (places,) = seen
    assert [name for _, _, name in places] == ["1 planner", "2 coder", "3 reviewer", "4 tests", "5 monitor",
                                               "6 shell", "7 mallory"]
    t.send(b"q")
    assert t.wait_exit(15) == 0
    assert "flowplex demo: 7 agents" in t.output()


def test_a_program_waiting_for_the_network_is_not_waiting_for_input(term: Callable[..., Terminal]) -> None:
    select_wait = ("import selectors, socket, sys\n"
                   "a, b = socket.socketpair(); sel = selectors.SelectSelector()\n"
                   "sel.register(a, selectors.EVENT_READ)\n"
                   "sel.register(sys.stdin, selectors.EVENT_READ)\n"
                   "print('calling the API...', flush=True); sel.select()")
    event_loop = "import asyncio; print('streaming tokens', flush=True); asyncio.run(asyncio.sleep(30))"
    t = term("--", sys.executable, "-c", select_wait, "--", sys.executable, "-c", event_loop,
             "--", sys.executable, "-q", "-i")
    t.wait_for(lambda s: "calling the API" in s and "streaming tokens" in s and ">>>" in s)
    # The REPL's prompt: waiting; the other two, quiet for a second (idle), have been polled
    # past PROMPT_QUIET_S without being taken for waiting; two more polls (0.25 s each) agree.
    t.wait_for(lambda s: "3 python#3 · info · waiting" in s and "1 python · info · idle" in s
               and "2 python#2 · info · idle" in s)
    time.sleep(0.6)
    screen = t.text()
    assert "1 python · info · idle" in screen, screen.splitlines()[0]
    assert "2 python#2 · info · idle" in screen, screen.splitlines()[0]
    assert "1 waiting" in screen.splitlines()[-1]
    t.send(b"q")
    t.wait_exit()


def test_another_typing_key_no_bell_and_ctrl_z(term: Callable[..., Terminal]) -> None:
    t = term("--typing-key", "ctrl-b", "--no-bell", "--", "bash", "--norc", "--noprofile", "-i")
    t.wait_for(lambda s: "waiting" in s.splitlines()[0])
    t.send(b"\x01")  # Ctrl-a is an ordinary key now: not typing mode
    t.settle_keys()  # (in typing mode, `t` and `g` would have gone to bash: no ticker view)
    assert "TYPING" not in t.status()
    t.send(b"\x02sleep 30\r")
    t.wait_for(lambda s: "sleep 30" in s)
    t.wait_running("sleep", "30")  # bash's foreground job now, not bash reading the line
    t.send(b"\x1a")  # Ctrl-Z: bash's job control stops the sleep
    t.wait_for(lambda s: "Stopped" in s)
    t.send(b"jobs\r")
    t.wait_for(lambda s: re.search(r"\[1\]\+\s+Stopped\s+sleep 30", s) is not None)
    t.send(b"exit 0\r")
    screen = t.wait_for(lambda s: "There are stopped jobs" in s or "exited (0)" in s)
    if "exited (0)" not in screen:  # bash keeps a stopped job: a second exit ends both
        t.send(b"exit 0\r")
        t.wait_for(lambda s: "exited (0)" in s)
    with t.lock:
        assert b"\a" not in t.raw  # --no-bell, though it waited for input
    t.send(b"\x02q")
    assert t.wait_exit() == 0


def test_the_bell_rings_once_per_wait(term: Callable[..., Terminal]) -> None:
    code = "input('first? '); print('ok'); import time; time.sleep(1.0); input('second? ')"
    t = term("--", sys.executable, "-c", code)
    t.wait_for(lambda s: "waiting" in s.splitlines()[0])
    time.sleep(1.0)  # still waiting: no second bell
    with t.lock:
        assert t.raw.count(b"\a") == 1
    t.send(CTRL_A + b"\r")
    t.wait_for(lambda s: "second?" in s and "waiting" in s.splitlines()[0], timeout=5)
    with t.lock:
        assert t.raw.count(b"\a") == 2  # a new wait rings again
    t.send(b"\r" + CTRL_A + b"q")
    assert t.wait_exit() == 0


def test_an_agent_never_started_is_not_a_failure(term: Callable[..., Terminal], tmp_path: Path) -> None:
    (tmp_path / "agents.yaml").write_text("""
agents:
  now: "echo ran"
  later: { cmd: "echo never", autostart: false }
""")
    t = term("-f", str(tmp_path / "agents.yaml"))
    t.wait_for(lambda s: "exited (0)" in s and "not started" in s)
    t.send(b"q")
    assert t.wait_exit() == 0
    assert re.search(r"2\s+later\s+not started", t.output()), t.output()


def test_a_bad_typing_key_is_a_usage_error_in_every_mode() -> None:
    proc = subprocess.run([*CLI, "agents", "--mode", "log", "--typing-key", "shift-q", "--", "true"],
                          capture_output=True, env=ENV, timeout=60, stdin=subprocess.DEVNULL)
    assert proc.returncode == 2
    assert b"--typing-key 'shift-q': expected a control key such as ctrl-a" in proc.stderr


def test_a_paste_split_over_reads_stays_a_paste(term: Callable[..., Terminal]) -> None:
    t = term("--", sys.executable, "-q", "-i")
    t.wait_for(lambda s: ">>>" in s)
    # Outside typing mode a paste is nobody's: "kq" inside it neither kills nor quits.
    t.send(b"\x1b[200~" + b"x" * 5000)
    time.sleep(0.2)
    t.send(b"kq\x1b[201~")
    t.settle_keys()  # every key of the paste was handled (a `q` acted upon would have quit)
    assert t.proc.isalive()
    assert "killed" not in t.text().splitlines()[0] and "TYPING" not in t.status()
    # In typing mode it reaches the agent whole, however the reads cut it.
    t.send(CTRL_A + b"\x1b[200~print(len('" + b"a" * 5000)
    time.sleep(0.2)
    t.send(b"'))\r\x1b[201~")
    t.wait_for(lambda s: "5000" in pane_lines(s))
    t.send(CTRL_A + b"q")
    assert t.wait_exit() == 0


def test_closing_a_pane_calls_off_its_pending_restart(term: Callable[..., Terminal], tmp_path: Path) -> None:
    (tmp_path / "agents.yaml").write_text("""
agents:
  flaky: { cmd: "echo attempt; exit 1", restart: always, restart_delay_s: 1.5 }
  steady: { cmd: "echo steady; sleep 60" }
""")
    t = term("-f", str(tmp_path / "agents.yaml"))
    t.wait_for(lambda s: "exited (1)" in s and "steady" in s)
    t.send(b"x")  # close flaky while its restart waits
    t.wait_for(lambda s: "attempt" not in s)
    time.sleep(2.5)  # a second past the restart delay: nothing comes back, nothing failed
    screen = t.text()
    assert "attempt" not in screen and "stderr" not in screen and "KeyError" not in screen
    assert "1 running" in screen.splitlines()[-1] or "1 idle" in screen.splitlines()[-1]
    t.send(b"q")
    assert t.wait_exit() == 1  # flaky did fail (exit 1)
    assert "failed: 1 flaky (exit 1)" in t.output()
