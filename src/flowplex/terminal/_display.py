"""``Display``: the base of both renderers -- agent registry, frame loop, resize, keys, stats.

Agents call :meth:`Display.feed` from any thread; it appends to a bounded buffer and returns.
What happens when the buffer is full is the ``overflow`` policy: ``"drop"`` keeps the newest
output and counts the rest (a slow terminal never blocks a producer), ``"block"`` makes the
feeding thread wait for the render thread (back-pressure; lossless when it may wait for ever,
``block_timeout_s=None``, as log mode into a file or a pipe does). One render thread wakes when something
changed, waits for the next frame slot (at most ``fps`` frames a second, so updates arriving in
between coalesce and the latest state wins), renders a frame to bytes, and hands it to the
single :class:`~flowplex.terminal.Writer` as one write.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import logging
import signal
import sys
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from types import FrameType
from typing import ClassVar, Final

from ..errors import StateError, UsageError
from ..transport import AgentType
from ._caps import TermCaps, terminal_size
from ._control import AgentControl, state_word
from ._sanitize import safe_label
from ._stats import RenderStats
from ._writer import Writer

log = logging.getLogger(__name__)

__all__ = ["AgentInfo", "Display", "agent_type_of", "stream_order"]

OVERFLOW_POLICIES: Final = ("drop", "block")
ACTIVE_S: Final = 1.0
"""An agent with output in the last second is ``running``; after that, ``idle``."""
STATE_POLL_S: Final = 0.25
"""How often the render thread asks the agents' controls whether they wait for input."""
PROMPT_QUIET_S: Final = 0.5
"""An agent polling its terminal counts as waiting once its output stopped mid-line this long."""
_DRAIN_BLOCK_S: Final = 2.0
"""Once ``draining`` is set, the longest a blocked ``feed`` still waits for a slow reader."""
_IDLE_POLL_S: Final = 0.1
"""The render thread looks at least this often for a resize (the SIGWINCH handler only sets a
flag: taking a lock inside a signal handler can deadlock the main thread)."""


def agent_type_of(value: object, *, where: str = "agent_type") -> AgentType:
    """Normalise an agent type given as ``AgentType``, 0..7 or a name (``"assistant"``).

    Raises:
        UsageError: Not one of Perdix's eight agent types.

    >>> agent_type_of("Warning")
    <AgentType.WARNING: 4>
    """
    if isinstance(value, AgentType):
        return value
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < len(AgentType):
        return AgentType(value)
    if isinstance(value, str):
        key = value.strip().upper()
        if key in AgentType.__members__:
            return AgentType[key]
    names = ", ".join(t.name.lower() for t in AgentType)
    msg = f"{where}: unknown agent type {value!r}; expected one of {names} (or 0..7)"
    raise UsageError(msg)


def stream_order(stream_id: int) -> tuple[bool, int]:
    """Sort key of agents: by stream id, with negative ids (stdout/stderr proxies) last."""
    return stream_id < 0, stream_id


