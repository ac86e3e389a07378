"""Source wakes: one thread per graph fires ``source_yield`` / ``rate`` deadlines.

Waiting sources occupy no worker: the timer thread hands the wake back to the engine, which
claims the source again on its executor. The thread must not die silently (every paced source
would stall): what its loop catches is reported (``failed``), naming the node whose wake it
was handling, and the engine fails the graph.
"""

from __future__ import annotations

import heapq
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._nodes import Node


class Timers:
    """One thread per graph that fires source wakes at their deadlines."""

    def __init__(self, wake: Callable[[Node, int], None],
                 failed: Callable[[Node | None, BaseException, str, bool], None]) -> None:
        self._wake = wake
        self._failed = failed
        self._cond = threading.Condition(threading.Lock())
        self._heap: list[tuple[float, int, Node, int]] = []
        self._seq = 0
        self._stopped = False
        self._firing: Node | None = None
        """The node whose deadline the loop handles now (for a failure's message)."""
        self._waking = False
        """Inside ``wake``: a failure there interrupted the engine's accounting."""
        self._thread = threading.Thread(target=self._run, name="flowplex-timers", daemon=True)
        self._thread.start()

    def add(self, deadline: float, node: Node, gen: int) -> None:
        with self._cond:
            self._seq += 1
            heapq.heappush(self._heap, (deadline, self._seq, node, gen))
            self._cond.notify()

    def _run(self) -> None:
        # The guard is around the loop, not each wake: no cost until something raises.
        try:
            self._loop()
        except BaseException as exc:
            with self._cond:
                self._stopped = True
                node = self._firing
                self._heap.clear()
            self._failed(node, exc, f"the timer thread (source wakes{_of(node)})", self._waking)

    def _loop(self) -> None:
        while True:
            with self._cond:
                while not self._stopped:
                    if self._heap:
                        self._firing = self._heap[0][2]
                        wait = self._heap[0][0] - time.monotonic()
                        if wait <= 0:
                            break
                        self._cond.wait(wait)
                    else:
                        self._firing = None
                        self._cond.wait()
                if self._stopped:
                    return
                _, _, node, gen = heapq.heappop(self._heap)
                self._firing = node
            self._waking = True
            self._wake(node, gen)
            self._waking = False

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._heap.clear()
            self._cond.notify_all()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout=5.0)


def _of(node: Node | None) -> str:
    return f", at node `{node.name}`" if node is not None else ""
