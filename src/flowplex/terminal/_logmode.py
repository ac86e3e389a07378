"""Log mode: whole lines from many agents, each with its agent's label and colour.

Lines never interleave: an agent's bytes collect in its own line buffer until a newline, then
the whole line is queued, prefixed with the agent's label, and the render thread writes every
queued line in one write. A line that stalls (or grows too long) is flushed after
``partial_flush_s`` with a continuation mark, and continues on the next line with the same
mark. Carriage-return progress output (``50%\\r51%\\r``) is not logged: it becomes the agent's
status line in a footer redrawn in place; only the final state reaches the log. Without a TTY
the output is plain lines: no colour, no footer, no escape sequence at all.

Screen control inside an agent's output (the rule, per agent):

* A clear, a home or a cursor move up or to a position is dropped, and the lines that follow
  it are held back for ``_SETTLE_S``. If no other such move comes, they are logged (so
  ``echo before; clear; echo after`` logs both lines). A run of moves with no text between
  them (``clear`` sends three) counts as one.
* A second move after text was drawn within ``_SETTLE_S`` means the agent is *painting* the
  screen (a ``watch``-style redraw, a multi-line progress display): the held lines are
  dropped, and its lines feed its status line in the footer instead of the log, until a line
  ends ``_SETTLE_S`` after its last move; that line, and those after it, are logged again.
* The alternate screen (vim, less, top, ``?1049h``, ``?1047h`` or ``?47h``) is emulated, at
  80x24 (a command's PTY in log mode). What the program leaves on it is logged, under a
  ``── screen`` line, when it leaves the alternate screen, when it ends (exits or is killed),
  when the display stops, and each time it *settles* (no output for ``_SETTLE_S``) showing
  something else than last logged: a log reader sees the final screen, and the screen at each
  pause (``top``'s every refresh, a prompt waiting for a key), without every redraw. Redraws
  replaced before a screen was logged are counted in ``stats().coalesced``. A line that scrolls
  off the top of the emulated screen is logged as it goes (``printf '\\e[?1049h'; seq 100``
  logs all 100 lines). Meanwhile the footer shows its last line.
* An agent that ends while painting the main screen leaves its last status line as its last
  log line.

Losses: with ``overflow="drop"`` (or ``"block"`` after ``block_timeout_s``) lines beyond
``max_pending_lines`` are dropped, counted and announced; with ``"block"`` and no timeout
(log mode into a file or a pipe) nothing is ever dropped: the feeding thread waits.
"""

from __future__ import annotations

import re
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final, final

from ..transport._format import COLOURS
from ._caps import TermCaps
from ._display import AgentInfo, Display
from ._sanitize import ALT_SCREEN, CR, MAIN_SCREEN, NEWLINE, SCREEN, TEXT, VERBATIM, LogSanitizer, safe_label
from ._text import display_width, truncate_to_width
from ._writer import Writer

__all__ = ["LogRenderer"]

RESET: Final = "\x1b[0m"
DIM: Final = "\x1b[2m"
_SGR: Final = re.compile("\x1b\\[[0-9;:]*m")
_RESETS: Final = re.compile("\x1b\\[(?:0*)m")
_LABEL_MAX: Final = 16
_SETTLE_S: Final = 1.0
"""How long the lines after a screen move are held back: another move within it is painting."""
_HOLD_MAX_LINES: Final = 500
"""More lines than a screen holds after a clear: a log, not a frame; they are logged at once."""

ALT_COLUMNS: Final = 80
ALT_ROWS: Final = 24
"""The size of the emulated alternate screen: that of a command's PTY in log mode."""
_ALT_SLICE: Final = 4096
"""Output goes to the emulated screen this many characters at a time, and what scrolled off is
logged after each: however large a chunk, scrolled-off lines never pile up."""

_LOG: Final = 0
"""Screen state: lines go to the log."""
_HOLD: Final = 1
"""Screen state: a move came; lines are held back until it is clear whether it paints."""
_PAINT: Final = 2
"""Screen state: the agent paints the main screen; lines feed its status line."""
_ALT: Final = 3
"""Screen state: the agent is on the alternate screen; its output drives an emulated screen."""


