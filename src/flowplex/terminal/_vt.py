"""``VirtualTerminal``: one agent's emulated screen (pyte), and the cells it may show.

Panes mode never forwards an agent's bytes to the real terminal: they drive a ``pyte`` screen
(a real VT emulator) the size of the agent's pane, and only the resulting *cells* are drawn.
Clipboard writes, title changes, cursor moves, mode switches and screen clears therefore act
on the pane's own virtual screen and nowhere else. Cells are checked once more on the way out:
a cell may hold only printable text whose width matches what pyte laid out.

pyte's ``draw`` handles one character at a time; :class:`_FastScreen` adds a fast path for
runs of printable ASCII in the default modes (the bulk of agent output) that writes whole runs
into the line at once, with identical results.

Scrollback: a line that leaves the top of the screen because the whole screen scrolled up (an
index at the bottom with no scroll region, or with a region as tall as the screen) is kept in a
bounded history, as are the lines a shrinking resize drops at the top. The alternate screen
(``ESC[?1049h``, ``?1047h``, ``?47h``) is a separate buffer, as on xterm: what a full-screen
program draws there never reaches the history, and the main screen comes back when it leaves.
``ESC[3J`` clears the history (xterm's "erase saved lines"; ``clear`` sends it) and leaves the
screen alone. The view can be scrolled back into the history and searched; see
:class:`VirtualTerminal`.

Before pyte sees it, an agent's output goes through the verbatim :class:`LogSanitizer`: control
strings (OSC, DCS, APC, PM, SOS; pyte knows only OSC, and would draw the others' payload as text)
are removed, and an escape sequence that runs past ``MAX_SEQUENCE`` characters is dropped and
counted (``cut``), so a missing terminator cannot swallow the rest of the pane's output, and
endless CSI parameters cannot grow pyte's parser state (nor make it fail on a 5000-digit number).
Log mode uses the same screen to know what a full-screen program leaves on its alternate screen
(``keep_scrolled_off``, ``feed_text``).
"""

from __future__ import annotations

import unicodedata
from collections import deque
from functools import lru_cache
from itertools import repeat
from operator import itemgetter
from typing import Any, Final

import pyte
from pyte import charsets as cs
from pyte import modes as mo
from pyte.screens import Char
from wcwidth import wcswidth, wcwidth

from ..errors import UsageError
from ._sanitize import LogSanitizer

__all__ = ["BLANK", "DATA", "Cell", "VirtualTerminal"]

Cell = Char
"""One on-screen cell: ``data`` (the character; ``""`` for the right half of a wide one),
``fg``, ``bg``, ``bold``, ``italics``, ``underscore``, ``strikethrough``, ``reverse``, ``blink``."""

BLANK: Final = Char(" ")


def restyle(cell: Cell, **changes: Any) -> Cell:
    """``cell`` with some fields changed (``data``, ``reverse``...): the one place that calls
    pyte's named-tuple ``_replace``, so the parts that draw cells need not know pyte's type."""
    return cell._replace(**changes)


DATA: Final = itemgetter(0)
_DECCOLM_PRIVATE: Final = 3
_ALT_SCREEN_CURSOR: Final = 1049  # alternate screen, saving the cursor on entry
_ALT_SCREENS: Final = frozenset({47, 1047, _ALT_SCREEN_CURSOR})
_ERASE_SAVED_LINES: Final = 3
_MAX_CACHED_STYLES: Final = 256
_ZWJ: Final = "\u200d"


class _CellCache(dict[str, Char]):
    """Character → cell in one style, made on first use."""

    __slots__ = ("attrs",)

    def __init__(self, attrs: Char) -> None:
        super().__init__()
        self.attrs = attrs

    def __missing__(self, ch: str) -> Char:
        cell: Char = restyle(self.attrs, data=ch)
        self[ch] = cell
        return cell


HistoryLine = tuple[Char, ...]
"""A line kept in the history: its cells up to the last one ever written, as wide as the
screen was when it scrolled off (the view pads or crops it to the current width)."""


