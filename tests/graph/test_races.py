"""Work claimed under the lock is submitted exactly once, by the thread that claimed it.

A regression test: the hop shortcut once handed out the live (empty) outbox after releasing the
lock, so a pool worker could submit another thread's claims a second time, or lose them, and a
diamond stalled with packets queued (about one run in twelve on two workers).
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Callable, Iterator
from types import FrameType

import pytest

import flowplex
from flowplex.engine import _waiting

TraceFunction = Callable[[FrameType, str, object], "TraceFunction | None"]


@flowplex.kernel("RaceEven")
class RaceEven(flowplex.Kernel):
    """Forwards even values only (the bound still advances)."""

    def process(self, cc: flowplex.Context) -> None:
        if cc.input(0).as_int() % 2 == 0:
            cc.forward(0, 0)


@flowplex.kernel("RaceJoin")
class RaceJoin(flowplex.Kernel):
    """Emits a * 1000 + b (b 0 when the even side has no packet at this timestamp)."""

    def process(self, cc: flowplex.Context) -> None:
        b = 0 if cc.input_is_empty(1) else cc.input(1).as_int()
        cc.emit(0, cc.input(0).as_int() * 1000 + b)


DIAMOND = """
nodes:
  - { name: l, kernel: PassThroughKernel, input_ports: [e0], output_ports: [a] }
  - { name: r, kernel: RaceEven, input_ports: [e0], output_ports: [b] }
  - { name: j, kernel: RaceJoin, input_ports: [a, b], output_ports: [y] }
  - { name: sink, kernel: PassThroughKernel, input_ports: [y], output_ports: [z] }
input_ports: [e0]
output_ports: [z]
"""


def test_a_diamond_delivers_everything_once_run_after_run(executor_kind: str) -> None:
    # A graph on a process pool starts workers (half a second): a few runs there, not a minute.
    for _ in range(5 if executor_kind == "processes" else 100):
        with flowplex.Graph.from_yaml(DIAMOND) as g:
            out = g.add_poller("z")
            g.start()
            for v in range(6):
                g.send("e0", v, ts=v * 10)
            g.close_all_inputs()
            g.wait_done(timeout=10)
            want = [(v * 10, v * 1000 + (v if v % 2 == 0 else 0)) for v in range(6)]
            assert [(p.timestamp, p.as_int()) for p in out] == want


@flowplex.kernel("RaceBurst")
class RaceBurst(flowplex.Kernel):
    """Emits option ``count`` ints on port 0 per input and every fifth of them on port 1."""

    def process(self, cc: flowplex.Context) -> None:
        base = cc.input_timestamp * 10_000
        for i in range(cc.option_int("count", 0)):
            cc.emit(0, i, base + i)
            if i % 5 == 0:
                cc.emit(1, i, base + i)


@contextlib.contextmanager
def _switching_often() -> Iterator[None]:
    """The GIL changes hands every 10 µs (Python's default is 5 ms), so races show in a few runs."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    try:
        yield
    finally:
        sys.setswitchinterval(before)


BURST = """
nodes:
  - { name: b, kernel: RaceBurst, input_ports: [x], output_ports: [y, s], options: { count: 8000 } }
input_ports: [x]
output_ports: [y, s]
"""


def _read_into(poller: flowplex.Poller, into: list[int]) -> None:
    into.extend(p.timestamp for p in poller)


_FOUND_EMPTY = _waiting.Waits.try_next.__code__
"""Where ``Poller.next`` finds the queue empty (``try_next`` returns None) and lets go of the
lock before it looks at the queue and the close again: the race's window."""


def _read_into_through_the_window(poller: flowplex.Poller, into: list[int], inside: threading.Event) -> None:
    """``_read_into``, but the first time ``next()`` finds the queue empty this thread stays in
    the window (``_FOUND_EMPTY``) until the poller is closed: whatever landed meanwhile landed
    with the close, as the last call's packets did in one flood in about forty."""
    def calls(frame: FrameType, event: str, arg: object) -> TraceFunction | None:
        return returns if frame.f_code is _FOUND_EMPTY else None

    def returns(frame: FrameType, event: str, arg: object) -> TraceFunction | None:
        if event == "return" and arg is None and not inside.is_set():
            inside.set()
            deadline = time.monotonic() + 20
            while not poller.closed and time.monotonic() < deadline:
                time.sleep(0.001)
        return returns

    sys.settrace(calls)
    try:
        _read_into(poller, into)
    finally:
        sys.settrace(None)


def _burst_and_finish(g: flowplex.Graph, readers: list[threading.Thread]) -> None:
    """Send BURST's three inputs, close them, and wait for the readers and the graph to finish."""
    for ts in range(3):
        g.send("x", 0, ts=ts)
    g.close_all_inputs()
    for reader in readers:
        reader.join(30)
    assert not any(reader.is_alive() for reader in readers), "a poller reader did not finish"
    g.wait_done(timeout=10)


@pytest.mark.executors(
    "inline", "threads",
    reason="the race is in the host's poller wait, the same on every kind: two kinds",
)
def test_a_waiting_reader_gets_the_packets_that_landed_with_the_close() -> None:
    # A regression test: a reader waiting on an empty poller once took "closed" for the end of
    # the stream without looking at the queue again, so the last call's packets, queued in the
    # same moment as the close, were never read (one flood in about forty, with a reader thread
    # per output contending for the GIL).
    #
    # Left to chance, as below, a flood hit that window about once in 300 (measured with the fix
    # reverted), so the window is also held open: each reader waits inside it until the close,
    # while every packet lands (1800 of them: under the budget, so the sends need no reader).
    # With the fix reverted every such run loses all of them.
    text = BURST.replace("count: 8000", "count: 500")
    for _ in range(3):
        got: dict[str, list[int]] = {"y": [], "s": []}
        with flowplex.Graph.from_yaml(text) as g:
            pollers = {port: g.add_poller(port) for port in got}
            inside = {port: threading.Event() for port in got}
            readers = [threading.Thread(target=_read_into_through_the_window,
                                        args=(pollers[port], got[port], inside[port]), daemon=True) for port in got]
            g.start()
            for reader in readers:
                reader.start()
            for port, event in inside.items():
                assert event.wait(20), f"the reader of `{port}` never found its poller empty inside next()"
            _burst_and_finish(g, readers)
        assert (len(got["y"]), len(got["s"])) == (1500, 300)
    # And the floods themselves, with the GIL changing hands often (a few: see above).
    for _ in range(5):
        got = {"y": [], "s": []}
        with flowplex.Graph.from_yaml(BURST) as g, _switching_often():
            pollers = {port: g.add_poller(port) for port in got}

            readers = [threading.Thread(target=_read_into, args=(pollers[port], got[port])) for port in got]
            g.start()
            for reader in readers:
                reader.start()
            _burst_and_finish(g, readers)
        assert len(got["y"]) == 24000
        assert len(got["s"]) == 4800
