"""``Display``: the base of both renderers -- the agents, the frame loop, resize, keys, stats.

Agents call :meth:`Display.feed` from any thread; it appends to a bounded buffer and returns.
What happens when the buffer is full is the ``overflow`` policy: ``"drop"`` keeps the newest
output and counts the rest (a slow terminal never blocks a producer), ``"block"`` makes the
feeding thread wait for the render thread (back-pressure; lossless when it may wait for ever,
``block_timeout_s=None``, as log mode into a file or a pipe does). One render thread wakes when something
changed, waits for the next frame slot (at most ``fps`` frames a second, so updates arriving in
between coalesce and the latest state wins), renders a frame to bytes, and hands it to the
single :class:`~flowplex.terminal.Writer` as one write.

The display composes its parts: the agents and their controls (:mod:`._roster`), the frame
loop's counters, ``flush`` handshake and resizes (:mod:`._frames`) and the back-pressure of
``overflow="block"`` (:mod:`._room`). A renderer implements the hooks at the end of the class.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import logging
import sys
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import ClassVar, Final

from ..errors import StateError, UsageError
from ._caps import TermCaps
from ._control import AgentControl, InputTap
from ._frames import FrameCounts, FrameSync, Resizes
from ._room import Backpressure
from ._roster import AgentInfo, AgentRoster, agent_type_of, stream_order
from ._sanitize import safe_label
from ._stats import RenderStats
from ._writer import Writer

log = logging.getLogger(__name__)

__all__ = ["AgentInfo", "Display", "agent_type_of", "stream_order"]

OVERFLOW_POLICIES: Final = ("drop", "block")
STATE_POLL_S: Final = 0.25
"""How often the render thread asks the agents' controls whether they wait for input."""
_IDLE_POLL_S: Final = 0.1
"""The render thread looks at least this often for a resize (the SIGWINCH handler only sets a
flag: taking a lock inside a signal handler can deadlock the main thread)."""


