"""``AgentControl``: what a display may ask of an agent behind a PTY, and the agent states.

A command source attaches a control to the display it draws into; the display hands it the
keys typed in typing mode, the stop/restart/kill keys, and polls it for "waiting for input".
Agents without a control (LLM streams, transcripts) are read-only.
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from typing import Final, Protocol, TypeAlias

__all__ = ["ACTIONS", "AgentControl", "InputTap", "signal_name", "state_word"]

ACTIONS: Final = ("start", "stop", "restart", "kill")
"""What ``AgentControl.request`` accepts: start a command that is not running, SIGTERM it,
restart it (stop, then start again), SIGKILL it."""


InputTap: TypeAlias = Callable[[int, int, bytes], None]
"""``tap(stream_id, ts, data)``: keys typed into an agent (``Display.input_tap``), ``ts`` in the
agent's own output clock (microseconds), called on the thread that typed them."""


class AgentControl(Protocol):
    """The agent side of interaction; every method may be called from any thread, never blocks."""

    def write(self, data: bytes) -> None:
        """Send input to the agent's terminal (keys, paste); dropped when it is not running."""

    def request(self, action: str) -> None:
        """Ask for one of :data:`ACTIONS`; carried out by the agent's own thread."""

    def waiting(self) -> str:
        """How the agent's foreground process waits for its terminal now: ``"read"`` (blocked
        reading it), ``"poll"`` (in select/poll/epoll with the terminal among what it watches:
        a prompt, or an event loop whose stdin is the terminal), or ``""``."""


def signal_name(signum: int) -> str:
    """``"SIGTERM"`` for 15; ``"signal 99"`` for a number with no name.

    >>> signal_name(9)
    'SIGKILL'
    """
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def state_word(*, finished: bool, ok: bool, exit_code: int | None, waiting: bool,
               active: bool, started: bool = True) -> str:
    """The state shown for an agent: running, idle, waiting, exited (N), killed (SIG), done, failed.

    ``active``: output in the last second. ``started`` False: a command not started yet.

    >>> state_word(finished=True, ok=False, exit_code=-15, waiting=False, active=False)
    'killed (SIGTERM)'
    """
    if not started:
        return "not started"
    if finished:
        if exit_code is None:
            return "done" if ok else "failed"
        if exit_code < 0:
            return f"killed ({signal_name(-exit_code)})"
        return f"exited ({exit_code})"
    if waiting:
        return "waiting"
    return "running" if active else "idle"
