"""Scrollback in a pane's virtual terminal: bounded history, a scrollable view, search (issue 16).

Everything goes through real pyte emulation: bytes in, cells out, as the panes renderer reads them.
"""

from __future__ import annotations

import re
from itertools import pairwise

import pyte
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flowplex.terminal._vt import BLANK, VirtualTerminal


def numbered(n: int, start: int = 0) -> bytes:
    """Lines ``L<start>`` ... ``L<start + n - 1>``, newline-separated, none after the last."""
    return "\n".join(f"L{i}" for i in range(start, start + n)).encode()


def view(vt: VirtualTerminal) -> list[str]:
    """The text of each row the view shows now."""
    return ["".join(c.data for c in vt.row(y)).rstrip() for y in range(vt.lines)]


def transcript(vt: VirtualTerminal) -> list[str]:
    """Every line kept, history then live screen, read through the view as a user would."""
    offset = vt.view_offset
    vt.scroll_to_live()
    vt.scroll_view(vt.history_len)
    out = []
    while vt.view_offset:
        out.append(view(vt)[0])
        vt.scroll_view(-1)
    out += view(vt)
    vt.scroll_view(offset)
    return out


def test_history_is_bounded_and_keeps_the_newest_lines_in_order() -> None:
    vt = VirtualTerminal(10, 3, newline_mode=True, history=5)
    vt.feed(numbered(20))
    assert vt.history_len == 5
    assert transcript(vt) == [f"L{i}" for i in range(12, 20)]


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(min_value=0, max_value=60),
    history=st.integers(min_value=0, max_value=20),
    lines=st.integers(min_value=1, max_value=6),
    cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=5),
)
def test_history_and_screen_hold_the_last_lines_in_order(n: int, history: int, lines: int, cuts: list[int]) -> None:
    vt = VirtualTerminal(8, lines, newline_mode=True, history=history)
    data = numbered(n)
    bounds = sorted({0, len(data), *(c for c in cuts if c < len(data))})
    for a, b in pairwise(bounds):  # chunk boundaries anywhere, even mid-line
        vt.feed(data[a:b])
    kept = [line for line in transcript(vt) if line]  # a screen not yet full has blank rows
    assert kept == [f"L{i}" for i in range(max(0, n - history - lines), n)]


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(min_value=0, max_value=40),
    back=st.integers(min_value=0, max_value=40),
    more=st.integers(min_value=0, max_value=40),
    lines=st.integers(min_value=1, max_value=5),
)
def test_a_scrolled_back_view_holds_until_its_lines_are_dropped(n: int, back: int, more: int, lines: int) -> None:
    history = 30
    vt = VirtualTerminal(8, lines, newline_mode=True, history=history)
    vt.feed(numbered(n))
    vt.scroll_view(back)
    top, before = vt.view_top, view(vt)
    vt.feed(b"".join(b"\nM%d" % i for i in range(more)))
    first_kept = vt.view_top + vt.view_offset - vt.history_len
    if not vt.view_offset:
        shown = [row for row in view(vt) if row] or [""]  # a screen not yet full has blank rows
        assert shown[-1] == (f"M{more - 1}" if more else f"L{n - 1}" if n else "")
    elif top >= first_kept:
        assert (vt.view_top, view(vt)) == (top, before)
    else:  # the lines it showed were dropped: it shows the oldest kept
        assert vt.view_offset == vt.history_len == history


# Pieces a program writes, without scroll regions or screen switches (those differ from pyte's
# HistoryScreen on purpose, see the tests below).
PIECES = st.sampled_from([
    *"abc xyz.-\n\r\t", "\x1b[31m", "\x1b[0m", "\x1b[2;3H", "\x1b[K", "\x1b[2K", "\x1b[4h", "\x1b[4l",
    "\x1b[?7l", "\x1b[?7h", "\x1bM", "\x1bD", "\x1bE", "中", "é", "hello world, long enough to wrap",
])


