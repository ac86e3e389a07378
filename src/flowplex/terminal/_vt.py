"""``VirtualTerminal``: one agent's emulated screen (pyte), and the cells it may show.

Panes mode never forwards an agent's bytes to the real terminal: they drive a ``pyte`` screen
(a real VT emulator) the size of the agent's pane, and only the resulting *cells* are drawn.
Clipboard writes, title changes, cursor moves, mode switches and screen clears therefore act
on the pane's own virtual screen and nowhere else. Cells are checked once more on the way out:
a cell may hold only printable text whose width matches what pyte laid out.

pyte's ``draw`` handles one character at a time; :class:`_FastScreen` adds a fast path for
runs of printable ASCII in the default modes (the bulk of agent output) that writes whole runs
into the line at once, with identical results.
"""

from __future__ import annotations

import unicodedata
from functools import lru_cache
from itertools import repeat
from operator import itemgetter
from typing import Any, Final

import pyte
from pyte import charsets as cs
from pyte import modes as mo
from pyte.screens import Char
from wcwidth import wcswidth, wcwidth

__all__ = ["BLANK", "DATA", "Cell", "VirtualTerminal"]

Cell = Char
"""One on-screen cell: ``data`` (the character; ``""`` for the right half of a wide one),
``fg``, ``bg``, ``bold``, ``italics``, ``underscore``, ``strikethrough``, ``reverse``, ``blink``."""

BLANK: Final = Char(" ")
DATA: Final = itemgetter(0)
_DECCOLM_PRIVATE: Final = 3
_MAX_CACHED_STYLES: Final = 256
_ZWJ: Final = "\u200d"


class _CellCache(dict[str, Char]):
    """Character → cell in one style, made on first use."""

    __slots__ = ("attrs",)

    def __init__(self, attrs: Char) -> None:
        super().__init__()
        self.attrs = attrs

    def __missing__(self, ch: str) -> Char:
        cell: Char = self.attrs._replace(data=ch)
        self[ch] = cell
        return cell


