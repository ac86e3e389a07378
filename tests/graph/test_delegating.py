"""The DelegatingExecutor against lm-lmflow: the same programs run the same tasks, counted alike.

lm-flow's semantics (reference §6.3-6.4): delegated work runs only on host threads inside
``pump_step`` and the blocking host calls, one host thread at a time, in a deterministic order;
``pump_step`` runs at most one task, and ``pump_steps(n)`` counts them. The figures pinned here
were recorded from lm-lmflow 0.3.3; where lm-lmflow is installed (extra ``bench``) the tests also
run each program on it and compare.
"""

from __future__ import annotations

import threading
from types import ModuleType
from typing import Any

import pytest

import flowplex

pytestmark = pytest.mark.executors(
    "delegating", reason="about the DelegatingExecutor: every graph here pins its nodes to named ones"
)

_LOG: list[str] = []
_REGISTERED: set[str] = set()


def _register(mod: ModuleType) -> None:
    """Register the recording kernel once per engine module (flowplex or lmflow)."""
    if mod.__name__ in _REGISTERED:
        return
    _REGISTERED.add(mod.__name__)

    @mod.kernel("DelegRecord")  # type: ignore[attr-defined,misc]
    class DelegRecord(mod.Kernel):  # type: ignore[name-defined,misc]
        def process(self, cc: Any) -> None:
            _LOG.append(f"{cc.node_name}:{cc.input(0).timestamp}")
            cc.forward(0, 0)


def chain(n: int, executors: tuple[str, ...] = ("host",)) -> str:
    """A chain of ``n`` recording nodes, node i on ``executors[i % len(executors)]``."""
    head = "executors: [" + ", ".join(f"{{ name: {e}, type: DelegatingExecutor }}" for e in executors) + "]\n"
    lines = [f"  - {{ name: f{i}, executor: {executors[i % len(executors)]}, kernel: DelegRecord, "
             f"input_ports: [e{i}], output_ports: [e{i + 1}] }}" for i in range(n)]
    return head + "nodes:\n" + "\n".join(lines) + f"\ninput_ports: [e0]\noutput_ports: [e{n}]\n"


def program(mod: ModuleType, n: int, drive: str, executors: tuple[str, ...] = ("host",)) -> tuple[list[int], list[str]]:
    """Send 5 packets into a chain, drive it by ``drive``; returns (pump_steps counts, the call log)."""
    _register(mod)
    _LOG.clear()
    counts: list[int] = []
    g = mod.Graph.from_yaml(chain(n, executors))
    try:
        out = g.add_poller(f"e{n}")
        g.start()
        for i in range(5):
            g.send("e0", i, ts=i)
        if drive == "pump_steps":
            counts = [g.pump_steps(k) for k in range(1, 17)]
        elif drive == "pump_step":
            while g.pump_step():
                _LOG.append("|")
        elif drive == "poll":
            for _ in range(2):
                p = out.next()
                _LOG.append(f"got:{p.timestamp}")
        g.close_all_inputs()
        g.wait_done()
    finally:
        g.close()
    return counts, list(_LOG)


def _lmflow() -> ModuleType:
    return pytest.importorskip("lmflow", reason="lm-lmflow (extra `bench`) is the baseline these figures come from")


def _calls(text: str) -> list[str]:
    return text.split()


WAVE3 = _calls("f0:0 f1:0 f0:1 f2:0 f1:1 f0:2 f2:1 f1:2 f0:3 f2:2 f1:3 f0:4 f2:3 f1:4 f2:4")
"""lm-lmflow's order for a 3-chain fed 5 packets: each task queues its consumer behind the rest."""
TURNS3 = _calls("f0:0 f1:0 f0:1 f1:1 f2:0 f0:2 f1:2 f2:1 f0:3 f1:3 f2:2 f0:4 f1:4 f2:3 f2:4")
"""The same with its nodes on executors a, b, a: lm-lmflow serves the two queues in turns."""


@pytest.mark.parametrize(("n", "expected"), [
    (1, [1, 2, 2] + [0] * 13),
    (2, [1, 2, 3, 4] + [0] * 12),
    (3, [1, 2, 3, 4, 5] + [0] * 11),
])
def test_pump_steps_counts_are_lmflows(n: int, expected: list[int]) -> None:
    counts, log = program(flowplex, n, "pump_steps")
    assert counts == expected  # one delegated task per step: 5 per node, whatever the chain
    assert len(log) == 5 * n


@pytest.mark.parametrize("n", [1, 2, 3])
@pytest.mark.parametrize("drive", ["pump_steps", "pump_step", "wait_done", "poll"])
def test_same_counts_and_order_as_lmflow(n: int, drive: str) -> None:
    lmflow = _lmflow()
    assert program(flowplex, n, drive) == program(lmflow, n, drive)


@pytest.mark.parametrize("drive", ["pump_step", "wait_done"])
def test_wait_done_runs_the_tasks_pump_step_would_in_that_order(drive: str) -> None:
    # wait_done drains in one go; the tasks and their order are those of single pump_step calls.
    _, log = program(flowplex, 3, drive)
    assert [c for c in log if c != "|"] == WAVE3


def test_poller_next_returns_after_the_task_that_delivered() -> None:
    _, log = program(flowplex, 3, "poll")
    assert log == [*WAVE3[:4], "got:0", *WAVE3[4:7], "got:1", *WAVE3[7:]]


@pytest.mark.parametrize("drive", ["pump_step", "wait_done"])
def test_two_delegating_executors_take_turns(drive: str) -> None:
    counts, log = program(flowplex, 3, drive, executors=("a", "b"))
    stepped = program(flowplex, 3, "pump_step", executors=("a", "b"))[1]
    assert log == [c for c in stepped if c != "|"] if drive == "wait_done" else stepped
    assert [c for c in log if c != "|"] == TURNS3
    try:
        lmflow = _lmflow()
    except pytest.skip.Exception:
        return
    assert (counts, log) == program(lmflow, 3, drive, executors=("a", "b"))


@flowplex.kernel("DelegHold")
class DelegHold(flowplex.Kernel):
    """Blocks in ``process`` until released, so a test can act while a host thread holds the gate."""

    entered = threading.Event()
    release = threading.Event()

    def process(self, cc: flowplex.Context) -> None:
        DelegHold.entered.set()
        assert DelegHold.release.wait(10)
        cc.forward(0, 0)


def test_one_host_thread_at_a_time() -> None:
    DelegHold.entered.clear()
    DelegHold.release.clear()
    with flowplex.Graph.from_yaml("""
executors: [{ name: host, type: DelegatingExecutor }]
nodes:
  - { name: hold, kernel: DelegHold, executor: host, input_ports: [x], output_ports: [y] }
  - { name: next, kernel: DelegRecord, executor: host, input_ports: [y], output_ports: [z] }
input_ports: [x]
output_ports: [z]
""") as g:
        _register(flowplex)
        g.start()
        for i in range(3):
            g.send("x", i, ts=i)
        g.close_all_inputs()
        host = threading.Thread(target=g.wait_done, kwargs={"timeout": 10})
        host.start()
        assert DelegHold.entered.wait(10)
        # The draining host holds the gate: another host thread runs nothing, now or later.
        assert g.pump_step() is False
        assert g.pump_steps(16) == 0
        DelegHold.release.set()
        host.join(10)
        assert not host.is_alive()
