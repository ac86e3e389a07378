"""The per-agent virtual terminal: pyte, a fast ASCII path, safe cells."""

from __future__ import annotations

import pyte
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flowplex.terminal._vt import VirtualTerminal, safe_cells

PIECES = st.sampled_from([
    *"abc xyz.-\n\r\t",
    "\x1b[31m", "\x1b[0m", "\x1b[2;3H", "\x1b[K", "\x1b[4h", "\x1b[4l", "\x1b(0", "\x1b(B", "\x1b[?7l",
    "\x1b[?7h", "\x1b[2;3r", "\x1bM", "中", "é", "hello world, long enough to wrap",
])
TEXT = st.lists(PIECES, max_size=60).map("".join)


@settings(max_examples=80)
@given(TEXT, st.integers(min_value=1, max_value=12), st.integers(min_value=1, max_value=6))
def test_fast_path_draws_exactly_like_pyte(text: str, columns: int, lines: int) -> None:
    ours = VirtualTerminal(columns, lines)
    ref = pyte.Screen(columns, lines)
    ours.feed(text.encode())
    pyte.ByteStream(ref).feed(text.encode())
    assert ours.screen.display == ref.display
    assert (ours.screen.cursor.x, ours.screen.cursor.y) == (ref.cursor.x, ref.cursor.y)
    for y in range(lines):
        assert [ours.screen.buffer[y][x] for x in range(columns)] == [ref.buffer[y][x] for x in range(columns)]


def test_rows_are_safe_and_exactly_wide() -> None:
    vt = VirtualTerminal(5, 2)
    vt.feed("abcd中".encode())  # the wide character does not fit in the last column: pyte wraps it
    vt.feed(b"\r\n\xc2\x85x")  # C1 NEL decoded from UTF-8
    rows = [vt.row(y) for y in range(2)]
    assert all(len(r) == 5 for r in rows)
    for row in rows:
        for cell in row:
            assert cell.data == "" or cell.data.isprintable()


def test_safe_cells_fix_what_a_terminal_could_misread() -> None:
    from flowplex.terminal._vt import Cell

    row = [Cell("a"), Cell(""), Cell("中"), Cell(""), Cell("\x07"), Cell("中")]
    fixed = safe_cells(row)
    assert [c.data for c in fixed] == ["a", " ", "中", "", "?", " "]  # lone halves and cut wide chars go


def test_newline_mode_for_text_agents() -> None:
    text = VirtualTerminal(10, 3, newline_mode=True)
    pty = VirtualTerminal(10, 3)
    text.feed(b"ab\ncd")
    pty.feed(b"ab\ncd")
    assert text.screen.display[1].startswith("cd")
    assert pty.screen.display[1].startswith("  cd")


def test_resize_keeps_the_text_at_the_top() -> None:
    vt = VirtualTerminal(20, 10, newline_mode=True)
    vt.feed(b"first line\nsecond")
    vt.resize(8, 4)
    assert vt.screen.display == ["first li", "second  ", "        ", "        "]
    vt.feed(b" more")
    assert vt.screen.display[1] == "second m"
    tall = VirtualTerminal(10, 6, newline_mode=True)
    tall.feed(b"\n".join(f"l{i}".encode() for i in range(6)))
    tall.resize(10, 3)  # the cursor is on the last line: keep the bottom
    assert [line.strip() for line in tall.screen.display] == ["l3", "l4", "l5"]


def test_deccolm_cannot_widen_the_pane() -> None:
    vt = VirtualTerminal(20, 4)
    vt.feed(b"\x1b[?3h")
    assert vt.columns == 20


def test_scroll_counter_and_ticker_text() -> None:
    vt = VirtualTerminal(10, 3, newline_mode=True)
    vt.feed(b"a\nb\nc\nd\ne\n")
    assert vt.take_scrolled() == 3
    assert vt.take_scrolled() == 0
    assert vt.last_text() == "e"


# -- bounds: escapes whose end never comes, in a pane -------------------------------------------------


def screen_text(vt: VirtualTerminal) -> str:
    return "\n".join(vt.screen.display)


@pytest.mark.parametrize("start", [b"\x1b]0;", b"\x1bP", b"\x1b_", b"\x1b^", b"\x1bX", b"\xc2\x9d"])
def test_an_unterminated_string_does_not_swallow_the_rest_of_a_pane(start: bytes) -> None:
    vt = VirtualTerminal(40, 5)
    vt.feed(b"before\r\n" + start + b"never ends ")
    vt.feed(b"." * 5000)
    vt.feed(b"\r\nafter the bound\r\n")
    lines = [line.rstrip() for line in vt.screen.display]
    assert "after the bound" in lines and vt.cut == 1


def test_a_pane_never_draws_a_dcs_or_apc_payload() -> None:
    vt = VirtualTerminal(40, 3)
    vt.feed(b"a\x1bP+q544e\x1b\\b\x1b_hidden\x1b\\c\x1b]0;title\x07d")
    assert vt.screen.display[0].rstrip() == "abcd"  # pyte alone draws "+q544e" and "hidden"


def test_a_csi_with_thousands_of_digits_does_not_lose_the_rest_of_the_chunk() -> None:
    vt = VirtualTerminal(40, 3)
    vt.feed(b"\x1b[" + b"9" * 4500 + b"mstill here")  # pyte alone fails on int() of 4500 digits
    assert "still here" in screen_text(vt) and vt.errors == 0
    assert vt.cut == 1
    vt = VirtualTerminal(40, 3)
    vt.feed(b"\x1b[" + b"1;" * 1500 + b"31mred")  # a long but bounded list: one sequence
    assert vt.screen.buffer[0][0].fg == "red" and vt.screen.display[0].rstrip() == "red" and vt.cut == 0


@pytest.mark.parametrize("cut", range(1, 24))
def test_escapes_split_across_reads_at_every_byte_draw_the_same(cut: int) -> None:
    data = "x\x1b]0;tïtle\x1b\\y\x1b[1;31mé\x1b[0m\x1bP1\x07z".encode()
    whole, split = VirtualTerminal(20, 2), VirtualTerminal(20, 2)
    whole.feed(data)
    split.feed(data[:cut])
    split.feed(data[cut:])
    assert split.screen.display == whole.screen.display == ["xyéz" + " " * 16, " " * 20]
    assert split.row(0)[2].fg == "red"
