"""Frame encoding: whatever two canvases, replaying the diff turns the old into the new."""

from __future__ import annotations

import pyte
from hypothesis import given, settings
from hypothesis import strategies as st

from flowplex.terminal._diff import FrameEncoder, blank_canvas, sgr
from flowplex.terminal._vt import Cell

W, H = 24, 5
CELLS = st.sampled_from([
    Cell(" "), Cell("a"), Cell("b", fg="red"), Cell("c", bold=True), Cell(" ", bg="blue"), Cell("d", fg="ff8700"),
    Cell("e", reverse=True), Cell("f", underscore=True),
])


def render(canvas: list[list[Cell]]) -> pyte.Screen:
    screen = pyte.Screen(W, H)
    enc = FrameEncoder()
    front = blank_canvas(W, H)
    for y in range(H):
        enc.diff_row(y, canvas[y], front[y], 0, W)
    pyte.Stream(screen).feed(enc.text())
    return screen


def cells_of(screen: pyte.Screen) -> list[list[Cell]]:
    return [[screen.buffer[y][x] for x in range(W)] for y in range(H)]


@settings(max_examples=60)
@given(st.lists(st.lists(CELLS, min_size=W, max_size=W), min_size=H, max_size=H),
       st.lists(st.lists(CELLS, min_size=W, max_size=W), min_size=H, max_size=H))
def test_replaying_the_diff_gives_the_new_frame(old: list[list[Cell]], new: list[list[Cell]]) -> None:
    screen = render(old)
    assert cells_of(screen) == old
    front = [row[:] for row in old]
    enc = FrameEncoder()
    for y in range(H):
        enc.diff_row(y, new[y], front[y], 0, W)
    pyte.Stream(screen).feed(enc.text())
    assert cells_of(screen) == new
    assert front == new


def test_unchanged_rows_cost_nothing_and_gaps_are_jumped() -> None:
    row = [Cell(ch) for ch in "x" * W]
    changed = row[:]
    changed[2] = Cell("A")
    changed[20] = Cell("B")
    enc = FrameEncoder()
    front = [row[:] for _ in range(H)]
    back = [row[:] for _ in range(H)]
    back[3] = changed
    for y in range(H):
        enc.diff_row(y, back[y], front[y], 0, W)
    assert enc.text() == "\x1b[4;3H\x1b[0mA\x1b[4;21HB"


def test_trailing_blanks_are_erased_not_written() -> None:
    front = [Cell(ch) for ch in "long line of text here!!"]
    back = [Cell(ch) for ch in "short"] + [Cell(" ")] * (W - 5)
    enc = FrameEncoder()
    enc.diff_row(0, back, front, 0, W)
    assert enc.text() == "\x1b[1;1H\x1b[0mshort\x1b[19X"


def test_wide_characters_are_never_cut() -> None:
    front = [Cell("x")] * 6
    back = [Cell("a"), Cell("中"), Cell(""), Cell("x"), Cell("x"), Cell("x")]
    enc = FrameEncoder()
    enc.diff_row(0, back, front, 2, 6)  # the change starts on the right half
    assert enc.text().endswith("中")
    assert "\x1b[1;2H" in enc.text()


def test_scroll_region_moves_front_rows() -> None:
    front = [[Cell(str(y))] * 4 for y in range(5)]
    enc = FrameEncoder()
    enc.scroll_up(front, 1, 3, 1)
    assert enc.text() == "\x1b[0m\x1b[2;4r\x1b[4;1H\x1bD\x1b[r"
    assert [row[0].data for row in front] == ["0", "2", "3", " ", "4"]


def test_sgr_codes() -> None:
    assert sgr(("default", "default", False, False, False, False, False, False)) == "\x1b[0m"
    assert sgr(("brightred", "blue", False, True, True, True, True, True)) == "\x1b[0;3;4;5;7;9;91;44m"
    assert sgr(("ff8700", "123456", False, False, False, False, False, False)) == "\x1b[0;38;5;208;48;2;18;52;86m"
    assert sgr(("red", "green", True, False, False, False, False, False), False) == "\x1b[0;1m"
