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
from ._control import AgentControl
from ._diff import Canvas, FrameEncoder, blank_canvas
from ._display import AgentInfo, Display
from ._keys import (
    MOUSE_OFF,
    MOUSE_ON,
    MOUSE_RE,
    PASTE_BEGIN,
    PASTE_END,
    PASTE_OFF,
    PASTE_ON,
    Key,
    KeyReader,
    Mouse,
    Paste,
    decode_input,
    mouse_of,
    split_typing,
    typing_key_byte,
)
from ._layout import Layout, Rect, View, plan_layout
from ._sanitize import safe_label
from ._vt import Cell, VirtualTerminal
from ._writer import Writer

__all__ = ["PaneRenderer"]

SYNC_BEGIN: Final = "\x1b[?2026h"
SYNC_END: Final = "\x1b[?2026l"
_DEFAULT_VT: Final = (80, 24)
_WHEEL_LINES: Final = 3
_BRACKETED_PASTE_MODE: Final = 2004 << 5
"""How pyte stores private mode 2004 (a program that asked for bracketed paste)."""
NORMAL_HINTS: Final = "^a type  Tab/1-9 focus  z zoom  PgUp/PgDn scroll  / find  s r k stop restart kill  q quit "
TYPING_HINTS: Final = "keys go to the agent  {key} leaves typing mode "


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
    title_key: tuple[object, ...] = ()
    """What the title last drawn showed (redrawn when its state, scroll position, typing mode,
    name or note changes)."""