class _FastScreen(pyte.Screen):
    """A pyte screen with a fast ASCII path, a scroll counter, bounded scrollback, an
    alternate screen, and no 132-column switch."""

    def __init__(self, columns: int, lines: int, history: int = 0) -> None:
        self._cells: dict[Char, _CellCache] = {}
        self.scrolled = 0
        """Whole-screen scroll-ups since the renderer last looked (it resets this)."""
        self.history: deque[HistoryLine] = deque(maxlen=history)
        """Lines scrolled off the top of the main screen, oldest first."""
        self.pushed = 0
        """Lines that ever left the top of the main screen (kept, dropped or cleared): the
        absolute index of screen line 0 in the agent's whole transcript."""
        self.main: dict[int, Any] | None = None
        """The main screen's lines while the alternate screen is shown, else None."""
        self.scrolled_off: list[HistoryLine] | None = None
        """When a list: every line that leaves the top of the screen (whichever screen it is)
        is put here too, for log mode to log it; its owner empties it."""
        super().__init__(columns, lines)

    def keep(self, line: Any) -> None:
        """Put a line leaving the top of the main screen into the history."""
        if self.scrolled_off is not None:
            self.scrolled_off.append(_compact(line, self.columns))
        if self.main is None:
            if self.history.maxlen:
                self.history.append(_compact(line, self.columns))
            self.pushed += 1

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
        line[x] = restyle(cell, data=joined)
        self.dirty.add(y)
        if (y == self.cursor.y and x == self.cursor.x - 1 and x + 1 < self.columns
                and wcswidth(joined) == 2 and wcswidth(cell.data) == 1):
            line[x + 1] = restyle(cell, data="")
            self.cursor.x += 1
        return True

    def index(self) -> None:
        # pyte's index, minus its per-line defaultdict churn: only existing lines move.
        lines = self.lines
        top, bottom = self.margins or (0, lines - 1)
        if self.cursor.y != bottom:
            self.cursor_down()
            return
        self.dirty.update(range(lines))
        buffer = self.buffer
        if top == 0 and bottom == lines - 1 and len(buffer) <= lines:
            # The whole screen scrolls (the usual case, made quick): line 0 leaves the top.
            self.scrolled += 1
            gone = buffer.pop(0, None)
            if self.scrolled_off is not None:
                self.scrolled_off.append(_compact(gone, self.columns))
            if self.main is None:
                if self.history.maxlen:
                    self.history.append(_compact(gone, self.columns))
                self.pushed += 1
            moved = {y - 1: line for y, line in buffer.items()}
        else:
            if top == 0 and bottom == lines - 1:
                self.scrolled += 1
                self.keep(buffer.get(0))
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
            for m in _ALT_SCREENS.intersection(modes):
                self._enter_alt(save_cursor=m == _ALT_SCREEN_CURSOR)
        super().set_mode(*modes, **kwargs)

    def reset_mode(self, *modes: int, **kwargs: Any) -> None:
        if kwargs.get("private"):
            modes = tuple(m for m in modes if m != _DECCOLM_PRIVATE)
            for m in _ALT_SCREENS.intersection(modes):
                self._leave_alt(restore_cursor=m == _ALT_SCREEN_CURSOR)
        super().reset_mode(*modes, **kwargs)

    def _enter_alt(self, *, save_cursor: bool) -> None:
        """Show a blank alternate screen, keeping the main one aside (xterm's 47/1047/1049)."""
        if self.main is not None:
            return
        if save_cursor:
            self.save_cursor()
        self.main = dict(self.buffer)
        self.buffer.clear()
        self.dirty.update(range(self.lines))

    def _leave_alt(self, *, restore_cursor: bool) -> None:
        """Bring the main screen back, cut to the current size if it changed meanwhile."""
        main = self.main
        if main is None:
            return
        self.main = None
        columns = self.columns
        self.buffer.clear()
        for y, line in main.items():
            if y < self.lines:
                for x in [x for x in line if x >= columns]:
                    del line[x]
                self.buffer[y] = line
        self.dirty.update(range(self.lines))
        if restore_cursor:
            self.restore_cursor()

    def erase_in_display(self, how: int = 0, *args: Any, **kwargs: Any) -> None:
        # ED 3 erases the saved lines only, as on xterm (pyte would clear the screen).
        if how == _ERASE_SAVED_LINES:
            self.history.clear()
            return
        super().erase_in_display(how, *args, **kwargs)

    def reset(self) -> None:
        # RIS leaves the alternate screen (xterm); the cleared screen is the main one.
        self.main = None
        super().reset()


