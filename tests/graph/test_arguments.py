"""Argument errors come before state errors: a wrong argument is reported as what it is.

lm-flow's binding converts arguments before it looks at the graph, so ``wait_done(timeout="abc")``
raises ``TypeError`` whatever the state; flowplex does the same in every public method that takes
a timeout, a port or side-packet name, a timestamp or a count, and names the argument.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import pytest

import flowplex

from .conftest import CHAIN

pytestmark = pytest.mark.executors(
    "inline", reason="a static check: each argument is converted and rejected before the call looks at the graph's "
                     "state or hands anything to an executor, so the kind changes nothing (500 cases, run once)")

STATES = ["initialized", "running", "terminated", "closed"]


@dataclass
class Handles:
    graph: flowplex.Graph
    poller: flowplex.Poller
    input: flowplex.Input


@pytest.fixture(params=STATES)
def handles(request: pytest.FixtureRequest) -> Iterator[Handles]:
    """A CHAIN graph (with a poller on `z` and the handle of `x`) in each lifecycle state."""
    g = flowplex.Graph.from_yaml(CHAIN)
    h = Handles(g, g.add_poller("z"), g.input("x"))
    state = request.param
    if state != "initialized":
        g.start()
    if state in ("terminated", "closed"):
        g.close_all_inputs()
        g.wait_done()
    if state == "closed":
        g.close()
    try:
        yield h
    finally:
        g.close()


def _await(coro: object) -> object:
    async def bounded() -> object:
        return await asyncio.wait_for(coro, 5)  # type: ignore[arg-type]

    return asyncio.run(bounded())


Call = Callable[[Handles, object], object]

# (method, argument name, call with the bad value)
TIMEOUT_CALLS: list[tuple[str, str, Call]] = [
    ("wait_done", "timeout", lambda h, v: h.graph.wait_done(timeout=v)),  # type: ignore[arg-type]
    ("wait_until_idle", "timeout", lambda h, v: h.graph.wait_until_idle(timeout=v)),  # type: ignore[arg-type]
    ("Poller.next", "timeout", lambda h, v: h.poller.next(v)),  # type: ignore[arg-type]
    ("send", "timeout", lambda h, v: h.graph.send("x", 1, ts=1, timeout=v)),  # type: ignore[arg-type]
    ("Input.send", "timeout", lambda h, v: h.input.send(1, 1, timeout=v)),  # type: ignore[arg-type]
    ("run_async", "timeout", lambda h, v: _await(h.graph.run_async(timeout=v))),  # type: ignore[arg-type]
    ("run_async", "cancel_grace", lambda h, v: _await(h.graph.run_async(cancel_grace=v))),  # type: ignore[arg-type]
]
PORT_CALLS: list[tuple[str, Call]] = [
    ("input", lambda h, v: h.graph.input(v)),  # type: ignore[arg-type]
    ("send", lambda h, v: h.graph.send(v, 1, ts=1)),  # type: ignore[arg-type]
    ("send_nowait", lambda h, v: h.graph.send_nowait(v, 1, ts=1)),  # type: ignore[arg-type]
    ("try_send", lambda h, v: h.graph.try_send(v, 1, ts=1)),  # type: ignore[arg-type]
    ("close_input", lambda h, v: h.graph.close_input(v)),  # type: ignore[arg-type]
    ("add_poller", lambda h, v: h.graph.add_poller(v)),  # type: ignore[arg-type]
    ("observe", lambda h, v: h.graph.observe(v, print)),  # type: ignore[arg-type]
    ("events", lambda h, v: h.graph.events(v)),  # type: ignore[arg-type]
    ("dropped_count", lambda h, v: h.graph.dropped_count(v)),  # type: ignore[arg-type]
    ("overwritten_count", lambda h, v: h.graph.overwritten_count(v)),  # type: ignore[arg-type]
    ("set_side_packet", lambda h, v: h.graph.set_side_packet(v, 1)),  # type: ignore[arg-type]
    ("counter_value", lambda h, v: h.graph.counter_value(v)),  # type: ignore[arg-type]
]
TS_CALLS: list[tuple[str, Call]] = [
    ("send", lambda h, v: h.graph.send("x", 1, ts=v)),  # type: ignore[arg-type]
    ("send_nowait", lambda h, v: h.graph.send_nowait("x", 1, ts=v)),  # type: ignore[arg-type]
    ("try_send", lambda h, v: h.graph.try_send("x", 1, ts=v)),  # type: ignore[arg-type]
    ("Input.send", lambda h, v: h.input.send(1, v)),  # type: ignore[arg-type]
    ("Input.send_nowait", lambda h, v: h.input.send_nowait(1, v)),  # type: ignore[arg-type]
    ("Input.try_send", lambda h, v: h.input.try_send(1, v)),  # type: ignore[arg-type]
]


def _ids(calls: list[tuple[str, Call]]) -> list[str]:
    return [f"{what}-{i}" for i, (what, _) in enumerate(calls)]


TIMEOUT_IDS = [f"{what}-{arg}" for what, arg, _ in TIMEOUT_CALLS]


@pytest.mark.parametrize(("what", "arg", "call"), TIMEOUT_CALLS, ids=TIMEOUT_IDS)
@pytest.mark.parametrize("value", ["abc", b"1", 1j, True, [1]], ids=repr)
def test_a_timeout_of_the_wrong_type_is_a_type_error(
    handles: Handles, what: str, arg: str, call: Call, value: object
) -> None:
    with pytest.raises(TypeError, match=rf"^{what}: {arg} must be a number of seconds.*, got {type(value).__name__}$"):
        call(handles, value)


def test_wait_done_with_a_string_timeout_before_start_is_a_type_error() -> None:
    # The case of issue 12: it used to be StateError("wait_done() before start()").
    message = r"^wait_done: timeout must be a number of seconds or None, got str$"
    with flowplex.Graph.from_yaml(CHAIN) as g, pytest.raises(TypeError, match=message):
        g.wait_done(timeout="abc")  # type: ignore[arg-type]


@pytest.mark.parametrize(("what", "arg", "call"), TIMEOUT_CALLS, ids=TIMEOUT_IDS)
def test_a_nan_timeout_is_a_value_error(handles: Handles, what: str, arg: str, call: Call) -> None:
    with pytest.raises(ValueError, match=rf"^{what}: {arg} must be a number of seconds.*, got NaN$"):
        call(handles, math.nan)


@pytest.mark.parametrize("name", ["timeout", "cancel_grace"])
@pytest.mark.parametrize("value", [-1, -0.001, -math.inf])
def test_run_async_rejects_negative_seconds_like_lmflow(handles: Handles, name: str, value: float) -> None:
    with pytest.raises(ValueError, match=rf"^run_async: {name} must be >= 0, got -"):
        _await(handles.graph.run_async(**{name: value}))


@pytest.mark.parametrize(("what", "call"), PORT_CALLS, ids=_ids(PORT_CALLS))
@pytest.mark.parametrize("value", [1, None, b"x", ("x",)], ids=repr)
def test_a_port_name_that_is_not_a_str_is_a_type_error(handles: Handles, what: str, call: Call, value: object) -> None:
    with pytest.raises(TypeError, match=rf"^{what}: (port|name) must be a str, got {type(value).__name__}$"):
        call(handles, value)


@pytest.mark.parametrize(("what", "call"), TS_CALLS, ids=_ids(TS_CALLS))
@pytest.mark.parametrize("value", ["1", 1.5, True, np.float64(2.0)], ids=repr)
def test_a_timestamp_that_is_not_an_int_is_a_type_error(handles: Handles, what: str, call: Call, value: object) -> None:
    with pytest.raises(TypeError, match=rf"^{what}: ts must be an int timestamp or None, got {type(value).__name__}$"):
        call(handles, value)


@pytest.mark.parametrize("value", ["3", 1.5, True, None], ids=repr)
def test_pump_steps_needs_an_int(handles: Handles, value: object) -> None:
    with pytest.raises(TypeError, match=rf"^pump_steps: max_steps must be an int, got {type(value).__name__}$"):
        handles.graph.pump_steps(value)  # type: ignore[arg-type]


def test_pump_steps_rejects_a_negative_count(handles: Handles) -> None:
    with pytest.raises(ValueError, match=r"^pump_steps: max_steps must be >= 0, got -1$"):
        handles.graph.pump_steps(-1)
    assert handles.graph.pump_steps(np.int64(3)) == 0  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("what", "call", "pattern"),
    [
        ("observe", lambda g: g.observe("z", 5), r"fn must be callable, got int"),
        ("observe", lambda g: g.observe("z", print, observe_timestamp_bounds="x"),
         r"observe_timestamp_bounds must be True or False, got str"),
        ("add_poller", lambda g: g.add_poller("z", observe_timestamp_bounds=1),
         r"observe_timestamp_bounds must be True or False, got int"),
        ("add_poller", lambda g: g.add_poller("z", capacity="8"), r"capacity must be an int, got str"),
        ("add_poller", lambda g: g.add_poller("z", capacity=8, overflow=None), r"overflow must be a str, got NoneType"),
        ("set_wakeup_callback", lambda g: g.set_wakeup_callback(3), r"fn must be callable, got int"),
    ],
    ids=lambda x: x if isinstance(x, str) and " " not in x else "",
)
def test_other_arguments_of_the_wrong_type(
    handles: Handles, what: str, call: Callable[[flowplex.Graph], object], pattern: str
) -> None:
    with pytest.raises(TypeError, match=rf"^{what}: {pattern}$"):
        call(handles.graph)


# -- what the accepted forms mean -------------------------------------------------------------------


@pytest.mark.without_workers(
    reason="wait_done(timeout=-1.5) polls once: the graph is done by then only where the calling threads ran the "
    "work (in send, or in that poll's pump); a pool may still be busy",
)
def test_a_negative_timeout_polls_once_as_in_lmflow() -> None:
    with flowplex.Graph.from_yaml(CHAIN) as g:
        out = g.add_poller("z")
        g.start()
        t0 = time.monotonic()
        with pytest.raises(flowplex.Timeout, match=r"timed out after 0\.0 s"):
            out.next(-1)
        g.wait_until_idle(timeout=-1)  # idle already: returns
        assert time.monotonic() - t0 < 1.0
        g.send("x", 1, ts=0, timeout=-5)  # room: a timeout only matters when the graph is full
        assert out.next(timeout=math.inf) is not None  # infinity means no deadline
        g.close_all_inputs()
        g.wait_done(timeout=-1.5)


def test_numpy_integers_are_timestamps_and_numpy_floats_are_seconds() -> None:
    with flowplex.Graph.from_yaml(CHAIN) as g:
        out = g.add_poller("z")
        g.start()
        g.send("x", 1, ts=np.int64(3), timeout=np.float64(1.0))  # type: ignore[arg-type]
        g.input("x").send(2, np.int32(4))  # type: ignore[arg-type]
        assert g.try_send("x", 3, ts=np.uint8(5))  # type: ignore[arg-type]
        g.close_all_inputs()
        got = [(p.timestamp, p.as_int()) for p in out]
        assert got == [(3, 4), (4, 8), (5, 12)]
        assert all(type(ts) is int for ts, _ in got)
        g.wait_done(timeout=np.float32(5.0))  # type: ignore[arg-type]
