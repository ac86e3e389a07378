"""``Clock``: the one place the engine reads engine time from, so that tests can drive it.

Engine time is what the timing rules measure: source pacing (``rate``, ``source_yield``),
``periodic`` conditions, ``call_after``, input timeouts; the timer thread sleeps on it. It is a
monotonic reading in seconds. ``SystemClock`` reads ``time.monotonic``;
``flowplex.testing.FakeClock`` moves only when a test (or, with ``autojump``, an idle graph)
moves it.

Three readings stay on the system clock on purpose: the host's own timeouts (``wait_done``,
``next``, ``send``: a test's safety limit must hold in real seconds), callback durations (stats,
tracing) and the watchdog (they measure the work a kernel does, which takes real time under any
clock).
"""

from __future__ import annotations

import threading
import time
from typing import Protocol, final, runtime_checkable

__all__ = ["SYSTEM_CLOCK", "Clock", "SystemClock"]


@runtime_checkable
class Clock(Protocol):
    """What the engine needs of a clock."""

    @property
    def autojump(self) -> bool:
        """Whether a graph with nothing left to run but timers may move this clock to the next one."""
        ...

    def __call__(self) -> float:
        """The current reading, in seconds (monotonic)."""
        ...

    def wait(self, cond: threading.Condition, deadline: float) -> None:
        """Wait on ``cond`` (held by the caller) until notified or this clock reads ``deadline``.

        May return early (the caller rechecks): a fake clock wakes its waiters when it moves.
        """
        ...

    def jump_to(self, reading: float) -> None:
        """Move the clock forward to ``reading`` (autojump clocks only; never backwards)."""
        ...


@final
class SystemClock:
    """``time.monotonic``: the clock of every graph unless one is given."""

    __slots__ = ()

    @property
    def autojump(self) -> bool:
        """Never: real time moves by itself."""
        return False

    def __call__(self) -> float:
        return time.monotonic()

    def wait(self, cond: threading.Condition, deadline: float) -> None:
        cond.wait(max(0.0, deadline - time.monotonic()))

    def jump_to(self, reading: float) -> None:
        """Real time cannot be moved: a no-op."""
        del reading

    def __repr__(self) -> str:
        return "SystemClock()"


SYSTEM_CLOCK = SystemClock()
"""The shared system clock (it holds no state)."""
