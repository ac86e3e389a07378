"""Where a pool's nodes live: the workers of each node's replicas, and which replica runs a call.

A node with ``max_in_flight: N`` (not a source) runs as ``min(N, num_processes)`` replicas, each
its own kernel instance on a worker of its own; every other node is one replica. ``Placement``
decides the workers when the graph starts (pure bookkeeping: it starts nothing), ``Replicas``
routes each ``process`` call of one node to its least busy replica, and ``Gather`` turns the
outcomes of an ``open`` or ``close`` sent to every replica into the one outcome the engine sees.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, final

from ..._log import LogLevel
from .._invocation import Outcome

if TYPE_CHECKING:
    from .._invocation import Complete, NodeRecipe

__all__ = ["Gather", "Placement", "Replicas", "combine", "replicas_wanted"]


def replicas_wanted(recipe: NodeRecipe, num_processes: int) -> int:
    """How many instances of the node a pool of ``num_processes`` workers runs.

    A source keeps one instance (its state is the stream it produces); any other node gets one
    per invocation it may have in flight, at most one per worker.
    """
    spec = recipe.spec
    if spec.is_source:
        return 1
    return max(1, min(spec.max_in_flight, num_processes))


@final
class Placement:
    """The worker slots of each node's replicas, kept across ``host`` calls.

    A new node's replicas go to the slots hosting the fewest replicas so far, on distinct slots;
    ties go to the slot after the last one chosen (so nodes with one replica each are placed
    round robin, slot ``k % num_processes`` for the k-th node).
    """

    __slots__ = ("_cursor", "_slots", "num_processes")

    def __init__(self, num_processes: int) -> None:
        self.num_processes = num_processes
        self._slots: dict[int, tuple[int, ...]] = {}
        self._cursor = 0

    def place(self, recipes: list[NodeRecipe]) -> dict[int, tuple[int, ...]]:
        """The slots of each recipe's replicas (replica k on the k-th slot): kept for a node
        placed before with as many replicas, chosen for the others. Nodes absent from
        ``recipes`` are forgotten."""
        n = self.num_processes
        placed: dict[int, tuple[int, ...]] = {}
        load = [0] * n
        for recipe in recipes:
            kept = self._slots.get(recipe.index)
            if kept is not None and len(kept) == replicas_wanted(recipe, n):
                placed[recipe.index] = kept
                for slot in kept:
                    load[slot] += 1
        for recipe in recipes:
            if recipe.index in placed:
                continue
            cursor = self._cursor
            order = sorted(range(n), key=lambda s: (load[s], (s - cursor) % n))
            chosen = tuple(order[:replicas_wanted(recipe, n)])
            for slot in chosen:
                load[slot] += 1
            self._cursor = (chosen[-1] + 1) % n
            placed[recipe.index] = chosen
        self._slots = placed
        return placed

    def clear(self) -> None:
        """Forget every node (``shutdown``)."""
        self._slots = {}
        self._cursor = 0


@final
class Replicas:
    """One node's replicas (their worker slots) and the ``process`` calls in flight on each."""

    __slots__ = ("_busy", "_lock", "_next", "slots")

    def __init__(self, slots: tuple[int, ...]) -> None:
        self.slots = slots
        """The worker slot of each replica, by replica number."""
        self._lock = threading.Lock()
        self._busy = [0] * len(slots)
        self._next = 0

    def __len__(self) -> int:
        return len(self.slots)

    def pick(self) -> int:
        """The replica for the next ``process`` call: the one with the fewest calls in flight,
        ties in turn (round robin). Pair each pick with a ``done``."""
        with self._lock:
            busy = self._busy
            n = len(busy)
            start = self._next
            k = min(range(n), key=lambda r: (busy[r], (r - start) % n))
            busy[k] += 1
            self._next = (k + 1) % n
            return k

    def done(self, k: int) -> None:
        """A call ``pick`` sent to replica ``k`` has completed."""
        with self._lock:
            self._busy[k] -= 1

    @property
    def busy(self) -> list[int]:
        """``process`` calls in flight, per replica."""
        with self._lock:
            return list(self._busy)


@final
class Gather:
    """Completes one ``open`` or ``close`` sent to every replica once all have answered."""

    __slots__ = ("_complete", "_left", "_lock", "_parts", "_what")

    def __init__(self, replicas: int, complete: Complete, what: str) -> None:
        """``what`` names the callback in a warning: ``[node-name] close``."""
        self._complete = complete
        self._what = what
        self._lock = threading.Lock()
        self._parts: list[Outcome | None] = [None] * replicas
        self._left = replicas

    def part(self, k: int) -> Complete:
        """The completion of replica ``k``'s call."""

        def complete(outcome: Outcome) -> None:
            with self._lock:
                self._parts[k] = outcome
                self._left -= 1
                last = self._left == 0
            if last:
                self._complete(combine([p for p in self._parts if p is not None], self._what))

        return complete


def combine(outcomes: list[Outcome], what: str) -> Outcome:
    """One outcome for a callback every replica ran (``open`` or ``close``), replica 0 first.

    When a replica failed, the outcome is the failure of the first one that did (its error and
    traceback; no output). Otherwise it is replica 0's output, bounds and requests; what the
    other replicas emitted is dropped, and the number dropped is logged as a warning of the
    node. Counters, logs, ignored emits and copies of every replica add up (each instance ran);
    the timing spans the first start to the last end.
    """
    first = outcomes[0]
    if len(outcomes) == 1:
        return first
    failed = next((o for o in outcomes if o.error), None)
    base = failed or first
    counters = [c for o in outcomes for c in o.counters]
    logs = [entry for o in outcomes for entry in o.logs]
    outputs = base.outputs if failed is None else [[] for _ in base.outputs]
    if failed is None:
        dropped = sum(len(packets) for o in outcomes[1:] for packets in o.outputs)
        if dropped:
            logs.append((int(LogLevel.WARN), f"{what} ran on {len(outcomes)} replicas: kept the output of "
                                             f"replica 0, dropped {dropped} packet(s) the others emitted"))
    started = min(o.started_ns for o in outcomes)
    ended = max(o.started_ns + o.duration_ns for o in outcomes)
    return Outcome(base.node, base.seq, outputs, base.bounds if failed is None else None, base.source_done,
                   base.yield_s, counters, logs, sum(o.ignored_emits for o in outcomes), started, ended - started,
                   sum(o.copies for o in outcomes), base.error, base.traceback, base.exception)
