"""Panes mode: every agent in its own emulated screen, laid out in a grid, drawn without tearing.

Each agent's bytes drive its own :class:`~flowplex.terminal._vt.VirtualTerminal`. A frame is
composed into a canvas of cells only from what changed (pyte's dirty lines, chrome that
changed), diffed against the canvas the terminal already shows, and written as one write:
``ESC[?2026h`` (synchronized output) + hidden cursor + absolute moves and changed runs + the
cursor back in the focused pane (when it runs a program) + ``ESC[?2026l``. Frames are composed
at most ``fps`` times a second and only when something changed; the alternate screen keeps the
shell's screen intact.

Flood control: a background pane whose every frame would be a near-full repaint (it scrolls
faster than anyone can read) is repainted at most ``flood_fps`` times a second; the postponed
repaints are counted in ``stats().deferred_repaints``. tmux throttles flooding panes the same
way. The focused pane is never throttled.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

from ..errors import UsageError
from ._caps import TermCaps
from ._compose import agent_style, border_rows, status_row, text_cells, ticker_row
from ._diff import Canvas, FrameEncoder, blank_canvas
from ._display import AgentInfo, Display
from ._keys import KeyReader
from ._layout import Layout, Rect, View, plan_layout
from ._vt import VirtualTerminal
from ._writer import Writer

__all__ = ["PaneRenderer"]

SYNC_BEGIN: Final = "\x1b[?2026h"
SYNC_END: Final = "\x1b[?2026l"
_DEFAULT_VT: Final = (80, 24)


@dataclass(slots=True)
class _Pane:
    info: AgentInfo
    pending: bytearray = field(default_factory=bytearray)
    vt: VirtualTerminal | None = None
    dropped: int = 0
    unread: int = 0
    last_repaint: float = -1e9
    scroll_acc: int = 0
    chrome_dirty: bool = True
    full_repaint: bool = True
    size: tuple[int, int] = _DEFAULT_VT
    sized: bool = False
    """A layout has given the pane its size (until then ``size`` is a placeholder)."""
    ended_line: bool = True


class PaneRenderer(Display):
    """Renders each agent in its own pane, like a small agent-aware tmux.

    Keys (when standard input is a terminal): ``Tab``/``Shift-Tab`` cycle the focus, ``1``-``9``
    focus an agent, ``z`` or ``Enter`` zooms the focused agent, ``t`` toggles the ticker view
    (each agent's last line), ``g``/``Esc`` returns to the grid, ``q`` sets
    :attr:`quit_requested`. Hidden panes count unread lines in the status bar.

    Args:
        writer: The single writer (default: standard output).
        caps: Terminal capabilities (default: detected).
        fps: Most frames per second; if in doubt, keep 60.
        flood_fps: Most near-full repaints per second of a background pane (see module doc).
        max_pending_bytes: Output buffered per agent while the renderer is behind; beyond it
            the oldest bytes are dropped and counted.
        feed_budget_bytes: Bytes per agent run through the emulator per frame; the rest waits
            for the next frame, so one flooding agent cannot stall the screen.
        keys: Read keys from standard input (None: when it is a terminal).
        title: Shown at the left of the status bar.
        size_fn, clock, overflow, block_timeout_s: See :class:`Display`.
    """

    mode = "panes"

    def __init__(
        self,
        writer: Writer | None = None,
        caps: TermCaps | None = None,
        *,
        fps: float = 60.0,
        flood_fps: float = 10.0,
        max_pending_bytes: int = 1 << 20,
        feed_budget_bytes: int = 1 << 18,
        keys: bool | None = None,
        title: str = "flowplex",
        size_fn: Callable[[], tuple[int, int]] | None = None,
        clock: Callable[[], float] = time.monotonic,
        overflow: str = "drop",
        block_timeout_s: float = 5.0,
    ) -> None:
        super().__init__(writer, caps, fps=fps, size_fn=size_fn, clock=clock, overflow=overflow,
                         block_timeout_s=block_timeout_s)
        if not flood_fps > 0:
            msg = f"PaneRenderer(flood_fps={flood_fps!r}): expected a positive number of repaints per second"
            raise UsageError(msg)
        self.flood_fps = float(flood_fps)
        self.max_pending_bytes = int(max_pending_bytes)
        self.feed_budget_bytes = int(feed_budget_bytes)
        self.title = title
        self._want_keys = keys
        self._keys: KeyReader | None = None
        # Shared with feeding threads (under self._lock).
        self._panes: dict[int, _Pane] = {}
        self._order: list[_Pane] = []
        self._view = View.GRID
        self._focus = 0
        self._layout_dirty = True
        self._deferred = 0
        self._dropped = 0
        # Render thread only.
        self._layout: Layout | None = None
        self._front: Canvas = []
        self._back: Canvas = []
        self._clear_next = True
        self._status = ""
        self._cursor: tuple[int, int, bool] | None = None
        self._sgr: tuple[object, ...] | None = None

    # -- feeding (any thread, lock held) ----------------------------------------------------------

    def _on_new_agent(self, info: AgentInfo) -> None:
        pane = _Pane(info)
        self._panes[info.stream_id] = pane
        self._order.append(pane)
        self._order.sort(key=lambda p: p.info.number)  # panes go in stream-id order
        for p in self._order:
            p.chrome_dirty = True  # numbers in titles may have moved
        self._layout_dirty = True

    def _on_agent_changed(self, info: AgentInfo) -> None:
        self._panes[info.stream_id].chrome_dirty = True

    def _on_feed(self, info: AgentInfo, data: bytes) -> None:
        pane = self._panes[info.stream_id]
        pane.ended_line = data.endswith(b"\n")
        pending = pane.pending
        pending += data
        excess = len(pending) - self.max_pending_bytes
        if excess > 0:
            # Keep the newest output; cut after a newline when there is one close by, and cancel
            # whatever escape sequence the cut may have split (CAN).
            cut = pending.find(b"\n", excess, excess + 4096)
            cut = excess if cut < 0 else cut + 1
            pane.dropped += cut
            self._dropped += cut
            del pending[:cut]
            pending[:0] = b"\x18"

    def _on_end(self, info: AgentInfo) -> None:
        pane = self._panes[info.stream_id]
        pane.chrome_dirty = True
        note = info.note or ("done" if info.ok else "failed")
        rule = "──" if self.caps.unicode else "--"
        colour = "2" if info.ok else "31"
        lead = b"" if pane.ended_line else b"\r\n"
        pane.pending += lead + f"\x1b[0;{colour}m{rule} {note}\x1b[0m\r\n".encode()

    # -- keys and queries (any thread) --------------------------------------------------------------

    def handle_key(self, key: str) -> None:
        """Focus, zoom, ticker and quit keys (see the class docstring)."""
        with self._lock:
            n = len(self._order)
            view, focus = self._view, self._focus
            if key in ("q", "Q"):
                self.quit_requested.set()
            elif n and key in ("tab", "right", "down"):
                focus = (focus + 1) % n
            elif n and key in ("btab", "left", "up"):
                focus = (focus - 1) % n
            elif len(key) == 1 and key.isdigit() and key != "0":
                if int(key) <= n:
                    focus = int(key) - 1
            elif key in ("z", "enter"):
                view = View.GRID if view is View.ZOOM else View.ZOOM
            elif key == "t":
                view = View.GRID if view is View.TICKER else View.TICKER
            elif key in ("g", "esc"):
                view = View.GRID
            if (view, focus) != (self._view, self._focus):
                self._view, self._focus = view, focus
                self._layout_dirty = True
        self._wake.set()

    @property
    def interactive(self) -> bool:
        """Whether keys are being read from the terminal."""
        return self._keys is not None

    @property
    def view(self) -> View:
        """The current view."""
        return self._view

    @property
    def focus(self) -> int:
        """Index of the focused agent (0-based, in stream-id order)."""
        return self._focus

    def pane_size(self, stream_id: int) -> tuple[int, int] | None:
        """``(columns, rows)`` of the agent's content area (its last size while hidden); None
        before the first layout."""
        with self._lock:
            pane = self._panes.get(stream_id)
            return pane.size if pane is not None and pane.sized else None

    # -- lifecycle ----------------------------------------------------------------------------------

    def _enter(self) -> None:
        enter = "\x1b[?1049h" if self.caps.alt_screen else ""
        self.writer.write((enter + "\x1b[?25l\x1b[0m\x1b[H\x1b[2J").encode())
        want = self._want_keys
        if want is None:
            want = self.caps.is_tty and _stdin_is_tty()
        if want:
            reader = KeyReader(0, self.handle_key)
            if reader.start():
                self._keys = reader

    def _leave(self) -> None:
        if self._keys is not None:
            self._keys.stop()
            self._keys = None
        if self.caps.alt_screen:
            self.writer.write(b"\x1b[0m\x1b[?25h\x1b[?1049l")
        else:
            self.writer.write(f"\x1b[0m\x1b[{self.caps.rows};1H\r\n\x1b[?25h".encode())

    def _on_resize(self) -> None:
        with self._lock:
            self._layout_dirty = True
        self._clear_next = True

    def _next_timer(self, now: float) -> float | None:
        # A deferred repaint is due 1/flood_fps after the pane's last one.
        if not self._deferred_panes():
            return None
        return 1.0 / self.flood_fps

    def _deferred_panes(self) -> bool:
        layout = self._layout
        if layout is None:
            return False
        for index, _rect in layout.panes:
            if index < len(self._order):
                vt = self._order[index].vt
                if vt is not None and vt.dirty:
                    return True
        return False

    def _extra_stats(self) -> dict[str, int]:
        return {"deferred": self._deferred, "dropped_bytes": self._dropped}

    def _full_locked(self, info: AgentInfo) -> bool:
        pane = self._panes.get(info.stream_id)
        return pane is not None and len(pane.pending) >= self.max_pending_bytes

    # -- rendering (render thread) ------------------------------------------------------------------

    def _render(self, now: float, *, final: bool) -> bytes:
        budget = self.feed_budget_bytes
        with self._lock:
            feeds: list[tuple[_Pane, bytes]] = []
            more = False
            for pane in self._order:
                if pane.pending:
                    if len(pane.pending) > budget and not final:
                        chunk = bytes(pane.pending[:budget])
                        del pane.pending[:budget]
                        more = True
                    else:
                        chunk = bytes(pane.pending)
                        pane.pending.clear()
                    feeds.append((pane, chunk))
            if feeds:
                self._room.notify_all()
            order = list(self._order)
            view, focus = self._view, self._focus
            relayout = self._layout_dirty or self._layout is None
            self._layout_dirty = False
            chrome = [p for p in order if p.chrome_dirty]
            for p in chrome:
                p.chrome_dirty = False
        if more:
            self._wake.set()

        enc = FrameEncoder(colour=self.caps.colour, style=self._sgr)
        columns, rows = self.caps.columns, self.caps.rows
        if relayout:
            self._relayout(enc, order, view, focus, columns, rows)
        layout = self._layout
        assert layout is not None
        visible = {index for index, _ in layout.panes}

        hidden = {id(p) for i, p in enumerate(order) if i not in visible}
        for pane, data in feeds:
            vt = pane.vt
            if vt is None:
                vt = pane.vt = VirtualTerminal(*pane.size, newline_mode=not pane.info.pty)
            vt.feed(data)
            if id(pane) in hidden:
                pane.unread += data.count(b"\n")

        touched: dict[int, list[tuple[int, int]]] = {}
        recolour = {id(p) for p in chrome}
        for index, rect in layout.panes:
            pane = order[index]
            focused = index == focus
            if pane.chrome_dirty or relayout or id(pane) in recolour:
                self._draw_chrome(pane, rect, focused, touched)
            self._draw_content(enc, pane, rect, focused, now, final, touched)
        if view is View.TICKER and (feeds or relayout or chrome):
            self._draw_ticker(order, layout, touched)
        self._draw_status(order, layout, touched)

        back, front = self._back, self._front
        for y in sorted(touched):
            for x0, x1 in _merge(touched[y]):
                enc.diff_row(y, back[y], front[y], x0, x1)
        cursor = self._focused_cursor(order, layout, focus)
        body = enc.text()
        if not body and cursor == self._cursor:
            return b""
        shown = self._cursor is not None and self._cursor[2]
        self._cursor = cursor
        self._sgr = enc.style
        # The cursor is hidden while the frame draws (it already is unless the last frame showed it).
        out = [SYNC_BEGIN if self.caps.synchronized_output else "", "\x1b[?25l" if shown else "", body]
        if cursor[2]:
            out.append(f"\x1b[{cursor[1] + 1};{cursor[0] + 1}H\x1b[?25h")
        if self.caps.synchronized_output:
            out.append(SYNC_END)
        return "".join(out).encode("utf-8", "replace")

    def _relayout(
        self, enc: FrameEncoder, order: list[_Pane], view: View, focus: int, columns: int, rows: int
    ) -> None:
        layout = plan_layout(len(order), columns, rows, view, focus)
        self._layout = layout
        if self._clear_next or len(self._front) != rows or (self._front and len(self._front[0]) != columns):
            enc.raw("\x1b[0m\x1b[H\x1b[2J")
            self._front = blank_canvas(columns, rows)
            self._clear_next = False
        self._back = blank_canvas(columns, rows)
        with self._lock:
            for index, rect in layout.panes:
                pane = order[index]
                inner = rect.inner
                pane.size = (max(1, inner.w), max(1, inner.h))
                pane.sized = True
                pane.unread = 0
        for index, _rect in layout.panes:
            pane = order[index]
            if pane.vt is None:
                pane.vt = VirtualTerminal(*pane.size, newline_mode=not pane.info.pty)
            elif (pane.vt.columns, pane.vt.lines) != pane.size:
                pane.vt.resize(*pane.size)
            pane.full_repaint = True
            pane.chrome_dirty = True
        # Panes not yet seen by a layout (hidden from the start) emulate at the grid's size.
        if layout.panes:
            default = order[layout.panes[0][0]].size
            with self._lock:
                for pane in order:
                    if pane.vt is None:
                        pane.size = default
                        pane.sized = True
        self._status = ""

    def _draw_chrome(self, pane: _Pane, rect: Rect, focused: bool, touched: dict[int, list[tuple[int, int]]]) -> None:
        info = pane.info
        style = agent_style(info.agent_type, focused=focused)
        title = f"{info.number} {info.name} · {info.agent_type.name.lower()}"
        if not self.caps.unicode:
            title = title.replace("·", "-")
        note = ""
        if info.finished:
            mark = ("✓ " if info.ok else "✗ ") if self.caps.unicode else ""
            note = mark + (info.note or ("done" if info.ok else "failed"))
        top, bottom, side = border_rows(rect.w, title, note, style, unicode=self.caps.unicode, focused=focused)
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
        self,
        enc: FrameEncoder,
        pane: _Pane,
        rect: Rect,
        focused: bool,
        now: float,
        final: bool,
        touched: dict[int, list[tuple[int, int]]],
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
            if heavy and not focused and not final and now - pane.last_repaint < 1.0 / self.flood_fps:
                with self._lock:
                    self._deferred += 1
                pane.scroll_acc += scrolled
                return
            lines = sorted(vt.dirty)
            scrolled += pane.scroll_acc
            pane.scroll_acc = 0
        else:
            return
        back = self._back
        x0, x1 = inner.x, inner.x + inner.w
        full_width = rect.x == 0 and rect.w == self.caps.columns
        if full_width and 0 < scrolled < inner.h:
            # A full-width pane scrolls on the terminal itself; only new lines are written.
            enc.scroll_up(self._front, inner.y, inner.y + inner.h - 1, scrolled)
            for y in range(inner.y + inner.h - scrolled, inner.y + inner.h):
                _touch(touched, y, rect.x, rect.x + rect.w)
        width = inner.w
        for line in lines:
            if line >= inner.h:
                continue
            y = inner.y + line
            cells = vt.row(line)
            back[y][x0:x1] = cells if len(cells) == width else cells[:width]
            _touch(touched, y, x0, x1)
        vt.dirty.clear()
        pane.last_repaint = now

    def _draw_ticker(self, order: list[_Pane], layout: Layout, touched: dict[int, list[tuple[int, int]]]) -> None:
        back = self._back
        height = layout.status_row
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

    def _draw_status(self, order: list[_Pane], layout: Layout, touched: dict[int, list[tuple[int, int]]]) -> None:
        dot = " · " if self.caps.unicode else " - "
        shown = {index for index, _ in layout.panes}
        parts = [f" {self.title}", f"{len(order)} agents", layout.view.value]
        if layout.view is not View.TICKER:
            for i, pane in enumerate(order):
                if i not in shown and pane.unread:
                    parts.append(f"{pane.info.number} {pane.info.name} +{pane.unread}")
        left = dot.join(parts)
        right = "Tab/1-9 focus  z zoom  t ticker  q quit "
        if left == self._status:
            return
        self._status = left
        y = layout.status_row
        self._back[y][:] = status_row(layout.columns, left, right)
        _touch(touched, y, 0, layout.columns)

    def _focused_cursor(self, order: list[_Pane], layout: Layout, focus: int) -> tuple[int, int, bool]:
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


def _touch(touched: dict[int, list[tuple[int, int]]], y: int, x0: int, x1: int) -> None:
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


def _stdin_is_tty() -> bool:
    try:
        return os.isatty(0)
    except OSError:
        return False
