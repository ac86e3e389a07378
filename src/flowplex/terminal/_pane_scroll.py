"""Scrollback and search in panes mode: the view changes keys ask for, made on the render thread.

Keys and the mouse (any thread) queue a change of a pane's view: ``scroll`` N lines back,
``live``, ``search`` a text, the ``next``/``prev`` match. The render thread, which owns the
panes' screens, makes them before it draws. This part owns that queue, the last search and the
search prompt's keys; the screens' history itself is the emulator's
(:class:`~flowplex.terminal._vt.VirtualTerminal`).
"""

from __future__ import annotations

import threading

from ._pane_board import Pane, PaneBoard
from ._pane_draw import PaneDrawer
from ._sanitize import safe_label

__all__ = ["PaneScrollback"]


class PaneScrollback:
    """The queue of view changes and the search (methods say which thread and lock)."""

    def __init__(self, board: PaneBoard, drawer: PaneDrawer, wake: threading.Event) -> None:
        self._board = board
        self._drawer = drawer
        self._wake = wake
        self._ops: list[tuple[Pane, str, int | str]] = []
        self._search = ""

    @property
    def search(self) -> str:
        """The last text searched for (``""``: none yet)."""
        return self._search

    def queue_locked(self, index: int, op: str, arg: int | str = 0) -> None:
        """Queue a change of pane ``index``'s view (lock held)."""
        if index < len(self._board.order):
            self._ops.append((self._board.order[index], op, arg))

    def queue_focused(self, op: str, arg: int | str = 0) -> None:
        """Queue a change of the focused pane's view, and wake the render thread (any thread)."""
        with self._board.lock:
            self.queue_locked(self._board.focus, op, arg)
        self._wake.set()

    def take(self) -> list[tuple[Pane, str, int | str]]:
        """The changes queued since the last frame (render thread)."""
        with self._board.lock:
            ops, self._ops = self._ops, []
        return ops

    def apply(self, ops: list[tuple[Pane, str, int | str]]) -> None:
        """Scroll and search the panes' screens (render thread)."""
        for pane, op, arg in ops:
            vt = pane.vt
            if vt is None:
                continue
            if op == "scroll":
                moved = vt.scroll_view(int(arg))
            elif op == "live":
                moved = vt.scroll_to_live()
            else:
                moved = vt.search(str(arg), backwards=op != "prev") is not None
                if not moved:
                    with self._board.lock:
                        self._board.notice = f"not found: {safe_label(str(arg), 40)}"
            if moved:
                pane.view_moved()  # a search match is highlighted even where the view stayed
            with self._board.lock:
                self._drawer.redraw_status()

    def prompt_key(self, key: str) -> None:
        """A key while the search prompt is open (lock held): Enter searches the focused pane."""
        board = self._board
        assert board.prompt is not None
        if key == "enter":
            self._search, board.prompt = board.prompt, None
            if self._search:
                self.queue_locked(board.focus, "search", self._search)
        elif key in ("esc", "ctrl-c", "ctrl-g"):
            board.prompt = None
        elif key == "backspace":
            board.prompt = board.prompt[:-1]
        elif len(key) == 1:
            board.prompt += key
        self._drawer.redraw_status()

    def search_again_locked(self, index: int, *, backwards: bool) -> None:
        """Find the last search's next (or previous) match in pane ``index`` (lock held)."""
        self.queue_locked(index, "prev" if backwards else "next", self._search)