if TYPE_CHECKING:
    from ._vt import VirtualTerminal


@final
class _AltScreen:
    """A full-screen program's alternate screen, emulated, and what of it was logged."""

    __slots__ = ("changed_at", "logged", "updates", "vt")

    def __init__(self, *, newline_mode: bool) -> None:
        from ._vt import VirtualTerminal  # pyte loads only when a program enters the alternate screen

        self.vt: VirtualTerminal = VirtualTerminal(ALT_COLUMNS, ALT_ROWS, newline_mode=newline_mode, history=0,
                                  keep_scrolled_off=True)
        self.updates = 0
        """Chunks of output since the screen was last logged."""
        self.changed_at = 0.0
        """When the last of them came."""
        self.logged: list[str] = []
        """The screen as last logged, every row (a screen with nothing new is not logged again)."""


@dataclass(slots=True)
class _LogAgent:
    sanitizer: LogSanitizer = field(default_factory=LogSanitizer)
    pieces: list[str] = field(default_factory=list)
    length: int = 0
    started: float | None = None
    cr_pending: bool = False
    progress: bool = False
    status: str = ""
    continues: bool = False
    carry: str = ""
    screen: int = _LOG
    """``_LOG``, ``_HOLD``, ``_PAINT`` or ``_ALT`` (see the module docstring)."""
    alt: _AltScreen | None = None
    """The emulated alternate screen, in ``_ALT`` only."""
    held: list[tuple[str, bool]] = field(default_factory=list)
    """Lines held back in ``_HOLD``: (text, partial)."""
    drawn: bool = False
    """Text came since the last screen move (the next move is then a redraw)."""
    moved_at: float = 0.0
    """When the last screen move came."""
    prefix: str = ""
    """The formatted label (cached; empty when it must be formatted again)."""


