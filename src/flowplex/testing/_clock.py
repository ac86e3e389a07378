"""``FakeClock``: monotonic seconds that move only when a test says so.

Give it to a graph (``Graph.from_yaml(..., clock=...)``, ``run_graph(..., clock=...)``) and every
timing rule of the engine (``rate``, ``source_yield``, ``periodic``, ``call_after``, input
timeouts) runs on virtual time: ``advance`` moves it, and with ``autojump=True`` a graph that
has nothing left to run but timers moves it to the next timer while the host waits on it
(``wait_done``, a poller's ``next``), as trio's ``MockClock(autojump_threshold=0)`` does. An hour
of a 1 Hz source then takes well under a second. The terminal displays take it too (``clock=``),
and so does any code of yours that takes a ``Callable[[], float]``.
"""

from __future__ import annotations

import math
import threading
from typing import final

from ..errors import UsageError

__all__ = ["FakeClock"]

_POLL_S = 0.05
"""Longest real wait of a timer thread on a fake clock: a safety net (moves notify it at once)."""


@final
class FakeClock:
    """A callable clock: ``clock()`` is the current reading, ``advance(s)`` moves it forward.

    >>> clock = FakeClock(100.0)
    >>> clock.advance(0.25)
    100.25
    >>> clock()
    100.25
    """

    __slots__ = ("_autojump", "_lock", "_now", "_waiters")

    def __init__(self, start: float = 0.0, *, autojump: bool = False) -> None:
        self._now = _seconds(start, "FakeClock", "start", allow_negative=True)
        if not isinstance(autojump, bool):
            msg = f"FakeClock: autojump must be True or False, got {autojump!r}"
            raise UsageError(msg)
        self._autojump = autojump
        self._lock = threading.Lock()
        self._waiters: list[threading.Condition] = []
        """Conditions that engine timer threads wait on now: a move notifies them."""

    def __call__(self) -> float:
        """The current reading, in seconds."""
        return self._now

    @property
    def now(self) -> float:
        """The current reading, in seconds."""
        return self._now

    @property
    def autojump(self) -> bool:
        """Whether an idle graph moves this clock to its next timer (see the module docstring)."""
        return self._autojump

    def advance(self, seconds: float) -> float:
        """Move the clock ``seconds`` (>= 0) forward and return the new reading."""
        step = _seconds(seconds, "FakeClock.advance", "seconds", allow_negative=False)
        with self._lock:
            self._now += step
            now = self._now
        self._notify()
        return now

    def jump_to(self, reading: float) -> None:
        """Move the clock forward to ``reading`` (a reading in the past changes nothing)."""
        with self._lock:
            if reading <= self._now:
                return
            self._now = reading
        self._notify()

    def wait(self, cond: threading.Condition, deadline: float) -> None:
        """Wait on ``cond`` (held) until notified, the clock moves, or a short real slice ends."""
        with self._lock:
            self._waiters.append(cond)
            if self._now >= deadline:  # moved before we registered: no notify is coming
                self._waiters.remove(cond)
                return
        try:
            cond.wait(_POLL_S)
        finally:
            with self._lock:
                self._waiters.remove(cond)

    def _notify(self) -> None:
        # Outside our lock: a waiter holds its condition's lock while it registers here.
        with self._lock:
            waiters = list(self._waiters)
        for cond in waiters:
            with cond:
                cond.notify_all()

    def __repr__(self) -> str:
        jump = ", autojump=True" if self._autojump else ""
        return f"FakeClock({self._now!r}{jump})"


def _seconds(value: object, where: str, name: str, *, allow_negative: bool) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        msg = f"{where}: {name} must be a finite number of seconds, got {value!r}"
        raise UsageError(msg)
    if value < 0 and not allow_negative:
        msg = f"{where}: {name} must be >= 0 (a monotonic clock never goes back), got {value!r}"
        raise UsageError(msg)
    return float(value)
