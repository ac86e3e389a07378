"""Back-pressure under ``overflow="block"``: a feeding thread waits for the render thread.

:class:`Backpressure` owns the wait: how long a ``feed`` may wait for room in an agent's full
buffer, when it stops waiting for good (the run winds down and the reader does not read), and
when a feed last came out of a wait (a renderer restarts its "this line stalled" timers then,
as the stall was ours).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Final

log = logging.getLogger(__name__)

__all__ = ["Backpressure"]

DRAIN_BLOCK_S: Final = 2.0
"""Once ``draining`` is set, the longest a blocked ``feed`` still waits for a slow reader."""
POLL_S: Final = 0.1
"""The longest one wait on the condition lasts (the render thread may end meanwhile)."""


class Backpressure:
    """Waits of feeding threads for room (the display's lock held).

    Args:
        room: The condition on the display's lock that the render thread notifies when it took
            output away.
        timeout_s: The longest a wait lasts (None: until there is room).
        draining: The display's ``draining`` event.
        clock: The display's clock (``held_at`` is on it).
    """

    def __init__(
        self,
        room: threading.Condition,
        timeout_s: float | None,
        draining: threading.Event,
        clock: Callable[[], float],
    ) -> None:
        self._room = room
        self._timeout_s = timeout_s
        self._draining = draining
        self._clock = clock
        self._gave_up = False
        """A wait for room timed out while draining: later feeds do not wait any more."""
        self.held_at = float("-inf")
        """When a ``feed`` last came out of a wait for room (display clock; lock held)."""

    def wait(self, name: str, full: Callable[[], bool], can_drain: Callable[[], bool]) -> bool:
        """Block until ``full()`` turns false (lock held).

        Returns False when the timeout passed first. Returns True with room, and also when no
        room can come (``can_drain()`` false: the display stops, its render thread ended, the
        reader went away): waiting longer would only hang the producer.
        """
        timeout = self._timeout_s
        deadline = None if timeout is None else time.monotonic() + timeout
        while full() and can_drain():
            if self._draining.is_set():
                # The run is being stopped: wait a little for a slow reader, then stop waiting
                # for good, so that a reader that never reads cannot hold the shutdown.
                if self._gave_up:
                    return False
                end = time.monotonic() + DRAIN_BLOCK_S
                deadline = end if deadline is None else min(deadline, end)
            left = POLL_S if deadline is None else deadline - time.monotonic()
            if left <= 0:
                log.debug("terminal.feed.block-timeout agent=%r", name)
                self.held_at = self._clock()
                self._gave_up = self._draining.is_set()
                return False
            self._room.wait(min(left, POLL_S))
            self.held_at = self._clock()
        return True
