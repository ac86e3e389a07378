"""`flowplex agents` in log mode loses nothing: full-screen programs and unterminated escapes.

Real runs of the CLI (a subprocess under a memory cap and a timeout) against small real
programs in their PTYs. A program that enters the alternate screen and never leaves it, or that
leaves it, ends or is killed there, has what it showed logged; an escape sequence whose end
never comes (an OSC without its BEL, a DCS, endless CSI parameters) is cut after 4 KiB, counted,
and the text after it is logged. One case runs the interactive panes in a real terminal.

Cases of the same kind run as the agents of one CLI run (``batch``): each test reads its own
agent's lines (every agent has its own PTY, screen and escape parser), and the run's summary
counts are those of all the batch's agents.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import sys
import tempfile
from pathlib import Path

import pytest

from flowplex.terminal._agentsfile import unique_names

from ..terminal.test_interactive import Terminal, pane_lines
from .conftest import CLI, Limited, run_limited

# The batches run once per worker: keep the module on one.
pytestmark = pytest.mark.xdist_group("hostile_agents_logmode")

BOUND = 4096
"""The documented bound on an escape sequence (``flowplex.terminal._sanitize.MAX_SEQUENCE``)."""


def agents(*scripts: str, stop_after_s: float | None = None) -> Limited:
    """``flowplex agents --mode log`` running one ``python -c`` command per script (its whole
    log read back from a file: the launcher keeps only the end of a piped stdout)."""
    argv = [*CLI, "agents", "--mode", "log"]
    for script in scripts:
        argv += ["--", sys.executable, "-c", "import os, sys, time\nw = sys.stdout.buffer.write\n" + script]
    with tempfile.TemporaryDirectory(prefix="flowplex-logmode-") as tmp:
        out = Path(tmp) / "log.txt"
        run = run_limited(argv, mem_mb=1024, timeout_s=30.0, stdout_path=str(out), stop_after_s=stop_after_s)
        return dataclasses.replace(run, stdout=out.read_text(encoding="utf-8", errors="replace"))


def agent_names(count: int) -> list[str]:
    """The log labels of ``count`` agents all running ``sys.executable``, in command-line order."""
    return unique_names([Path(sys.executable).name] * count)


def batch(cases: dict[str, str], case: str) -> tuple[Limited, str]:
    """The run of all ``cases`` (id -> script) as the agents of one CLI run (made once), and the
    log label of ``case``'s agent."""
    run = _batch_run(tuple(cases.values()))
    return run, agent_names(len(cases))[list(cases).index(case)]


@functools.cache
def _batch_run(scripts: tuple[str, ...]) -> Limited:
    return agents(*scripts)


def logged(run: Limited, name: str = agent_names(1)[0]) -> list[str]:
    """The lines of agent ``name``, without the label."""
    prefix = re.compile(rf"^{re.escape(name)}\s* \| ")
    return [prefix.sub("", line) for line in run.stdout.splitlines() if prefix.match(line)]


def summary(run: Limited) -> str:
    return next(line for line in run.stdout.splitlines() if line.startswith("flowplex agents: "))


_MODES = ["?1049", "?1047", "?47", "?25;1049"]
_FULL_SCREEN = {
    "never leaves": "w(b'before\\n\\x1b[?1049h')\nfor i in range(60): w(b'line %d\\n' % i)",
    **{f"leaves {mode}": f"w(b'\\x1b[{mode}h\\x1b[2J\\x1b[1;1Hmenu: quit\\x1b[10;5Hcursor-drawn body\\x1b[{mode}l')\n"
                          "w(b'after\\n')" for mode in _MODES},
    "repeatedly": "for i in range(5): w(b'\\x1b[?1049h\\x1b[Hvisit %d\\x1b[?1049lline %d\\n' % (i, i))",
}
"""Full-screen programs that exit by themselves (0): one batch."""


def test_an_agent_that_enters_the_alternate_screen_and_never_leaves_has_every_line_logged() -> None:
    run, name = batch(_FULL_SCREEN, "never leaves")
    assert not run.hung and run.rc == 0, run.stderr
    lines = [line for line in logged(run, name) if line.startswith("line ")]
    assert lines == [f"line {i}" for i in range(60)]  # 36 scrolled off the 24 rows, 24 left on them
    assert logged(run, name)[0] == "before" and "── screen" in logged(run, name)
    assert ", 0 dropped" in summary(run)


@pytest.mark.parametrize("mode", _MODES)
def test_what_a_full_screen_program_leaves_on_screen_is_logged_when_it_leaves(mode: str) -> None:
    run, name = batch(_FULL_SCREEN, f"leaves {mode}")
    assert not run.hung and run.rc == 0, run.stderr
    lines = logged(run, name)
    start = lines.index("── screen")
    assert lines[start + 1 : start + 11] == ["menu: quit", *[""] * 8, "    cursor-drawn body"]
    assert lines[start + 11] == "after"


