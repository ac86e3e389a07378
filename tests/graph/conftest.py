"""Kernels and fixtures shared by the engine tests."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import ClassVar

import pytest

import flowplex


@flowplex.kernel("TDouble")
class TDouble(flowplex.Kernel):
    def process(self, cc: flowplex.Context) -> None:
        cc.emit(0, cc.input(0).as_int() * 2)


@flowplex.kernel("TForward")
class TForward(flowplex.Kernel):
    def process(self, cc: flowplex.Context) -> None:
        cc.forward(0, 0)


@flowplex.kernel("TAddPair")
class TAddPair(flowplex.Kernel):
    """Emits a+b when both inputs have a packet at the aligned timestamp, else the one present."""

    def process(self, cc: flowplex.Context) -> None:
        a, b = cc.input(0).as_int(), cc.input(1).as_int()
        cc.emit(0, (a or 0) * 1000 + (b or 0))


@flowplex.kernel("TEvenOnly")
class TEvenOnly(flowplex.Kernel):
    """Drops odd values (the bound still advances downstream)."""

    def process(self, cc: flowplex.Context) -> None:
        if cc.input(0).as_int() % 2 == 0:
            cc.forward(0, 0)


@flowplex.kernel("TFailOn")
class TFailOn(flowplex.Kernel):
    """Forwards, but raises on the value given in option `bad`."""

    def process(self, cc: flowplex.Context) -> None:
        if cc.input(0).as_int() == cc.option_int("bad", -1):
            raise ValueError(f"bad value {cc.option_int('bad')}")
        cc.forward(0, 0)


@flowplex.kernel("TSleepy")
class TSleepy(flowplex.Kernel):
    """Sleeps `ms` milliseconds (shorter for later packets) then forwards."""

    def process(self, cc: flowplex.Context) -> None:
        v = cc.input(0).as_int()
        time.sleep(max(0, cc.option_int("ms", 5) - v) / 1000)
        cc.forward(0, 0)


@flowplex.kernel("TCount")
class TCount(flowplex.Kernel):
    """Source: emits 0..count-1 then finishes."""

    def process(self, cc: flowplex.Context) -> None:
        i = cc.input_timestamp
        if i >= cc.option_int("count", 5):
            cc.source_done()
            return
        cc.emit(0, i)


@flowplex.kernel("TRecorder")
class TRecorder(flowplex.Kernel):
    """Records lifecycle calls and thread names into class-level lists."""

    events: ClassVar[list[tuple[str, str, int]]] = []
    lock = threading.Lock()

    def open(self, cc: flowplex.Context) -> None:
        with self.lock:
            self.events.append(("open", cc.node_name, cc.input_timestamp))

    def process(self, cc: flowplex.Context) -> None:
        with self.lock:
            self.events.append(("process", threading.current_thread().name, cc.input_timestamp))
        cc.forward(0, 0)

    def close(self, cc: flowplex.Context) -> None:
        with self.lock:
            self.events.append(("close", cc.node_name, cc.close_reason))


@pytest.fixture
def make_graph() -> Iterator[Callable[[str], flowplex.Graph]]:
    """Build graphs from YAML, on the executor kind under test (tests/conftest.py); closed after the test."""
    graphs: list[flowplex.Graph] = []

    def build(yaml_text: str) -> flowplex.Graph:
        g = flowplex.Graph.from_yaml(yaml_text)
        graphs.append(g)
        return g

    yield build
    for g in graphs:
        g.close()


CHAIN = """
nodes:
  - { name: a, kernel: TDouble, input_ports: [x], output_ports: [y] }
  - { name: b, kernel: TDouble, input_ports: [y], output_ports: [z] }
input_ports: [x]
output_ports: [z]
"""


NO_RUN = pytest.mark.executors(
    "inline", reason="a static check: it fails at build or before any work is submitted (or drives a KernelRunner): "
                     "no executor takes part, so one run covers it")
"""Runs once: for the tests that never run a graph on its executor (issue 26: static checks run once)."""
