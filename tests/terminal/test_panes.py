"""Panes mode, asserted on what a terminal shows: output replayed into pyte."""

from __future__ import annotations

import io
import os
import signal
import threading
import time

import pyte
import pytest

from flowplex.terminal import PaneRenderer, TermCaps, View, Writer
from flowplex.terminal._layout import Rect, plan_layout
from flowplex.transport import AgentType

from .conftest import SYNC_BEGIN, SYNC_END, FakeClock, Term, replay, until_exit
from .test_logmode import Chunks

SIDES = "│┃"  # a pane's side border (heavy when focused)


def pane_rect(display: PaneRenderer, index: int, caps: TermCaps) -> Rect:
    layout = plan_layout(len(display.agents()), caps.columns, caps.rows, display.view, display.focus)
    rect = layout.rect_of(index)
    assert rect is not None
    return rect


def inside(screen: pyte.Screen, rect: Rect) -> list[str]:
    inner = rect.inner
    return [screen.display[inner.y + y][inner.x : inner.x + inner.w] for y in range(inner.h)]


def expected(text: str, rect: Rect) -> list[str]:
    ref = pyte.Screen(rect.inner.w, rect.inner.h)
    ref.set_mode(pyte.modes.LNM)
    pyte.Stream(ref).feed(text)
    return list(ref.display)


def test_each_agent_in_its_own_pane(panes: tuple[PaneRenderer, Term]) -> None:
    display, term = panes
    texts = {1: "planner: step one\nstep two\n", 2: "coder: def f():\n    return 1\n", 3: "x" * 130}
    with display:
        for sid, text in texts.items():
            display.feed(sid, text, name=f"agent{sid}", agent_type=AgentType(sid))
    screen = term.screen()
    for index, (sid, text) in enumerate(texts.items()):
        rect = pane_rect(display, index, term.caps)
        assert inside(screen, rect) == expected(text, rect)
        top = screen.display[rect.y][rect.x : rect.x + rect.w]
        assert f" {index + 1} agent{sid} · {AgentType(sid).name.lower()} " in top
    assert screen.display[term.caps.rows - 1].startswith(" flowplex · 3 agents · grid")


def test_every_frame_is_one_synchronized_write_on_the_alternate_screen() -> None:
    sink = Chunks()
    caps = TermCaps(is_tty=True, columns=80, rows=24, colour=True)
    display = PaneRenderer(Writer(sink), caps, keys=False)
    with display:
        for i in range(30):
            display.feed(1 + i % 3, f"line {i}\r\n$ ", name=f"a{i % 3}", pty=True)  # programs: cursor shown
            if i % 7 == 0:
                assert display.flush()
    enter, *frames, leave = sink.writes
    assert enter.startswith(b"\x1b[?1049h\x1b[?25l")
    assert leave == b"\x1b[0m\x1b[?25h\x1b[?1049l"
    assert len(frames) == display.stats().frames >= 2
    cursor_shown = False
    for frame in frames:
        assert frame.startswith(SYNC_BEGIN + (b"\x1b[?25l" if cursor_shown else b""))  # hidden while drawing
        assert frame.endswith(SYNC_END)
        assert frame.count(SYNC_BEGIN) == 1 and frame.count(SYNC_END) == 1
        assert b"\x1b[2J" not in frame or frame is frames[0]
        cursor_shown = frame.endswith(b"\x1b[?25h" + SYNC_END)
    assert cursor_shown


def test_no_row_mixes_two_agents(panes: tuple[PaneRenderer, Term]) -> None:
    display, term = panes
    letters = "ABCD"
    with display:
        for round_ in range(50):
            for sid, letter in enumerate(letters):
                display.feed(sid, letter * (round_ % 17 + 1) + ("\n" if round_ % 3 else ""), name=letter)
            if round_ % 10 == 0:
                display.flush()
    screen = term.screen()
    for index, letter in enumerate(letters):
        rows = inside(screen, pane_rect(display, index, term.caps))
        assert any(letter in row for row in rows)
        for row in rows:
            assert set(row) <= {letter, " "}, (letter, row)


