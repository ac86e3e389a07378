"""Micro-batching: the calls of one actor go in batches, at most ``MAX_BATCHES_IN_FLIGHT`` at once.

A Ray actor call costs about a millisecond here, so one call per small packet would cap a node
near a thousand packets a second. A ``Lane`` queues the invocations of one actor in claim
order and sends them as one ``run`` call: at once when the actor has nothing to do, otherwise
when ``max_batch`` are waiting or the oldest has waited ``max_batch_delay_ms``, and never more
than ``MAX_BATCHES_IN_FLIGHT`` batches ahead of the actor (the engine bounds how many calls of a
node are claimed: ``RayExecutor.calls_in_flight``). One ``Completions`` thread per executor
completes the outcomes of each finished batch in order, and fires the delays.
"""

from __future__ import annotations

import heapq
import queue
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Final, final

from ..errors import BrokenError
from ._frames import decode

if TYPE_CHECKING:
    from concurrent.futures import Future

    from ..executors._invocation import Complete, Invocation, Outcome

__all__ = ["MAX_BATCHES_IN_FLIGHT", "Completions", "Lane"]

MAX_BATCHES_IN_FLIGHT: Final = 2
"""Batches sent to one actor and not answered yet: one running, one waiting behind it."""

Send = Callable[["Lane", list["Invocation"]], "Future[tuple[bytes, list[object]]]"]
"""``send(lane, invocations) -> future of their encoded outcomes`` (the executor's Ray call)."""
Fail = Callable[["Lane", BaseException, list[tuple["Invocation", "Complete"]]], None]
"""``fail(lane, error, calls)``: complete ``calls`` with the failure of their batch."""


@final
class Lane:
    """The calls of one actor: waiting ones, and the batches in flight (oldest first)."""

    __slots__ = ("actor", "closed", "dead", "deadline", "flying", "lock", "node", "pending", "placed", "replica",
                 "unsent", "where")

    def __init__(self, actor: object, node: int, replica: int) -> None:
        self.actor = actor
        self.node = node
        self.replica = replica
        self.where = ""
        """``pid P on IP``, once the actor answered its hosting call."""
        self.placed: tuple[int, str, str] = (0, "", "")
        """``(pid, IP address, Ray node id)`` of the actor's worker process, once it answered."""
        self.lock = threading.Lock()
        self.pending: list[tuple[Invocation, Complete]] = []
        self.flying: deque[tuple[Future[tuple[bytes, list[object]]], list[tuple[Invocation, Complete]]]] = deque()
        self.deadline = 0.0
        """When the oldest pending call must be sent (0: no delay armed)."""
        self.closed = ""
        """Why no call may be sent any more ("" while it may)."""
        self.dead = False
        """Its actor died once (Ray may have restarted it)."""
        self.unsent: list[tuple[BaseException, list[tuple[Invocation, Complete]]]] = []
        """Batches whose sending failed, to fail on the completion thread (never under the lock)."""


@final
class Completions:
    """Sends batches and completes their outcomes, for every lane of one executor."""

    def __init__(self, name: str, max_batch: int, delay_s: float, send: Send, fail: Fail) -> None:
        self.max_batch = max_batch
        self.delay_s = delay_s
        self._send = send
        self._fail = fail
        self._done: queue.SimpleQueue[Lane | None] = queue.SimpleQueue()
        self._timers: list[tuple[float, int, Lane]] = []
        self._timers_lock = threading.Lock()
        self._count = 0
        self.batches = 0
        """Actor calls sent so far (each one batch of invocations)."""
        self._thread = threading.Thread(target=self._run, name=f"flowplex-{name}-completions", daemon=True)
        self._started = False

    def start(self) -> None:
        if not self._started:
            self._started = True
            self._thread.start()

    def stop(self) -> None:
        if self._started:
            self._done.put(None)
            self._thread.join(5.0)

    # -- from the engine's threads ----------------------------------------------------------------

    def add(self, lane: Lane, invocation: Invocation, complete: Complete) -> None:
        """Queue one call on ``lane``; sends a batch now when the rules say so."""
        with lane.lock:
            if not lane.closed:
                lane.pending.append((invocation, complete))
                self._maybe_send(lane)
                return
            why = lane.closed
        self._fail(lane, BrokenError(why), [(invocation, complete)])

    def _maybe_send(self, lane: Lane, *, due: bool = False) -> None:
        """Under ``lane.lock``: send the next batch when the actor is idle, a batch is full or
        the delay is ``due``; else arm the delay (once per batch)."""
        pending = lane.pending
        if not pending or len(lane.flying) >= MAX_BATCHES_IN_FLIGHT:
            return
        if due or not lane.flying or len(pending) >= self.max_batch:
            self._send_now(lane)
        elif lane.deadline == 0.0:
            lane.deadline = time.monotonic() + self.delay_s
            with self._timers_lock:
                self._count += 1
                heapq.heappush(self._timers, (lane.deadline, self._count, lane))
            self._done.put(lane)  # wake the thread: it may be sleeping past this deadline

    def _send_now(self, lane: Lane) -> None:
        """Under ``lane.lock`` (Ray runs one caller's calls in the order they were made)."""
        calls = lane.pending[:self.max_batch]
        del lane.pending[:self.max_batch]
        lane.deadline = 0.0
        try:
            future = self._send(lane, [invocation for invocation, _ in calls])
        except Exception as exc:
            lane.unsent.append((exc, calls))
            self._done.put(lane)
            return
        lane.flying.append((future, calls))
        self.batches += 1
        future.add_done_callback(lambda _: self._done.put(lane))

    def close(self, lane: Lane, why: str) -> list[tuple[Invocation, Complete]]:
        """Send nothing more on ``lane``; the calls that were waiting (the caller fails them)."""
        with lane.lock:
            lane.closed = why
            calls, lane.pending = lane.pending, []
        return calls

    def waiting(self, lane: Lane) -> tuple[int, int]:
        """``(pending, in flight)`` calls of ``lane``."""
        with lane.lock:
            return len(lane.pending), sum(len(calls) for _, calls in lane.flying)

    # -- the completion thread ----------------------------------------------------------------

    def _run(self) -> None:
        done = self._done
        while True:
            timeout = self._fire_due()
            try:
                lane = done.get(timeout=timeout)
            except queue.Empty:
                continue
            if lane is None:
                return
            self._finish(lane)

    def _fire_due(self) -> float | None:
        """Send the batches whose delay has passed; seconds until the next one (None: none)."""
        while True:
            with self._timers_lock:
                if not self._timers:
                    return None
                deadline, _, lane = self._timers[0]
                now = time.monotonic()
                if deadline > now:
                    return deadline - now
                heapq.heappop(self._timers)
            with lane.lock:
                if lane.deadline and lane.deadline <= now and not lane.closed:
                    lane.deadline = 0.0
                    self._maybe_send(lane, due=True)

    def _finish(self, lane: Lane) -> None:
        """Complete the answered batches at the head of ``lane``, in order, after sending the next."""
        while True:
            with lane.lock:
                unsent, lane.unsent = lane.unsent, []
            for exc, failed in unsent:
                self._fail(lane, exc, failed)
            with lane.lock:
                if not lane.flying or not lane.flying[0][0].done():
                    return
                future, calls = lane.flying.popleft()
                if not lane.closed:
                    self._maybe_send(lane)
            try:
                outcomes: list[Outcome] = decode(*future.result())
            except BaseException as exc:
                self._fail(lane, exc, calls)
                continue
            for (_, complete), outcome in zip(calls, outcomes, strict=True):
                complete(outcome)