class _FastScreen(pyte.Screen):
    """A pyte screen with a fast ASCII path, a scroll counter, and no 132-column switch."""

    def __init__(self, columns: int, lines: int) -> None:
        self._cells: dict[Char, _CellCache] = {}
        self.scrolled = 0
        """Whole-screen scroll-ups since the renderer last looked (it resets this)."""
        super().__init__(columns, lines)

    def draw(self, data: str) -> None:
        if (
            self.charset
            or self.g0_charset is not cs.LAT1_MAP
            or mo.IRM in self.mode
            or mo.DECAWM not in self.mode
            or not data.isascii()
            or not data.isprintable()
        ):
            self._draw_unicode(data)
            return
        attrs = self.cursor.attrs
        cells = self._cells.get(attrs)
        if cells is None:
            if len(self._cells) >= _MAX_CACHED_STYLES:
                self._cells.clear()
            cells = self._cells[attrs] = _CellCache(attrs)
        cell_of = cells.__getitem__
        columns = self.columns
        cursor = self.cursor
        pos = 0
        n = len(data)
        while pos < n:
            if cursor.x >= columns:  # pending wrap, exactly as pyte's draw does it
                self.dirty.add(cursor.y)
                self.carriage_return()
                self.linefeed()
            x = cursor.x
            take = min(columns - x, n - pos)
            self.buffer[cursor.y].update(zip(range(x, x + take), map(cell_of, data[pos : pos + take]), strict=True))
            cursor.x = x + take
            pos += take
        self.dirty.add(cursor.y)

    def _draw_unicode(self, data: str) -> None:
        """pyte's ``draw``, except that a zero-width character no longer ends the text.

        pyte 0.8 stops drawing at the first zero-width character that is not a combining mark
        (the emoji presentation selector U+FE0F, the joiner U+200D, U+200B...), losing the rest
        of the text. Here each run between them goes to pyte, and the zero-width character
        joins the cell before it: a selector or joiner is kept in that cell (with what the
        joiner joins, so a ZWJ sequence is one cell, as wide as its first emoji), a selector
        that makes the character wide widens its cell, and an invisible format character
        (U+200B, U+2060...) is dropped.
        """
        start = 0
        joining = False
        for i, ch in enumerate(data):
            if joining:
                if i > start:
                    super().draw(data[start:i])
                start = i + 1
                joining = not self._join(ch)
                continue
            if ch.isascii() or wcwidth(ch) != 0 or unicodedata.combining(ch):
                continue
            if i > start:
                super().draw(data[start:i])
            start = i + 1
            if ch == _ZWJ:
                joining = self._join(ch)
            elif unicodedata.category(ch) != "Cf":
                self._join(ch)
        if start < len(data):
            super().draw(data[start:])

    def _join(self, ch: str) -> bool:
        """Append ``ch`` to the cell before the cursor (the left half of a wide one); True if
        there was one. Widens that cell when the result is two cells wide and it was one."""
        y, x = self.cursor.y, self.cursor.x
        line = self.buffer[y]
        if x == 0:
            if y == 0:
                return False
            y, x = y - 1, self.columns
            line = self.buffer[y]
        x -= 1
        if line[x].data == "" and x > 0:
            x -= 1
        cell = line[x]
        if not cell.data:
            return False
        joined = cell.data + ch
        line[x] = cell._replace(data=joined)
        self.dirty.add(y)
        if (y == self.cursor.y and x == self.cursor.x - 1 and x + 1 < self.columns
                and wcswidth(joined) == 2 and wcswidth(cell.data) == 1):
            line[x + 1] = cell._replace(data="")
            self.cursor.x += 1
        return True

    def index(self) -> None:
        # pyte's index, minus its per-line defaultdict churn: only existing lines move.
        top, bottom = self.margins or (0, self.lines - 1)
        if self.cursor.y != bottom:
            self.cursor_down()
            return
        if top == 0 and bottom == self.lines - 1:
            self.scrolled += 1
        self.dirty.update(range(self.lines))
        buffer = self.buffer
        moved = {}
        for y, line in buffer.items():
            if y < top or y > bottom:
                moved[y] = line
            elif y > top:
                moved[y - 1] = line
        buffer.clear()
        buffer.update(moved)

    def set_mode(self, *modes: int, **kwargs: Any) -> None:
        # DECCOLM would make the virtual screen 132 columns wide, wider than its pane.
        if kwargs.get("private"):
            modes = tuple(m for m in modes if m != _DECCOLM_PRIVATE)
        super().set_mode(*modes, **kwargs)

    def reset_mode(self, *modes: int, **kwargs: Any) -> None:
        if kwargs.get("private"):
            modes = tuple(m for m in modes if m != _DECCOLM_PRIVATE)
        super().reset_mode(*modes, **kwargs)