class LogRenderer(Display):
    """Renders agents as an interleaved log of whole, labelled lines.

    Args:
        writer: The single writer (default: standard output).
        caps: Terminal capabilities; without a TTY: plain lines, no escape sequences.
        fps: Most writes per second (lines arriving in between go out together).
        partial_flush_s: A line without a newline is flushed after this long, with a
            continuation mark. If in doubt, keep 2 s: LLM sentences take that long. None: never
            by time (a log file keeps every line whole; only ``max_line_chars`` cuts it). The
            time a producer spent held back by a slow writer does not count.
        max_line_chars: A longer line is cut (with continuation marks) at this many characters,
            and so is a ``\r`` progress line that grows past it (it is logged, then goes on as
            a line); each cut is counted (``stats().cut_lines``). This bounds what one agent's
            unfinished line can hold, whatever it sends.
        max_pending_lines: Lines waiting for a slow terminal. Beyond it, ``feed`` waits under
            ``overflow="block"``; under ``"drop"`` (or once a wait timed out) the oldest are
            dropped and counted (``stats().dropped_lines``), and a notice line says how many.
        size_fn, clock, overflow, block_timeout_s: See :class:`Display`.
    """

    mode = "log"

    def __init__(
        self,
        writer: Writer | None = None,
        caps: TermCaps | None = None,
        *,
        fps: float = 60.0,
        partial_flush_s: float | None = 2.0,
        max_line_chars: int = 4000,
        max_pending_lines: int = 5000,
        size_fn: Callable[[], tuple[int, int]] | None = None,
        clock: Callable[[], float] = time.monotonic,
        overflow: str = "drop",
        block_timeout_s: float | None = 5.0,
    ) -> None:
        super().__init__(writer, caps, fps=fps, size_fn=size_fn, clock=clock, overflow=overflow,
                         block_timeout_s=block_timeout_s)
        self.partial_flush_s = float("inf") if partial_flush_s is None else float(partial_flush_s)
        self.max_line_chars = int(max_line_chars)
        self.max_pending_lines = int(max_pending_lines)
        self._state: dict[int, _LogAgent] = {}
        self._lines: deque[str] = deque()
        self._dropped_lines = 0
        self._cut_lines = 0
        self._dropped_unreported = 0
        self._progress_replaced = 0
        self._footer_rows = 0
        self._footer_text: list[str] = []
        self._status_dirty = False
        self._label_width = 0
        self._mark = "…" if self.caps.unicode else "..."

    def notice(self, text: str) -> None:
        """Log a line of flowplex's own (a warning while the display is live), not an agent's."""
        body = safe_label(text.rstrip("\n"), 1000)
        with self._lock:
            self._queue(f"{DIM}[flowplex] {body}{RESET}\n" if self.caps.colour else f"[flowplex] {body}\n")
        self._wake.set()

    # -- feeding (lock held) ----------------------------------------------------------------------

    def _on_agent(self, info: AgentInfo, change: str) -> None:
        if change == "waiting":
            return  # log mode shows no states
        if change == "new":
            self._state[info.stream_id] = _LogAgent()
        self._label_width = min(_LABEL_MAX, max(self._label_width, len(info.name)))
        for st in self._state.values():
            st.prefix = ""  # the width or a name changed: labels are formatted again

    def _on_feed(self, info: AgentInfo, data: bytes) -> None:
        st = self._state[info.stream_id]
        now = self._clock()
        for kind, text in st.sanitizer.feed(data):
            if kind == TEXT:
                if st.cr_pending:
                    self._progress_cr(st)
                if st.started is None:
                    st.started = now
                st.drawn = True
                if st.screen >= _PAINT:
                    if st.length + len(text) > self.max_line_chars:
                        self._paint_line(st)  # painting without newlines: keep it bounded
                else:
                    # Progress text too: a bar that grows without another \r or a newline
                    # must not collect for ever (300 MB of it once made a 1.4 GB line).
                    while st.length + len(text) > self.max_line_chars:
                        head, text = _cut(text, self.max_line_chars - st.length)
                        st.pieces.append(head)
                        self._cut_lines += 1
                        self._end_line(info, st, partial=True)
                        st.started = now
                st.pieces.append(text)
                st.length += len(text)
            elif kind == NEWLINE:
                st.cr_pending = False
                st.drawn = True
                self._end_line(info, st, partial=False)
            elif kind == CR:
                if st.cr_pending:
                    self._progress_cr(st)
                st.cr_pending = True
            elif kind == VERBATIM:
                self._alt_feed(info, st, text, now)
            elif kind == SCREEN:
                self._screen_move(info, st, now)
            elif kind == ALT_SCREEN:
                if st.screen != _ALT:
                    self._flush_agent(info, st)  # what came before is logged as it stands
                    st.screen = _ALT
                    st.alt = _AltScreen(newline_mode=not info.pty)
                    st.progress = True
                    self._status_dirty = True
            elif kind == MAIN_SCREEN:
                self._leave_alt(info, st)

    # -- the alternate screen ------------------------------------------------------------------------

    def _alt_feed(self, info: AgentInfo, st: _LogAgent, text: str, now: float) -> None:
        """Output on the alternate screen: drive the emulated screen, log what scrolls off it."""
        alt = st.alt
        if alt is None:  # VERBATIM comes only after ALT_SCREEN; should a restart cross them, start one
            st.screen = _ALT
            alt = st.alt = _AltScreen(newline_mode=not info.pty)
            st.progress = True
        vt = alt.vt
        for start in range(0, len(text), _ALT_SLICE):
            vt.feed_text(text[start : start + _ALT_SLICE])
            for line in vt.take_scrolled_off():
                self._queue(self._format_line(info, st, line, partial=False))
        alt.updates += 1
        alt.changed_at = now
        self._status_dirty = True

    def _log_alt(self, info: AgentInfo, st: _LogAgent) -> None:
        """Log the emulated screen under a ``── screen`` line, unless it shows nothing new (it is
        blank, or has only rows that were logged last time, in their places).

        The chunks that changed it since it was last logged were one update that got its line
        in the log, and the others coalesced (the latest state wins).
        """
        alt = st.alt
        if alt is None or not alt.updates:
            return
        screen = alt.vt.screen_text()
        last = alt.logged
        # Nothing new: blank, or only rows erased since (less erases its prompt as it quits).
        shown = not all(not row or (y < len(last) and row == last[y]) for y, row in enumerate(screen))
        self._progress_replaced += alt.updates - 1 if shown else alt.updates
        alt.updates = 0
        if not shown:
            return
        alt.logged = screen
        rows = list(screen)
        while rows and not rows[-1]:
            rows.pop()
        first = next((y for y, row in enumerate(rows) if row), len(rows))
        rows = rows[first:]
        rule = "──" if self.caps.unicode else "--"
        header = f"{DIM}{rule} screen{RESET}" if self.caps.colour else f"{rule} screen"
        self._queue(self._prefix(info, st) + header + "\n")
        for row in rows:
            self._queue(self._format_line(info, st, row, partial=False))

    def _leave_alt(self, info: AgentInfo, st: _LogAgent) -> None:
        """The agent left the alternate screen (or ended on it): log what it left there."""
        if st.screen != _ALT:
            return
        self._log_alt(info, st)
        st.alt = None
        st.screen = _LOG
        st.pieces.clear()
        st.length = 0
        st.started = None
        st.cr_pending = st.progress = False
        st.status = ""
        self._status_dirty = True

    def _screen_move(self, info: AgentInfo, st: _LogAgent, now: float) -> None:
        """A clear or a cursor move up or to a position (see the module docstring)."""
        if st.screen == _HOLD and st.drawn:
            if now - st.moved_at < _SETTLE_S:
                # A redraw: what was held is a frame, not a log; its last line is the status.
                frame = [text for text, _ in st.held if _SGR.sub("", text).strip()]
                st.held.clear()
                self._progress_replaced += max(0, len(frame) - 1)  # not logged: counted as coalesced
                st.screen = _PAINT
                st.progress = True
                if frame:
                    st.status = frame[-1]
                self._status_dirty = True
            else:
                self._commit_held(info, st)
        if st.screen == _LOG:
            self._end_pending(info, st)  # what came before the move is a line of its own
            st.screen = _HOLD
        elif st.screen >= _PAINT:
            self._paint_line(st)
        st.drawn = False
        st.moved_at = now

    def _end_pending(self, info: AgentInfo, st: _LogAgent) -> None:
        """Whatever text waits for its newline ends as a line now."""
        if st.pieces or st.cr_pending:
            st.cr_pending = False
            self._end_line(info, st, partial=False)

    def _commit_held(self, info: AgentInfo, st: _LogAgent) -> None:
        """The lines held after a move were a log after all: queue them, back to ``_LOG``."""
        if st.screen == _HOLD:
            st.screen = _LOG
            held, st.held = st.held, []
            for text, partial in held:
                self._queue(self._format_line(info, st, text, partial=partial))

    def _paint_line(self, st: _LogAgent) -> None:
        """A painting agent's current text becomes its status line (when not blank)."""
        text = "".join(st.pieces)
        if _SGR.sub("", text).strip():
            if st.status:
                self._progress_replaced += 1
            st.status = text
            self._status_dirty = True
        st.pieces.clear()
        st.length = 0
        st.started = None

    def _progress_cr(self, st: _LogAgent) -> None:
        """A carriage return followed by more text: the line is being redrawn in place."""
        st.cr_pending = False
        if st.progress and st.status:
            self._progress_replaced += 1
        content = "".join(st.pieces)
        if content:
            st.status = content
        st.progress = True
        st.pieces.clear()
        st.length = 0
        st.started = None
        self._status_dirty = True

    def _end_line(self, info: AgentInfo, st: _LogAgent, *, partial: bool) -> None:
        if st.screen >= _PAINT:
            if st.screen == _ALT or self._clock() - st.moved_at < _SETTLE_S:
                self._paint_line(st)  # a painting program redraws; the log keeps its status line
                return
            st.screen = _LOG  # quiet for long enough: a log again
            st.status = ""
            st.progress = False
        text = "".join(st.pieces)
        if not text and st.progress and not partial:
            text = st.status  # "50%\r\n": the last progress state is the line
        st.pieces.clear()
        st.length = 0
        st.started = None
        if st.progress:
            st.progress = False
            st.status = ""
            self._status_dirty = True
        if st.screen == _HOLD:
            st.held.append((text, partial))
            if len(st.held) > _HOLD_MAX_LINES:
                self._commit_held(info, st)
        else:
            self._queue(self._format_line(info, st, text, partial=partial))

    def _on_run(self, info: AgentInfo, note: str) -> None:
        if not info.finished:
            return  # log mode marks only the end of a run
        st = self._state[info.stream_id]
        self._flush_agent(info, st)
        st.sanitizer.restart()  # a restarted command begins on the main screen
        note = info.note or ("done" if info.ok else "failed")
        rule = "──" if self.caps.unicode else "--"
        if self.caps.colour:
            colour = COLOURS[3].decode() if not info.ok else DIM
            body = f"{colour}{rule} {note}{RESET}"
        else:
            body = f"{rule} {note}"
        self._queue(self._prefix(info, st) + body + "\n")

    def _flush_agent(self, info: AgentInfo, st: _LogAgent) -> None:
        """Whatever an agent left unfinished becomes a final line (end of stream or of display)."""
        self._leave_alt(info, st)
        st.cr_pending = False
        if st.screen >= _PAINT:
            st.screen = _LOG
            self._paint_line(st)
            st.pieces = [st.status] if st.status else []
            st.progress = bool(st.pieces)
        if st.pieces or st.progress:
            if not st.pieces and st.status:
                st.pieces.append(st.status)
            st.progress = False
            st.status = ""
            self._status_dirty = True
            if st.pieces:
                self._end_line(info, st, partial=False)
        self._commit_held(info, st)

    def _queue(self, line: str) -> None:
        self._lines.append(line)
        if self._may_drop and len(self._lines) > self.max_pending_lines:
            self._lines.popleft()
            self._dropped_lines += 1
            self._dropped_unreported += 1

    # -- formatting ---------------------------------------------------------------------------------

    def _prefix(self, info: AgentInfo, st: _LogAgent) -> str:
        if st.prefix:
            return st.prefix
        st.prefix = self._label(info)
        return st.prefix

    def _label(self, info: AgentInfo) -> str:
        name = info.name if len(info.name) <= _LABEL_MAX else info.name[: _LABEL_MAX - 1] + "…"
        label = name.ljust(self._label_width)
        if self.caps.colour:
            bar = "│" if self.caps.unicode else "|"
            return f"{COLOURS[info.agent_type].decode()}{label} {bar}{RESET} "
        return f"{label} | "  # plain logs stay ASCII: easy to grep and to split on

    def _format_line(self, info: AgentInfo, st: _LogAgent, text: str, *, partial: bool) -> str:
        head = (self._mark + ("" if text[:1].isspace() else " ")) if st.continues else ""
        tail = " " + self._mark if partial else ""
        st.continues = partial
        if self.caps.colour:
            body = st.carry + head + text + tail
            st.carry = _carry_sgr(st.carry, text)
            return self._prefix(info, st) + body + RESET + "\n"
        if "\x1b" in text:
            text = _SGR.sub("", text)
        return self._prefix(info, st) + head + text + tail + "\n"

    # -- rendering (render thread) --------------------------------------------------------------------

    def _next_timer(self, now: float) -> float | None:
        with self._lock:
            held = self._backpressure.held_at
            due = [max(st.started, held) + self.partial_flush_s for st in self._state.values()
                   if st.started is not None and not st.progress]
            due.extend(st.moved_at + _SETTLE_S for st in self._state.values() if st.screen == _HOLD)
            due.extend(st.alt.changed_at + _SETTLE_S for st in self._state.values()
                       if st.alt is not None and st.alt.updates)
        soonest = min(due, default=float("inf"))
        return None if soonest == float("inf") else max(0.0, soonest - now)

    def _render(self, now: float, *, final: bool) -> bytes:
        with self._lock:
            for stream_id, st in self._state.items():
                info = self._roster.agents[stream_id]
                if final:
                    self._flush_agent(info, st)
                    continue
                if st.screen == _HOLD and now - st.moved_at >= _SETTLE_S:
                    self._commit_held(info, st)  # no redraw came: the lines after the move are a log
                alt = st.alt
                if alt is not None and alt.updates and now - alt.changed_at >= _SETTLE_S:
                    self._log_alt(info, st)  # the full-screen program settled: log what it shows
                if st.started is not None and now - max(st.started, self._backpressure.held_at) >= self.partial_flush_s:
                    if st.progress or st.cr_pending:
                        continue
                    self._end_line(info, st, partial=True)
            lines = list(self._lines)
            self._lines.clear()
            self._room.notify_all()
            if self._dropped_unreported:
                lines.insert(0, f"[flowplex] {self._dropped_unreported} log lines dropped: the terminal was slower "
                                "than the agents\n")
                self._dropped_unreported = 0
            footer = self._footer_lines() if self.caps.is_tty and not final else []
            footer_changed = footer != self._footer_text
            self._status_dirty = False
        if not lines and not footer_changed:
            return b""
        out: list[str] = []
        if self._footer_rows:
            out.append("\r\x1b[J")  # the cursor sits at the footer's first line: erase the footer
        out.extend(lines)
        if footer:
            out.append("\n".join(footer))
            out.append("\r" + (f"\x1b[{len(footer) - 1}A" if len(footer) > 1 else ""))
        self._footer_rows = len(footer)
        self._footer_text = footer
        return "".join(out).encode("utf-8", "replace")

    def _footer_lines(self) -> list[str]:
        width = max(10, self.caps.columns - 1)  # never reach the last column: no autowrap
        rows: list[str] = []
        limit = max(1, self.caps.rows // 3)
        for stream_id, st in self._state.items():
            if not st.progress:
                continue
            info = self._roster.agents[stream_id]
            current = st.alt.vt.last_text() if st.alt is not None else "".join(st.pieces) or st.status
            plain = _SGR.sub("", current)
            prefix_w = display_width(info.name.ljust(self._label_width)) + 3
            text = truncate_to_width(plain, max(1, width - prefix_w))
            rows.append(self._prefix(info, st) + text + (RESET if self.caps.colour else ""))
            if len(rows) >= limit:
                break
        return rows

    def _enter(self) -> None:
        pass

    def _leave(self) -> None:
        if self._footer_rows:
            self.writer.write(b"\r\x1b[J")
            self._footer_rows = 0

    def _full_locked(self, info: AgentInfo) -> bool:
        return len(self._lines) >= self.max_pending_lines

    def _extra_stats(self) -> dict[str, int]:
        stripped = sum(st.sanitizer.stripped for st in self._state.values())
        cut = sum(st.sanitizer.cut for st in self._state.values())
        return {"dropped_lines": self._dropped_lines, "coalesced": self._progress_replaced, "stripped": stripped,
                "cut_lines": self._cut_lines, "cut_sequences": cut}


def _carry_sgr(carry: str, text: str) -> str:
    """The SGR state still active after ``text``: re-applied at the start of the next line."""
    codes = _SGR.findall(text)
    if not codes:
        return carry
    last_reset = -1
    for i, code in enumerate(codes):
        if _RESETS.fullmatch(code):
            last_reset = i
    kept = codes[last_reset + 1 :] if last_reset >= 0 else [carry, *codes]
    joined = "".join(kept)
    return joined[-256:]


def _cut(text: str, limit: int) -> tuple[str, str]:
    """Split ``text`` after ``limit`` characters, never inside an SGR sequence."""
    limit = max(1, limit)
    for m in _SGR.finditer(text):
        if m.start() >= limit:
            break
        if m.end() > limit:
            return text[: m.start()], text[m.start() :]
    return text[:limit], text[limit:]
