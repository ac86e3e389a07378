"""The watchdog: warn about a kernel callback while it is still running past ``watchdog_ms``.

``watchdog_ms`` makes the loop time every callback (``Scheduler.timed_call`` stamps
``node.running_since``); this thread, started only when ``watchdog_ms`` is set, looks at those
stamps a few times per period and warns once per call that has run longer: a kernel that hangs
is reported while it hangs, not after it returns (the loop also warns then, with the whole
duration). It starts before the kernels open, so that an ``open`` that hangs is reported too.
Graphs without ``watchdog_ms`` start no thread and pay nothing.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._nodes import Node

log = logging.getLogger("flowplex.graph")


def running_what(node: Node) -> str:
    """The callback ``node`` runs now, by its lifecycle: opens run before, closes after the rest."""
    if node.close_started:
        return "close()"
    return "process()" if node.opened else "open()"


class Watchdog:
    """One thread per graph (while it runs) that warns about callbacks running too long."""

    def __init__(self, nodes: list[Node], limit_ns: int) -> None:
        self._nodes = nodes
        self._limit_ns = limit_ns
        self._stop = threading.Event()
        self._warned: dict[Node, int] = {}
        """The ``running_since`` of the call each node was last warned about: once per call."""
        # A few looks per period: a hang is reported within ~1.25 periods (at most every 1 s).
        self._period_s = min(1.0, max(0.005, limit_ns / 4e9))
        self._thread = threading.Thread(target=self._run, name="flowplex-watchdog", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while not self._stop.wait(self._period_s):
                self.check(time.perf_counter_ns())
        except Exception:  # a diagnostic: it must never take the graph down
            log.exception("the watchdog thread failed; hanging callbacks are reported only when they return")

    def check(self, now_ns: int) -> None:
        """Warn once about each callback that has run longer than the limit at ``now_ns``."""
        for node in self._nodes:
            since = node.running_since  # one read: the loop may clear it meanwhile
            if since and now_ns - since > self._limit_ns and self._warned.get(node) != since:
                self._warned[node] = since
                log.warning("node `%s`: %s has been running for %.1f ms, exceeding watchdog %d ms (still running)",
                            node.name, running_what(node), (now_ns - since) / 1e6, self._limit_ns // 1_000_000)

    def stop(self) -> None:
        """Stop the thread and join it."""
        self._stop.set()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout=5.0)
