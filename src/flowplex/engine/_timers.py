"""Timed wakes: one thread per graph fires ``source_yield`` / ``rate`` / ``call_after`` deadlines,
``periodic`` conditions and input timeouts, on the graph's ``Clock``.

Waiting nodes occupy no worker: the timer thread hands the wake back to the engine, which
claims the node again on its executor. The thread must not die silently (every paced source
would stall): what its loop catches is reported (``failed``), naming the node whose wake it
was handling, and the engine fails the graph.
"""

from __future__ import annotations

import heapq
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._clock import Clock
    from ._nodes import Node

Call = Callable[[], None]
"""A timed callback of the engine's (``Timers.add_call``): it takes the graph's lock itself."""


class Timers:
    """One thread per graph that fires source wakes at their deadlines."""

    def __init__(self, clock: Clock, wake: Callable[[Node, int], None],
                 failed: Callable[[Node | None, BaseException, str, bool], None]) -> None:
        self._clock = clock
        self._wake = wake
        self._failed = failed
        self._cond = threading.Condition(threading.Lock())
        self._heap: list[tuple[float, int, Node, int, Call | None]] = []
        self._seq = 0
        self._stopped = False
        self._firing: Node | None = None
        """The node whose deadline the loop handles now (for a failure's message)."""
        self._waking = False
        """Inside ``wake``: a failure there interrupted the engine's accounting."""
        self._thread = threading.Thread(target=self._run, name="flowplex-timers", daemon=True)
        self._thread.start()

    def add(self, deadline: float, node: Node, gen: int) -> None:
        """Wake ``node`` (``Sources.wake``) at ``deadline`` unless its ``wake_gen`` moved on."""
        with self._cond:
            self._seq += 1
            heapq.heappush(self._heap, (deadline, self._seq, node, gen, None))
            self._cond.notify()

    def add_call(self, deadline: float, node: Node, call: Call) -> None:
        """Run ``call`` at ``deadline`` (``node``: whose it is, for a failure's message)."""
        with self._cond:
            self._seq += 1
            heapq.heappush(self._heap, (deadline, self._seq, node, 0, call))
            self._cond.notify()

    def jump_target(self) -> float | None:
        """The next deadline, when none is due or firing now (an autojump moves the clock there)."""
        with self._cond:
            if self._waking or self._stopped or not self._heap:
                return None
            deadline = self._heap[0][0]
            return deadline if deadline > self._clock() else None

    def due(self) -> bool:
        """Whether a deadline has come but not yet fired, or fires now (a manual clock just moved)."""
        with self._cond:
            return self._waking or bool(self._heap and self._heap[0][0] <= self._clock())

    def pending(self) -> bool:
        """Whether a deadline waits or fires now."""
        with self._cond:
            return bool(self._heap) or self._waking

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
                        deadline = self._heap[0][0]
                        if deadline <= self._clock():
                            break
                        self._clock.wait(self._cond, deadline)
                    else:
                        self._firing = None
                        self._cond.wait()
                if self._stopped:
                    return
                _, _, node, gen, call = heapq.heappop(self._heap)
                self._firing = node
                self._waking = True  # under the lock: ``jump_target`` sees a firing wake
            if call is None:
                self._wake(node, gen)
            else:
                call()
            with self._cond:
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