def test_hostile_output_stays_inside_its_pane(panes: tuple[PaneRenderer, Term]) -> None:
    display, term = panes
    attack = (
        b"\x1b]52;c;aGVsbG8gZnJvbSBtYWxsb3J5\x07"  # clipboard
        b"\x1b]0;pwned\x07\x1b]2;pwned\x1b\\"  # title
        b"\x1b[?1049h\x1b[?1000h\x1b[?2004h\x1b[?25l"  # alt screen, mouse, bracketed paste, cursor
        b"\x1b[2J\x1b[3J\x1b[1;1HTOPLEFT"  # clear and home
        b"\x1b[999;999HCORNER"  # far away
        b"\x1bP+q544e\x1b\\\x1b[6n\x1b[c\x05"  # queries that would make a terminal answer
        b"\x1b#8"  # DECALN: fill the screen with E
        b"\x1b[?3h"  # 132-column mode
        b"\x1bc"  # full reset
        b"still here\r\n"
    )
    with display:
        display.feed(1, "innocent bystander\n", name="good")
        display.flush()
        display.feed(2, attack, name="mallory", agent_type=AgentType.ERROR, pty=True)
    data = until_exit(term.data)
    for forbidden in (b"\x1b]", b"\x1bP", b"\x1b[?1000h", b"\x1b[?2004h", b"\x1bc", b"\x1b#8", b"\x1b[6n", b"\x1b[c",
                      b"\x05", b"\x1b[3J", b"\x1b[?3h"):
        assert forbidden not in data, forbidden
    assert data.count(b"\x1b[?1049h") == 1  # ours, at the start
    screen = term.screen()
    good = pane_rect(display, 0, term.caps)
    bad = pane_rect(display, 1, term.caps)
    assert inside(screen, good)[0].startswith("innocent bystander")
    assert inside(screen, bad)[0].startswith("still here")
    # Borders of both panes are intact; nothing was written outside the panes and status bar.
    for rect in (good, bad):
        for y in range(rect.y + 1, rect.y + rect.h - 1):
            assert screen.display[y][rect.x] in SIDES and screen.display[y][rect.x + rect.w - 1] in SIDES


def test_colours_of_agent_text_and_borders(panes: tuple[PaneRenderer, Term]) -> None:
    display, term = panes
    with display:
        display.feed(1, "\x1b[1;31mred bold\x1b[0m normal \x1b[38;5;208morange\x1b[0m \x1b[38;2;1;2;3mrgb\n",
                     name="c", agent_type=AgentType.ASSISTANT)
        display.feed(2, "x\n", name="e", agent_type=AgentType.ERROR)
    screen = term.screen()
    rect = pane_rect(display, 0, term.caps)
    row = screen.buffer[rect.inner.y]
    x = rect.inner.x
    assert (row[x].data, row[x].fg, row[x].bold) == ("r", "red", True)
    assert (row[x + 9].data, row[x + 9].fg, row[x + 9].bold) == ("n", "default", False)
    assert row[x + 16].fg == "ff8700"  # 256-colour 208
    assert row[x + 23].fg == "010203"
    assert screen.buffer[rect.y][rect.x].fg == "cyan"  # the focused assistant pane's border
    other = pane_rect(display, 1, term.caps)
    assert screen.buffer[other.y][other.x].fg == "red"


def test_wide_characters_keep_borders_aligned(panes: tuple[PaneRenderer, Term]) -> None:
    display, term = panes
    rect_w = None
    with display:
        display.feed(1, "中文字符和表情 🙂 ✓ done\n" + "漢" * 60 + "\n" + "e\u0301 combining, zero\u200bwidth\n",
                     name="wide")
        display.feed(2, "narrow\n", name="n")
        display.flush()
        rect_w = pane_rect(display, 0, term.caps)
    screen = term.screen()
    for rect in (rect_w, pane_rect(display, 1, term.caps)):
        assert rect is not None
        for y in range(rect.y + 1, rect.y + rect.h - 1):
            row = screen.buffer[y]  # by column: pyte's display strings skip wide characters' right halves
            assert row[rect.x].data in SIDES and row[rect.x + rect.w - 1].data in SIDES, screen.display[y]
    assert inside(screen, rect_w)[0].startswith("中文字符和表情")


