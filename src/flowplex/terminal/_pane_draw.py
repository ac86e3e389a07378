"""Drawing in panes mode: the canvas, and one frame as the bytes that turn it into the next.

Owns the two canvases (``front``: what the terminal shows; ``back``: the frame being drawn),
the status text last drawn and the cursor and colour the terminal was left with (render
thread). A frame copies into ``back`` only what changed (pyte's dirty lines, chrome whose title
moved, the status bar), diffs the touched spans against ``front`` and wraps them in
synchronized output, the cursor hidden while it draws. Background panes that flood are
repainted at most ``flood_fps`` times a second (the postponed repaints are counted).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from ._caps import TermCaps
from ._compose import agent_style, border_rows, status_row, text_cells, ticker_row
from ._diff import Canvas, FrameEncoder, blank_canvas
from ._layout import Layout, Rect, View
from ._pane_board import FrameWork, Pane, PaneBoard
from ._vt import Cell, restyle

__all__ = ["NORMAL_HINTS", "SYNC_BEGIN", "SYNC_END", "TYPING_HINTS", "PaneDrawer"]

SYNC_BEGIN: Final = "\x1b[?2026h"
SYNC_END: Final = "\x1b[?2026l"
NORMAL_HINTS: Final = "^a type  Tab/1-9 focus  z zoom  PgUp/PgDn scroll  / find  s r k stop restart kill  q quit "
TYPING_HINTS: Final = "keys go to the agent  {key} leaves typing mode "

Touched = dict[int, list[tuple[int, int]]]
"""The spans of each row a frame drew into ``back``: only those are diffed."""


class PaneDrawer:
    """Draws frames (render thread; :meth:`redraw_status` from any thread, lock held).

    Args:
        board: The panes and the status bar's mode.
        clock: The display's monotonic clock.
        typing_name: The typing key as the status bar names it (``Ctrl-a``).
    """

    def __init__(self, board: PaneBoard, clock: Callable[[], float], typing_name: str) -> None:
        self._board = board
        self._clock = clock
        self._typing_name = typing_name
        self._front: Canvas = []
        self._back: Canvas = []
        self._clear_next = True
        self._status = ""
        self._status_key: tuple[object, ...] = ()
        self._cursor: tuple[int, int, bool] | None = None
        self._sgr: tuple[object, ...] | None = None
        self.deferred = 0
        """Repaints of flooding background panes postponed (written under the board's lock)."""

    def status_states(self) -> object:
        """The agents' state keys the status bar last showed (None: none drawn yet)."""
        return self._status_key[0] if self._status_key else None

    def redraw_status(self) -> None:
        """Build the status bar anew at the next frame (its mode or notice changed)."""
        self._status = ""

    def clear(self) -> None:
        """Clear the whole terminal at the next layout (its size changed)."""
        self._clear_next = True

    def encoder(self, caps: TermCaps) -> FrameEncoder:
        """An encoder for the next frame, starting from the colour the last one left."""
        return FrameEncoder(colour=caps.colour, style=self._sgr)

    def reset(self, enc: FrameEncoder, columns: int, rows: int) -> None:
        """A new layout: a fresh ``back``, and a cleared screen when the size changed."""
        if self._clear_next or len(self._front) != rows or (self._front and len(self._front[0]) != columns):
            enc.raw("\x1b[0m\x1b[H\x1b[2J")
            self._front = blank_canvas(columns, rows)
            self._clear_next = False
        self._back = blank_canvas(columns, rows)
        self._status = ""

    def frame(
        self, enc: FrameEncoder, work: FrameWork, layout: Layout, caps: TermCaps, now: float, *,
        final: bool, title: str, flood_fps: float,
    ) -> bytes:
        """Draw what changed and return the frame's bytes (``b""``: nothing to write)."""
        order, focus = work.order, work.focus
        touched: Touched = {}
        recolour = {id(p) for p in work.chrome}
        for index, rect in layout.panes:
            pane = order[index]
            focused = index == focus
            if (pane.chrome_dirty or work.relayout or id(pane) in recolour
                    or self.title_key(pane, focused, now) != pane.title_key):
                self._draw_chrome(pane, rect, focused, caps, touched)
            self._draw_content(enc, pane, rect, focused, now, caps, touched, final=final, flood_fps=flood_fps)
        if work.view is View.TICKER and (work.feeds or work.relayout or work.chrome):
            self._draw_ticker(order, layout, touched)
        self._draw_status(order, layout, caps, title, touched)

        back, front = self._back, self._front
        for y in sorted(touched):
            for x0, x1 in _merge(touched[y]):
                enc.diff_row(y, back[y], front[y], x0, x1)
        cursor = _focused_cursor(order, layout, focus)
        body = enc.text()
        if not body and cursor == self._cursor:
            return b""
        shown = self._cursor is not None and self._cursor[2]
        self._cursor = cursor
        self._sgr = enc.style
        # The cursor is hidden while the frame draws (it already is unless the last frame showed it).
        out = [SYNC_BEGIN if caps.synchronized_output else "", "\x1b[?25l" if shown else "", body]
        if self._board.ring_bell:
            self._board.ring_bell = False
            out.append("\a")
        if cursor[2]:
            out.append(f"\x1b[{cursor[1] + 1};{cursor[0] + 1}H\x1b[?25h")
        if caps.synchronized_output:
            out.append(SYNC_END)
        return "".join(out).encode("utf-8", "replace")

    def title_key(self, pane: Pane, focused: bool, now: float) -> tuple[object, ...]:
        """What the pane's title depends on: it is redrawn when this changes."""
        vt = pane.vt
        info = pane.info
        return (info.state_key(now), vt.view_offset if vt is not None else 0, focused and self._board.typing,
                info.name, info.agent_type, info.note)

    def _title(self, pane: Pane, focused: bool, caps: TermCaps) -> tuple[str, str]:
        """A pane's title (number, name, state, scroll position, typing) and its right-hand note."""
        info = pane.info
        vt = pane.vt
        scrolled = f" · ↑{vt.view_offset}" if vt is not None and vt.view_offset else ""
        typing = " · typing" if focused and self._board.typing else ""
        kind = info.agent_type.name.lower()
        title = f"{info.number} {info.name} · {kind} · {info.state(self._clock())}{scrolled}{typing}"
        if not caps.unicode:
            title = title.replace("·", "-").replace("↑", "^")
        note = ""
        if info.finished:
            mark = ("✓ " if info.ok else "✗ ") if caps.unicode else ""
            note = mark + (info.note or ("done" if info.ok else "failed"))
        return title, note

    def _draw_chrome(self, pane: Pane, rect: Rect, focused: bool, caps: TermCaps, touched: Touched) -> None:
        info = pane.info
        style = agent_style(info.agent_type, focused=focused)
        title, note = self._title(pane, focused, caps)
        pane.title_key = self.title_key(pane, focused, self._clock())
        top, bottom, side = border_rows(rect.w, title, note, style, unicode=caps.unicode, focused=focused)
        back = self._back
        x0, x1 = rect.x, rect.x + rect.w
        back[rect.y][x0:x1] = top
        back[rect.y + rect.h - 1][x0:x1] = bottom
        _touch(touched, rect.y, x0, x1)
        _touch(touched, rect.y + rect.h - 1, x0, x1)
        for y in range(rect.y + 1, rect.y + rect.h - 1):
            back[y][x0] = side
            back[y][x1 - 1] = side
            _touch(touched, y, x0, x0 + 1)
            _touch(touched, y, x1 - 1, x1)
        pane.chrome_dirty = False

    def _draw_content(
        self, enc: FrameEncoder, pane: Pane, rect: Rect, focused: bool, now: float, caps: TermCaps,
        touched: Touched, *, final: bool, flood_fps: float,
    ) -> None:
        vt = pane.vt
        if vt is None:
            return
        inner = rect.inner
        scrolled = vt.take_scrolled()
        if pane.full_repaint:
            lines: list[int] = list(range(vt.lines))
            pane.full_repaint = False
            scrolled = 0
            pane.scroll_acc = 0
        elif vt.dirty:
            heavy = len(vt.dirty) >= max(2, vt.lines // 2)
            if heavy and not focused and not final and now - pane.last_repaint < 1.0 / flood_fps:
                with self._board.lock:
                    self.deferred += 1
                pane.scroll_acc += scrolled
                return
            lines = sorted(vt.dirty)
            scrolled += pane.scroll_acc
            pane.scroll_acc = 0
        else:
            return
        back = self._back
        x0, x1 = inner.x, inner.x + inner.w
        full_width = rect.x == 0 and rect.w == caps.columns
        if full_width and 0 < scrolled < inner.h:
            # A full-width pane scrolls on the terminal itself; only new lines are written.
            enc.scroll_up(self._front, inner.y, inner.y + inner.h - 1, scrolled)
            for y in range(inner.y + inner.h - scrolled, inner.y + inner.h):
                _touch(touched, y, rect.x, rect.x + rect.w)
        width = inner.w
        match = vt.match_span() if focused else None
        for line in lines:
            if line >= inner.h:
                continue
            y = inner.y + line
            cells = vt.row(line)
            if match is not None and match[0] == line:
                cells = _highlight(cells, match[1], match[2])
            back[y][x0:x1] = cells if len(cells) == width else cells[:width]
            _touch(touched, y, x0, x1)
        vt.dirty.clear()
        pane.last_repaint = now

    def _draw_ticker(self, order: list[Pane], layout: Layout, touched: Touched) -> None:
        back = self._back
        height = layout.status_row
        order = sorted(order, key=lambda p: not p.info.waiting)  # the agents that need the user first
        for y in range(height):
            if y < len(order):
                pane = order[y]
                info = pane.info
                text = pane.vt.last_text() if pane.vt is not None else ""
                note = info.note if info.finished else ""
                row = ticker_row(layout.columns, info.number, info.name, info.agent_type, text, note)
            else:
                row = text_cells("", layout.columns)
            back[y][:] = row
            _touch(touched, y, 0, layout.columns)

    def _draw_status(self, order: list[Pane], layout: Layout, caps: TermCaps, title: str, touched: Touched) -> None:
        now = self._clock()
        board = self._board
        shown = {index for index, _ in layout.panes}
        key = (tuple(p.info.state_key(now) for p in order), board.prompt, board.typing, board.notice, board.focus,
               layout.view, tuple(p.unread for i, p in enumerate(order) if i not in shown), len(order))
        if key == self._status_key and self._status:
            return  # nothing it shows changed: no need to build the text
        self._status_key = key
        left = _status_text(board, order, layout, shown, now, caps, title)
        right = TYPING_HINTS.format(key=self._typing_name) if board.typing else NORMAL_HINTS
        if left == self._status:
            return
        self._status = left
        y = layout.status_row
        self._back[y][:] = status_row(layout.columns, left, right)
        _touch(touched, y, 0, layout.columns)


def _status_text(
    board: PaneBoard, order: list[Pane], layout: Layout, shown: set[int], now: float, caps: TermCaps, title: str
) -> str:
    """The status bar's left side: the mode, the agents per state, who needs input, unread output."""
    dot = " · " if caps.unicode else " - "
    states: dict[str, int] = {}
    for pane in order:
        word = pane.info.state(now).split(" (")[0]
        states[word] = states.get(word, 0) + 1
    # Waiting agents first: they are the ones that need the user.
    counts = [f"{states.pop('waiting')} waiting"] if "waiting" in states else []
    counts += [f"{count} {word}" for word, count in sorted(states.items())]
    if board.prompt is not None:
        parts = [f" /{board.prompt}"]
    elif board.typing:
        focused = order[board.focus].info if board.focus < len(order) else None
        who = f"{focused.number} {focused.name}" if focused is not None else "?"
        parts = [f" TYPING → {who}" if caps.unicode else f" TYPING -> {who}", *counts]
    else:
        parts = [f" {title}", f"{len(order)} agents", layout.view.value, *counts]
        waiting = [p.info for p in order if p.info.waiting and not p.info.finished]
        if waiting:
            parts.append("needs input: " + " ".join(f"{i.number} {i.name}" for i in waiting))
        if layout.view is not View.TICKER:
            for i, pane in enumerate(order):
                if i not in shown and pane.unread:
                    parts.append(f"{pane.info.number} {pane.info.name} +{pane.unread}")
    if board.notice:
        parts.append(board.notice)
    return dot.join(parts)


def _focused_cursor(order: list[Pane], layout: Layout, focus: int) -> tuple[int, int, bool]:
    """Where the terminal's cursor goes: in the focused pane, when it runs a program."""
    if layout.view is View.TICKER or not order:
        return 0, 0, False
    rect = layout.rect_of(focus)
    pane = order[focus] if focus < len(order) else None
    # Only a program behind a PTY has a cursor worth showing (an LLM's text has none).
    if rect is None or pane is None or pane.vt is None or pane.info.finished or not pane.info.pty:
        return 0, 0, False
    x, y, visible = pane.vt.cursor()
    inner = rect.inner
    if not (0 <= x < inner.w and 0 <= y < inner.h):
        return 0, 0, False
    return inner.x + x, inner.y + y, visible


def _highlight(cells: list[Cell], x0: int, x1: int) -> list[Cell]:
    """``cells`` with the search match ``x0:x1`` in reverse video."""
    out = list(cells)
    for x in range(max(0, x0), min(len(out), x1)):
        out[x] = restyle(out[x], reverse=not out[x].reverse)
    return out


def _touch(touched: Touched, y: int, x0: int, x1: int) -> None:
    spans = touched.get(y)
    if spans is None:
        touched[y] = [(x0, x1)]
    else:
        spans.append((x0, x1))


def _merge(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    if len(spans) == 1:
        return spans
    spans.sort()
    merged = [spans[0]]
    for x0, x1 in spans[1:]:
        last0, last1 = merged[-1]
        if x0 <= last1:
            merged[-1] = (last0, max(last1, x1))
        else:
            merged.append((x0, x1))
    return merged