@settings(max_examples=80, deadline=None)
@given(st.lists(PIECES, max_size=80).map("".join), st.integers(1, 12), st.integers(1, 5))
def test_history_cells_match_pytes_history_screen(text: str, columns: int, lines: int) -> None:
    ours = VirtualTerminal(columns, lines, history=50)
    ref = pyte.HistoryScreen(columns, lines, history=50)
    ours.feed(text.encode())
    pyte.ByteStream(ref).feed(text.encode())
    kept = [list(line) + [BLANK] * (columns - len(line)) for line in ours.screen.history]
    assert kept == [[line[x] for x in range(columns)] for line in ref.history.top]
    assert ours.screen.display == ref.display


def test_scroll_view_clamps_and_says_whether_it_moved() -> None:
    vt = VirtualTerminal(10, 3, newline_mode=True)
    assert not vt.scroll_view(5)  # nothing in the history yet
    vt.feed(numbered(7))  # L0..L3 in the history, L4..L6 on screen
    vt.dirty.clear()
    assert vt.scroll_view(2) and vt.view_offset == 2
    assert vt.dirty == {0, 1, 2}
    assert view(vt) == ["L2", "L3", "L4"]
    assert vt.scroll_view(100) and vt.view_offset == 4
    assert not vt.scroll_view(1)
    assert view(vt) == ["L0", "L1", "L2"]
    assert vt.scroll_view(-1) and vt.view_offset == 3
    assert vt.scroll_view(-100) and vt.view_offset == 0
    assert not vt.scroll_view(-1)
    assert view(vt) == ["L4", "L5", "L6"]
    vt.scroll_view(3)
    vt.dirty.clear()
    assert vt.scroll_to_live() and not vt.scroll_to_live()
    assert vt.dirty == {0, 1, 2}


def test_the_view_stays_on_its_lines_while_output_arrives() -> None:
    vt = VirtualTerminal(10, 4, newline_mode=True)
    vt.feed(numbered(10))  # L0..L5 in the history, L6..L9 on screen
    vt.scroll_view(2)
    before = view(vt)
    assert before == ["L4", "L5", "L6", "L7"]
    vt.take_scrolled()
    vt.dirty.clear()
    vt.feed(b"\n" + numbered(3, start=10))
    assert view(vt) == before
    assert vt.view_offset == 5
    assert vt.take_scrolled() == 0  # the renderer must not scroll the pane
    assert vt.scroll_to_live()
    assert view(vt) == ["L9", "L10", "L11", "L12"]


def test_dirty_rows_follow_the_view_when_scrolled_back() -> None:
    vt = VirtualTerminal(10, 3, newline_mode=True)
    vt.feed(numbered(5))  # L0, L1 in the history; L2..L4 on screen
    vt.scroll_view(1)  # view: L1 | L2, L3 (screen lines 0, 1)
    vt.dirty.clear()
    vt.feed(b"\x1b[1;1HX")  # screen line 0 is view row 1
    assert vt.dirty == {1}
    assert view(vt) == ["L1", "X2", "L3"]
    vt.dirty.clear()
    vt.feed(b"\x1b[3;1HY")  # screen line 2 is below the view
    assert vt.dirty == set()
    vt.scroll_to_live()
    assert view(vt) == ["X2", "L3", "Y4"]


def test_when_the_history_drops_the_lines_under_the_view_it_shows_the_oldest_kept() -> None:
    vt = VirtualTerminal(10, 2, newline_mode=True, history=4)
    vt.feed(numbered(6))  # L0..L3 in the history
    vt.scroll_view(4)
    assert view(vt) == ["L0", "L1"]
    vt.dirty.clear()
    vt.feed(b"\n" + numbered(2, start=6))  # L0, L1 dropped
    assert vt.view_offset == vt.history_len == 4
    assert view(vt) == ["L2", "L3"]
    assert vt.dirty == {0, 1}


def test_the_cursor_hides_while_scrolled_back() -> None:
    vt = VirtualTerminal(10, 3, newline_mode=True)
    vt.feed(numbered(5))
    assert vt.cursor() == (2, 2, True)
    vt.scroll_view(1)
    assert vt.cursor()[2] is False
    vt.scroll_to_live()
    assert vt.cursor()[2] is True


