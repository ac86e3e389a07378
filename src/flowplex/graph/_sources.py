"""Source pacing: ``source_yield`` and ``rate`` park a source without a worker, timers wake it.

After a source invocation the loop asks ``pace``; a source that must wait counts as busy (the
graph is not idle) until the timer thread calls ``wake``, which claims it again on its
executor's background path.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from ._timers import Timers

if TYPE_CHECKING:
    from ..kernels._context import Context
    from ._claims import Claims
    from ._closing import Closing
    from ._nodes import Node
    from ._status import Status


class Sources:
    """Parks and wakes sources; owns the graph's timer thread (started lazily)."""

    def __init__(self, status: Status, claims: Claims, closing: Closing) -> None:
        self.status = status
        self.claims = claims
        self.closing = closing
        self._timers: Timers | None = None

    def pace(self, node: Node, ctx: Context) -> None:
        """After a source invocation: wait for ``source_yield`` / ``rate``; lock held."""
        delay = ctx._yield
        deadline = 0.0
        now = time.monotonic()
        if node.rate_period:
            deadline = node.last_start + node.rate_period
        if delay is not None and delay > 0:
            deadline = max(deadline, now + delay)
        if deadline > now:
            node.waiting = True
            self.status.busy += 1
            if self._timers is None:
                self._timers = Timers(self.wake)
            self._timers.add(deadline, node, node.wake_gen)

    def wake(self, node: Node, gen: int) -> None:
        """Timer callback: a waiting source may run again."""
        status = self.status
        with status.lock:
            if gen != node.wake_gen or not node.waiting:
                return  # stale: cancel or reset already settled this wake's ``busy`` count
            status.busy -= 1
            node.waiting = False
            self.closing.rescan((node,))
            status.bump()
            subs = self.claims.take()
        for executor, task, arg in subs:
            executor.submit_background(task, arg)

    def cancel_waits(self, nodes: list[Node]) -> None:
        """Drop pending wakes (a cancel); lock held."""
        for node in nodes:
            if node.waiting:
                node.waiting = False
                node.wake_gen += 1
                self.status.busy -= 1

    def stop(self) -> None:
        """Stop the timer thread."""
        if self._timers is not None:
            self._timers.stop()
            self._timers = None