def test_resize_by_a_real_sigwinch() -> None:
    out = io.BytesIO()
    size = [100, 30]
    caps = TermCaps(is_tty=True, columns=100, rows=30, colour=True)
    display = PaneRenderer(Writer(out), caps, keys=False, size_fn=lambda: (size[0], size[1]))
    with display:
        for sid in range(3):
            display.feed(sid, f"agent {sid} says hello\n", name=f"a{sid}")
        assert display.flush()
        before = len(out.getvalue())
        old_size = display.pane_size(0)
        size[:] = [60, 20]
        os.kill(os.getpid(), signal.SIGWINCH)
        deadline = time.monotonic() + 5
        while display.stats().resizes == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert display.stats().resizes == 1
        assert display.flush()
        assert display.pane_size(0) != old_size
    after = out.getvalue()[before:]
    assert after.startswith(SYNC_BEGIN + b"\x1b[0m\x1b[H\x1b[2J")  # a full redraw at the new size
    screen = replay(until_exit(after), 60, 20)
    small = TermCaps(is_tty=True, columns=60, rows=20)
    for index in range(3):
        rect = pane_rect(display, index, small)
        assert inside(screen, rect) == expected(f"agent {index} says hello\n", rect)
    assert screen.display[19].startswith(" flowplex · 3 agents")


def test_keys_focus_zoom_ticker_and_unread_counters(panes: tuple[PaneRenderer, Term]) -> None:
    display, term = panes
    with display:
        for sid in range(4):
            display.feed(sid, f"hello from {sid}\n", name=f"n{sid}")
        display.handle_key("z")  # zoom the focused (first) agent
        assert display.flush()
        display.feed(2, "one\ntwo\nthree\n")
        assert display.flush()
        assert "3 n2 +4" in term.lines()[-1]  # hidden agents count unread lines
        display.handle_key("3")
        assert display.flush()
        screen = term.screen()
        assert display.view is View.ZOOM and display.focus == 2
        assert screen.display[1].startswith("┃hello from 2") and screen.display[4].startswith("┃three")
        assert "+4" not in screen.display[-1]
        display.handle_key("tab")
        assert display.focus == 3
        display.handle_key("btab")
        display.handle_key("btab")
        assert display.focus == 1
        display.handle_key("t")
        assert display.flush()
        ticker = term.lines()
        assert ticker[0].startswith(" 1 n0") and ticker[0].rstrip().endswith("hello from 0")
        assert ticker[2].rstrip().endswith("three")
        display.handle_key("g")
        assert display.view is View.GRID
        assert not display.quit_requested.is_set()
        display.handle_key("q")
        assert display.quit_requested.is_set()


def test_focused_pane_shows_the_cursor(panes: tuple[PaneRenderer, Term]) -> None:
    display, term = panes
    with display:
        display.feed(1, "prompt> ", name="shell", pty=True)
        assert display.flush()
        frame = term.data[term.data.rfind(SYNC_BEGIN) :]
    rect = pane_rect(display, 0, term.caps)
    assert frame.endswith(f"\x1b[{rect.inner.y + 1};{rect.inner.x + 9}H\x1b[?25h".encode() + SYNC_END)


def test_flood_control_defers_background_repaints(clock: FakeClock) -> None:
    out = io.BytesIO()
    caps = TermCaps(is_tty=True, columns=80, rows=20, colour=True)
    display = PaneRenderer(Writer(out), caps, keys=False, flood_fps=5.0, clock=clock)
    with display:
        display.feed(1, "focused\n", name="main")
        display.feed(2, "".join(f"bg {i}\n" for i in range(40)), name="bg")
        assert display.flush()
        display.feed(2, "".join(f"more {i}\n" for i in range(40)))
        display.feed(1, "".join(f"fg {i}\n" for i in range(40)))
        assert display.flush()
        assert display.stats().deferred_repaints >= 1
        screen = term_screen(out, caps)
        bg, fg = pane_rect(display, 1, caps), pane_rect(display, 0, caps)
        assert inside(screen, bg)[-2].startswith("bg 39")  # not yet repainted
        assert inside(screen, fg)[-2].startswith("fg 39")  # the focused pane never waits
        clock.advance(0.25)
        assert display.flush()
        assert inside(term_screen(out, caps), bg)[-2].startswith("more 39")


