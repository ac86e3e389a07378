"""``KernelError.node`` / ``.kernel`` / ``.ts``: set where the engine records a failure, on every executor.

Node names may hold any character, so stats and DOT take the failed node from the error's
attribute, never from its message: ``a] b[1]`` would fool a parser of ``kernel failed: [a] ...``
into naming node ``a``.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest

import flowplex

from .conftest import NO_RUN
from .test_lifecycle import stalled_graph

TRICKY = "a] b/c[1]"


@flowplex.kernel("TErrOpenFails")
class TErrOpenFails(flowplex.Kernel):
    def open(self, cc: flowplex.Context) -> None:
        raise OSError("camera missing")

    def process(self, cc: flowplex.Context) -> None:
        cc.forward(0, 0)


@flowplex.kernel("TErrCloseFails")
class TErrCloseFails(flowplex.Kernel):
    def process(self, cc: flowplex.Context) -> None:
        cc.forward(0, 0)

    def close(self, cc: flowplex.Context) -> None:
        raise RuntimeError("flush failed")


def _chain(kernel: str, options: str = "") -> str:
    # Node `a` forwards into the node under test, whose name starts like `a`'s and holds "] ".
    return f"""
nodes:
  - {{ name: a, kernel: TForward, input_ports: [x], output_ports: [y] }}
  - {{ name: "{TRICKY}", kernel: {kernel}, input_ports: [y], output_ports: [z]{options} }}
input_ports: [x]
output_ports: [z]
"""


def _dot_state(dot: str, node: str) -> str:
    """The state a DOT text gives ``node`` (its box's tooltip: ``NAME (Kernel ...) on @x: state S, ...``)."""
    states = [m.group(1) for m in re.finditer(r'^ *n\d+ \[.* tooltip="(.*?)"\];$', dot, re.MULTILINE)]
    found = [t.split(": state ", 1)[1].split(",", 1)[0] for t in states if t.startswith(f"{node} (")]
    assert len(found) == 1, f"no box for {node!r} in:\n{dot}"
    return found[0]


def _assert_only_tricky_failed(g: flowplex.Graph) -> None:
    stats = g.stats()
    assert stats.node(TRICKY).state == "ERROR"
    assert stats.node("a").state != "ERROR"
    dot = g.to_dot("compact")
    assert _dot_state(dot, TRICKY) == "ERROR"
    assert _dot_state(dot, "a") != "ERROR"


def test_process_failure_names_the_node(make_graph: Callable[[str], flowplex.Graph]) -> None:
    g = make_graph(_chain("TFailOn", ", options: { bad: 3 }"))
    out = g.add_poller("z")
    g.start()
    with pytest.raises(flowplex.KernelError) as info:  # from a later send, or from wait_done
        for v in range(5):
            g.send("x", v, ts=v * 10)
        g.close_all_inputs()
        g.wait_done(timeout=10)
    err = info.value
    assert (err.node, err.kernel, err.ts) == (TRICKY, "TFailOn", 30)
    assert str(err) == f"kernel failed: [{TRICKY}] ValueError: bad value 3"
    assert isinstance(err.__cause__, ValueError)
    with pytest.raises(flowplex.KernelError) as again:  # each raise is a fresh copy, same attributes
        g.wait_done(timeout=1)
    assert again.value is not err and (again.value.node, again.value.kernel, again.value.ts) == (TRICKY, "TFailOn", 30)
    with pytest.raises(flowplex.KernelError) as polled:  # the poller raises the copy too
        list(out)
    assert polled.value.node == TRICKY
    _assert_only_tricky_failed(g)


def test_open_failure_names_the_node(make_graph: Callable[[str], flowplex.Graph]) -> None:
    g = make_graph(_chain("TErrOpenFails"))
    with pytest.raises(flowplex.KernelError, match=r"open failed: OSError: camera missing$") as info:
        g.start()
    err = info.value
    assert (err.node, err.kernel, err.ts) == (TRICKY, "TErrOpenFails", None)
    assert isinstance(err.__cause__, OSError)
    assert g.state == flowplex.GraphState.INITIALIZED
    # Node `a` has no error count and the graph never started: only the recorded node is ERROR.
    _assert_only_tricky_failed(g)
    assert g.stats().node("a").state == "CREATED"


def test_close_failure_names_the_node(make_graph: Callable[[str], flowplex.Graph]) -> None:
    g = make_graph(_chain("TErrCloseFails"))
    g.start()
    g.send("x", 1, ts=0)
    g.close_all_inputs()
    with pytest.raises(flowplex.KernelError, match=r"RuntimeError: flush failed$") as info:
        g.wait_done(timeout=10)
    assert (info.value.node, info.value.kernel, info.value.ts) == (TRICKY, "TErrCloseFails", None)
    _assert_only_tricky_failed(g)


def test_a_stall_is_a_run_error_not_a_kernel_error() -> None:
    g, _y, _z = stalled_graph()
    with g:
        with pytest.raises(flowplex.errors.RunError) as info:  # what code catching "any run failure" uses
            g.wait_done(timeout=30)
        assert type(info.value) is flowplex.DeadlockError
        assert not isinstance(info.value, flowplex.KernelError)
        assert isinstance(info.value, RuntimeError)  # lm-flow programs catch that


@NO_RUN
def test_kernel_runner_failure_names_its_node() -> None:
    with flowplex.KernelRunner("TFailOn", options={"bad": 2}) as r:
        r.add_input(0, 2)
        with pytest.raises(flowplex.KernelError, match=r"^kernel failed: \[kernel_runner\] ValueError") as info:
            r.process(5)
    assert (info.value.node, info.value.kernel, info.value.ts) == ("kernel_runner", "TFailOn", 5)
