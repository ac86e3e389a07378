"""Keys and input in panes mode: what the keyboard and the mouse do.

Bytes read from the keyboard (raw mode, the key reader's thread) become typing for the focused
agent's PTY in typing mode, a paste (whole, across reads), mouse clicks and wheel turns, or
flowplex's keys: focus, zoom, ticker, scrollback and search, stop/restart/kill, close, quit.
This part owns the typing key, the paste in progress and whether Ctrl-C asked to quit; it
changes the board under the display's lock and wakes the render thread, which draws the result.
"""

from __future__ import annotations

import threading
from typing import Final

from ._control import AgentControl
from ._keys import MOUSE_RE, PASTE_BEGIN, PASTE_END, Key, Mouse, Paste, decode_input, mouse_of, split_typing
from ._layout import View
from ._pane_board import PaneBoard
from ._pane_draw import PaneDrawer
from ._pane_layout import PaneLayout
from ._pane_scroll import PaneScrollback

__all__ = ["PaneInput"]

WHEEL_LINES: Final = 3
BRACKETED_PASTE_MODE: Final = 2004 << 5
"""How pyte stores private mode 2004 (a program that asked for bracketed paste)."""


class PaneInput:
    """Turns input into changes of the board and writes to the focused agent (any thread).

    Args:
        typing_key: The byte that enters and leaves typing mode.
        controls: The display's controls by stream id (read under the lock).
        quit_requested: Set when the user asks to quit.
    """

    def __init__(
        self,
        board: PaneBoard,
        layout: PaneLayout,
        drawer: PaneDrawer,
        scroll: PaneScrollback,
        *,
        typing_key: bytes,
        controls: dict[int, AgentControl],
        wake: threading.Event,
        quit_requested: threading.Event,
    ) -> None:
        self._board = board
        self._layout = layout
        self._drawer = drawer
        self._scroll = scroll
        self._typing_key = typing_key
        self._controls = controls
        self._wake = wake
        self._quit = quit_requested
        self._pasting: bool | None = None
        """Inside a paste (its end marker not seen yet): whether the markers are passed on."""
        self._paste_target = False
        """The paste goes to the focused agent (typing mode when it began)."""
        self.interrupted = False
        """Ctrl-C was pressed outside typing mode (the host exits with 130)."""

    def handle_input(self, data: bytes) -> None:
        """Bytes read from the keyboard: pastes apart, then keys or typing (see the renderer)."""
        while data:
            if self._pasting is not None:
                data = self._paste(data)
                continue
            start = data.find(PASTE_BEGIN)
            head, data = (data, b"") if start < 0 else (data[:start], data[start + len(PASTE_BEGIN):])
            self._keys_or_typing(head)
            if start >= 0:
                self._begin_paste()

    def _keys_or_typing(self, data: bytes) -> None:
        """Input without pastes: keys in normal mode, the agent's in typing mode."""
        while data:
            if self._board.typing:
                data = self._type(data)
                continue
            k = data.find(self._typing_key)
            head, data = (data, b"") if k < 0 else (data[:k], data[k + len(self._typing_key):])
            for event in decode_input(head):
                self._handle_event(event)
            if k >= 0:
                self.set_typing(True)
                if not self._board.typing:
                    return  # nothing to type into: the rest is not for an agent either

    def _type(self, data: bytes) -> bytes:
        """Typing mode: hand ``data`` to the focused agent up to the typing key; the rest comes back."""
        mice, data = _take_mouse(data)
        for mouse in mice:
            self._handle_event(mouse)
        text, pressed, rest = split_typing(data, self._typing_key)
        if text:
            self._send(text)
        if pressed:
            self.set_typing(False)
            return rest
        return b""

    def _send(self, data: bytes) -> None:
        with self._board.lock:
            pane = self._board.focused_locked()
            control = None if pane is None else self._controls.get(pane.info.stream_id)
        if control is not None:
            control.write(data)
            self._scroll.queue_focused("live")

    def _begin_paste(self) -> None:
        """A paste starts: it goes to the focused agent in typing mode (dropped whole otherwise),
        with the markers only for a program that asked for bracketed paste."""
        pane = self._board.focused() if self._board.typing else None
        self._paste_target = pane is not None
        vt = pane.vt if pane is not None else None
        self._pasting = vt is not None and BRACKETED_PASTE_MODE in vt.screen.mode
        if self._pasting:
            self._send(PASTE_BEGIN)

    def _paste(self, data: bytes) -> bytes:
        end = data.find(PASTE_END)
        body, rest = (data, b"") if end < 0 else (data[:end], data[end + len(PASTE_END):])
        if self._paste_target and body:
            self._send(body)
        if end >= 0:
            if self._paste_target and self._pasting:
                self._send(PASTE_END)
            self._pasting = None
        return rest

    def set_typing(self, on: bool) -> None:
        """Enter or leave typing mode (only for an agent that takes input)."""
        board = self._board
        with board.lock:
            pane = board.focused_locked()
            if on and (pane is None or not pane.info.controllable):
                board.notice = "typing: the focused agent takes no input" if pane is not None else ""
                on = False
            board.typing = on
            board.prompt = None  # a search being typed ends: keys now go elsewhere
            self._drawer.redraw_status()
        self._wake.set()

    def _handle_event(self, event: Key | Mouse | Paste) -> None:
        if isinstance(event, Key):
            self.handle_key(event.name)
        elif isinstance(event, Mouse):
            self._handle_mouse(event)
        # A paste outside typing mode is not for flowplex's keys: ignored.

    def _handle_mouse(self, event: Mouse) -> None:
        if not event.pressed:
            return
        index = self._layout.pane_at(event.x, event.y)
        if index is None:
            return
        board = self._board
        with board.lock:
            if event.wheel:
                self._scroll.queue_locked(index, "scroll", -event.wheel * WHEEL_LINES)
            elif event.button & 3 == 0 and index != board.focus:
                board.focus = index
                board.layout_dirty = board.view is not View.GRID
                for pane in board.order:
                    pane.chrome_dirty = True
                self._drawer.redraw_status()
        self._wake.set()

    def handle_key(self, key: str) -> None:
        """Focus, zoom, ticker, scrollback, search, agent control and quit keys (see the renderer)."""
        board = self._board
        with board.lock:
            if board.prompt is not None:
                self._scroll.prompt_key(key)
                self._wake.set()
                return
            n = len(board.order)
            view, focus = board.view, board.focus
            board.notice = ""
            if key in ("q", "Q"):
                self._quit.set()
            elif key == "ctrl-c":
                self.interrupted = True
                self._quit.set()
            elif n and key in ("tab", "right", "down"):
                focus = (focus + 1) % n
            elif n and key in ("btab", "left", "up"):
                focus = (focus - 1) % n
            elif len(key) == 1 and key.isdigit() and key != "0":
                focus = next((i for i, p in enumerate(board.order) if p.info.number == int(key)), focus)
            elif key in ("pgup", "pgdn") and n:
                page = max(1, board.order[focus].size[1] - 1)
                self._scroll.queue_locked(focus, "scroll", page if key == "pgup" else -page)
            elif key == "end" and n:
                self._scroll.queue_locked(focus, "live")
            elif key == "/" and n:
                board.prompt = ""
            elif key in ("n", "N") and n and self._scroll.search:
                self._scroll.search_again_locked(focus, backwards=key == "N")
            elif key in ("s", "r", "k") and n:
                self._act({"s": "stop", "r": "restart", "k": "kill"}[key])
            elif key == "x" and n:
                self._close_pane()
                n = len(board.order)
                view, focus = board.view, board.focus
            elif key in ("z", "enter"):
                view = View.GRID if view is View.ZOOM else View.ZOOM
            elif key == "t":
                view = View.GRID if view is View.TICKER else View.TICKER
            elif key in ("g", "esc"):
                view = View.GRID
            if (view, focus) != (board.view, board.focus):
                board.view, board.focus = view, focus
                board.layout_dirty = True
            self._drawer.redraw_status()
        self._wake.set()

    def _act(self, action: str) -> None:
        """Stop/start, restart or kill the focused agent (lock held)."""
        board = self._board
        pane = board.focused_locked()
        if pane is None:
            return
        control = self._controls.get(pane.info.stream_id)
        if control is None:
            board.notice = f"{pane.info.name} is not a command: nothing to {action}"
            return
        if action == "stop" and (pane.info.finished or not pane.info.started):
            action = "start"
        control.request(action)
        board.notice = f"{action}: {pane.info.name}"
        self._drawer.redraw_status()

    def _close_pane(self) -> None:
        """Remove the focused pane if its agent ended (lock held); a restart it had pending is
        called off, so nothing runs without a pane."""
        board = self._board
        pane = board.focused_locked()
        if pane is None:
            return
        if not pane.info.finished:
            board.notice = f"{pane.info.name} still runs: stop it (s) or kill it (k) first"
            return
        control = self._controls.get(pane.info.stream_id)
        if control is not None:
            control.request("stop")
        board.order.pop(board.focus)
        del board.panes[pane.info.stream_id]
        board.focus = min(board.focus, max(0, len(board.order) - 1))
        board.layout_dirty = True


def _take_mouse(data: bytes) -> tuple[list[Mouse], bytes]:
    """The mouse reports in ``data`` (typing mode keeps them for flowplex), and the rest."""
    if b"\x1b[<" not in data:
        return [], data
    mice: list[Mouse] = []
    rest = bytearray()
    i = 0
    for match in MOUSE_RE.finditer(data):
        rest += data[i:match.start()]
        mice.append(mouse_of(match))
        i = match.end()
    rest += data[i:]
    return mice, bytes(rest)
