"""``LoopbackExecutor``: hosts kernels and sends every invocation through the codec and back."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from flowplex import Packet
from flowplex._timestamps import TS_DONE, TS_POST_STREAM, TS_UNSTARTED
from flowplex.errors import UsageError
from flowplex.executors import Executor, TaskStats
from flowplex.executors._invocation import Invocation, NodeRecipe, Outcome
from flowplex.executors._placement import default_executor as placed_executor
from flowplex.executors._protocol import KernelHostExecutor
from flowplex.kernels import Context, Kernel
from flowplex.kernels._context import PHASE_CLOSE, PHASE_OPEN, PHASE_PROCESS
from flowplex.kernels._registry import kernel_class
from flowplex.spec import NodeSpec, PortSpec
from flowplex.testing import EXECUTOR_KINDS, LoopbackExecutor, default_executor

WAIT_S = 10.0


def recipe(kernel: str | type[Kernel], index: int = 0, options: object = None, outputs: int = 1) -> NodeRecipe:
    cls = kernel_class(kernel) if isinstance(kernel, str) else kernel
    name = kernel if isinstance(kernel, str) else kernel.__name__
    spec = NodeSpec(f"n{index}", name, f"nodes[{index}]", (PortSpec("x"),),
                    tuple(PortSpec(f"y{o}") for o in range(outputs)), options=options)  # type: ignore[arg-type]
    return NodeRecipe(index, spec, cls, False, {})


def invoke(ex: LoopbackExecutor, inv: Invocation) -> Outcome:
    """``invoke``, checking that ``complete`` ran exactly once before it returned."""
    got: list[Outcome] = []
    ex.invoke(inv, got.append)
    assert len(got) == 1
    return got[0]


def process(node: int, ts: int, packet: Packet | None, seq: int = 0) -> Invocation:
    return Invocation(node, seq, PHASE_PROCESS, ts, [packet])


def opened(ex: LoopbackExecutor, node: int = 0) -> None:
    assert invoke(ex, Invocation(node, -1, PHASE_OPEN, TS_UNSTARTED, [None])).error == ""


class Fails(Kernel):
    def process(self, cc: Context) -> None:
        raise ValueError("bad frame " + str(cc.input(0).as_int()))


class FailsOddly(Kernel):
    class Odd(Exception):
        def __init__(self, a: int, b: int) -> None:
            super().__init__(f"{a}/{b}")

    def process(self, cc: Context) -> None:
        raise self.Odd(1, 2)


class Interrupted(Kernel):
    def process(self, cc: Context) -> None:
        raise KeyboardInterrupt


class LocalDLPack:
    """A CPU DLPack exporter (a subclass defined inside a test function does not pickle)."""

    shape = (2,)
    dtype = np.dtype("float32")

    def __dlpack__(self, stream: object = None) -> object:
        return np.zeros(2, np.float32).__dlpack__()

    def __dlpack_device__(self) -> tuple[int, int]:
        return (1, 0)


# -- the protocol ----------------------------------------------------------------------------------


def test_it_is_a_kernel_host_executor() -> None:
    ex = LoopbackExecutor()
    assert isinstance(ex, Executor)
    assert isinstance(ex, KernelHostExecutor)
    assert (ex.name, ex.kind, ex.threads, ex.runs_on_caller, ex.hosts_kernels) == ("loopback", "loopback", 0, True,
                                                                                    True)
    assert ex.inbox() is None
    assert ex.stats() == TaskStats("loopback", 0, 0, 0, 0)


def test_default_executor_places_a_loopback_in_the_default_slot() -> None:
    assert "loopback" in EXECUTOR_KINDS
    with default_executor("loopback"):
        ex = placed_executor("default")
    assert isinstance(ex, LoopbackExecutor)
    assert ex.name == "default"
    assert not isinstance(placed_executor("default"), LoopbackExecutor)
    with pytest.raises(UsageError, match=r"expected one of inline, threads, delegating, loopback, processes, ray$"), \
            default_executor("loop"):
        pass


def test_tasks_run_inline_on_the_caller_like_the_inline_executor() -> None:
    ex = LoopbackExecutor()
    order: list[tuple[str, int, int | None]] = []

    def inner(arg: object) -> None:
        order.append(("inner", threading.get_ident(), None))

    def outer(arg: object) -> None:
        ex.submit(inner, None)
        backlog = ex.backlog()
        order.append(("outer", threading.get_ident(), None if backlog is None else len(backlog)))
        assert ex.stats().running == 1

    ex.submit(outer, None)
    me = threading.get_ident()
    assert order == [("outer", me, 1), ("inner", me, None)]
    assert ex.backlog() is None


def test_background_work_runs_on_its_thread_until_shutdown() -> None:
    ex = LoopbackExecutor("bg")
    ex.set_on_submit(lambda: pytest.fail("no host thread runs loopback work"))
    ex.start()
    ran = threading.Event()
    where: list[int] = []
    try:
        ex.submit_background(lambda _: (where.append(threading.get_ident()), ran.set()), None)
        assert ran.wait(WAIT_S)
    finally:
        ex.shutdown()
    assert where != [threading.get_ident()]


# -- invocations through the codec --------------------------------------------------------------------


def test_an_invocation_crosses_the_codec_both_ways() -> None:
    ex = LoopbackExecutor()
    ex.host([recipe("ScaleKernel", options={"factor": 4})])
    opened(ex)
    out = invoke(ex, process(0, 3, Packet.from_int(5, 3), seq=7))
    assert (out.node, out.seq, out.error) == (0, 7, "")
    assert [(p.timestamp, p.as_int()) for p in out.outputs[0]] == [(3, 20)]
    assert ex.invocations == 2
    assert ex.bytes_sent > 0 and ex.bytes_received > 0
    assert (ex.buffers_sent, ex.buffers_received) == (0, 0)


def test_buffers_travel_out_of_band_and_come_back_as_new_memory() -> None:
    ex = LoopbackExecutor()
    ex.host([recipe("PassThroughKernel")])
    frame = np.arange(1 << 18, dtype=np.float32)
    sent = Packet.from_numpy(frame, 1)
    out = invoke(ex, process(0, 1, sent))
    back = out.outputs[0][0]
    assert back is not sent  # a forward came back through bytes
    assert np.array_equal(back.as_numpy(), frame)
    assert not np.shares_memory(back.as_numpy(), frame)
    assert (ex.buffers_sent, ex.buffers_received) == (1, 1)
    assert ex.bytes_sent >= frame.nbytes and ex.bytes_received >= frame.nbytes


def test_a_kernel_writes_its_own_copy_never_the_senders_memory() -> None:
    ex = LoopbackExecutor()
    ex.host([recipe("InvertKernel")])
    image = np.full((8, 8), 10, np.uint8)
    out = invoke(ex, process(0, 1, Packet.from_numpy(image, 1)))
    assert out.error == ""
    assert int(out.outputs[0][0].as_numpy()[0, 0]) == 245
    assert out.copies == 1  # the decoded input is a read-only view of the frame: one copy, counted
    assert int(image[0, 0]) == 10


def test_open_and_close_cross_too_and_a_restart_keeps_the_instance() -> None:
    ex = LoopbackExecutor()
    r = recipe("SumKernel")
    ex.host([r])
    opened(ex)
    invoke(ex, process(0, 0, Packet.from_int(2, 0)))
    ex.host([r])  # Graph.reset then start: same recipe, no open
    invoke(ex, process(0, 1, Packet.from_int(3, 1)))
    closed = invoke(ex, Invocation(0, 2, PHASE_CLOSE, TS_DONE, [None]))
    assert [(p.timestamp, p.as_int()) for p in closed.outputs[0]] == [(TS_POST_STREAM, 5)]
    assert ex.invocations == 4


def test_invoke_from_inside_a_submitted_task_completes_before_the_task_ends() -> None:
    ex = LoopbackExecutor()
    ex.host([recipe("ScaleKernel", options={"factor": 2})])
    opened(ex)
    got: list[Outcome] = []

    def task(arg: object) -> None:
        ex.invoke(arg, got.append)  # type: ignore[arg-type]
        assert len(got) == 1

    ex.submit(task, process(0, 1, Packet.from_int(21, 1)))
    assert [p.as_int() for p in got[0].outputs[0]] == [42]


# -- failures ---------------------------------------------------------------------------------------


def test_a_kernel_failure_comes_back_with_text_traceback_and_exception() -> None:
    ex = LoopbackExecutor()
    ex.host([recipe(Fails)])
    out = invoke(ex, process(0, 1, Packet.from_int(9, 1)))
    assert out.error == "ValueError: bad frame 9"
    assert "in process" in out.traceback and out.traceback.endswith("ValueError: bad frame 9\n")
    assert type(out.exception) is ValueError
    assert out.exception.args == ("bad frame 9",)


def test_an_exception_that_cannot_cross_arrives_as_none_with_its_text() -> None:
    ex = LoopbackExecutor()
    ex.host([recipe(FailsOddly)])
    out = invoke(ex, process(0, 1, Packet.from_int(1, 1)))
    assert (out.error, out.exception) == ("Odd: 1/2", None)
    assert "Odd: 1/2" in out.traceback


def test_a_payload_that_cannot_be_encoded_fails_the_invocation() -> None:
    class Local(LocalDLPack):
        pass

    ex = LoopbackExecutor()
    ex.host([recipe("PassThroughKernel", outputs=2)])
    out = invoke(ex, process(0, 1, Packet.from_dlpack(Local(), 1)))
    assert out.error.startswith("UsageError: encode: cannot pickle Invocation: ")
    assert out.outputs == [[], []]
    assert isinstance(out.exception, UsageError)
    assert ex.invocations == 0  # it never left


def test_an_outcome_that_cannot_be_encoded_fails_the_invocation() -> None:
    class Local(LocalDLPack):
        pass

    class EmitsLocal(Kernel):
        def process(self, cc: Context) -> None:
            cc.emit(0, Packet.from_dlpack(Local()))

    ex = LoopbackExecutor()
    ex.host([recipe(EmitsLocal)])
    out = invoke(ex, process(0, 1, Packet.from_int(1, 1)))
    assert out.error.startswith("UsageError: encode: cannot pickle Outcome: ")
    assert out.outputs == [[]]
    assert ex.invocations == 1


def test_a_node_that_is_not_hosted_fails_the_invocation() -> None:
    ex = LoopbackExecutor()
    ex.host([recipe("ScaleKernel")])
    out = invoke(ex, process(9, 1, None))
    assert out.error == "UsageError: run: no hosted node has index 9 (hosted: 0)"
    assert out.outputs == []


def test_a_keyboard_interrupt_propagates_without_a_completion() -> None:
    ex = LoopbackExecutor()
    ex.host([recipe(Interrupted)])
    got: list[Outcome] = []
    with pytest.raises(KeyboardInterrupt):
        ex.invoke(process(0, 1, Packet.from_int(1, 1)), got.append)
    assert got == []


def test_a_failing_completion_is_not_called_twice() -> None:
    ex = LoopbackExecutor()
    ex.host([recipe("ScaleKernel")])
    calls: list[Outcome] = []

    def complete(outcome: Outcome) -> None:
        calls.append(outcome)
        raise RuntimeError("engine bug")

    with pytest.raises(RuntimeError, match="engine bug"):
        ex.invoke(process(0, 1, Packet.from_int(1, 1)), complete)
    assert len(calls) == 1
