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
import logging
import queue
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Final, final

from ...errors import BrokenError
from ...kernels._context import PHASE_PROCESS
from ._frames import decode

if TYPE_CHECKING:
    from concurrent.futures import Future

    from .._invocation import Complete, Invocation, Outcome

__all__ = ["BATCH_BUDGET_NS", "MAX_BATCHES_IN_FLIGHT", "Completions", "Lane"]

log = logging.getLogger(__name__)


def _never() -> bool:
    return False

MAX_BATCHES_IN_FLIGHT: Final = 2
"""Batches sent to one actor and not answered yet: one running, one waiting behind it."""
BATCH_BUDGET_NS: Final = 50_000_000
"""A batch holds at most about this much kernel time (by the lane's running average), so that
an actor is never far ahead of the graph: a cancel or an abort waits for little, and a slow
node's calls wait on the host, where they can still be dropped."""

Send = Callable[["Lane", list["Invocation"]], "Future[tuple[bytes, list[object]]]"]
"""``send(lane, invocations) -> future of their encoded outcomes`` (the executor's Ray call)."""
Fail = Callable[["Lane", "BaseException | None", list[tuple["Invocation", "Complete"]]], None]
"""``fail(lane, error, calls)``: complete ``calls`` with the failure of their batch (None: they
were dropped unsent, the graph having stopped)."""


@final
class Lane:
    """The calls of one actor: waiting ones, and the batches in flight (oldest first)."""

    __slots__ = ("actor", "closed", "cost_ns", "dead", "deadline", "flying", "lock", "node", "pending", "placed",
                 "replica", "unsent", "where")

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
        self.cost_ns = 0
        """The running average of one call's kernel time on this actor (0: none answered yet)."""
        self.unsent: list[tuple[BaseException | None, list[tuple[Invocation, Complete]]]] = []
        """Batches whose sending failed, to fail on the completion thread (never under the lock);
        with None, calls dropped unsent because the graph stopped."""


@final
class Completions:
    """Sends batches and completes their outcomes, for every lane of one executor."""

    def __init__(self, name: str, max_batch: int, delay_s: float, send: Send, fail: Fail) -> None:
        self.name = name
        self.max_batch = max_batch
        self.delay_s = delay_s
        self._send = send
        self._fail = fail
        self.stopped: Callable[[], bool] = _never
        """Whether the graph stopped for good (failed or cancelled): ``process`` calls not sent
        yet are then dropped, as the engine claims no new ones (``open``/``close`` still go)."""
        self.live: weakref.WeakSet[object] = weakref.WeakSet()
        """The frames of this executor's outcomes not fetched yet (``keep_live_frames``)."""
        self._done: queue.SimpleQueue[Lane | None] = queue.SimpleQueue()
        self._timers: list[tuple[float, int, Lane]] = []
        self._timers_lock = threading.Lock()
        self._count = 0
        self.batches = 0
        """Actor calls sent so far (each one batch of invocations)."""
        self._thread = threading.Thread(target=self._run, name=f"flowplex-{name}-completions", daemon=True)
        self._started = False

    def start(self) -> None:
        if not self._started or not self._thread.is_alive():
            if self._started:  # stopped before: a new thread (the queue may hold the old stop)
                self._done = queue.SimpleQueue()
                self._thread = threading.Thread(target=self._run, name=self._thread.name, daemon=True)
            self._started = True
            self._thread.start()

    def stop(self) -> None:
        if self._started:
            self._done.put(None)
            if threading.current_thread() is not self._thread:  # closed from a completion: it ends after
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
        if lane.flying and not lane.cost_ns:
            return  # what a call costs is known from the first answer: until then, one batch at a time
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
        lane.deadline = 0.0
        if self.stopped():  # every process call waiting is dropped; open and close still go
            dropped = [call for call in lane.pending if call[0].phase == PHASE_PROCESS]
            if dropped:
                lane.pending = [call for call in lane.pending if call[0].phase != PHASE_PROCESS]
                lane.unsent.append((None, dropped))
                self._done.put(lane)
                if not lane.pending:
                    return
        size = self.max_batch
        if lane.cost_ns:
            size = max(1, min(size, BATCH_BUDGET_NS // lane.cost_ns))
        calls = lane.pending[:size]
        del lane.pending[:size]
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
                self._guarded(self._fail, lane, exc, failed)
            with lane.lock:
                if not lane.flying or not lane.flying[0][0].done():
                    return
                future, calls = lane.flying[0]
            try:
                outcomes: list[Outcome] = decode(*future.result(), live=self.live)
            except BaseException as exc:
                outcomes = []
                failure: BaseException | None = exc
            else:
                failure = None
                durations = [o.duration_ns for (invocation, _), o in zip(calls, outcomes, strict=True)
                             if invocation.phase == PHASE_PROCESS]
                if durations:  # what ``process`` costs (an ``open`` says nothing about it)
                    cost = max(1, sum(durations) // len(durations))
                    lane.cost_ns = cost if not lane.cost_ns else (lane.cost_ns * 3 + cost) // 4
            with lane.lock:  # the next batch goes before these are completed: the actor keeps busy
                lane.flying.popleft()
                if not lane.closed:
                    self._maybe_send(lane)
            if failure is not None:
                self._guarded(self._fail, lane, failure, calls)
                continue
            for (_, complete), outcome in zip(calls, outcomes, strict=True):
                self._guarded(complete, outcome)

    def _guarded(self, fn: Callable[..., None], *args: object) -> None:
        """``fn(*args)``; an exception is logged, never the end of the completion thread (every
        lane of the executor would hang)."""
        try:
            fn(*args)
        except Exception:
            log.exception("ray.completion.failed executor=%r", self.name)