def term_screen(out: io.BytesIO, caps: TermCaps) -> pyte.Screen:
    return replay(until_exit(out.getvalue()), caps.columns, caps.rows)


def test_pending_output_is_bounded_and_drops_are_counted() -> None:
    out = io.BytesIO()
    caps = TermCaps(is_tty=True, columns=80, rows=20, colour=True)
    display = PaneRenderer(Writer(out), caps, keys=False, max_pending_bytes=1000)
    for i in range(500):  # nothing renders before start: the buffer must stay bounded
        display.feed(1, f"line {i:04d}\n", name="flood")
    st = display.stats()
    assert 0 < st.dropped_bytes <= 500 * 10
    assert st.bytes_in == 5000
    with display:
        pass
    rect = pane_rect(display, 0, caps)
    assert inside(term_screen(out, caps), rect)[-2].startswith("line 0499")


def test_frame_rate_is_capped() -> None:
    out = io.BytesIO()
    caps = TermCaps(is_tty=True, columns=80, rows=20, colour=True)
    display = PaneRenderer(Writer(out), caps, keys=False, fps=20)
    stop = threading.Event()

    def agent() -> None:
        i = 0
        while not stop.is_set():
            display.feed(1, f"{i} ", name="fast")
            i += 1
            time.sleep(0.0005)

    with display:
        worker = threading.Thread(target=agent)
        start = time.monotonic()
        worker.start()
        time.sleep(0.5)
        stop.set()
        worker.join()
        elapsed = time.monotonic() - start
    st = display.stats()
    assert st.messages > 3 * st.frames  # updates coalesced into frames
    assert st.frames <= 20 * elapsed + 3
    assert st.coalesced > 0


def test_full_width_pane_scrolls_with_a_scroll_region() -> None:
    out = io.BytesIO()
    caps = TermCaps(is_tty=True, columns=60, rows=12, colour=True)
    display = PaneRenderer(Writer(out), caps, keys=False)
    lines = [f"line {i}" for i in range(40)]
    with display:
        display.feed(1, "".join(line + "\n" for line in lines[:20]), name="solo")
        assert display.flush()
        before = len(out.getvalue())
        display.feed(1, lines[20] + "\n")
        assert display.flush()
        scroll_frame = out.getvalue()[before:]
        for line in lines[21:]:
            display.feed(1, line + "\n")
            display.flush()
    assert b"\x1b[2;10r" in scroll_frame and b"\x1bD" in scroll_frame
    assert len(scroll_frame) < 120  # one new line, not a repaint of the pane
    screen = term_screen(out, caps)
    rect = pane_rect(display, 0, caps)
    assert inside(screen, rect) == expected("".join(line + "\n" for line in lines), rect)


def test_end_of_stream_is_shown(panes: tuple[PaneRenderer, Term]) -> None:
    display, term = panes
    with display:
        display.feed(1, "working\n", name="job")
        display.end_stream(1, "exit 2", ok=False)
    screen = term.screen()
    rect = pane_rect(display, 0, term.caps)
    assert inside(screen, rect)[1].startswith("── exit 2")
    assert "✗ exit 2" in screen.display[rect.y]


@pytest.mark.parametrize("flood_fps", [0, -2])
def test_bad_flood_fps_is_refused(flood_fps: float) -> None:
    with pytest.raises(ValueError, match="flood_fps"):
        PaneRenderer(Writer(io.BytesIO()), TermCaps(is_tty=True), flood_fps=flood_fps)