def test_search_goes_back_then_forward_and_shows_the_match() -> None:
    vt = VirtualTerminal(20, 3, newline_mode=True)
    vt.feed(b"\n".join([b"error one", b"ok", b"ok", b"error two", b"ok", b"ok", b"ok", b"ok"]))
    # lines 0..4 in the history; 5..7 on screen
    assert vt.search("error") == 3
    assert vt.view_offset == 2 and vt.match_line() == 0  # the matched line at the top of the pane
    assert vt.match_span() == (0, 0, 5)
    assert vt.search("error") == 0  # again: the next older one
    assert vt.view_offset == 5 and view(vt)[0] == "error one"
    assert vt.search("error") is None  # nothing older: the view stays
    assert vt.view_offset == 5
    assert vt.search("ok", backwards=False) == 1  # the view shows lines 0..2: it stays
    assert vt.view_offset == 5 and vt.match_line() == 1
    assert vt.search("error", backwards=False) == 3
    assert vt.view_offset == 2 and vt.match_line() == 0
    assert vt.search("two", start=7) == 3


def test_search_on_the_live_screen_keeps_it_live() -> None:
    vt = VirtualTerminal(20, 3, newline_mode=True)
    vt.feed(b"\n".join([b"a", b"b", b"needle x", b"c", b"needle y"]))
    assert vt.search("needle") == 4
    assert vt.view_offset == 0 and vt.match_line() == 2
    assert vt.search("needle") == 2
    assert vt.view_offset == 0 and vt.match_line() == 0
    vt.scroll_view(2)  # the view now shows a, b, needle x
    assert vt.search("needle", backwards=False, start=3) == 4
    assert vt.view_offset == 0 and vt.match_line() == 2


def test_search_uses_smart_case() -> None:
    vt = VirtualTerminal(20, 2, newline_mode=True)
    vt.feed(b"Warning: disk\nok\nok\nok")
    assert vt.search("warning") == 0  # all lowercase: any case matches
    vt.scroll_to_live()
    assert vt.search("WARNING") is None  # a capital: case counts
    assert vt.view_offset == 0
    assert vt.search("Warn") == 0


def test_search_misses_and_bad_text() -> None:
    vt = VirtualTerminal(20, 2, newline_mode=True)
    vt.feed(numbered(6))
    vt.scroll_view(1)
    assert vt.search("nowhere") is None
    assert vt.view_offset == 1 and vt.match_line() is None
    with pytest.raises(ValueError, match=re.escape("search(''): expected the text to look for")):
        vt.search("")


def test_match_span_counts_wide_characters_as_two_cells() -> None:
    vt = VirtualTerminal(20, 2, newline_mode=True)
    vt.feed("中文 find me\nx".encode())
    assert vt.search("find") == 0
    assert vt.match_span() == (0, 5, 9)
    assert "".join(c.data for c in vt.row(0)[5:9]) == "find"


def test_resize_keeps_history_text_and_rows_exactly_wide() -> None:
    vt = VirtualTerminal(12, 3, newline_mode=True)
    vt.feed(b"first line!\nsecond\n\xe4\xb8\xad\xe4\xb8\xad\xe4\xb8\xad\nfourth\nfifth")  # "中中中"
    assert vt.history_len == 2
    vt.resize(5, 3)
    vt.scroll_view(2)
    assert [len(vt.row(y)) for y in range(3)] == [5, 5, 5]
    assert view(vt) == ["first", "secon", "中中"]  # the third 中 is cut whole, not halved
    vt.resize(20, 3)
    assert view(vt)[:2] == ["first line!", "second"]  # history lines keep their text
    assert all(len(vt.row(y)) == 20 for y in range(3))


def test_a_lower_screen_puts_the_lines_it_drops_into_the_history() -> None:
    vt = VirtualTerminal(10, 5, newline_mode=True)
    vt.feed(numbered(5))
    vt.resize(10, 2)
    assert vt.history_len == 3
    assert transcript(vt) == ["L0", "L1", "L2", "L3", "L4"]