class Display(ABC):
    """A live view of many agents' output on one terminal; log or panes mode.

    Lifecycle: construct → :meth:`start` (takes over the terminal, starts the render thread;
    call it on the main thread so that SIGWINCH can be handled) → ``feed``/``end_stream`` from
    any thread → :meth:`stop` (renders what is left, restores the terminal). Use it as a context
    manager. ``feed`` waits for the terminal only under ``overflow="block"``.

    Args:
        writer: The single writer; default: standard output.
        caps: Terminal capabilities; default: detected on the writer's descriptor.
        fps: Most frames per second; if in doubt, keep 60.
        size_fn: Returns ``(columns, rows)`` after SIGWINCH; default: ask the writer's terminal.
        clock: Monotonic seconds (tests may inject one).
        overflow: What ``feed`` does when an agent's buffer is full because the terminal is
            slower than the agents: ``"drop"`` (default: keep the newest output, count the rest)
            or ``"block"`` (wait for room, at most ``block_timeout_s``, then drop).
        block_timeout_s: The longest a ``feed`` waits under ``overflow="block"``; None waits
            until there is room (lossless), or until the display stops or its reader went away.
    """

    mode: ClassVar[str] = ""

    def __init__(
        self,
        writer: Writer | None = None,
        caps: TermCaps | None = None,
        *,
        fps: float = 60.0,
        size_fn: Callable[[], tuple[int, int]] | None = None,
        clock: Callable[[], float] = time.monotonic,
        overflow: str = "drop",
        block_timeout_s: float | None = 5.0,
    ) -> None:
        if not fps > 0:
            msg = f"{type(self).__name__}(fps={fps!r}): expected a positive number of frames per second"
            raise UsageError(msg)
        if overflow not in OVERFLOW_POLICIES:
            msg = f"{type(self).__name__}(overflow={overflow!r}): expected one of {', '.join(OVERFLOW_POLICIES)}"
            raise UsageError(msg)
        if block_timeout_s is not None and not block_timeout_s >= 0:
            msg = (f"{type(self).__name__}(block_timeout_s={block_timeout_s!r}): expected seconds >= 0, "
                   "or None to wait until there is room")
            raise UsageError(msg)
        self.overflow = overflow
        self.block_timeout_s = None if block_timeout_s is None else float(block_timeout_s)
        self._may_drop = overflow == "drop"
        """Whether the chunk being fed may be cut to the buffer's bound (lock held): always under
        ``"drop"``; under ``"block"`` only after a wait for room timed out."""
        if writer is None:
            writer = Writer(_stdout_fd())
        self.writer = writer
        self.caps = caps if caps is not None else TermCaps.detect(writer.fd if writer.fd is not None else 1)
        self.fps = float(fps)
        self._clock = clock
        self._lock = threading.Lock()
        self._room = threading.Condition(self._lock)
        """Notified by the render thread when it took output away (``overflow="block"``)."""
        self._wake = threading.Event()
        self.quit_requested = threading.Event()
        """Set when the user asked to quit (``q`` in panes mode)."""
        self.draining = threading.Event()
        """Set by the host program when it winds down: agent sources bound to this display
        (their ``display`` option) finish at their next turn, so the graph ends by itself."""
        self.input_tap: InputTap | None = None
        """Set by the host program before the agents start (``flowplex agents --record-input``):
        the command sources tell it every key typed into their commands, whoever typed them
        (typing mode, ``agents send``, an attached view)."""
        self._roster = AgentRoster(self._lock, self._on_agent)
        self._counts = FrameCounts()
        self._sync = FrameSync()
        self._resizes = Resizes(size_fn, writer.fd)
        self._backpressure = Backpressure(self._room, self.block_timeout_s, self.draining, clock)
        self._poll_hook: Callable[[float], None] | None = None
        """A renderer's: called every :data:`STATE_POLL_S` on the render thread, after the
        controls were polled (states that change with time)."""
        self._resize_hook: Callable[[], None] | None = None
        """A renderer's: ``self.caps`` has a new size (render thread)."""
        self._next_poll = 0.0
        self._thread: threading.Thread | None = None
        self._started = False
        self._stopping = False
        self._stopped = False
        self._at_exit = functools.partial(_restore_at_exit, self)
        self._drains = functools.partial(_drains, self)

    # -- agents (any thread) ------------------------------------------------------------------

    def add_agent(self, stream_id: int, name: str | None = None, agent_type: object = None) -> AgentInfo:
        """Register (or rename/retype) the agent behind ``stream_id``; ``feed`` does it implicitly."""
        with self._lock:
            return self._roster.agent_locked(stream_id, name, agent_type)

    def feed(
        self,
        stream_id: int,
        data: bytes | str,
        *,
        name: str | None = None,
        agent_type: object = None,
        pty: bool | None = None,
    ) -> None:
        """Queue a chunk of an agent's output for display (any thread); returns at once, unless
        ``overflow="block"`` and the buffer is full: then it waits for room (see the class).

        Args:
            stream_id: Which agent; a new id adds an agent.
            data: Raw output, terminal escape sequences included; a ``str`` is encoded as UTF-8.
            name: The agent's label (first use, or to rename it).
            agent_type: The agent type (selects the colour); ``AgentType``, 0..7 or a name.
            pty: The output comes from a pseudo-terminal (see ``AgentInfo.pty``); set it with
                the first chunk.
        """
        raw = data.encode() if isinstance(data, str) else bytes(data)
        with self._lock:
            info = self._roster.agent_locked(stream_id, name, agent_type)
            if pty is not None:
                info.pty = pty
            if self.overflow == "block":
                # Lossless unless the wait timed out: then the renderer cuts to its bound (counted).
                full = functools.partial(self._full_locked, info)
                if full():
                    self._wake.set()
                    self._may_drop = not self._backpressure.wait(info.name, full, self._drains)
                else:
                    self._may_drop = False
            info.messages += 1
            info.bytes_in += len(raw)
            if raw:
                now = self._clock()
                if info.started_at is None:
                    info.started_at = now
                info.last_output = now
                info.lines += raw.count(b"\n")
                info.ended_line = raw.endswith(b"\n")
            counts = self._counts
            counts.messages += 1
            counts.bytes_in += len(raw)
            counts.updates_since_frame += 1
            if raw and not self.writer.broken:  # nobody reads any more: keep nothing
                self._on_feed(info, raw)
        self._wake.set()

    def end_stream(self, stream_id: int, note: str = "", *, ok: bool = True, exit_code: int | None = None) -> None:
        """Mark the agent finished (``note`` e.g. ``"exit 0"``); shown in its title or as a line."""
        with self._lock:
            info = self._roster.agent_locked(stream_id, None, None)
            info.finished = True
            info.ok = ok
            info.exit_code = exit_code
            info.note = safe_label(note, 60)
            info.waiting = False
            info.ended_at = self._clock()
            if info.started_at is None:
                info.started_at = info.ended_at
            self._on_run(info, info.note)
        self._wake.set()

    def begin_stream(self, stream_id: int, note: str = "") -> None:
        """The agent (re)started: a finished one runs again (its pane and counters stay)."""
        with self._lock:
            info = self._roster.agent_locked(stream_id, None, None)
            again = info.finished or info.started_at is not None
            info.finished = False
            info.ok = True
            info.exit_code = None
            info.note = ""
            info.started = True
            info.ended_at = None
            info.started_at = self._clock()
            if again:
                info.restarts += 1
            self._on_run(info, safe_label(note, 60))
        self._wake.set()

    def attach_control(self, stream_id: int, control: AgentControl, *, started: bool = True) -> bool:
        """Let keys reach the agent through ``control``; returns :attr:`keeps_agents`.

        ``started`` False: the command waits for a start key (``autostart: false``).
        """
        with self._lock:
            self._roster.attach_locked(stream_id, control, started=started)
        self._wake.set()
        return self.keeps_agents

    def detach_control(self, stream_id: int, control: AgentControl) -> None:
        """Undo :meth:`attach_control` (the agent's source closed)."""
        with self._lock:
            self._roster.detach_locked(stream_id, control)

    def controls_now(self) -> tuple[float, dict[int, AgentControl]]:
        """The display's clock now (a test's fake one when given) and every attached control by
        stream id (a copy): what a remote listing of the agents needs (any thread)."""
        with self._lock:
            return self._clock(), dict(self._roster.controls)

    @property
    def keeps_agents(self) -> bool:
        """Whether an agent that exits keeps running its source, to be restarted from keys
        (an interactive display); otherwise a command's source ends when it exits."""
        return False

    def agent_states(self) -> dict[str, int]:
        """How many agents are in each state now (``{"running": 2, "exited (0)": 1}``)."""
        return self._roster.states(self._clock())

    def agents(self) -> list[AgentInfo]:
        """The agents seen so far, in stream-id order (copies)."""
        return self._roster.copies()

    def pane_size(self, stream_id: int) -> tuple[int, int] | None:
        """``(columns, rows)`` of the agent's pane, for a PTY; None when it has none (log mode)."""
        return None

    def handle_key(self, key: str) -> None:
        """React to one decoded key (``"q"``, ``"tab"``, ``"1"``...); the key reader calls it."""
        if key in ("q", "Q"):
            self.quit_requested.set()

    # -- lifecycle (owner thread) ---------------------------------------------------------------

    def start(self) -> None:
        """Take over the terminal and start the render thread (idempotent)."""
        if self._started:
            return
        if self._stopped:
            msg = f"{type(self).__name__}.start: a stopped display cannot be restarted; create a new one"
            raise StateError(msg)
        self._started = True
        with contextlib.suppress(Exception):
            sys.stdout.flush()
        self._resizes.install(self.caps)
        self._enter()
        atexit.register(self._at_exit)  # never leave the shell in raw mode / the alternate screen
        self._thread = threading.Thread(target=self._run, name=f"flowplex-{self.mode}-render", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Render what is left, restore the terminal and stop the render thread (idempotent).

        Blocks until the last frame is written.
        """
        if self._stopped:
            return
        self._stopped = True
        if not self._started:
            return
        self._stopping = True
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=10.0)
        stuck = self._thread is not None and self._thread.is_alive()
        self._resizes.restore()
        atexit.unregister(self._at_exit)
        try:
            if stuck:  # its write has not returned for 10 s: a reader that never reads; don't hang too
                log.debug("terminal.stop.writer-stuck")
            else:
                cpu = time.thread_time()
                data = self._render(self._clock(), final=True)
                self._counts.render_cpu += time.thread_time() - cpu
                if data and self.writer.write(data):
                    self._counts.wrote(len(data))
        finally:
            self._leave()
            self._sync.done_all()

    def __enter__(self) -> Display:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def flush(self, timeout: float = 5.0) -> bool:
        """Ask for a frame now and wait until it is written; True unless ``timeout`` passed.

        For tests and for the end of a run; the frame still honours the fps limit.
        """
        if not self._started or self._stopped:
            return False
        target = self._sync.request()
        self._wake.set()
        return self._sync.wait(target, timeout)

    def resize(self, columns: int | None = None, rows: int | None = None) -> None:
        """Re-lay out for a new terminal size; SIGWINCH takes the same path.

        With no arguments the size is asked from ``size_fn`` (the terminal).
        """
        self._resizes.request(columns, rows)
        self._wake.set()

    def stats(self) -> RenderStats:
        """A snapshot of the counters (any thread)."""
        with self._lock:
            extra = self._extra_stats()
            c = self._counts
            return RenderStats(
                mode=self.mode,
                agents=len(self._roster.agents),
                messages=c.messages,
                bytes_in=c.bytes_in,
                frames=c.frames,
                bytes_out=self.writer.bytes_written,
                max_frame_bytes=c.max_frame,
                coalesced=c.coalesced + extra.get("coalesced", 0),
                skipped_frames=c.skipped,
                deferred_repaints=extra.get("deferred", 0),
                dropped_bytes=extra.get("dropped_bytes", 0),
                dropped_lines=extra.get("dropped_lines", 0),
                stripped=extra.get("stripped", 0),
                resizes=c.resizes,
                render_cpu_s=c.render_cpu,
                write_s=self.writer.write_time_s,
                cut_lines=extra.get("cut_lines", 0),
                cut_sequences=extra.get("cut_sequences", 0),
            )

    # -- the render loop (render thread) ---------------------------------------------------------

    def _run(self) -> None:
        # This is the loop: wait for a change, wait for the next frame slot, render, write once.
        period = 1.0 / self.fps
        next_at = 0.0
        counts = self._counts
        try:
            while not self._stopping:
                timeout = self._next_timer(self._clock())
                self._wake.wait(_IDLE_POLL_S if timeout is None else max(0.0, min(timeout, _IDLE_POLL_S)))
                if self._stopping:
                    break
                now = self._clock()
                if now < next_at:
                    time.sleep(next_at - now)  # updates arriving meanwhile coalesce into this frame
                    if self._stopping:
                        break
                    now = self._clock()
                self._wake.clear()
                if now >= self._next_poll:
                    self._next_poll = now + STATE_POLL_S
                    self._roster.poll_waiting(now)
                    if self._poll_hook is not None:
                        self._poll_hook(now)
                target = self._sync.target()
                # One frame: a new size first, then the renderer's bytes, written at once.
                start = self._clock()
                cpu = time.thread_time()
                size = self._resizes.take(self.caps)
                if size is not None:
                    self.caps = self.caps.with_size(*size)
                    counts.resizes += 1
                    if self._resize_hook is not None:
                        self._resize_hook()
                with self._lock:
                    updates, counts.updates_since_frame = counts.updates_since_frame, 0
                data = self._render(start, final=False)
                counts.render_cpu += time.thread_time() - cpu
                if data:
                    counts.coalesced += max(0, updates - 1)
                    if self.writer.write(data):
                        counts.wrote(len(data))
                elif updates:
                    counts.coalesced += updates
                end = self._clock()
                if data:
                    next_at = start + period
                    if end > next_at:
                        counts.skipped += int((end - start) / period)
                        next_at = end
                self._sync.done(target)
                if self.writer.broken:
                    log.debug("terminal.render.stopped reason=broken-pipe")
                    self.quit_requested.set()
                    break
        except Exception:  # a rendering bug must not kill the agents; say so and stop drawing
            log.exception("terminal.render.failed")
            self.quit_requested.set()

    # -- what a renderer implements ---------------------------------------------------------------

    @abstractmethod
    def _on_agent(self, info: AgentInfo, change: str) -> None:
        """An agent appeared (``change`` ``"new"``), its name, type or control changed
        (``"changed"``), or ``info.waiting`` changed (``"waiting"``) (lock held)."""

    @abstractmethod
    def _on_feed(self, info: AgentInfo, data: bytes) -> None:
        """Buffer ``data`` for ``info`` (lock held; keep it cheap and bounded)."""

    @abstractmethod
    def _on_run(self, info: AgentInfo, note: str) -> None:
        """The agent finished (``info.finished``, ``note`` its end note) or started again after
        it finished (``note`` the start's) (lock held)."""

    def _next_timer(self, now: float) -> float | None:
        """Seconds until the renderer wants a frame without new input (partial-line flush...)."""
        return None

    @abstractmethod
    def _enter(self) -> None:
        """Take over the terminal (owner thread, before the render thread starts)."""

    @abstractmethod
    def _leave(self) -> None:
        """Give the terminal back (owner thread, after the last frame)."""

    @abstractmethod
    def _render(self, now: float, *, final: bool) -> bytes:
        """The next frame as bytes, or ``b""`` when nothing changed (render thread)."""

    def _extra_stats(self) -> dict[str, int]:
        """Renderer-specific counters for :class:`RenderStats` (lock held)."""
        return {}

    def _full_locked(self, info: AgentInfo) -> bool:
        """Whether ``info``'s buffer is at its bound (lock held); ``overflow="block"`` waits."""
        return False


def _drains(display: Display) -> bool:
    """Whether the display's render thread may still take output away (lock held)."""
    thread = display._thread
    return (display._started and not display._stopping and not display.writer.broken
            and thread is not None and thread.is_alive())


def _restore_at_exit(display: Display) -> None:
    """The program ends without ``stop``: give the terminal back as it was, draw nothing."""
    if display._started and not display._stopped:
        display._stopped = display._stopping = True
        with contextlib.suppress(Exception):
            display._leave()


def _stdout_fd() -> int:
    try:
        return sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):
        return 1
