"""When a command that exited is started again: a pure policy with back-off.

Shared by ``CommandSource`` (its ``restart`` options) and the agents file
(:mod:`flowplex.terminal._agentsfile`), so a crash loop backs off the same way everywhere.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

__all__ = [
    "DEFAULT_RESTART_DELAY_S",
    "DEFAULT_RESTART_LIMIT",
    "MAX_RESTART_DELAY_S",
    "MIN_RESTART_DELAY_S",
    "RESTART_MODES",
    "STABLE_AFTER_S",
    "RestartDecision",
    "RestartPolicy",
]

RESTART_MODES: Final = ("never", "on_failure", "always")
DEFAULT_RESTART_LIMIT: Final = 10
"""Consecutive restarts before giving up (the agent then stays exited)."""
DEFAULT_RESTART_DELAY_S: Final = 1.0
"""The first restart's delay; each consecutive restart doubles it, up to ``MAX_RESTART_DELAY_S``."""
MIN_RESTART_DELAY_S: Final = 0.1
"""The smallest ``restart_delay_s`` a file may ask for: a crash loop must never spin."""
MAX_RESTART_DELAY_S: Final = 60.0
STABLE_AFTER_S: Final = 30.0
"""A run that lasted this long was not part of a crash loop: the consecutive count starts over."""


@dataclass(frozen=True, slots=True)
class RestartDecision:
    """What to do after an agent exited: the value :meth:`RestartPolicy.decide` returns."""

    restart: bool
    delay_s: float
    """Seconds to wait before starting it again (0 when ``restart`` is false)."""
    restarts: int
    """The consecutive-restart count to pass to the next ``decide`` (this restart included)."""
    reason: str
    """Why, in words for a status line: ``"restart 2/10 in 2.0 s"``, ``"restart limit 10 reached"``."""


@dataclass(frozen=True, slots=True)
class RestartPolicy:
    """When an exited agent is started again, and after how long.

    ``mode`` is ``never``, ``on_failure`` (a non-zero exit or a signal) or ``always``. Restarts
    back off: the n-th consecutive one waits ``delay_s * 2**(n-1)``, at most
    ``MAX_RESTART_DELAY_S``; after ``limit`` consecutive restarts (``None``: no limit) the agent
    stays exited. A run that lasted ``STABLE_AFTER_S`` or more resets the count.
    """

    mode: str = "never"
    limit: int | None = DEFAULT_RESTART_LIMIT
    delay_s: float = DEFAULT_RESTART_DELAY_S
    max_delay_s: float = MAX_RESTART_DELAY_S
    stable_after_s: float = STABLE_AFTER_S

    def decide(self, exit_code: int, restarts: int, *, uptime_s: float | None = None,
               stopped: bool = False) -> RestartDecision:
        """Whether to restart an agent that exited with ``exit_code`` (``-N``: killed by signal N).

        Args:
            exit_code: The exit status; negative for a signal.
            restarts: Consecutive restarts so far (the ``restarts`` of the previous decision; 0
                for the first exit).
            uptime_s: How long the run that just ended lasted; ``None`` when unknown (the count
                is then kept).
            stopped: The user stopped or killed it: it is never restarted.

        >>> policy = RestartPolicy("on_failure", limit=3, delay_s=1.0)
        >>> policy.decide(1, 0)
        RestartDecision(restart=True, delay_s=1.0, restarts=1, reason='restart 1/3 in 1.0 s')
        >>> policy.decide(1, 2).delay_s
        4.0
        >>> policy.decide(0, 0).restart
        False
        """
        if uptime_s is not None and uptime_s >= self.stable_after_s:
            restarts = 0
        if stopped:
            return RestartDecision(False, 0.0, restarts, "stopped by the user")
        if self.mode == "never":
            return RestartDecision(False, 0.0, restarts, "restart: never")
        if self.mode == "on_failure" and exit_code == 0:
            return RestartDecision(False, 0.0, restarts, "exited 0 (restart: on_failure)")
        if self.limit is not None and restarts >= self.limit:
            return RestartDecision(False, 0.0, restarts, f"restart limit {self.limit} reached")
        # 2**restarts grows without bound; min() before the power keeps it a small float.
        delay = min(self.max_delay_s, self.delay_s * 2.0 ** min(restarts, 64))
        count = restarts + 1
        of = f"/{self.limit}" if self.limit is not None else ""
        return RestartDecision(True, delay, count, f"restart {count}{of} in {delay:.1f} s")