def test_the_screen_is_logged_when_the_program_is_killed_on_it() -> None:
    run = agents("w(b'\\x1b[?1049h\\x1b[H\\x1b[2Jprogress 99%\\x1b[3;1Hstill working')\nsys.stdout.flush()\n"
                 "os.kill(os.getpid(), 9)")
    assert not run.hung, run.stderr
    lines = logged(run)
    assert lines[lines.index("── screen") + 1 :][:3] == ["progress 99%", "", "still working"]
    assert "killed" in lines[-1] or "SIGKILL" in lines[-1]


def test_the_screen_is_logged_when_flowplex_is_stopped_while_the_program_waits() -> None:
    run = agents("w(b'\\x1b[?1049h\\x1b[Hwaiting for a key\\x1b[3;1Hq: quit')\nsys.stdout.flush()\ntime.sleep(60)",
                 stop_after_s=2.5)
    assert not run.hung, run.stderr
    lines = logged(run)
    assert lines[lines.index("── screen") + 1 :][:3] == ["waiting for a key", "", "q: quit"]


def test_each_settled_screen_is_logged_and_the_redraws_between_are_counted() -> None:
    # 20 quick redraws, a pause (the screen settles: logged), then a last screen at exit.
    run = agents("w(b'\\x1b[?1049h')\n"
                 "for i in range(20): w(b'\\x1b[H\\x1b[2Jframe %d' % i); sys.stdout.flush(); time.sleep(0.01)\n"
                 "time.sleep(1.6)\nw(b'\\x1b[H\\x1b[2Jlast frame')")
    assert not run.hung and run.rc == 0, run.stderr
    frames = [line for line in logged(run) if line.startswith(("frame", "last"))]
    assert frames == ["frame 19", "last frame"]
    coalesced = int(re.search(r"(\d+) coalesced", summary(run)).group(1))  # type: ignore[union-attr]
    assert coalesced >= 10  # most of the 19 redraws before the pause came in chunks of their own


def test_the_alternate_screen_entered_and_left_repeatedly_logs_every_visit_in_order() -> None:
    run, name = batch(_FULL_SCREEN, "repeatedly")
    assert not run.hung and run.rc == 0, run.stderr
    body = [line for line in logged(run, name) if line.startswith(("visit", "line"))]
    assert body == [x for i in range(5) for x in (f"visit {i}", f"line {i}")]


_UNTERMINATED = {
    "OSC with BEL never sent": b"\x1b]0;a title that never ends",
    "OSC 52 clipboard": b"\x1b]52;c;" + b"QUFB" * 100,
    "DCS": b"\x1bP+q544e",
    "APC": b"\x1b_payload",
    "PM": b"\x1b^payload",
    "SOS": b"\x1bXpayload",
    "8-bit OSC as UTF-8": b"\xc2\x9d0;title",
    "OSC with UTF-8 inside": "\x1b]0;héllo 中文 ".encode(),
}
_CUT = {
    **{case: f"w(b'first\\n' + {start!r})\nfor i in range(700): w(b'line %d\\n' % i)"
       for case, start in _UNTERMINATED.items()},
    "runaway CSI": "w(b'\\x1b[' + b'1;' * 2100 + b'after\\n')\nw(b'next line\\n')",
}
"""Programs whose one escape never ends: one batch, so one cut per agent."""
_CUTS = f"{len(_CUT)} unterminated escapes cut"


@pytest.mark.parametrize("case", list(_UNTERMINATED))
def test_an_unterminated_escape_is_cut_and_the_text_after_it_is_logged(case: str) -> None:
    run, name = batch(_CUT, case)
    assert not run.hung and run.rc == 0, run.stderr
    lines = logged(run, name)
    assert lines[0] == "first"
    numbers = [int(line[5:]) for line in lines if re.fullmatch(r"line \d+", line)]
    # Everything past the first 4 KiB is logged, in order, to the last line.
    assert numbers == list(range(numbers[0], 700)) and numbers[0] * 9 < BOUND
    assert _CUTS in summary(run)  # each agent's escape, cut once


def test_runaway_csi_parameters_are_cut_and_the_text_after_them_is_logged() -> None:
    run, name = batch(_CUT, "runaway CSI")
    assert not run.hung and run.rc == 0, run.stderr
    lines = logged(run, name)
    assert lines[0].endswith(";1;after") and lines[1] == "next line"
    assert _CUTS in summary(run)


def test_an_unterminated_osc_in_a_pane_does_not_swallow_the_rest() -> None:
    script = ("import sys\nw = sys.stdout.buffer.write\nw(b'\\x1b]0;never ends')\n"
              "for i in range(800): w(b'row %d\\n' % i)\nsys.stdout.flush()\nimport time; time.sleep(30)")
    t = Terminal(["--", sys.executable, "-c", script], columns=100, rows=30)
    try:
        t.wait_for(lambda s: "row 799" in pane_lines(s), timeout=15.0)
    finally:
        t.close()
