"""Bounded waiting: spin briefly, then sleep with exponential back-off, until a deadline.

A shared-memory ring has no kernel object to block on, so a waiting side polls.  Polling must
neither burn a core forever nor add much latency: the first ``SPIN`` polls run back to back with
a ``sched_yield`` between them (tens to hundreds of microseconds; the yield hands the core to a
peer that shares it, which matters on small machines), then the pause doubles from
``FIRST_SLEEP_S`` up to ``MAX_SLEEP_S``, so an idle consumer costs about a thousand wake-ups a
second and a message arriving during a sleep waits at most ``MAX_SLEEP_S``.
"""

from __future__ import annotations

import os
import time
from typing import Final, final

SPIN: Final = 200
FIRST_SLEEP_S: Final = 20e-6
MAX_SLEEP_S: Final = 1e-3


@final
class Backoff:
    """One wait: call :meth:`pause` after each unsuccessful poll.

    Args:
        timeout: Seconds to wait in total; ``None`` waits without a deadline.
    """

    __slots__ = ("_deadline", "_polls", "_sleep")

    def __init__(self, timeout: float | None) -> None:
        self._deadline = None if timeout is None else time.monotonic() + max(0.0, timeout)
        self._polls = 0
        self._sleep = FIRST_SLEEP_S

    def expired(self) -> bool:
        """Whether the deadline has passed."""
        return self._deadline is not None and time.monotonic() >= self._deadline

    def pause(self) -> bool:
        """Wait a little before the next poll.

        Returns:
            False when the deadline has passed (the caller should give up), else True.
        """
        if self._deadline is not None and time.monotonic() >= self._deadline:
            return False
        self._polls += 1
        if self._polls <= SPIN:
            os.sched_yield()  # a polite spin: lets a peer sharing this core run
            return True
        pause = self._sleep
        if self._deadline is not None:
            pause = min(pause, max(0.0, self._deadline - time.monotonic()))
        time.sleep(pause)
        self._sleep = min(self._sleep * 2, MAX_SLEEP_S)
        return True