class PaneRenderer(Display):
    """Renders each agent in its own pane, like a small agent-aware tmux.

    Keys (when standard input is a terminal): ``Tab``/``Shift-Tab`` cycle the focus, ``1``-``9``
    focus an agent, ``z`` or ``Enter`` zooms the focused agent, ``t`` toggles the ticker view
    (each agent's last line), ``g``/``Esc`` returns to the grid, ``PgUp``/``PgDn`` scroll the
    focused pane's history (``End`` back to live), ``/`` searches it (``n``/``N`` again), ``s``
    stops (SIGTERM) or starts the focused command, ``r`` restarts it, ``k`` kills it (SIGKILL),
    ``x`` closes the pane of an agent that ended, ``q`` (or Ctrl-C) sets
    :attr:`quit_requested`. A mouse click focuses a pane, the wheel scrolls it.

    Typing mode (``typing_key``, default Ctrl-a, enters and leaves it; pressed twice it sends
    itself): every key, paste (bracketed, when the program asked for it) and control key
    (Ctrl-C, Ctrl-Z, Ctrl-D) goes to the focused agent's PTY, whose line discipline signals its
    foreground process group. The status bar says which mode is on.

    Each pane's title shows its agent's state (running, idle, waiting, exited (N), killed
    (SIG)); the status bar counts agents per state and names the waiting ones first, and the
    bell rings once when an agent starts waiting for input (``bell=False`` turns it off).

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
        typing_key: The key that enters and leaves typing mode (``ctrl-a``).
        bell: Ring the terminal bell when an agent starts waiting for input.
        mouse: Report mouse clicks and the wheel (when keys are read).
        history: Lines of scrollback kept per pane.
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
        typing_key: str = "ctrl-a",
        bell: bool = True,
        mouse: bool = True,
        history: int = 10_000,
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
        self._typing_key = typing_key_byte(typing_key)
        self._typing_name = f"Ctrl-{chr(self._typing_key[0] + 0x60)}"
        self.bell = bool(bell)
        self._mouse = bool(mouse)
        if history < 0:
            msg = f"PaneRenderer(history={history!r}): expected a number of lines >= 0"
            raise UsageError(msg)
        self.history = int(history)
        self._want_keys = keys
        self._keys: KeyReader | None = None
        self._typing = False
        self._prompt: str | None = None
        """The search being typed after ``/`` (None: no prompt)."""
        self._search = ""
        self._notice = ""
        """A one-off message for the status bar (a search that found nothing...)."""
        self._ring_bell = False
        self._pasting: bool | None = None
        """Inside a paste (its end marker not seen yet): whether the markers are passed on."""
        self._paste_target = False
        """The paste goes to the focused agent (typing mode when it began)."""
        self._view_ops: list[tuple[_Pane, str, int | str]] = []
        self.interrupted = False
        """Ctrl-C was pressed outside typing mode (the host exits with 130)."""
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
        self._status_key: tuple[object, ...] = ()
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
        pane = self._panes.get(info.stream_id)
        if pane is not None:
            pane.chrome_dirty = True

    def _on_feed(self, info: AgentInfo, data: bytes) -> None:
        pane = self._panes.get(info.stream_id)
        if pane is None:
            return  # its pane was closed (x): what it still says is not shown
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
        pane = self._panes.get(info.stream_id)
        if pane is None:
            return
        pane.chrome_dirty = True
        note = info.note or ("done" if info.ok else "failed")
        rule = "──" if self.caps.unicode else "--"
        colour = "2" if info.ok else "31"
        lead = b"" if pane.ended_line else b"\r\n"
        pane.pending += lead + f"\x1b[0;{colour}m{rule} {note}\x1b[0m\r\n".encode()

    def _on_begin(self, info: AgentInfo, note: str) -> None:
        pane = self._panes.get(info.stream_id)
        if pane is None:
            return
        pane.chrome_dirty = True
        rule = "──" if self.caps.unicode else "--"
        lead = b"" if pane.ended_line else b"\r\n"
        pane.pending += lead + f"\x1b[0;2m{rule} {note or 'start'}\x1b[0m\r\n".encode()

    def _on_waiting(self, info: AgentInfo) -> None:
        pane = self._panes.get(info.stream_id)
        if pane is not None:
            pane.chrome_dirty = True
        if info.waiting and self.bell:
            self._ring_bell = True
        self._wake.set()

    def _on_poll(self, now: float) -> None:
        # "running" turns into "idle" a second after the last output: a frame redraws the titles
        # and the status line (only then: a frame for nothing would take a frame slot).
        with self._lock:
            states = tuple(p.info.state_key(now) for p in self._order)
        if not self._status_key or states != self._status_key[0]:
            self._wake.set()

    @property
    def keeps_agents(self) -> bool:
        return self.interactive

    # -- keys and queries (any thread) --------------------------------------------------------------

    @property
    def typing(self) -> bool:
        """Whether typing mode is on: keys go to the focused agent."""
        return self._typing

    def handle_input(self, data: bytes) -> None:
        """Bytes read from the keyboard (raw mode): typing mode, mouse, paste, or keys.

        A paste may arrive over several reads: until its end marker, everything is pasted text
        (for the focused agent in typing mode, dropped otherwise), never keys.
        """
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
            if self._typing:
                data = self._type(data)
                continue
            k = data.find(self._typing_key)
            head, data = (data, b"") if k < 0 else (data[:k], data[k + len(self._typing_key):])
            for event in decode_input(head):
                self._handle_event(event)
            if k >= 0:
                self._set_typing(True)
                if not self._typing:
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
            self._set_typing(False)
            return rest
        return b""

    def _send(self, data: bytes) -> None:
        control = self._focused_control()
        if control is not None:
            control.write(data)
            self._view_op("live")

    def _begin_paste(self) -> None:
        """A paste starts: it goes to the focused agent in typing mode (dropped whole otherwise),
        with the markers only for a program that asked for bracketed paste."""
        pane = self._focused_pane() if self._typing else None
        self._paste_target = pane is not None
        vt = pane.vt if pane is not None else None
        self._pasting = vt is not None and _BRACKETED_PASTE_MODE in vt.screen.mode
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

    def _set_typing(self, on: bool) -> None:
        with self._lock:
            pane = self._focused_pane_locked()
            if on and (pane is None or not pane.info.controllable):
                self._notice = "typing: the focused agent takes no input" if pane is not None else ""
                on = False
            self._typing = on
            self._prompt = None  # a search being typed ends: keys now go elsewhere
            self._status = ""
        self._wake.set()

    def _focused_pane_locked(self) -> _Pane | None:
        return self._order[self._focus] if self._focus < len(self._order) else None

    def _focused_pane(self) -> _Pane | None:
        with self._lock:
            return self._focused_pane_locked()

    def _focused_control(self) -> AgentControl | None:
        with self._lock:
            pane = self._focused_pane_locked()
            return None if pane is None else self._controls.get(pane.info.stream_id)

    def _handle_event(self, event: Key | Mouse | Paste) -> None:
        if isinstance(event, Key):
            self.handle_key(event.name)
        elif isinstance(event, Mouse):
            self._handle_mouse(event)
        # A paste outside typing mode is not for flowplex's keys: ignored.

    def _handle_mouse(self, event: Mouse) -> None:
        layout = self._layout
        if layout is None or not event.pressed:
            return
        for index, rect in layout.panes:
            if rect.x <= event.x < rect.x + rect.w and rect.y <= event.y < rect.y + rect.h:
                with self._lock:
                    if event.wheel:
                        self._view_op_locked(index, "scroll", -event.wheel * _WHEEL_LINES)
                    elif event.button & 3 == 0 and index != self._focus:
                        self._focus = index
                        self._layout_dirty = self._view is not View.GRID
                        for pane in self._order:
                            pane.chrome_dirty = True
                        self._status = ""
                self._wake.set()
                return

    def _view_op(self, op: str, arg: int | str = 0) -> None:
        with self._lock:
            self._view_op_locked(self._focus, op, arg)
        self._wake.set()

    def _view_op_locked(self, index: int, op: str, arg: int | str = 0) -> None:
        """Queue a change of pane ``index``'s view (``scroll`` N lines back, ``live``, ``search``
        text, ``next``/``prev`` match): the render thread, which owns the pane's screen, makes it."""
        if index < len(self._order):
            self._view_ops.append((self._order[index], op, arg))

    def _apply_view_ops(self, ops: list[tuple[_Pane, str, int | str]]) -> None:
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
                    with self._lock:
                        self._notice = f"not found: {safe_label(str(arg), 40)}"
            if moved:
                _view_moved(pane)  # a search match is highlighted even where the view stayed
            with self._lock:
                self._status = ""

    def _prompt_key(self, key: str) -> None:
        """A key while the search prompt is open (lock held)."""
        assert self._prompt is not None
        if key == "enter":
            self._search, self._prompt = self._prompt, None
            if self._search:
                self._view_op_locked(self._focus, "search", self._search)
        elif key in ("esc", "ctrl-c", "ctrl-g"):
            self._prompt = None
        elif key == "backspace":
            self._prompt = self._prompt[:-1]
        elif len(key) == 1:
            self._prompt += key
        self._status = ""

    def _act(self, action: str) -> None:
        """Stop/start, restart or kill the focused agent (lock held)."""
        pane = self._focused_pane_locked()
        if pane is None:
            return
        control = self._controls.get(pane.info.stream_id)
        if control is None:
            self._notice = f"{pane.info.name} is not a command: nothing to {action}"
            return
        if action == "stop" and (pane.info.finished or not pane.info.started):
            action = "start"
        control.request(action)
        self._notice = f"{action}: {pane.info.name}"
        self._status = ""

    def _close_pane(self) -> None:
        """Remove the focused pane if its agent ended (lock held); a restart it had pending is
        called off, so nothing runs without a pane."""
        pane = self._focused_pane_locked()
        if pane is None:
            return
        if not pane.info.finished:
            self._notice = f"{pane.info.name} still runs: stop it (s) or kill it (k) first"
            return
        control = self._controls.get(pane.info.stream_id)
        if control is not None:
            control.request("stop")
        self._order.pop(self._focus)
        del self._panes[pane.info.stream_id]
        self._focus = min(self._focus, max(0, len(self._order) - 1))
        self._layout_dirty = True

    def notice(self, text: str) -> None:
        """Show a line of flowplex's own (a warning) in the status bar, never in an agent's pane."""
        with self._lock:
            self._notice = "[flowplex] " + safe_label(text.strip(), 200)
            self._status = ""
        self._wake.set()

    def handle_key(self, key: str) -> None:
        """Focus, zoom, ticker, scrollback, search, agent control and quit keys (class docstring)."""
        with self._lock:
            if self._prompt is not None:
                self._prompt_key(key)
                self._wake.set()
                return
            n = len(self._order)
            view, focus = self._view, self._focus
            self._notice = ""
            if key in ("q", "Q"):
                self.quit_requested.set()
            elif key == "ctrl-c":
                self.interrupted = True
                self.quit_requested.set()
            elif n and key in ("tab", "right", "down"):
                focus = (focus + 1) % n
            elif n and key in ("btab", "left", "up"):
                focus = (focus - 1) % n
            elif len(key) == 1 and key.isdigit() and key != "0":
                focus = next((i for i, p in enumerate(self._order) if p.info.number == int(key)), focus)
            elif key in ("pgup", "pgdn") and n:
                page = max(1, self._order[focus].size[1] - 1)
                self._view_op_locked(focus, "scroll", page if key == "pgup" else -page)
            elif key == "end" and n:
                self._view_op_locked(focus, "live")
            elif key == "/" and n:
                self._prompt = ""
            elif key in ("n", "N") and n and self._search:
                self._view_op_locked(focus, "next" if key == "n" else "prev", self._search)
            elif key in ("s", "r", "k") and n:
                self._act({"s": "stop", "r": "restart", "k": "kill"}[key])
            elif key == "x" and n:
                self._close_pane()
                n = len(self._order)
                view, focus = self._view, self._focus
            elif key in ("z", "enter"):
                view = View.GRID if view is View.ZOOM else View.ZOOM
            elif key == "t":
                view = View.GRID if view is View.TICKER else View.TICKER
            elif key in ("g", "esc"):
                view = View.GRID
            if (view, focus) != (self._view, self._focus):
                self._view, self._focus = view, focus
                self._layout_dirty = True
            self._status = ""
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
            if pane is None:
                return None
            if not pane.sized:
                self._plan_sizes_locked()
            return pane.size if pane.sized else None

    def _plan_sizes_locked(self) -> None:
        """Give every pane the size the next layout will give it, so that a program started
        before the first frame sees its real size (lock held)."""
        layout = plan_layout(len(self._order), self.caps.columns, self.caps.rows, self._view, self._focus)
        default: tuple[int, int] | None = None
        for index, rect in layout.panes:
            pane = self._order[index]
            pane.size = (max(1, rect.inner.w), max(1, rect.inner.h))
            pane.sized = True
            default = default or pane.size
        for pane in self._order:
            if not pane.sized and default is not None:
                pane.size, pane.sized = default, True

    # -- lifecycle ----------------------------------------------------------------------------------

    def _enter(self) -> None:
        enter = "\x1b[?1049h" if self.caps.alt_screen else ""
        self.writer.write((enter + "\x1b[?25l\x1b[0m\x1b[H\x1b[2J").encode())
        want = self._want_keys
        if want is None:
            want = self.caps.is_tty and _stdin_is_tty()
        if want:
            reader = KeyReader(0, on_input=self.handle_input)
            if reader.start():
                self._keys = reader
                modes = PASTE_ON + (MOUSE_ON if self._mouse else "")
                self.writer.write(modes.encode())

    def _leave(self) -> None:
        if self._keys is not None:
            self.writer.write((PASTE_OFF + (MOUSE_OFF if self._mouse else "")).encode())
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
        cut = sum(p.vt.cut for p in self._panes.values() if p.vt is not None)
        return {"deferred": self._deferred, "dropped_bytes": self._dropped, "cut_sequences": cut}

    def _full_locked(self, info: AgentInfo) -> bool:
        pane = self._panes.get(info.stream_id)
        return pane is not None and len(pane.pending) >= self.max_pending_bytes

    # -- rendering (render thread) ------------------------------------------------------------------

    def _render(self, now: float, *, final: bool) -> bytes:
        budget = self.feed_budget_bytes
        with self._lock:
            ops, self._view_ops = self._view_ops, []
        if ops:
            self._apply_view_ops(ops)
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
                vt = pane.vt = VirtualTerminal(*pane.size, newline_mode=not pane.info.pty, history=self.history)
            vt.feed(data)
            if id(pane) in hidden:
                pane.unread += data.count(b"\n")

        touched: dict[int, list[tuple[int, int]]] = {}
        recolour = {id(p) for p in chrome}
        for index, rect in layout.panes:
            pane = order[index]
            focused = index == focus
            if (pane.chrome_dirty or relayout or id(pane) in recolour
                    or self._title_key(pane, focused, now) != pane.title_key):
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
        if self._ring_bell:
            self._ring_bell = False
            out.append("\a")
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
                pane.vt = VirtualTerminal(*pane.size, newline_mode=not pane.info.pty, history=self.history)
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

    def _title_key(self, pane: _Pane, focused: bool, now: float) -> tuple[object, ...]:
        vt = pane.vt
        info = pane.info
        return (info.state_key(now), vt.view_offset if vt is not None else 0, focused and self._typing,
                info.name, info.agent_type, info.note)

    def _title(self, pane: _Pane, focused: bool) -> tuple[str, str]:
        """A pane's title (number, name, state, scroll position, typing) and its right-hand note."""
        info = pane.info
        vt = pane.vt
        scrolled = f" · ↑{vt.view_offset}" if vt is not None and vt.view_offset else ""
        typing = " · typing" if focused and self._typing else ""
        kind = info.agent_type.name.lower()
        title = f"{info.number} {info.name} · {kind} · {info.state(self._clock())}{scrolled}{typing}"
        if not self.caps.unicode:
            title = title.replace("·", "-").replace("↑", "^")
        note = ""
        if info.finished:
            mark = ("✓ " if info.ok else "✗ ") if self.caps.unicode else ""
            note = mark + (info.note or ("done" if info.ok else "failed"))
        return title, note

    def _draw_chrome(self, pane: _Pane, rect: Rect, focused: bool, touched: dict[int, list[tuple[int, int]]]) -> None:
        info = pane.info
        style = agent_style(info.agent_type, focused=focused)
        title, note = self._title(pane, focused)
        pane.title_key = self._title_key(pane, focused, self._clock())
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

    def _draw_ticker(self, order: list[_Pane], layout: Layout, touched: dict[int, list[tuple[int, int]]]) -> None:
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

    def _draw_status(self, order: list[_Pane], layout: Layout, touched: dict[int, list[tuple[int, int]]]) -> None:
        now = self._clock()
        shown = {index for index, _ in layout.panes}
        key = (tuple(p.info.state_key(now) for p in order), self._prompt, self._typing, self._notice, self._focus,
               layout.view, tuple(p.unread for i, p in enumerate(order) if i not in shown), len(order))
        if key == self._status_key and self._status:
            return  # nothing it shows changed: no need to build the text
        self._status_key = key
        dot = " · " if self.caps.unicode else " - "
        states: dict[str, int] = {}
        for pane in order:
            word = pane.info.state(now).split(" (")[0]
            states[word] = states.get(word, 0) + 1
        # Waiting agents first: they are the ones that need the user.
        counts = [f"{states.pop('waiting')} waiting"] if "waiting" in states else []
        counts += [f"{count} {word}" for word, count in sorted(states.items())]
        if self._prompt is not None:
            parts = [f" /{self._prompt}"]
        elif self._typing:
            focused = order[self._focus].info if self._focus < len(order) else None
            who = f"{focused.number} {focused.name}" if focused is not None else "?"
            parts = [f" TYPING → {who}" if self.caps.unicode else f" TYPING -> {who}", *counts]
        else:
            parts = [f" {self.title}", f"{len(order)} agents", layout.view.value, *counts]
            waiting = [p.info for p in order if p.info.waiting and not p.info.finished]
            if waiting:
                parts.append("needs input: " + " ".join(f"{i.number} {i.name}" for i in waiting))
            if layout.view is not View.TICKER:
                for i, pane in enumerate(order):
                    if i not in shown and pane.unread:
                        parts.append(f"{pane.info.number} {pane.info.name} +{pane.unread}")
        if self._notice:
            parts.append(self._notice)
        left = dot.join(parts)
        right = TYPING_HINTS.format(key=self._typing_name) if self._typing else NORMAL_HINTS
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


def _view_moved(pane: _Pane) -> None:
    """The pane's view scrolled or jumped: repaint it whole (no terminal scroll from before)."""
    pane.full_repaint = True
    pane.scroll_acc = 0


def _highlight(cells: list[Cell], x0: int, x1: int) -> list[Cell]:
    """``cells`` with the search match ``x0:x1`` in reverse video."""
    out = list(cells)
    for x in range(max(0, x0), min(len(out), x1)):
        out[x] = out[x]._replace(reverse=not out[x].reverse)
    return out


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