def test_a_scroll_region_feeds_the_history_only_when_it_is_the_whole_screen() -> None:
    vt = VirtualTerminal(10, 4, newline_mode=True)
    vt.feed(b"\x1b[1;3r\x1b[3;1H" + numbered(6))  # a status line below a 3-line region
    assert vt.history_len == 0
    vt.feed(b"\x1b[1;4r\x1b[4;1H" + b"\n".join([b"", b"a", b"b"]))
    assert vt.history_len == 2


def test_full_screen_programs_on_the_alternate_screen_leave_the_history_alone() -> None:
    vt = VirtualTerminal(10, 3)
    vt.feed(b"\r\n".join(f"sh{i}".encode() for i in range(5)) + b"$ ")
    assert vt.history_len == 2
    for enter, leave in ((b"\x1b[?1049h", b"\x1b[?1049l"), (b"\x1b[?47h", b"\x1b[?47l")):
        vt.feed(enter + b"\x1b[H\x1b[2J" + b"\r\n".join(f"tui{i}".encode() for i in range(30)))
        assert vt.history_len == 2
        assert "tui29" in view(vt)
        vt.feed(leave)
        assert view(vt) == ["sh2", "sh3", "sh4$"]  # the shell's screen comes back
    vt.feed(b"\x1b[?1049h\x1b[5;5Hxx\x1b[?1049l")
    assert vt.cursor()[:2] == (5, 2)  # 1049 also brings the cursor back
    assert transcript(vt) == ["sh0", "sh1", "sh2", "sh3", "sh4$"]


def test_the_main_screen_comes_back_cut_to_a_size_set_meanwhile() -> None:
    vt = VirtualTerminal(10, 4)
    vt.feed(b"0123456789\r\nline two")
    vt.feed(b"\x1b[?1049hTUI")
    vt.resize(4, 2)
    vt.feed(b"\x1b[?1049l")
    assert view(vt) == ["0123", "line"]
    assert all(len(vt.row(y)) == 4 for y in range(2))


def test_erase_saved_lines_clears_the_history_and_the_view_goes_live() -> None:
    vt = VirtualTerminal(10, 3, newline_mode=True)
    vt.feed(numbered(8))
    vt.scroll_view(3)
    vt.feed(b"\x1b[3J")
    assert vt.history_len == 0 and vt.view_offset == 0
    assert view(vt) == ["L5", "L6", "L7"]  # ED 3 leaves the screen itself alone
    vt.feed(b"\x1b[H\x1b[2J\x1b[3J")  # what `clear` sends
    assert view(vt) == ["", "", ""]


def test_no_history_and_bad_history() -> None:
    vt = VirtualTerminal(10, 2, newline_mode=True, history=0)
    vt.feed(numbered(5))
    assert vt.history_len == 0 and not vt.scroll_view(1)
    assert vt.lines_total == 5 and vt.search("L0") is None and vt.search("L4") == 4
    with pytest.raises(ValueError, match=re.escape("VirtualTerminal(history=-1): expected a number of lines >= 0")):
        VirtualTerminal(10, 2, history=-1)


def test_lines_total_counts_what_the_agent_wrote() -> None:
    vt = VirtualTerminal(10, 3, newline_mode=True, history=2)
    assert vt.lines_total == 0
    vt.feed(b"a\nb\n")
    assert vt.lines_total == 2
    vt.feed(numbered(10))
    assert vt.lines_total == 12  # dropped history lines still count
    assert vt.view_top == 9  # 12 lines, 3 on screen
    vt.scroll_view(2)
    assert vt.view_top == 7 and vt.lines_total == 12


def test_history_rows_pad_with_blank_cells() -> None:
    vt = VirtualTerminal(6, 1, newline_mode=True)
    vt.feed(b"\x1b[31mab\x1b[0m\nc")
    vt.scroll_view(1)
    row = vt.row(0)
    assert [c.data for c in row] == ["a", "b", " ", " ", " ", " "]
    assert row[0].fg == "red" and row[2] == BLANK
