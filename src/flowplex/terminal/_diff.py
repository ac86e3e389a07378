"""Frame encoding: the difference between two canvases of cells, as terminal bytes.

A canvas is a list of rows, each a list of :data:`~flowplex.terminal._vt.Cell`. Only changed
runs are written, each after an absolute cursor move (``CSI row;col H``), with an SGR sequence
only where the style changes; a trailing run of blanks is erased with ``ECH`` instead of being
written out. Full-width scrolling regions move with ``DECSTBM`` + ``IND`` instead of being
redrawn.
"""

from __future__ import annotations

from functools import lru_cache
from itertools import groupby
from operator import eq, itemgetter
from typing import Final

from pyte import graphics

from ._vt import BLANK, DATA, Cell

__all__ = ["FrameEncoder", "Canvas", "blank_canvas", "sgr"]

Canvas = list[list[Cell]]
STYLE: Final = itemgetter(1, 2, 3, 4, 5, 6, 7, 8)
"""The style part of a cell: (fg, bg, bold, italics, underscore, strikethrough, reverse, blink)."""
DEFAULT_STYLE: Final = STYLE(BLANK)
_UNKNOWN: Final = Cell("\x00")
"""A cell that matches nothing: marks terminal content we do not know (after a resize)."""
_MIN_GAP: Final = 12
"""Unchanged cells inside a changed run that make it cheaper to jump than to rewrite."""
_GAP: Final = b"\x01" * _MIN_GAP
_MIN_ECH: Final = 5
"""Trailing blanks from which ``ESC[nX`` is shorter than writing them."""

_FG: Final = {name: code for code, name in {**graphics.FG_ANSI, **graphics.FG_AIXTERM}.items() if code != 39}
_BG: Final = {name: code for code, name in {**graphics.BG_ANSI, **graphics.BG_AIXTERM}.items() if code != 49}
_INDEX_256: Final = {hexcode: i for i, hexcode in reversed(list(enumerate(graphics.FG_BG_256)))}


def blank_canvas(columns: int, rows: int, cell: Cell = BLANK) -> Canvas:
    """A ``rows x columns`` canvas filled with ``cell``."""
    return [[cell] * columns for _ in range(rows)]


def unknown_canvas(columns: int, rows: int) -> Canvas:
    """A canvas that differs from every real frame (the terminal's content is unknown)."""
    return blank_canvas(columns, rows, _UNKNOWN)


@lru_cache(maxsize=1024)
def sgr(style: tuple[object, ...], colour: bool = True) -> str:
    """The SGR sequence that selects ``style`` from any previous state (it starts with a reset).

    >>> sgr(("red", "default", True, False, False, False, False, False))
    '\\x1b[0;1;31m'
    """
    fg, bg, bold, italics, underscore, strike, reverse, blink = style
    codes = ["0"]
    if bold:
        codes.append("1")
    if italics:
        codes.append("3")
    if underscore:
        codes.append("4")
    if blink:
        codes.append("5")
    if reverse:
        codes.append("7")
    if strike:
        codes.append("9")
    if colour:
        codes.extend(_colour(str(fg), _FG, 38))
        codes.extend(_colour(str(bg), _BG, 48))
    return "\x1b[" + ";".join(codes) + "m"


def _colour(name: str, table: dict[str, int], extended: int) -> list[str]:
    if name == "default":
        return []
    code = table.get(name)
    if code is not None:
        return [str(code)]
    index = _INDEX_256.get(name.lower())
    if index is not None:
        return [f"{extended};5;{index}"]
    if len(name) == 6:
        try:
            r, g, b = int(name[0:2], 16), int(name[2:4], 16), int(name[4:6], 16)
        except ValueError:
            return []
        return [f"{extended};2;{r};{g};{b}"]
    return []


