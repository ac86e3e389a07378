"""Panes mode: every agent in its own emulated screen, laid out in a grid, drawn without tearing.

Each agent's bytes drive its own :class:`~flowplex.terminal._vt.VirtualTerminal`. A frame is
composed into a canvas of cells only from what changed (pyte's dirty lines, chrome that
changed), diffed against the canvas the terminal already shows, and written as one write:
``ESC[?2026h`` (synchronized output) + hidden cursor + absolute moves and changed runs + the
cursor back in the focused pane (when it runs a program) + ``ESC[?2026l``. Frames are composed
at most ``fps`` times a second and only when something changed; the alternate screen keeps the
shell's screen intact.

The renderer composes parts that each own one job: the board (:mod:`._pane_board`: the panes
and the view, shared under the lock), keys and input (:mod:`._pane_input`), layout and the
panes' emulators (:mod:`._pane_layout`), drawing (:mod:`._pane_draw`) and scrollback and
search (:mod:`._pane_scroll`). This module joins them to the :class:`Display` frame loop.

Flood control: a background pane whose every frame would be a near-full repaint (it scrolls
faster than anyone can read) is repainted at most ``flood_fps`` times a second; the postponed
repaints are counted in ``stats().deferred_repaints``. tmux throttles flooding panes the same
way. The focused pane is never throttled.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

from ..errors import UsageError
from ._caps import TermCaps
from ._display import AgentInfo, Display
from ._keys import MOUSE_OFF, MOUSE_ON, PASTE_OFF, PASTE_ON, KeyReader, typing_key_byte
from ._layout import Rect, View
from ._pane_board import PaneBoard
from ._pane_draw import PaneDrawer
from ._pane_input import PaneInput
from ._pane_layout import PaneLayout
from ._pane_scroll import PaneScrollback
from ._sanitize import safe_label
from ._writer import Writer

__all__ = ["PaneRenderer"]


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
        key = typing_key_byte(typing_key)
        self.bell = bool(bell)
        self._mouse = bool(mouse)
        if history < 0:
            msg = f"PaneRenderer(history={history!r}): expected a number of lines >= 0"
            raise UsageError(msg)
        self.history = int(history)
        self._want_keys = keys
        self._keys: KeyReader | None = None
        # The parts, bottom up; each is told only about the parts below it.
        self._board = PaneBoard(self._lock)
        self._layout = PaneLayout(self._board)
        self._drawer = PaneDrawer(self._board, self._clock, f"Ctrl-{chr(key[0] + 0x60)}")
        self._scroll = PaneScrollback(self._board, self._drawer, self._wake)
        self._input = PaneInput(self._board, self._layout, self._drawer, self._scroll, typing_key=key,
                                controls=self._roster.controls, wake=self._wake, quit_requested=self.quit_requested)
        self._poll_hook = self._on_poll
        self._resize_hook = self._on_resize

    # -- feeding (any thread, lock held) ----------------------------------------------------------

    def _on_agent(self, info: AgentInfo, change: str) -> None:
        if change == "new":
            self._board.add_locked(info)
            return
        self._board.changed_locked(info.stream_id)
        if change == "waiting":
            if info.waiting and self.bell:
                self._board.ring_bell = True
            self._wake.set()

    def _on_feed(self, info: AgentInfo, data: bytes) -> None:
        self._board.feed_locked(info.stream_id, data, self.max_pending_bytes)

    def _on_run(self, info: AgentInfo, note: str) -> None:
        rule = "──" if self.caps.unicode else "--"
        if info.finished:
            note = info.note or ("done" if info.ok else "failed")
            colour = "2" if info.ok else "31"
            self._board.say_locked(info.stream_id, f"\x1b[0;{colour}m{rule} {note}\x1b[0m\r\n")
        else:
            self._board.say_locked(info.stream_id, f"\x1b[0;2m{rule} {note or 'start'}\x1b[0m\r\n")

    def _on_poll(self, now: float) -> None:
        # "running" turns into "idle" a second after the last output: a frame redraws the titles
        # and the status line (only then: a frame for nothing would take a frame slot).
        with self._lock:
            states = tuple(p.info.state_key(now) for p in self._board.order)
        if states != self._drawer.status_states():
            self._wake.set()

    @property
    def keeps_agents(self) -> bool:
        return self.interactive

    # -- keys and queries (any thread) --------------------------------------------------------------

    @property
    def typing(self) -> bool:
        """Whether typing mode is on: keys go to the focused agent."""
        return self._board.typing

    @property
    def interrupted(self) -> bool:
        """Ctrl-C was pressed outside typing mode (the host exits with 130)."""
        return self._input.interrupted

    def handle_input(self, data: bytes) -> None:
        """Bytes read from the keyboard (raw mode): typing mode, mouse, paste, or keys.

        A paste may arrive over several reads: until its end marker, everything is pasted text
        (for the focused agent in typing mode, dropped otherwise), never keys.
        """
        self._input.handle_input(data)

    def handle_key(self, key: str) -> None:
        """Focus, zoom, ticker, scrollback, search, agent control and quit keys (class docstring)."""
        self._input.handle_key(key)

    def notice(self, text: str) -> None:
        """Show a line of flowplex's own (a warning) in the status bar, never in an agent's pane."""
        with self._lock:
            self._board.notice = "[flowplex] " + safe_label(text.strip(), 200)
            self._drawer.redraw_status()
        self._wake.set()

    @property
    def interactive(self) -> bool:
        """Whether keys are being read from the terminal."""
        return self._keys is not None

    @property
    def view(self) -> View:
        """The current view."""
        return self._board.view

    @property
    def focus(self) -> int:
        """Index of the focused agent (0-based, in stream-id order)."""
        return self._board.focus

    def pane_size(self, stream_id: int) -> tuple[int, int] | None:
        """``(columns, rows)`` of the agent's content area (its last size while hidden); None
        before the first layout."""
        with self._lock:
            pane = self._board.panes.get(stream_id)
            if pane is None:
                return None
            if not pane.sized:
                self._layout.plan_sizes_locked(self.caps.columns, self.caps.rows)
            return pane.size if pane.sized else None

    def pane_rects(self) -> dict[int, Rect] | None:
        """Where each shown agent's content was last drawn, by stream id (None before the first frame)."""
        return self._layout.content_rects()

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
            self._board.layout_dirty = True
        self._drawer.clear()

    def _next_timer(self, now: float) -> float | None:
        # A deferred repaint is due 1/flood_fps after the pane's last one.
        if not self._layout.has_deferred():
            return None
        return 1.0 / self.flood_fps

    def _extra_stats(self) -> dict[str, int]:
        cut = sum(p.vt.cut for p in self._board.panes.values() if p.vt is not None)
        return {"deferred": self._drawer.deferred, "dropped_bytes": self._board.dropped, "cut_sequences": cut}

    def _full_locked(self, info: AgentInfo) -> bool:
        return self._board.full_locked(info.stream_id, self.max_pending_bytes)

    # -- rendering (render thread) ------------------------------------------------------------------

    def _render(self, now: float, *, final: bool) -> bytes:
        ops = self._scroll.take()
        if ops:
            self._scroll.apply(ops)
        with self._lock:
            work = self._board.take_work_locked(self.feed_budget_bytes, final=final,
                                                have_layout=self._layout.current is not None)
            if work.feeds:
                self._room.notify_all()
        if work.more:
            self._wake.set()
        caps = self.caps
        enc = self._drawer.encoder(caps)
        if work.relayout:
            self._layout.relayout(work.order, work.view, work.focus, caps.columns, caps.rows, self.history)
            self._drawer.reset(enc, caps.columns, caps.rows)
        layout = self._layout.current
        assert layout is not None
        self._layout.feed(work.order, work.feeds, self.history)
        return self._drawer.frame(enc, work, layout, caps, now, final=final, title=self.title,
                                  flood_fps=self.flood_fps)


def _stdin_is_tty() -> bool:
    try:
        return os.isatty(0)
    except OSError:
        return False
