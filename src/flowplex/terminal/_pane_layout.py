"""Layout of the panes: where each one goes, its size, and its emulated screen.

Owns the layout last drawn (render thread) and the panes' emulators: it creates each pane's
:class:`~flowplex.terminal._vt.VirtualTerminal` at the size its rectangle gives it, resizes it
when the layout changes, and feeds it. It also answers, before the first frame, what size a
pane will have (a program started then sees its real size). The rectangles themselves come
from the pure :func:`~flowplex.terminal._layout.plan_layout`.
"""

from __future__ import annotations

from ._layout import Layout, Rect, View, plan_layout
from ._pane_board import Pane, PaneBoard
from ._vt import VirtualTerminal

__all__ = ["PaneLayout"]


class PaneLayout:
    """The current layout and the panes' screens (render thread, unless said otherwise)."""

    def __init__(self, board: PaneBoard) -> None:
        self._board = board
        self.current: Layout | None = None
        """The layout of the last frame (None before the first)."""

    def relayout(self, order: list[Pane], view: View, focus: int, columns: int, rows: int, history: int) -> Layout:
        """Lay the panes out anew; every shown pane gets its size, a screen, a full repaint."""
        layout = plan_layout(len(order), columns, rows, view, focus)
        self.current = layout
        with self._board.lock:
            for index, rect in layout.panes:
                pane = order[index]
                inner = rect.inner
                pane.size = (max(1, inner.w), max(1, inner.h))
                pane.sized = True
                pane.unread = 0
        for index, _rect in layout.panes:
            pane = order[index]
            if pane.vt is None:
                pane.vt = VirtualTerminal(*pane.size, newline_mode=not pane.info.pty, history=history)
            elif (pane.vt.columns, pane.vt.lines) != pane.size:
                pane.vt.resize(*pane.size)
            pane.full_repaint = True
            pane.chrome_dirty = True
        # Panes not yet seen by a layout (hidden from the start) emulate at the grid's size.
        if layout.panes:
            default = order[layout.panes[0][0]].size
            with self._board.lock:
                for pane in order:
                    if pane.vt is None:
                        pane.size = default
                        pane.sized = True
        return layout

    def feed(self, order: list[Pane], feeds: list[tuple[Pane, bytes]], history: int) -> None:
        """Run each pane's output through its emulator; a hidden pane counts its unread lines."""
        layout = self.current
        assert layout is not None
        visible = {index for index, _ in layout.panes}
        hidden = {id(p) for i, p in enumerate(order) if i not in visible}
        for pane, data in feeds:
            vt = pane.vt
            if vt is None:
                vt = pane.vt = VirtualTerminal(*pane.size, newline_mode=not pane.info.pty, history=history)
            vt.feed(data)
            if id(pane) in hidden:
                pane.unread += data.count(b"\n")

    def plan_sizes_locked(self, columns: int, rows: int) -> None:
        """Give every pane the size the next layout will give it, so that a program started
        before the first frame sees its real size (any thread, lock held)."""
        board = self._board
        layout = plan_layout(len(board.order), columns, rows, board.view, board.focus)
        default: tuple[int, int] | None = None
        for index, rect in layout.panes:
            pane = board.order[index]
            pane.size = (max(1, rect.inner.w), max(1, rect.inner.h))
            pane.sized = True
            default = default or pane.size
        for pane in board.order:
            if not pane.sized and default is not None:
                pane.size, pane.sized = default, True

    def pane_at(self, x: int, y: int) -> int | None:
        """The index of the shown pane whose rectangle holds cell ``(x, y)`` (any thread)."""
        layout = self.current
        if layout is None:
            return None
        for index, rect in layout.panes:
            if rect.x <= x < rect.x + rect.w and rect.y <= y < rect.y + rect.h:
                return index
        return None

    def has_deferred(self) -> bool:
        """Whether a shown pane has changes not drawn yet (a flooding pane's postponed repaint)."""
        layout = self.current
        if layout is None:
            return False
        order = self._board.order
        for index, _rect in layout.panes:
            if index < len(order):
                vt = order[index].vt
                if vt is not None and vt.dirty:
                    return True
        return False

    def content_rects(self) -> dict[int, Rect] | None:
        """The content area of each shown pane by stream id (None before the first layout)."""
        layout = self.current
        if layout is None:
            return None
        with self._board.lock:
            order = list(self._board.order)
        return {order[index].info.stream_id: rect.inner for index, rect in layout.panes if index < len(order)}
