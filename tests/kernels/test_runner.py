"""KernelRunner drives one kernel without a graph; every process call starts fresh."""

from __future__ import annotations

import pytest

import flowplex

from .conftest import NO_GRAPH

pytestmark = NO_GRAPH


@flowplex.kernel("TRunnerEcho")
class TRunnerEcho(flowplex.Kernel):
    @staticmethod
    def get_contract(c: flowplex.Contract) -> None:
        c.input_set_type(0, 2)

    def open(self, cc: flowplex.Context) -> None:
        self.offset = cc.option_int("offset", 0) + (cc.side_packet("base").as_int() or 0)

    def process(self, cc: flowplex.Context) -> None:
        cc.emit(0, cc.input(0).as_int() + self.offset)

    def close(self, cc: flowplex.Context) -> None:
        cc.emit(0, -1)


def test_runner_emits_on_every_process_call() -> None:
    with flowplex.KernelRunner("TRunnerEcho", options={"offset": 10}, side_packets={"base": 100}) as r:
        for ts in range(3):
            r.add_input(0, ts)
            r.process(ts)
        got = [r.try_next() for _ in range(3)]
        assert [(p.as_int(), p.timestamp) for p in got if p] == [(110, 0), (111, 1), (112, 2)]
        assert r.try_next() is None
        r.close()
        last = r.try_next()
        assert last is not None and last.as_int() == -1 and last.timestamp == flowplex.TS_POST_STREAM


def test_runner_errors_are_clear() -> None:
    r = flowplex.KernelRunner("TRunnerEcho")
    with pytest.raises(ValueError, match="input port 3 is out of range"):
        r.add_input(3, 1)
    r.add_input(0, 1)
    with pytest.raises(RuntimeError, match="already has a packet"):
        r.add_input(0, 2)
    r.process(0)
    r.add_input(0, "text")
    with pytest.raises(ValueError, match="type mismatch: contract declares I64, actual Str"):
        r.process(1)
    with pytest.raises(flowplex.StateError):
        r.set_options({"offset": 1})
    r.close()
    r.close()  # idempotent
    with pytest.raises(KeyError, match="not registered"):
        flowplex.KernelRunner("NoSuchKernelAnywhere")


def test_runner_kernel_exception_becomes_kernel_error() -> None:
    r = flowplex.KernelRunner("TRunnerEcho")
    r.add_input(0, 1)
    r.process(0)
    with pytest.raises(flowplex.KernelError, match=r"\[kernel_runner\] TypeError"):
        r.process(1)  # no input: None + offset
