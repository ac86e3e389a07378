"""The agents a display knows: what it knows about each one, and the controls attached to them.

:class:`AgentInfo` is one agent's record (name, type, counters, state); :class:`AgentRoster`
owns the records and the attached controls, numbers the agents in stream-id order, and polls
the controls for agents that wait for input. Every change of a record is told to the display's
renderer through the ``on_agent`` callback it was given (lock held).
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from ..errors import UsageError
from ..transport import AgentType
from ._control import AgentControl, state_word
from ._sanitize import safe_label

log = logging.getLogger(__name__)

__all__ = ["AgentInfo", "AgentRoster", "agent_type_of", "stream_order"]

ACTIVE_S: Final = 1.0
"""An agent with output in the last second is ``running``; after that, ``idle``."""
PROMPT_QUIET_S: Final = 0.5
"""An agent polling its terminal counts as waiting once its output stopped mid-line this long."""


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


class AgentRoster:
    """The agents by stream id and their controls (under the display's ``lock``).

    Args:
        lock: The display's lock; methods ending in ``_locked`` expect it held.
        on_agent: Told ``(info, change)`` under the lock: ``"new"`` (an agent appeared),
            ``"changed"`` (its name, type or control changed), ``"waiting"`` (``info.waiting``
            changed).
    """

    def __init__(self, lock: threading.Lock, on_agent: Callable[[AgentInfo, str], None]) -> None:
        self._lock = lock
        self._on_agent = on_agent
        self.agents: dict[int, AgentInfo] = {}
        self.controls: dict[int, AgentControl] = {}

    def agent_locked(self, stream_id: int, name: str | None, agent_type: object) -> AgentInfo:
        """The agent behind ``stream_id``, registered (or renamed/retyped) first."""
        info = self.agents.get(stream_id)
        if info is None:
            kind = AgentType.ASSISTANT if agent_type is None else agent_type_of(agent_type)
            label = safe_label(name if name else f"agent-{stream_id}", 32)
            info = AgentInfo(stream_id, label, kind, 0)
            self.agents[stream_id] = info
            for number, sid in enumerate(sorted(self.agents, key=stream_order), 1):
                self.agents[sid].number = number
            self._on_agent(info, "new")
        else:
            if name and name != info.name:
                info.name = safe_label(name, 32)
                self._on_agent(info, "changed")
            if agent_type is not None:
                kind = agent_type_of(agent_type)
                if kind != info.agent_type:
                    info.agent_type = kind
                    self._on_agent(info, "changed")
        return info

    def attach_locked(self, stream_id: int, control: AgentControl, *, started: bool) -> None:
        """Let keys reach the agent through ``control``."""
        info = self.agent_locked(stream_id, None, None)
        self.controls[stream_id] = control
        info.controllable = True
        info.started = started
        self._on_agent(info, "changed")

    def detach_locked(self, stream_id: int, control: AgentControl) -> None:
        """Undo :meth:`attach_locked` (if ``control`` is still the one attached)."""
        if self.controls.get(stream_id) is control:
            del self.controls[stream_id]
            info = self.agents.get(stream_id)
            if info is not None:
                info.controllable = False
                info.waiting = False

    def poll_waiting(self, now: float) -> None:
        """Ask each control whether its agent waits for input (render thread; takes the lock
        only between the questions, which may read ``/proc``)."""
        with self._lock:
            controls = [(sid, c) for sid, c in self.controls.items()
                        if not self.agents[sid].finished and self.agents[sid].started]
        for sid, control in controls:
            try:
                how = control.waiting()
            except Exception:  # a control that cannot tell is not waiting
                log.debug("terminal.state.poll-failed agent=%d", sid, exc_info=True)
                how = ""
            with self._lock:
                info = self.agents[sid]
                # A read of the terminal is waiting for keys; a select/poll on it is, after a
                # prompt (output that stopped mid-line a moment ago): an event loop that merely
                # has the terminal as stdin while it waits for the network has printed whole lines.
                quiet = info.last_output is None or now - info.last_output >= PROMPT_QUIET_S
                waiting = how == "read" or (how == "poll" and quiet and not info.ended_line)
                if waiting != info.waiting and not info.finished:
                    info.waiting = waiting
                    self._on_agent(info, "waiting")

    def states(self, now: float) -> dict[str, int]:
        """How many agents are in each state (lock taken)."""
        with self._lock:
            counts: dict[str, int] = {}
            for info in self.agents.values():
                word = info.state(now)
                counts[word] = counts.get(word, 0) + 1
            return counts

    def copies(self) -> list[AgentInfo]:
        """Copies of the agents' records in stream-id order (lock taken)."""
        with self._lock:
            return sorted((dataclasses.replace(a) for a in self.agents.values()), key=lambda a: a.number)