class VirtualTerminal:
    """An agent's virtual screen: bytes in (``feed``), checked rows of cells out (``row``).

    Lines have absolute indices in the agent's whole transcript: 0 is the first line that ever
    scrolled into the history, and screen line ``y`` is ``view_top + view_offset + y``. The
    view shows ``lines`` consecutive lines ending ``view_offset`` lines above the live screen's
    bottom; ``row``, ``dirty`` and ``match_line`` speak in view rows. While scrolled back the
    view stays on the same lines as new output arrives (the offset grows with each line that
    scrolls into the history), until the lines under it are dropped from the bounded history:
    it then shows the oldest lines kept, which move as more are dropped.

    Owned by the render thread; not thread-safe.
    """

    __slots__ = ("_filter", "_match", "_offset", "_view_dirty", "errors", "screen", "stream")

    def __init__(
        self,
        columns: int,
        lines: int,
        *,
        newline_mode: bool = False,
        history: int = 10_000,
        keep_scrolled_off: bool = False,
    ) -> None:
        if isinstance(history, bool) or not isinstance(history, int) or history < 0:
            msg = f"VirtualTerminal(history={history!r}): expected a number of lines >= 0 (0 keeps no scrollback)"
            raise UsageError(msg)
        self.screen = _FastScreen(max(1, columns), max(1, lines), history)
        if keep_scrolled_off:
            self.screen.scrolled_off = []
        if newline_mode:
            # Text (not a program behind a PTY): "\n" starts a new line, as a PTY's ONLCR would.
            self.screen.set_mode(mo.LNM)
        self.stream = pyte.Stream(self.screen)
        self._filter = LogSanitizer(verbatim=True)  # it decodes UTF-8, and bounds every sequence
        self.errors = 0
        """Chunks pyte failed on (its parser is reset; the pane goes on)."""
        self._offset = 0
        self._view_dirty: set[int] = set()
        self._match: tuple[int, str] | None = None  # absolute line and text of the last search hit

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
        """View rows changed since the renderer last cleared the set."""
        dirty: set[int] = self.screen.dirty
        if not self._offset:
            return dirty
        # Scrolled back: screen line y is on view row y + offset, if that is on the view at all.
        view = self._view_dirty
        if dirty:
            shift, lines = self._offset, self.screen.lines
            view.update(y + shift for y in dirty if y + shift < lines)
            dirty.clear()
        return view

    @property
    def history_len(self) -> int:
        """Lines in the history now (at most the ``history`` given)."""
        return len(self.screen.history)

    @property
    def view_offset(self) -> int:
        """How many lines the view is scrolled back from the live screen (0: live)."""
        return self._offset

    @property
    def view_top(self) -> int:
        """Absolute index of the line on view row 0."""
        return int(self.screen.pushed) - self._offset

    @property
    def lines_total(self) -> int:
        """Lines the agent has produced, roughly: those that scrolled into the history (even if
        since dropped or cleared) plus the live screen down to its last non-blank line."""
        buffer = self.screen.buffer
        for y in range(self.screen.lines - 1, -1, -1):
            line = buffer.get(y)
            if line and "".join(map(DATA, line.values())).strip():
                return int(self.screen.pushed) + y + 1
        return int(self.screen.pushed)

    def take_scrolled(self) -> int:
        """Whole-screen scroll-ups of the view since the last call (none while scrolled back:
        the view then stays on the lines it shows)."""
        n = 0 if self._offset else int(self.screen.scrolled)
        self.screen.scrolled = 0
        return n

    @property
    def cut(self) -> int:
        """Escape sequences dropped for running past ``MAX_SEQUENCE`` characters."""
        return self._filter.cut

    def feed(self, data: bytes) -> None:
        """Run ``data`` (raw output, UTF-8) through the emulator."""
        for _, text in self._filter.feed(data):
            self.feed_text(text)

    def feed_text(self, text: str) -> None:
        """Run decoded output through the emulator; it must be filtered already (verbatim
        :class:`LogSanitizer` output: no control string, every sequence bounded)."""
        pushed = self.screen.pushed
        try:
            self.stream.feed(text)
        except Exception:  # pyte raises on some malformed input; one bad chunk must not kill the pane
            self.errors += 1
            self.stream = pyte.Stream(self.screen)
        if self._offset:
            self._follow(pushed)

    def take_scrolled_off(self) -> list[str]:
        """The lines that left the top of the screen since the last call, as plain text with
        trailing blanks removed (with ``keep_scrolled_off`` only; else always empty)."""
        gone = self.screen.scrolled_off
        if not gone:
            return []
        self.screen.scrolled_off = []
        return [_plain(line) for line in gone]

    def screen_text(self) -> list[str]:
        """The live screen as plain text, one string per line, trailing blanks removed."""
        buffer = self.screen.buffer
        columns = self.screen.columns
        return [_plain(tuple(map(buffer[y].get, range(columns), repeat(BLANK)))) if y in buffer else ""
                for y in range(self.screen.lines)]

    def _follow(self, pushed: int) -> None:
        """Keep a scrolled-back view on its lines after ``screen.pushed`` was ``pushed``."""
        offset = self._offset + self.screen.pushed - pushed
        kept = len(self.screen.history)
        if offset > kept:  # the lines under the view were dropped (or ESC[3J cleared them all)
            offset = kept
            self._mark_all()
        self._offset = offset
        if not offset:
            self._view_dirty.clear()

    def _mark_all(self) -> None:
        """Every view row must be drawn again."""
        rows = range(self.screen.lines)
        self.screen.dirty.update(rows)
        if self._offset:
            self._view_dirty.update(rows)

    def scroll_view(self, delta: int) -> bool:
        """Scroll the view ``delta`` lines back into the history (negative: towards the live
        screen), clamped to ``[0, history_len]``; True if the view moved."""
        offset = min(max(self._offset + delta, 0), len(self.screen.history))
        return self._set_offset(offset)

    def scroll_to_live(self) -> bool:
        """Show the live screen again; True if the view moved."""
        return self._set_offset(0)

    def _set_offset(self, offset: int) -> bool:
        if offset == self._offset:
            return False
        self._offset = offset
        self._view_dirty.clear()
        self._mark_all()
        self.screen.scrolled = 0  # everything is redrawn anyway
        return True

    def resize(self, columns: int, lines: int) -> None:
        """Give the screen a new size.

        When it gets lower, lines are dropped at the top only as far as needed to keep the
        cursor on screen (pyte alone drops them all at the top, taking the text just written
        with them), into the history; when it gets narrower, the right part of each line is
        cut. History lines keep their text: the view pads or crops them.
        """
        screen = self.screen
        lines, columns = max(1, lines), max(1, columns)
        pushed = screen.pushed
        if lines < screen.lines:
            drop = max(0, screen.cursor.y - lines + 1)
            buffer = screen.buffer
            for y in range(drop):
                screen.keep(buffer.get(y))
            kept = {y - drop: buffer[y] for y in list(buffer) if drop <= y < drop + lines}
            buffer.clear()
            buffer.update(kept)
            screen.cursor.y -= drop
            screen.lines = lines
            screen.margins = None
        screen.resize(lines, columns)
        if self._offset:
            self._follow(pushed)
        self._view_dirty.clear()
        self._mark_all()

    def cursor(self) -> tuple[int, int, bool]:
        """``(x, y, visible)`` of the emulated cursor; never visible while scrolled back."""
        c = self.screen.cursor
        visible = mo.DECTCEM in self.screen.mode and not c.hidden and not self._offset
        return min(int(c.x), self.columns - 1), int(c.y), visible

    def row(self, y: int) -> list[Char]:
        """View row ``y`` (from the history or the live screen) as exactly ``columns`` safe cells."""
        if y < self._offset:
            history = self.screen.history
            return self._history_row(history[len(history) - self._offset + y])
        return self._live_row(y - self._offset)

    def _live_row(self, y: int) -> list[Char]:
        line = self.screen.buffer[y]
        columns = self.screen.columns
        cells: list[Char] = list(map(line.get, range(columns), repeat(line.default, columns)))
        return _checked(cells)

    def _history_row(self, kept: HistoryLine) -> list[Char]:
        columns = self.screen.columns
        cells = list(kept[:columns])
        if len(cells) < columns:
            cells.extend(repeat(BLANK, columns - len(cells)))
        return _checked(cells)

    def _line_text(self, index: int) -> str:
        """The text of absolute line ``index`` (history or live screen), as stored."""
        screen = self.screen
        pos = index - screen.pushed
        if pos < 0:
            return "".join(map(DATA, screen.history[len(screen.history) + pos]))
        line = screen.buffer.get(pos)
        if not line:
            return ""
        return "".join(map(DATA, map(line.get, range(screen.columns), repeat(line.default))))

    def search(self, text: str, *, backwards: bool = True, start: int | None = None) -> int | None:
        """Find the next line holding ``text`` and scroll the view to it; its absolute index,
        or None (view unchanged) when no line holds it.

        Smart case, as less -i: all-lowercase ``text`` matches any case, otherwise case counts.
        The search starts at absolute line ``start`` (included; a start beyond the newest line
        kept searching backwards is the newest, beyond the oldest forwards the oldest), by
        default just past the last match if it is in view, else at the view's bottom row
        (``backwards``, towards older lines) or top row (forwards, towards the live screen).
        A match on the view leaves it still; one on the live screen shows the live screen;
        else the matched line goes to the view's top row. Text that wraps onto the next line
        is matched per line only.
        """
        if not isinstance(text, str) or not text:
            msg = f"search({text!r}): expected the text to look for, a non-empty string"
            raise UsageError(msg)
        screen = self.screen
        first = screen.pushed - len(screen.history)
        last = screen.pushed + screen.lines - 1
        top = self.view_top
        step = -1 if backwards else 1
        if start is None:
            match = self._match
            if match is not None and top <= match[0] < top + screen.lines:
                start = match[0] + step
            else:
                start = top + screen.lines - 1 if backwards else top
        # Clamped towards the lines kept only: a start past the oldest (or newest) one, in the
        # direction searched, finds nothing.
        start = min(start, last) if backwards else max(start, first)
        fold = text == text.lower()
        stop = first - 1 if backwards else last + 1
        for index in range(start, stop, step):
            line = self._line_text(index)
            if text in (line.lower() if fold else line):
                break
        else:
            return None
        self._match = (index, text)
        if not top <= index < top + screen.lines:
            self._set_offset(0 if index >= screen.pushed else screen.pushed - index)
        return index

    def match_line(self) -> int | None:
        """View row of the last search match, or None when it is not in view (or none yet)."""
        span = self.match_span()
        return None if span is None else span[0]

    def match_span(self) -> tuple[int, int, int] | None:
        """``(row, x0, x1)``: view row and cell columns ``[x0, x1)`` of the last search match,
        for the renderer to highlight; None when it is not in view (or none yet)."""
        if self._match is None:
            return None
        index, text = self._match
        row = index - self.view_top
        if not 0 <= row < self.screen.lines:
            return None
        cells = self.row(row)
        line = "".join(map(DATA, cells))
        found = (line.lower() if text == text.lower() else line).find(text)
        if found < 0:  # the line changed (or was cropped) since the search
            return None
        # String index -> columns: a wide character's right half is a cell with no text.
        end = found + len(text)
        x0, x1, pos = 0, len(cells), 0
        for x, cell in enumerate(cells):
            n = len(cell.data)
            if pos <= found < pos + n:
                x0 = x
            pos += n
            if pos >= end:
                x1 = x + 1
                break
        while x1 < len(cells) and cells[x1].data == "":
            x1 += 1
        return row, x0, x1

    def last_text(self) -> str:
        """The last non-blank line of the live screen, as plain text (for the ticker view)."""
        buffer = self.screen.buffer
        for y in range(self.screen.lines - 1, -1, -1):
            if y not in buffer:
                continue
            text = "".join(c.data for c in self._live_row(y)).rstrip()
            if text:
                return text
        return ""