class FrameEncoder:
    """Builds one frame: cursor moves, SGR changes and text for the changed runs.

    Tracks where the real cursor is and which style is active, so that neither is repeated.
    One encoder per frame; the style may be carried over from the previous frame.
    """

    __slots__ = ("_colour", "_cx", "_cy", "_style", "cells_written", "out")

    def __init__(self, *, colour: bool = True, style: tuple[object, ...] | None = None) -> None:
        self.out: list[str] = []
        self._cx = -1
        self._cy = -1
        self._style = style
        self._colour = colour
        self.cells_written = 0

    @property
    def style(self) -> tuple[object, ...] | None:
        """The SGR style the terminal is left in (None: unknown); the next frame starts from it,
        since nothing else writes to the terminal in between."""
        return self._style

    def raw(self, text: str) -> None:
        """Append a control sequence that leaves cursor position and style unknown."""
        self.out.append(text)
        self._cx = self._cy = -1
        self._style = None

    def move(self, x: int, y: int) -> None:
        """Put the cursor at column ``x``, row ``y`` (0-based)."""
        if x != self._cx or y != self._cy:
            self.out.append(f"\x1b[{y + 1};{x + 1}H")
            self._cx, self._cy = x, y

    def scroll_up(self, front: Canvas, top: int, bottom: int, count: int) -> None:
        """Scroll full-width rows ``top..bottom`` up by ``count`` on the terminal and in ``front``.

        The rows that scroll in are blank (erased with the default background).
        """
        self._set_style(DEFAULT_STYLE)
        self.out.append(f"\x1b[{top + 1};{bottom + 1}r\x1b[{bottom + 1};1H" + "\x1bD" * count + "\x1b[r")
        self._cx = self._cy = 0  # DECSTBM homes the cursor
        width = len(front[top])
        del front[top : top + count]
        for _ in range(count):
            front.insert(bottom - count + 1, [BLANK] * width)

    def diff_row(self, y: int, back: list[Cell], front: list[Cell], x0: int, x1: int) -> None:
        """Write the cells of ``back[x0:x1]`` that differ from ``front``; update ``front``."""
        new = back[x0:x1]
        old = front[x0:x1]
        if new == old:
            return
        # One byte per cell, 1 where unchanged: the scans below run in C.
        same = bytes(map(eq, new, old))
        a = same.find(0)
        b = same.rfind(0) + 1
        start = a
        # Split the changed stretch where a long unchanged gap is cheaper to jump over.
        while True:
            gap = same.find(_GAP, start, b)
            if gap < 0:
                break
            self._span(y, back, x0 + start, x0 + gap)
            start = same.find(0, gap, b)
        self._span(y, back, x0 + start, x0 + b)
        front[x0 + a : x0 + b] = new[a:b]

    def _span(self, y: int, row: list[Cell], a: int, b: int) -> None:
        if a > 0 and row[a].data == "":
            a -= 1  # never start on the right half of a wide character
        if b < len(row) and row[b].data == "" and b > a:
            b += 1  # nor cut one in two at the end
        b = min(b, len(row))
        if a >= b:
            return
        self.move(a, y)
        cells = row[a:b]
        self.cells_written += len(cells)
        styles = list(map(STYLE, cells))
        if styles.count(styles[0]) == len(styles):  # one style, the common case (compared in C)
            advanced = self._run(cells, styles[0], last=True)
        else:
            runs = [(style, list(group)) for style, group in groupby(cells, STYLE)]
            advanced = 0
            last = len(runs) - 1
            for i, (style, run) in enumerate(runs):
                advanced += self._run(run, style, last=i == last)
        self._cx = a + advanced

    def _run(self, cells: list[Cell], style: tuple[object, ...], *, last: bool) -> int:
        """Write one run of equally styled cells; returns how far the cursor moved."""
        text = "".join(map(DATA, cells))
        if last and len(text) >= _MIN_ECH and text[-1] == " " and _erasable(style):
            body = text.rstrip(" ")
            blanks = len(text) - len(body)
            if blanks >= _MIN_ECH:
                if body:
                    self._set_style(style)
                    self.out.append(body)
                self._set_style(DEFAULT_STYLE)
                self.out.append(f"\x1b[{blanks}X")  # erase; the cursor stays before the blanks
                return len(cells) - blanks
        self._set_style(style)
        self.out.append(text)
        return len(cells)

    def _set_style(self, style: tuple[object, ...]) -> None:
        if style != self._style:
            self.out.append(sgr(style, self._colour))
            self._style = style

    def text(self) -> str:
        """The frame so far."""
        return "".join(self.out)


def _erasable(style: tuple[object, ...]) -> bool:
    """Blanks in this style look like erased cells (default background, nothing drawn)."""
    _fg, bg, _bold, _italics, underscore, strike, reverse, _blink = style
    return bg == "default" and not (underscore or strike or reverse)
