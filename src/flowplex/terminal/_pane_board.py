"""The panes' shared state: one record per pane, and the board that orders them.

The board owns what the feeding threads, the key reader and the render thread share, always
under the display's lock: the panes by stream id and in order, the view and the focus, whether
the layout must be redone, the status bar's mode (typing, the search prompt, a notice, the
bell) and the bytes cut from buffers that overflowed. The panes renderer's other parts (keys
and input, layout, drawing, scrollback and search) read and change it; what each of those
keeps for itself stays there.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Final

from ._display import AgentInfo
from ._layout import View
from ._vt import VirtualTerminal

__all__ = ["FrameWork", "Pane", "PaneBoard"]

DEFAULT_VT: Final = (80, 24)


@dataclass(slots=True)
class Pane:
    """One agent's pane: its output waiting for the emulator, its screen, what to redraw."""

    info: AgentInfo
    pending: bytearray = field(default_factory=bytearray)
    vt: VirtualTerminal | None = None
    dropped: int = 0
    unread: int = 0
    last_repaint: float = -1e9
    scroll_acc: int = 0
    chrome_dirty: bool = True
    full_repaint: bool = True
    size: tuple[int, int] = DEFAULT_VT
    sized: bool = False
    """A layout has given the pane its size (until then ``size`` is a placeholder)."""
    ended_line: bool = True
    title_key: tuple[object, ...] = ()
    """What the title last drawn showed (redrawn when its state, scroll position, typing mode,
    name or note changes)."""

    def view_moved(self) -> None:
        """The pane's view scrolled or jumped: repaint it whole (no terminal scroll from before)."""
        self.full_repaint = True
        self.scroll_acc = 0


@dataclass(slots=True)
class FrameWork:
    """What one frame has to do, taken from the board under the lock (render thread)."""

    feeds: list[tuple[Pane, bytes]]
    """Output for the emulators, at most the feed budget per pane."""
    more: bool
    """Some pane has output left over for the next frame."""
    order: list[Pane]
    view: View
    focus: int
    relayout: bool
    chrome: list[Pane]
    """Panes whose border and title must be redrawn."""


class PaneBoard:
    """The panes in stream-id order, the view, the focus and the status bar's mode.

    Every attribute is read and written under ``lock`` (the display's lock).
    """

    def __init__(self, lock: threading.Lock) -> None:
        self.lock = lock
        self.panes: dict[int, Pane] = {}
        self.order: list[Pane] = []
        self.view = View.GRID
        self.focus = 0
        self.layout_dirty = True
        self.dropped = 0
        """Bytes cut from the front of overflowing buffers (all panes)."""
        self.typing = False
        """Typing mode: keys go to the focused agent."""
        self.prompt: str | None = None
        """The search being typed after ``/`` (None: no prompt)."""
        self.notice = ""
        """A one-off message for the status bar (a search that found nothing...)."""
        self.ring_bell = False

    def add_locked(self, info: AgentInfo) -> None:
        """A pane for a new agent, in stream-id order."""
        pane = Pane(info)
        self.panes[info.stream_id] = pane
        self.order.append(pane)
        self.order.sort(key=lambda p: p.info.number)  # panes go in stream-id order
        for p in self.order:
            p.chrome_dirty = True  # numbers in titles may have moved
        self.layout_dirty = True

    def changed_locked(self, stream_id: int) -> None:
        """The agent's name, type or state changed: its title is redrawn."""
        pane = self.panes.get(stream_id)
        if pane is not None:
            pane.chrome_dirty = True

    def feed_locked(self, stream_id: int, data: bytes, bound: int) -> None:
        """Buffer an agent's output; beyond ``bound`` bytes the oldest are cut and counted."""
        pane = self.panes.get(stream_id)
        if pane is None:
            return  # its pane was closed (x): what it still says is not shown
        pane.ended_line = data.endswith(b"\n")
        pending = pane.pending
        pending += data
        excess = len(pending) - bound
        if excess > 0:
            # Keep the newest output; cut after a newline when there is one close by, and cancel
            # whatever escape sequence the cut may have split (CAN).
            cut = pending.find(b"\n", excess, excess + 4096)
            cut = excess if cut < 0 else cut + 1
            pane.dropped += cut
            self.dropped += cut
            del pending[:cut]
            pending[:0] = b"\x18"

    def say_locked(self, stream_id: int, line: str) -> None:
        """Append a line of flowplex's own (``── done``) to the pane's output, on a line of its own."""
        pane = self.panes.get(stream_id)
        if pane is None:
            return
        pane.chrome_dirty = True
        lead = b"" if pane.ended_line else b"\r\n"
        pane.pending += lead + line.encode()

    def full_locked(self, stream_id: int, bound: int) -> bool:
        """Whether the pane's buffer holds ``bound`` bytes or more."""
        pane = self.panes.get(stream_id)
        return pane is not None and len(pane.pending) >= bound

    def focused_locked(self) -> Pane | None:
        """The focused pane (None: no panes)."""
        return self.order[self.focus] if self.focus < len(self.order) else None

    def focused(self) -> Pane | None:
        """:meth:`focused_locked`, taking the lock."""
        with self.lock:
            return self.focused_locked()

    def take_work_locked(self, budget: int, *, final: bool, have_layout: bool) -> FrameWork:
        """Take each pane's output (``budget`` bytes at most, all of it when ``final``), the view,
        and which panes need new chrome (their flags are cleared)."""
        feeds: list[tuple[Pane, bytes]] = []
        more = False
        for pane in self.order:
            if pane.pending:
                if len(pane.pending) > budget and not final:
                    chunk = bytes(pane.pending[:budget])
                    del pane.pending[:budget]
                    more = True
                else:
                    chunk = bytes(pane.pending)
                    pane.pending.clear()
                feeds.append((pane, chunk))
        relayout = self.layout_dirty or not have_layout
        self.layout_dirty = False
        chrome = [p for p in self.order if p.chrome_dirty]
        for p in chrome:
            p.chrome_dirty = False
        return FrameWork(feeds, more, list(self.order), self.view, self.focus, relayout, chrome)