@dataclass(slots=True)
class AgentInfo:
    """What a display knows about one agent (stream); mutable, owned by the display."""

    stream_id: int
    name: str
    agent_type: AgentType
    number: int
    """1-based position in stream-id order (see :func:`stream_order`); the key that focuses it
    in panes mode."""
    messages: int = 0
    bytes_in: int = 0
    finished: bool = False
    ok: bool = True
    note: str = ""
    exit_code: int | None = None
    """The exit status given to ``end_stream`` (commands)."""
    pty: bool = False
    """The stream is a program's output through a pseudo-terminal (newlines already CRLF where
    the program wanted them); otherwise it is text, and ``\n`` starts a new line."""
    lines: int = 0
    """Newlines received."""
    started_at: float | None = None
    """When the current run of the agent began (its first output, or ``begin_stream``)."""
    ended_at: float | None = None
    last_output: float | None = None
    waiting: bool = False
    """Its foreground process waits for keys (polled from its control)."""
    ended_line: bool = True
    """Its last output ended a line (false after a prompt such as ``>>> ``)."""
    restarts: int = 0
    started: bool = True
    """False for a command that is not started yet (``autostart: false``)."""
    controllable: bool = False
    """A control is attached: keys can reach it (typing mode, stop/restart/kill)."""

    def state_key(self, now: float) -> tuple[object, ...]:
        """What :meth:`state` depends on at ``now``: cheap to compare, so a renderer redraws a
        title only when its state word can have changed."""
        active = self.last_output is not None and now - self.last_output < ACTIVE_S
        return self.finished, self.ok, self.exit_code, self.waiting, self.started, active

    def state(self, now: float) -> str:
        """The state word at monotonic time ``now`` (see :func:`~flowplex.terminal._control.state_word`)."""
        active = self.last_output is not None and now - self.last_output < ACTIVE_S
        return state_word(finished=self.finished, ok=self.ok, exit_code=self.exit_code,
                          waiting=self.waiting, active=active, started=self.started)

    def duration(self, now: float) -> float:
        """Seconds the current run lasted (so far)."""
        if self.started_at is None:
            return 0.0
        return (self.ended_at if self.ended_at is not None else now) - self.started_at


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
        self._gave_up = False
        """A wait for room timed out while draining: later feeds do not wait any more."""
        self._held_at = float("-inf")
        """When a ``feed`` last came out of a wait for room (display clock; lock held): a
        renderer's "this line stalled" timers restart then, as the stall was ours."""
        if writer is None:
            writer = Writer(_stdout_fd())
        self.writer = writer
        self.caps = caps if caps is not None else TermCaps.detect(writer.fd if writer.fd is not None else 1)
        self.fps = float(fps)
        self._size_fn = size_fn
        self._clock = clock
        self._lock = threading.Lock()
        self._room = threading.Condition(self._lock)
        """Notified by the render thread when it took output away (``overflow="block"``)."""
        self._wake = threading.Event()
        self._frame_done = threading.Condition(threading.Lock())
        self._requested = 0
        self._completed = 0
        self._agents: dict[int, AgentInfo] = {}
        self._controls: dict[int, AgentControl] = {}
        self._next_poll = 0.0
        self._thread: threading.Thread | None = None
        self._started = False
        self._stopping = False
        self._stopped = False
        self._resize_pending = False
        self._old_winch: Callable[[int, FrameType | None], object] | int | None = None
        self._winch_installed = False
        self.quit_requested = threading.Event()
        """Set when the user asked to quit (``q`` in panes mode)."""
        self.draining = threading.Event()
        """Set by the host program when it winds down: agent sources bound to this display
        (their ``display`` option) finish at their next turn, so the graph ends by itself."""
        # Counters (updated under self._lock or by the render thread only).
        self._messages = 0
        self._bytes_in = 0
        self._updates_since_frame = 0
        self._frames = 0
        self._max_frame = 0
        self._coalesced = 0
        self._skipped = 0
        self._resizes = 0
        self._render_cpu = 0.0

    # -- agents (any thread) ------------------------------------------------------------------

    def add_agent(self, stream_id: int, name: str | None = None, agent_type: object = None) -> AgentInfo:
        """Register (or rename/retype) the agent behind ``stream_id``; ``feed`` does it implicitly."""
        with self._lock:
            return self._agent_locked(stream_id, name, agent_type)

    def _agent_locked(self, stream_id: int, name: str | None, agent_type: object) -> AgentInfo:
        info = self._agents.get(stream_id)
        if info is None:
            kind = AgentType.ASSISTANT if agent_type is None else agent_type_of(agent_type)
            label = safe_label(name if name else f"agent-{stream_id}", 32)
            info = AgentInfo(stream_id, label, kind, 0)
            self._agents[stream_id] = info
            for number, sid in enumerate(sorted(self._agents, key=stream_order), 1):
                self._agents[sid].number = number
            self._on_new_agent(info)
        else:
            if name and name != info.name:
                info.name = safe_label(name, 32)
                self._on_agent_changed(info)
            if agent_type is not None:
                kind = agent_type_of(agent_type)
                if kind != info.agent_type:
                    info.agent_type = kind
                    self._on_agent_changed(info)
        return info

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
            info = self._agent_locked(stream_id, name, agent_type)
            if pty is not None:
                info.pty = pty
            if self.overflow == "block":
                # Lossless unless the wait timed out: then the renderer cuts to its bound (counted).
                self._may_drop = not self._wait_for_room(info) if self._full_locked(info) else False
            info.messages += 1
            info.bytes_in += len(raw)
            if raw:
                now = self._clock()
                if info.started_at is None:
                    info.started_at = now
                info.last_output = now
                info.lines += raw.count(b"\n")
                info.ended_line = raw.endswith(b"\n")
            self._messages += 1
            self._bytes_in += len(raw)
            self._updates_since_frame += 1
            if raw and not self.writer.broken:  # nobody reads any more: keep nothing
                self._on_feed(info, raw)
        self._wake.set()

    def _wait_for_room(self, info: AgentInfo) -> bool:
        """Block the feeding thread until the render thread drained ``info``'s buffer (lock held).

        Returns False when ``block_timeout_s`` passed first. Returns True with room, and also
        when no room can come (the display stops, its render thread ended, the reader went
        away): waiting longer would only hang the producer.
        """
        timeout = self.block_timeout_s
        deadline = None if timeout is None else time.monotonic() + timeout
        self._wake.set()
        while self._full_locked(info) and self._can_drain():
            if self.draining.is_set():
                # The run is being stopped: wait a little for a slow reader, then stop waiting
                # for good, so that a reader that never reads cannot hold the shutdown.
                if self._gave_up:
                    return False
                end = time.monotonic() + _DRAIN_BLOCK_S
                deadline = end if deadline is None else min(deadline, end)
            left = _IDLE_POLL_S if deadline is None else deadline - time.monotonic()
            if left <= 0:
                log.debug("terminal.feed.block-timeout agent=%r", info.name)
                self._held_at = self._clock()
                self._gave_up = self.draining.is_set()
                return False
            self._room.wait(min(left, _IDLE_POLL_S))
            self._held_at = self._clock()
        return True

    def _can_drain(self) -> bool:
        """Whether the render thread may still take output away (lock held)."""
        thread = self._thread
        return (self._started and not self._stopping and not self.writer.broken
                and thread is not None and thread.is_alive())

    def end_stream(self, stream_id: int, note: str = "", *, ok: bool = True, exit_code: int | None = None) -> None:
        """Mark the agent finished (``note`` e.g. ``"exit 0"``); shown in its title or as a line."""
        with self._lock:
            info = self._agent_locked(stream_id, None, None)
            info.finished = True
            info.ok = ok
            info.exit_code = exit_code
            info.note = safe_label(note, 60)
            info.waiting = False
            info.ended_at = self._clock()
            if info.started_at is None:
                info.started_at = info.ended_at
            self._on_end(info)
        self._wake.set()

    def begin_stream(self, stream_id: int, note: str = "") -> None:
        """The agent (re)started: a finished one runs again (its pane and counters stay)."""
        with self._lock:
            info = self._agent_locked(stream_id, None, None)
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
            self._on_begin(info, safe_label(note, 60))
        self._wake.set()

    def attach_control(self, stream_id: int, control: AgentControl, *, started: bool = True) -> bool:
        """Let keys reach the agent through ``control``; returns :attr:`keeps_agents`.

        ``started`` False: the command waits for a start key (``autostart: false``).
        """
        with self._lock:
            info = self._agent_locked(stream_id, None, None)
            self._controls[stream_id] = control
            info.controllable = True
            info.started = started
            self._on_agent_changed(info)
        self._wake.set()
        return self.keeps_agents

    def detach_control(self, stream_id: int, control: AgentControl) -> None:
        """Undo :meth:`attach_control` (the agent's source closed)."""
        with self._lock:
            if self._controls.get(stream_id) is control:
                del self._controls[stream_id]
                info = self._agents.get(stream_id)
                if info is not None:
                    info.controllable = False
                    info.waiting = False

    def control_of(self, stream_id: int) -> AgentControl | None:
        """The control attached for ``stream_id``, if any (any thread)."""
        with self._lock:
            return self._controls.get(stream_id)

    @property
    def keeps_agents(self) -> bool:
        """Whether an agent that exits keeps running its source, to be restarted from keys
        (an interactive display); otherwise a command's source ends when it exits."""
        return False

    def agent_states(self) -> dict[str, int]:
        """How many agents are in each state now (``{"running": 2, "exited (0)": 1}``)."""
        now = self._clock()
        with self._lock:
            counts: dict[str, int] = {}
            for info in self._agents.values():
                word = info.state(now)
                counts[word] = counts.get(word, 0) + 1
            return counts

    def agents(self) -> list[AgentInfo]:
        """The agents seen so far, in stream-id order (copies)."""
        with self._lock:
            return sorted((dataclasses.replace(a) for a in self._agents.values()), key=lambda a: a.number)

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
        self._install_winch()
        self._enter()
        atexit.register(self._restore_at_exit)  # never leave the shell in raw mode / the alternate screen
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
        self._restore_winch()
        atexit.unregister(self._restore_at_exit)
        try:
            if stuck:  # its write has not returned for 10 s: a reader that never reads; don't hang too
                log.debug("terminal.stop.writer-stuck")
            else:
                cpu = time.thread_time()
                data = self._render(self._clock(), final=True)
                self._render_cpu += time.thread_time() - cpu
                if data:
                    self._emit(data)
        finally:
            self._leave()
            with self._frame_done:
                self._completed = self._requested
                self._frame_done.notify_all()

    def _restore_at_exit(self) -> None:
        """The program ends without ``stop``: give the terminal back as it was, draw nothing."""
        if self._started and not self._stopped:
            self._stopped = self._stopping = True
            with contextlib.suppress(Exception):
                self._leave()

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
        with self._frame_done:
            self._requested += 1
            target = self._requested
        self._wake.set()
        deadline = time.monotonic() + timeout
        with self._frame_done:
            while self._completed < target:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._frame_done.wait(min(left, 0.05))
        return True

    def resize(self, columns: int | None = None, rows: int | None = None) -> None:
        """Re-lay out for a new terminal size; SIGWINCH takes the same path.

        With no arguments the size is asked from ``size_fn`` (the terminal).
        """
        if columns is not None and rows is not None:
            self._size_fn = _fixed_size(int(columns), int(rows))
        self._resize_pending = True
        self._wake.set()

    def stats(self) -> RenderStats:
        """A snapshot of the counters (any thread)."""
        with self._lock:
            extra = self._extra_stats()
            return RenderStats(
                mode=self.mode,
                agents=len(self._agents),
                messages=self._messages,
                bytes_in=self._bytes_in,
                frames=self._frames,
                bytes_out=self.writer.bytes_written,
                max_frame_bytes=self._max_frame,
                coalesced=self._coalesced + extra.get("coalesced", 0),
                skipped_frames=self._skipped,
                deferred_repaints=extra.get("deferred", 0),
                dropped_bytes=extra.get("dropped_bytes", 0),
                dropped_lines=extra.get("dropped_lines", 0),
                stripped=extra.get("stripped", 0),
                resizes=self._resizes,
                render_cpu_s=self._render_cpu,
                write_s=self.writer.write_time_s,
                cut_lines=extra.get("cut_lines", 0),
                cut_sequences=extra.get("cut_sequences", 0),
            )

    # -- the render loop (render thread) ---------------------------------------------------------

    def _run(self) -> None:
        # This is the loop: wait for a change, wait for the next frame slot, render, write once.
        period = 1.0 / self.fps
        next_at = 0.0
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
                    self._poll_states(now)
                with self._frame_done:
                    target = self._requested
                start = self._clock()
                wrote = self._frame(start)
                end = self._clock()
                if wrote:
                    next_at = start + period
                    if end > next_at:
                        self._skipped += int((end - start) / period)
                        next_at = end
                with self._frame_done:
                    self._completed = max(self._completed, target)
                    self._frame_done.notify_all()
                if self.writer.broken:
                    log.debug("terminal.render.stopped reason=broken-pipe")
                    self.quit_requested.set()
                    break
        except Exception:  # a rendering bug must not kill the agents; say so and stop drawing
            log.exception("terminal.render.failed")
            self.quit_requested.set()

    def _poll_states(self, now: float) -> None:
        """Ask each control whether its agent waits for input; tell the renderer what changed."""
        with self._lock:
            controls = [(sid, c) for sid, c in self._controls.items()
                        if not self._agents[sid].finished and self._agents[sid].started]
        for sid, control in controls:
            try:
                how = control.waiting()
            except Exception:  # a control that cannot tell is not waiting
                log.debug("terminal.state.poll-failed agent=%d", sid, exc_info=True)
                how = ""
            with self._lock:
                info = self._agents[sid]
                # A read of the terminal is waiting for keys; a select/poll on it is, after a
                # prompt (output that stopped mid-line a moment ago): an event loop that merely
                # has the terminal as stdin while it waits for the network has printed whole lines.
                quiet = info.last_output is None or now - info.last_output >= PROMPT_QUIET_S
                waiting = how == "read" or (how == "poll" and quiet and not info.ended_line)
                if waiting != info.waiting and not info.finished:
                    info.waiting = waiting
                    self._on_waiting(info)
        self._on_poll(now)

    def _frame(self, now: float) -> bool:
        cpu = time.thread_time()
        if self._resize_pending:
            self._resize_pending = False
            size = self._query_size()
            if size != (self.caps.columns, self.caps.rows):
                self.caps = self.caps.with_size(*size)
                self._resizes += 1
                self._on_resize()
        with self._lock:
            updates, self._updates_since_frame = self._updates_since_frame, 0
        data = self._render(now, final=False)
        self._render_cpu += time.thread_time() - cpu
        if not data:
            if updates:
                self._coalesced += updates
            return False
        self._coalesced += max(0, updates - 1)
        self._emit(data)
        return True

    def _emit(self, data: bytes) -> None:
        if self.writer.write(data):
            self._frames += 1
            self._max_frame = max(self._max_frame, len(data))

    def _query_size(self) -> tuple[int, int]:
        if self._size_fn is not None:
            return self._size_fn()
        if self.writer.fd is not None:
            return terminal_size(self.writer.fd)
        return self.caps.columns, self.caps.rows

    # -- SIGWINCH ---------------------------------------------------------------------------------

    def _install_winch(self) -> None:
        if not self.caps.is_tty and self._size_fn is None:
            return
        if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "SIGWINCH"):
            return
        try:
            self._old_winch = signal.signal(signal.SIGWINCH, self._on_winch)
        except (ValueError, OSError):
            return
        self._winch_installed = True

    def _restore_winch(self) -> None:
        if not self._winch_installed:
            return
        self._winch_installed = False
        with contextlib.suppress(ValueError, OSError, TypeError):
            signal.signal(signal.SIGWINCH, self._old_winch if self._old_winch is not None else signal.SIG_DFL)

    def _on_winch(self, signum: int, frame: FrameType | None) -> None:
        self._resize_pending = True  # only a flag: see _IDLE_POLL_S
        old = self._old_winch
        if callable(old):
            old(signum, frame)

    # -- what a renderer implements ---------------------------------------------------------------

    def _on_new_agent(self, info: AgentInfo) -> None:  # noqa: B027  (optional hook)
        """A new agent appeared (lock held)."""

    def _on_agent_changed(self, info: AgentInfo) -> None:  # noqa: B027  (optional hook)
        """An agent's name or type changed (lock held)."""

    @abstractmethod
    def _on_feed(self, info: AgentInfo, data: bytes) -> None:
        """Buffer ``data`` for ``info`` (lock held; keep it cheap and bounded)."""

    @abstractmethod
    def _on_end(self, info: AgentInfo) -> None:
        """The agent finished (lock held)."""

    def _on_begin(self, info: AgentInfo, note: str) -> None:  # noqa: B027  (optional hook)
        """The agent started again after it finished (lock held)."""

    def _on_waiting(self, info: AgentInfo) -> None:  # noqa: B027  (optional hook)
        """``info.waiting`` changed (lock held)."""

    def _on_poll(self, now: float) -> None:  # noqa: B027  (optional hook)
        """Called every :data:`STATE_POLL_S` on the render thread (states that change with time)."""

    def _on_resize(self) -> None:  # noqa: B027  (optional hook)
        """``self.caps`` has a new size (render thread)."""

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


def _fixed_size(columns: int, rows: int) -> Callable[[], tuple[int, int]]:
    def size() -> tuple[int, int]:
        return columns, rows

    return size


def _stdout_fd() -> int:
    try:
        return sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):
        return 1