def _plain(line: HistoryLine) -> str:
    """A line's text as a log shows it: safe cells, no trailing blanks."""
    return "".join(map(DATA, safe_cells(list(line)))).rstrip()


def _checked(cells: list[Char]) -> list[Char]:
    """``cells`` as they are when plain ASCII (the usual case, checked at once), else made safe."""
    text = "".join(map(DATA, cells))
    if len(text) == len(cells) and text.isascii() and text.isprintable():
        return cells
    return safe_cells(cells)


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
            out.append(restyle(c, data=" "))
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
            out.append(restyle(c, data=" " if width == 2 else "?"))
        i += 1
    return out


class _InOrder(dict[int, tuple[int, ...]]):
    """n → ``(0, 1, ..., n - 1)``, made on first use: the keys of a line written left to right."""

    def __missing__(self, n: int) -> tuple[int, ...]:
        keys = self[n] = tuple(range(n))
        return keys


_IN_ORDER: Final = _InOrder()


def _compact(line: Any, columns: int) -> HistoryLine:
    """The cells of a screen line up to the last one written (at most ``columns``)."""
    # A tuple of cells takes a seventh of the dict the screen held them in. Most lines were
    # written left to right, so their cells are the dict's values in order (checked: quick).
    if not line:
        return ()
    keys = tuple(line)
    n = len(keys)
    if n <= columns and keys == _IN_ORDER[n]:
        return tuple(line.values())
    n = min(max(keys) + 1, columns)
    return tuple(map(line.get, range(n), repeat(line.default, n)))


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
