"""A pool's restart policy: whether a dead worker is replaced, and how often that may happen.

With ``restart: on_failure`` a worker that dies (killed, crashed, ``os._exit``) is replaced by a
fresh one in its slot, which hosts the same nodes again and opens their kernels; the pool
(``_pool``) does that. ``Restarts`` keeps the bookkeeping: the restarts of each slot within the
last ``RESTART_WINDOW_S`` (more than ``RESTARTS_MAX`` and the slot stays dead, so that a kernel
that kills its worker on every packet cannot loop), and the nodes whose kernel could not be
opened again (every later call of such a node fails with that reason).
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Final, final

__all__ = ["RESTARTS_MAX", "RESTART_POLICIES", "RESTART_WINDOW_S", "Restarts"]

RESTART_POLICIES: Final = ("never", "on_failure")
"""``restart`` values: a dead worker fails the later calls of its nodes, or is replaced."""
RESTARTS_MAX: Final = 3
"""Restarts of one slot allowed within ``RESTART_WINDOW_S``; the next death is final."""
RESTART_WINDOW_S: Final = 60.0
"""The window ``RESTARTS_MAX`` counts in: a worker that ran for a minute may die again."""


@final
class Restarts:
    """The restarts of each worker slot of one pool, and the nodes that could not be reopened."""

    __slots__ = ("_given_up", "_lock", "_times", "broken", "policy")

    def __init__(self, policy: str) -> None:
        self.policy = policy
        self._lock = threading.Lock()
        self._times: dict[int, deque[float]] = {}
        self._given_up: dict[int, int] = {}
        self.broken: dict[int, str] = {}
        """Node index → why it cannot run: its ``open`` failed on a restarted worker."""

    @property
    def enabled(self) -> bool:
        """Whether dead workers are replaced (``on_failure``)."""
        return self.policy == "on_failure"

    def allow(self, slot: int, now: float) -> int:
        """Count a restart of ``slot`` at ``now`` (``time.monotonic()``); its number within the
        window (1, 2, ...), or 0 when the slot has had ``RESTARTS_MAX`` already (none counted)."""
        with self._lock:
            times = self._times.setdefault(slot, deque())
            while times and now - times[0] > RESTART_WINDOW_S:
                times.popleft()
            if len(times) >= RESTARTS_MAX:
                self._given_up[slot] = len(times)
                return 0
            times.append(now)
            return len(times)

    def given_up(self, slot: int) -> bool:
        """Whether ``allow`` refused a restart of ``slot`` (it stays dead)."""
        return slot in self._given_up

    def why_not(self, slot: int) -> str:
        """Why the dead worker of ``slot`` was not replaced, for an error message."""
        given_up = self._given_up.get(slot)
        if not self.enabled:
            return "workers are not restarted"
        if given_up is not None:
            times = "time" if given_up == 1 else "times"
            return f"it was restarted {given_up} {times} within {RESTART_WINDOW_S:.0f} s; no more restarts"
        return "it died while the graph was starting"

    def clear(self) -> None:
        """Forget every restart and broken node (``shutdown``)."""
        with self._lock:
            self._times.clear()
            self._given_up.clear()
            self.broken.clear()
