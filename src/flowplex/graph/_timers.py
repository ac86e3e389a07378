"""Source wakes: one thread per graph fires ``source_yield`` / ``rate`` deadlines.

Waiting sources occupy no worker: the timer thread hands the wake back to the engine, which
claims the source again on its executor.
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

    def __init__(self, wake: Callable[[Node, int], None]) -> None:
        self._wake = wake
        self._cond = threading.Condition(threading.Lock())
        self._heap: list[tuple[float, int, Node, int]] = []
        self._seq = 0
        self._stopped = False
        self._thread = threading.Thread(target=self._loop, name="flowplex-timers", daemon=True)
        self._thread.start()

    def add(self, deadline: float, node: Node, gen: int) -> None:
        with self._cond:
            self._seq += 1
            heapq.heappush(self._heap, (deadline, self._seq, node, gen))
            self._cond.notify()

    def _loop(self) -> None:
        while True:
            with self._cond:
                while not self._stopped:
                    if self._heap:
                        wait = self._heap[0][0] - time.monotonic()
                        if wait <= 0:
                            break
                        self._cond.wait(wait)
                    else:
                        self._cond.wait()
                if self._stopped:
                    return
                _, _, node, gen = heapq.heappop(self._heap)
            self._wake(node, gen)

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._heap.clear()
            self._cond.notify_all()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout=5.0)
