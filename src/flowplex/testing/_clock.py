"""``FakeClock``: monotonic seconds that move only when a test says so.

The engine keeps its own time (``time.monotonic``: source pacing, timers, waits) and takes no
clock; the terminal displays do (``clock=``), and so does any code of yours that takes a
``Callable[[], float]``.
"""

from __future__ import annotations

import math
import threading
from typing import final

from ..errors import UsageError

__all__ = ["FakeClock"]


@final
class FakeClock:
    """A callable clock: ``clock()`` is the current reading, ``advance(s)`` moves it forward.

    >>> clock = FakeClock(100.0)
    >>> clock.advance(0.25)
    100.25
    >>> clock()
    100.25
    """

    __slots__ = ("_lock", "_now")

    def __init__(self, start: float = 0.0) -> None:
        self._now = _seconds(start, "FakeClock", "start", allow_negative=True)
        self._lock = threading.Lock()

    def __call__(self) -> float:
        """The current reading, in seconds."""
        return self._now

    @property
    def now(self) -> float:
        """The current reading, in seconds."""
        return self._now

    def advance(self, seconds: float) -> float:
        """Move the clock ``seconds`` (>= 0) forward and return the new reading."""
        step = _seconds(seconds, "FakeClock.advance", "seconds", allow_negative=False)
        with self._lock:
            self._now += step
            return self._now

    def __repr__(self) -> str:
        return f"FakeClock({self._now!r})"


def _seconds(value: object, where: str, name: str, *, allow_negative: bool) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        msg = f"{where}: {name} must be a finite number of seconds, got {value!r}"
        raise UsageError(msg)
    if value < 0 and not allow_negative:
        msg = f"{where}: {name} must be >= 0 (a monotonic clock never goes back), got {value!r}"
        raise UsageError(msg)
    return float(value)
