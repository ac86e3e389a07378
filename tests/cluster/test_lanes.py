"""Properties of micro-batching (``cluster._lanes``), with a real thread pool as the "actor".

No Ray here: the lane's send is a function that runs the batch on a one-thread
``concurrent.futures`` pool (one call at a time, in order, like an actor) after a random pause.
Whatever the arrival pattern, ``max_batch`` and delay: every call completes exactly once, in
the order it was queued, no batch is larger than ``max_batch``, and no more than
``MAX_BATCHES_IN_FLIGHT`` are ever in flight.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor

from hypothesis import given, settings
from hypothesis import strategies as st

from flowplex.executors._invocation import Complete, Invocation, Outcome
from flowplex.executors.ray._frames import encode
from flowplex.executors.ray._lanes import MAX_BATCHES_IN_FLIGHT, Completions, Lane
from flowplex.kernels._context import PHASE_PROCESS

WAIT_S = 20.0


@settings(max_examples=40, deadline=None)
@given(max_batch=st.integers(1, 8), delay_ms=st.sampled_from([0.0, 0.5, 3.0]),
       pauses=st.lists(st.sampled_from([0.0, 0.0, 0.0, 0.0005, 0.002]), min_size=1, max_size=60),
       work_s=st.sampled_from([0.0, 0.0003, 0.001]))
def test_every_call_completes_once_in_order_within_the_bounds(max_batch: int, delay_ms: float, pauses: list[float],
                                                              work_s: float) -> None:
    actor = ThreadPoolExecutor(1)
    lock = threading.Lock()
    sizes: list[int] = []
    flying = [0, 0]  # now, most ever

    def run(invocations: list[Invocation]) -> tuple[bytes, list[object]]:
        time.sleep(work_s)
        with lock:
            flying[0] -= 1
        return encode([Outcome(i.node, i.seq, [[]]) for i in invocations])

    def send(lane: Lane, invocations: list[Invocation]) -> Future[tuple[bytes, list[object]]]:
        with lock:
            sizes.append(len(invocations))
            flying[0] += 1
            flying[1] = max(flying[1], flying[0])
        return actor.submit(run, invocations)

    def fail(lane: Lane, exc: BaseException, calls: list[tuple[Invocation, Complete]]) -> None:
        raise AssertionError(f"no batch may fail here: {exc!r}")

    completions = Completions("t", max_batch, delay_ms / 1000.0, send, fail)
    completions.start()
    lane = Lane(object(), 0, 0)
    done: list[int] = []
    all_done = threading.Event()

    def complete(outcome: Outcome) -> None:
        done.append(outcome.seq)
        if len(done) == len(pauses):
            all_done.set()

    try:
        for seq, pause in enumerate(pauses):
            completions.add(lane, Invocation(0, seq, PHASE_PROCESS, seq, []), complete)
            if pause:
                time.sleep(pause)
        assert all_done.wait(WAIT_S), f"{len(done)} of {len(pauses)} completed"
    finally:
        completions.stop()
        actor.shutdown()
    assert done == list(range(len(pauses)))
    assert sum(sizes) == len(pauses) and max(sizes) <= max_batch
    assert flying[1] <= MAX_BATCHES_IN_FLIGHT


def test_a_batch_waits_for_company_while_the_actor_is_busy_and_goes_when_full() -> None:
    """The first call goes alone (the actor was idle), and the next batch only once it is
    answered (what a call costs is unknown until then); those queued behind go together, at
    ``max_batch`` at once without waiting for the delay."""
    release = threading.Event()
    actor = ThreadPoolExecutor(1)
    sizes: list[int] = []

    def run(invocations: list[Invocation]) -> tuple[bytes, list[object]]:
        release.wait(WAIT_S)
        return encode([Outcome(i.node, i.seq, [[]]) for i in invocations])

    def send(lane: Lane, invocations: list[Invocation]) -> Future[tuple[bytes, list[object]]]:
        sizes.append(len(invocations))
        return actor.submit(run, invocations)

    completions = Completions("t", 4, 10.0, send, lambda *_: None)  # a 10 s delay: only "full" sends
    completions.start()
    lane = Lane(object(), 0, 0)
    done: list[int] = []
    try:
        for seq in range(9):
            completions.add(lane, Invocation(0, seq, PHASE_PROCESS, seq, []), lambda o: done.append(o.seq))
        assert sizes == [1]  # alone; the others wait for its answer
        release.set()
        deadline = time.monotonic() + WAIT_S
        while len(done) < 9 and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        completions.stop()
        actor.shutdown()
    assert done == list(range(9))
    assert sizes == [1, 4, 4]