class VirtualTerminal:
    """An agent's virtual screen: bytes in (``feed``), checked rows of cells out (``row``).

    Owned by the render thread; not thread-safe.
    """

    __slots__ = ("errors", "screen", "stream")

    def __init__(self, columns: int, lines: int, *, newline_mode: bool = False) -> None:
        self.screen = _FastScreen(max(1, columns), max(1, lines))
        if newline_mode:
            # Text (not a program behind a PTY): "\n" starts a new line, as a PTY's ONLCR would.
            self.screen.set_mode(mo.LNM)
        self.stream = pyte.ByteStream(self.screen)
        self.errors = 0
        """Chunks pyte failed on (its parser is reset; the pane goes on)."""

    @property
    def columns(self) -> int:
        """Width in cells."""
        return int(self.screen.columns)

    @property
    def lines(self) -> int:
        """Height in cells."""
        return int(self.screen.lines)

    @property
    def dirty(self) -> set[int]:
        """Lines changed since the renderer last cleared the set."""
        dirty: set[int] = self.screen.dirty
        return dirty

    def take_scrolled(self) -> int:
        """Whole-screen scroll-ups since the last call."""
        n = int(self.screen.scrolled)
        self.screen.scrolled = 0
        return n

    def feed(self, data: bytes) -> None:
        """Run ``data`` through the emulator."""
        try:
            self.stream.feed(data)
        except Exception:  # pyte raises on some malformed input; one bad chunk must not kill the pane
            self.errors += 1
            self.stream = pyte.ByteStream(self.screen)

    def resize(self, columns: int, lines: int) -> None:
        """Give the screen a new size.

        When it gets lower, lines are dropped at the top only as far as needed to keep the
        cursor on screen (pyte alone drops them all at the top, taking the text just written
        with them); when it gets narrower, the right part of each line is cut.
        """
        screen = self.screen
        lines, columns = max(1, lines), max(1, columns)
        if lines < screen.lines:
            drop = max(0, screen.cursor.y - lines + 1)
            buffer = screen.buffer
            kept = {y - drop: buffer[y] for y in list(buffer) if drop <= y < drop + lines}
            buffer.clear()
            buffer.update(kept)
            screen.cursor.y -= drop
            screen.lines = lines
            screen.margins = None
        screen.resize(lines, columns)
        screen.dirty.update(range(screen.lines))

    def cursor(self) -> tuple[int, int, bool]:
        """``(x, y, visible)`` of the emulated cursor."""
        c = self.screen.cursor
        visible = mo.DECTCEM in self.screen.mode and not c.hidden
        return min(int(c.x), self.columns - 1), int(c.y), visible

    def row(self, y: int) -> list[Char]:
        """Line ``y`` as exactly ``columns`` safe cells."""
        line = self.screen.buffer[y]
        columns = self.screen.columns
        cells: list[Char] = list(map(line.get, range(columns), repeat(line.default, columns)))
        text = "".join(map(DATA, cells))
        if len(text) == len(cells) and text.isascii() and text.isprintable():
            return cells
        return safe_cells(cells)

    def last_text(self) -> str:
        """The last non-blank line, as plain text (for the ticker view)."""
        buffer = self.screen.buffer
        for y in range(self.screen.lines - 1, -1, -1):
            if y not in buffer:
                continue
            text = "".join(c.data for c in self.row(y)).rstrip()
            if text:
                return text
        return ""


def safe_cells(cells: list[Char]) -> list[Char]:
    """``cells`` with anything a terminal could misread replaced.

    A cell keeps its character only if it is printable and exactly as wide as the cells pyte
    gave it: a wide character needs its right half (``""``) next to it, a lone right half
    becomes a space, controls and format characters become ``?``.
    """
    out: list[Char] = []
    n = len(cells)
    i = 0
    while i < n:
        c = cells[i]
        d = c.data
        if len(d) == 1 and d.isascii() and d.isprintable():
            out.append(c)
            i += 1
            continue
        if d == "":
            out.append(c._replace(data=" "))
            i += 1
            continue
        width = _checked_width(d)
        if width == 2 and i + 1 < n and cells[i + 1].data == "":
            out.append(c)
            out.append(cells[i + 1])
            i += 2
            continue
        if width == 1:
            out.append(c)
        else:
            out.append(c._replace(data=" " if width == 2 else "?"))
        i += 1
    return out


@lru_cache(maxsize=8192)
def _checked_width(text: str) -> int:
    """Cells ``text`` occupies if it is safe to print, else -1."""
    for ch in text:
        code = ord(ch)
        if code < 0x20 or 0x7F <= code < 0xA0:
            return -1
        category = unicodedata.category(ch)
        if category in ("Cc", "Cs") or (category == "Cf" and ch != "\u200d"):
            return -1
    width = int(wcswidth(text))
    return width if width in (1, 2) else -1
