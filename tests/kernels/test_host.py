"""``KernelHost`` runs real kernels from invocations and reports outcomes, as a worker process will."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import flowplex
from flowplex import Packet
from flowplex._log import LogLevel
from flowplex._timestamps import TS_DONE, TS_POST_STREAM, TS_UNSTARTED
from flowplex.errors import ConfigError, UsageError
from flowplex.executors._invocation import Invocation, NodeRecipe, Outcome
from flowplex.kernels import CloseReason, Context, Kernel
from flowplex.kernels._context import PHASE_CLOSE, PHASE_OPEN, PHASE_PROCESS
from flowplex.kernels._host import KernelHost, KernelHosts, describe_failure, failed_outcome
from flowplex.kernels._registry import kernel_class
from flowplex.packets import new_buffer
from flowplex.spec import NodeSpec, PortSpec

from .conftest import NO_GRAPH

pytestmark = NO_GRAPH

WAIT_S = 10.0


def recipe(
    cls: type[Kernel] | str,
    *,
    inputs: Sequence[str] = ("x",),
    outputs: Sequence[str] = ("y",),
    options: object = None,
    index: int = 0,
    name: str = "n",
    strict: bool = False,
    side_packets: Mapping[str, Packet] | None = None,
) -> NodeRecipe:
    kernel_cls = kernel_class(cls) if isinstance(cls, str) else cls
    kernel = cls if isinstance(cls, str) else cls.__name__
    spec = NodeSpec(name, kernel, f"nodes[{index}]", tuple(PortSpec(p) for p in inputs),
                    tuple(PortSpec(p) for p in outputs), options=options)  # type: ignore[arg-type]
    return NodeRecipe(index, spec, kernel_cls, strict, dict(side_packets or {}))


def opening(host: KernelHost) -> Outcome:
    return host.run(Invocation(host.index, -1, PHASE_OPEN, TS_UNSTARTED, [None] * len(host.recipe.spec.input_ports)))


def processing(host: KernelHost, ts: int, *values: object, seq: int = 0, done: list[bool] | None = None) -> Outcome:
    inputs = [None if v is None else flowplex.Packet.from_int(v, ts) if type(v) is int
              else v if isinstance(v, Packet) else _packet(v, ts) for v in values]
    return host.run(Invocation(host.index, seq, PHASE_PROCESS, ts, inputs, done=done))  # type: ignore[arg-type]


def closing(host: KernelHost, reason: int = CloseReason.NORMAL) -> Outcome:
    n = len(host.recipe.spec.input_ports)
    return host.run(Invocation(host.index, 9, PHASE_CLOSE, TS_DONE, [None] * n, close_reason=reason))


def _packet(value: object, ts: int) -> Packet:
    from flowplex.packets import to_packet

    return to_packet(value, ts)


def ints(packets: list[Packet]) -> list[tuple[int, int | None]]:
    return [(p.timestamp, p.as_int()) for p in packets]


def ok(outcome: Outcome) -> Outcome:
    assert outcome.error == "", outcome.traceback
    return outcome


# -- small test kernels ----------------------------------------------------------------------------


class Recorder(Kernel):
    """Emits what it sees about its context, on the phase's own output."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, int, int, int, int]] = []
        self.contexts: list[int] = []

    def open(self, cc: Context) -> None:
        self._note("open", cc)
        cc.emit(0, "opened")

    def process(self, cc: Context) -> None:
        self._note("process", cc)
        cc.emit(0, cc.input_count(0))

    def close(self, cc: Context) -> None:
        self._note("close", cc)
        cc.emit(0, "closed")  # no ts in close: TS_POST_STREAM

    def _note(self, phase: str, cc: Context) -> None:
        self.seen.append((phase, cc.input_timestamp, cc.seq, cc.close_reason, int(cc.input_is_done(0))))
        self.contexts.append(id(cc))


class Requests(Kernel):
    """Bounds, counters, logs, and emits to ports it lacks, as the options say."""

    def process(self, cc: Context) -> None:
        cc.emit(0, 1)
        cc.set_next_timestamp_bound(1, cc.input_timestamp + 10)
        cc.counter_add("a", 2)
        cc.counter_add("b")
        cc.log(LogLevel.WARN, "careful")
        if cc.option_bool("stray"):
            cc.emit(5, "nowhere")
            cc.forward(0, 7)


class Fails(Kernel):
    """Emits and counts, then fails as the options say."""

    def process(self, cc: Context) -> None:
        cc.emit(0, 1)
        cc.set_next_timestamp_bound(0, 100)
        cc.counter_add("before.failure", 1)
        cc.log(LogLevel.INFO, "about to fail")
        how = cc.option_str("how")
        if how == "set_error":
            cc.set_error("the frame was torn")
            raise RuntimeError
        if how == "message":
            cc.set_error("ignored: the exception has a message")
            raise ValueError("bad frame")
        if how == "interrupt":
            raise KeyboardInterrupt
        if how == "bare":
            raise LookupError


class Source(Kernel):
    """A source that yields twice, then finishes."""

    def __init__(self) -> None:
        self.calls = 0

    def process(self, cc: Context) -> None:
        self.calls += 1
        if self.calls == 1:
            cc.source_yield(0.25)
            cc.source_yield(0.1)  # the longest delay wins
            return
        cc.emit(0, self.calls, ts=self.calls)
        cc.source_done()


class Touches(Kernel):
    """Tries to change a borrowed input or side packet."""

    def process(self, cc: Context) -> None:
        target = cc.side_packet("calib") if cc.option_bool("side") else cc.input(0)
        target.set_metadata("k", 1)


class Sleeps(Kernel):
    def process(self, cc: Context) -> None:
        time.sleep(0.002)


class Blocks(Kernel):
    """Two calls meet at a barrier: they must run at the same time, on different contexts."""

    def __init__(self) -> None:
        self.barrier = threading.Barrier(2, timeout=WAIT_S)

    def process(self, cc: Context) -> None:
        self.barrier.wait()
        cc.emit(0, cc.input(0).as_int())


class BrokenConstructor(Kernel):
    def __init__(self) -> None:
        msg = "no camera"
        raise RuntimeError(msg)


# -- builtin kernels ------------------------------------------------------------------------------


def test_a_builtin_kernel_reads_options_in_open_and_emits_in_process() -> None:
    host = KernelHost(recipe("ScaleKernel", options={"factor": 3}))
    ok(opening(host))
    out = ok(processing(host, 7, 5, seq=4))
    assert (out.node, out.seq) == (0, 4)
    assert [ints(ps) for ps in out.outputs] == [[(7, 15)]]
    assert (out.bounds, out.source_done, out.yield_s, out.counters, out.logs, out.ignored_emits) == (
        None, False, None, [], [], 0)


def test_a_summary_is_emitted_in_close_only_after_a_normal_end() -> None:
    host = KernelHost(recipe("SumKernel"))
    ok(opening(host))
    for ts in range(3):
        assert ok(processing(host, ts, ts + 1)).outputs == [[]]
    assert ints(ok(closing(host)).outputs[0]) == [(TS_POST_STREAM, 6)]
    ok(opening(host))
    ok(processing(host, 0, 4))
    assert ok(closing(host, CloseReason.ERROR)).outputs == [[]]


def test_forward_stages_the_input_packet_itself_and_bounds_travel() -> None:
    host = KernelHost(recipe("FilterKernel", options={"threshold": 10}))
    ok(opening(host))
    p = Packet.from_int(12, 3)
    out = ok(processing(host, 3, p))
    assert out.outputs[0][0] is p  # zero-copy: the same handle
    below = ok(processing(host, 4, 2))
    assert below.outputs == [[]]
    assert below.bounds == {0: 5}


def test_counters_and_logs_are_collected_not_sent_anywhere() -> None:
    host = KernelHost(recipe("SinkKernel", outputs=(), name="sink"))
    ok(opening(host))
    out = ok(processing(host, 4, 1))
    assert out.outputs == []
    assert out.counters == [("sink.packets", 1)]
    assert out.logs == [(LogLevel.DEBUG, "[sink] received packet @ ts=4")]
    closed = ok(closing(host))
    assert closed.counters == [("sink.closed", 1)]
    assert closed.logs == [(LogLevel.INFO, "[sink] processed 1 packets in total")]
    assert ok(processing(host, 5, 1)).counters == [("sink.packets", 1)]  # each outcome has its own


def test_a_builtin_source_finishes_with_source_done() -> None:
    host = KernelHost(recipe("RangeSourceKernel", inputs=(), options={"count": 2}))
    ok(opening(host))
    first = ok(host.run(Invocation(0, 0, PHASE_PROCESS, 0, [])))
    second = ok(host.run(Invocation(0, 1, PHASE_PROCESS, 1, [])))
    assert (ints(first.outputs[0]), first.source_done) == ([(0, 0)], False)
    assert (ints(second.outputs[0]), second.source_done) == ([(1, 1)], True)


def test_options_and_side_packets_reach_the_kernel() -> None:
    calib = Packet.from_numpy(np.eye(3), 0)
    host = KernelHost(recipe("NormalizeKernel", options={"scale": 2, "mean": [1.0, 2.0], "roi": {"x": 4}},
                             side_packets={"calib": calib, "calibration": calib}, name="norm"))
    out = ok(opening(host))
    assert out.logs == [(LogLevel.INFO, "[norm] scale=2 mean=2 std=0 roi=(4,0) calib=yes")]
    failed = KernelHost(recipe("NormalizeKernel")).run(Invocation(0, -1, PHASE_OPEN, TS_UNSTARTED, [None]))
    assert failed.error == "ValueError: node `n`: required parameter options.scale is missing or type mismatch"


def test_batches_and_done_inputs_reach_the_kernel() -> None:
    host = KernelHost(recipe("BatchSumKernel"))
    batch = [[Packet.from_int(v, ts) for ts, v in enumerate((1, 2, 3))]]
    out = ok(host.run(Invocation(0, 0, PHASE_PROCESS, 2, [batch[0][0]], batch=batch)))
    assert ints(out.outputs[0]) == [(2, 6)]
    rhost = KernelHost(recipe(Recorder))
    ok(processing(rhost, 3, 1, done=[True]))
    assert rhost.kernel.seen == [("process", 3, 0, 0, 1)]  # type: ignore[attr-defined]


@given(st.lists(st.integers(-1000, 1000), max_size=8), st.integers(-5, 5))
def test_a_host_gives_what_the_kernel_runner_gives(values: list[int], factor: int) -> None:
    host = KernelHost(recipe("ScaleKernel", options={"factor": factor}))
    ok(opening(host))
    hosted = [ints(ok(processing(host, ts, v)).outputs[0]) for ts, v in enumerate(values)]
    with flowplex.KernelRunner("ScaleKernel", options={"factor": factor}) as runner:
        direct = []
        for ts, v in enumerate(values):
            runner.add_input(0, v)
            runner.process(ts)
            direct.append(ints([p for p in iter(lambda: runner.try_next(0), None)]))  # type: ignore[arg-type]
    assert hosted == direct


# -- phases, context reuse, concurrency --------------------------------------------------------------


def test_each_phase_calls_its_callback_with_the_invocation_fields() -> None:
    host = KernelHost(recipe(Recorder))
    opened = ok(opening(host))
    processed = ok(processing(host, 42, 1, seq=3))
    closed = ok(closing(host, CloseReason.CANCELLED))
    kernel: Recorder = host.kernel  # type: ignore[assignment]
    assert kernel.seen == [("open", TS_UNSTARTED, -1, 0, 0), ("process", 42, 3, 0, 0),
                           ("close", TS_DONE, 9, CloseReason.CANCELLED, 0)]
    assert [(p.timestamp, p.payload) for p in opened.outputs[0]] == [(TS_UNSTARTED, "opened")]
    assert [(p.timestamp, p.payload) for p in processed.outputs[0]] == [(42, 1)]
    assert [(p.timestamp, p.payload) for p in closed.outputs[0]] == [(TS_POST_STREAM, "closed")]


def test_one_context_is_reused_and_outputs_are_moved_out() -> None:
    host = KernelHost(recipe(Recorder))
    first = ok(processing(host, 1, 1))
    second = ok(processing(host, 2, 1))
    kernel: Recorder = host.kernel  # type: ignore[assignment]
    assert len(set(kernel.contexts)) == 1
    assert [len(ps) for ps in first.outputs] == [1]  # the second run did not add to the first's lists
    assert first.outputs[0] is not second.outputs[0]


def test_an_invocation_is_handed_over_and_its_slots_emptied() -> None:
    host = KernelHost(recipe(Recorder))
    p = Packet.from_int(1, 1)
    inv = Invocation(0, 0, PHASE_PROCESS, 1, [p])
    ok(host.run(inv))
    assert inv.inputs == [None]
    assert p._owned is False  # borrowed, as the engine's inputs are


def test_concurrent_calls_get_contexts_of_their_own() -> None:
    host = KernelHost(recipe(Blocks))
    results: dict[int, Outcome] = {}

    def call(v: int) -> None:
        results[v] = processing(host, v, v)

    threads = [threading.Thread(target=call, args=(v,)) for v in (1, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT_S)
    assert {v: ints(ok(o).outputs[0]) for v, o in results.items()} == {1: [(1, 1)], 2: [(2, 2)]}
    assert len(host._free) == 2  # both contexts kept for reuse


# -- requests: bounds, counters, logs, sources, ignored emits -----------------------------------------


def test_bounds_counters_and_logs_are_reported_in_order() -> None:
    host = KernelHost(recipe(Requests, outputs=("y", "z"), name="req"))
    out = ok(processing(host, 5, 0))
    assert ints(out.outputs[0]) == [(5, 1)]
    assert out.outputs[1] == []
    assert out.bounds == {1: 15}
    assert out.counters == [("a", 2), ("b", 1)]
    assert out.logs == [(LogLevel.WARN, "[req] careful")]


def test_ignored_emits_are_counted_per_outcome() -> None:
    host = KernelHost(recipe(Requests, outputs=("y", "z"), options={"stray": True}))
    assert [ok(processing(host, ts, 0)).ignored_emits for ts in range(3)] == [2, 2, 2]


def test_strict_ports_make_a_stray_emit_an_error() -> None:
    host = KernelHost(recipe(Requests, outputs=("y", "z"), options={"stray": True}, strict=True))
    out = processing(host, 1, 0)
    assert out.error == "UsageError: emit: output port index 5 is out of range (num_outputs=2)"
    assert out.outputs == [[], []]


def test_source_yield_and_source_done() -> None:
    host = KernelHost(recipe(Source, inputs=()))
    first = ok(host.run(Invocation(0, 0, PHASE_PROCESS, 0, [])))
    assert (first.yield_s, first.source_done, first.outputs) == (0.25, False, [[]])
    second = ok(host.run(Invocation(0, 1, PHASE_PROCESS, 1, [])))
    assert (second.yield_s, second.source_done, ints(second.outputs[0])) == (None, True, [(2, 2)])


def test_source_yield_fails_a_node_that_is_no_source() -> None:
    class Yields(Kernel):
        def process(self, cc: Context) -> None:
            cc.source_yield(1)

    out = processing(KernelHost(recipe(Yields)), 1, 0)
    assert out.error == "UsageError: source_yield is only valid for source nodes (other nodes: call_after)"


# -- failures -------------------------------------------------------------------------------------


@pytest.mark.parametrize(("how", "error"), [
    ("set_error", "RuntimeError: the frame was torn"),
    ("message", "ValueError: bad frame"),
    ("bare", "LookupError"),
])
def test_a_failure_reports_its_text_traceback_and_exception(how: str, error: str) -> None:
    host = KernelHost(recipe(Fails, options={"how": how}, name="f"))
    out = host.run(Invocation(0, 3, PHASE_PROCESS, 8, [Packet.from_int(1, 8)]))
    assert out.error == error
    assert isinstance(out.exception, Exception)
    assert f"{type(out.exception).__name__}" in out.traceback
    assert out.traceback.startswith("Traceback (most recent call last):")
    assert ", in process\n" in out.traceback
    assert "flowplex/kernels/_host.py" not in out.traceback  # from the kernel's frame on
    assert (out.outputs, out.bounds) == ([[]], None)  # a failed callback's output is discarded
    assert out.counters == [("before.failure", 1)]  # what it did before failing still counts
    assert out.logs == [(LogLevel.INFO, "[f] about to fail")]
    assert (out.node, out.seq) == (0, 3)


def test_set_error_text_does_not_leak_into_the_next_call() -> None:
    host = KernelHost(recipe(Fails, options={"how": "set_error"}))
    processing(host, 1, 0)
    host.recipe.spec.options["how"] = "bare"  # type: ignore[index]
    assert processing(host, 2, 0).error == "LookupError"


def test_a_keyboard_interrupt_propagates_and_the_host_stays_usable() -> None:
    host = KernelHost(recipe(Fails, options={"how": "interrupt"}))
    inv = Invocation(0, 0, PHASE_PROCESS, 1, [Packet.from_int(1, 1)])
    with pytest.raises(KeyboardInterrupt):
        host.run(inv)
    assert inv.inputs == [None]
    host.recipe.spec.options["how"] = ""  # type: ignore[index]
    out = ok(processing(host, 2, 0))
    assert ints(out.outputs[0]) == [(2, 1)]
    assert out.counters == [("before.failure", 1)]


def test_borrowed_inputs_and_side_packets_cannot_be_changed() -> None:
    host = KernelHost(recipe(Touches))
    assert "packet is borrowed" in processing(host, 1, 5).error
    side = Packet.from_int(1)
    host = KernelHost(recipe(Touches, options={"side": True}, side_packets={"calib": side}))
    assert "packet is borrowed" in processing(host, 1, 5).error
    side.set_metadata("mine", True)  # the recipe's own packet stays the host's


def test_describe_failure_matches_the_engine() -> None:
    ctx = Context(KernelHost(recipe(Recorder))._new_slot().info)
    assert describe_failure(ValueError("x"), ctx) == "ValueError: x"
    assert describe_failure(ValueError(), ctx) == "ValueError"
    ctx.set_error("from set_error")
    assert describe_failure(ValueError(), ctx) == "ValueError: from set_error"
    assert describe_failure(ValueError("own"), ctx) == "ValueError: own"
    assert describe_failure(KeyError("k"), ctx) == "KeyError: 'k'"


def test_failed_outcome_reports_an_executor_failure() -> None:
    exc = UsageError("encode: cannot pickle Outcome: TypeError: nope")
    out = failed_outcome(Invocation(4, 2, PHASE_PROCESS, 0, []), exc, num_outputs=2)
    assert (out.node, out.seq, out.outputs, out.exception) == (4, 2, [[], []], exc)
    assert out.error == "UsageError: encode: cannot pickle Outcome: TypeError: nope"
    assert out.traceback.endswith("UsageError: encode: cannot pickle Outcome: TypeError: nope\n")


def test_an_invocation_that_does_not_fit_the_node_is_refused() -> None:
    host = KernelHost(recipe(Recorder))
    with pytest.raises(UsageError, match=r"^node `n`: invocation has 2 input slot\(s\), the node has 1 input port"):
        host.run(Invocation(0, 0, PHASE_PROCESS, 0, [None, None]))
    with pytest.raises(UsageError, match=r"^node `n`: invocation phase 7 is none of open \(0\), process \(1\), close"):
        host.run(Invocation(0, 0, 7, 0, [None]))


def test_a_failing_constructor_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"^nodes\[0\] \(node `n`\): constructing kernel `BrokenConstructor` failed: "
                                          r"RuntimeError: no camera$"):
        KernelHost(recipe(BrokenConstructor))


# -- timing and copies ------------------------------------------------------------------------------


def test_the_call_is_timed_on_the_host() -> None:
    host = KernelHost(recipe(Sleeps))
    before = time.perf_counter_ns()
    out = ok(processing(host, 1, 0))
    after = time.perf_counter_ns()
    assert before <= out.started_ns <= out.started_ns + out.duration_ns <= after
    assert out.duration_ns >= 2_000_000


def test_an_exclusively_held_buffer_is_written_in_place() -> None:
    host = KernelHost(recipe("InvertKernel"))
    p, view = new_buffer((4, 4), "u8")
    view[:] = 10
    del view
    address = p.as_numpy().ctypes.data
    inv = Invocation(0, 0, PHASE_PROCESS, 1, [p])
    del p
    out = ok(host.run(inv))
    assert out.copies == 0
    result = out.outputs[0][0].as_numpy()
    assert (result.ctypes.data, int(result[0, 0])) == (address, 245)


def test_a_shared_buffer_is_copied_and_the_copy_counted() -> None:
    host = KernelHost(recipe("InvertKernel"))
    image = np.full((4, 4), 10, np.uint8)
    p = Packet.from_numpy(image, 1)
    out = ok(host.run(Invocation(0, 0, PHASE_PROCESS, 1, [p])))
    assert out.copies == 1
    assert int(out.outputs[0][0].as_numpy()[0, 0]) == 245
    assert int(image[0, 0]) == 10


# -- several nodes -------------------------------------------------------------------------------------


def test_hosts_route_invocations_by_node_index() -> None:
    hosts = KernelHosts()
    hosts.host([recipe("ScaleKernel", options={"factor": 2}, index=3),
                recipe("ScaleKernel", options={"factor": 10}, index=5)])
    assert (len(hosts), 3 in hosts, 4 in hosts) == (2, True, False)
    for index in (3, 5):
        ok(hosts.run(Invocation(index, -1, PHASE_OPEN, TS_UNSTARTED, [None])))
    outs = [hosts.run(Invocation(i, 0, PHASE_PROCESS, 1, [Packet.from_int(1, 1)])) for i in (3, 5)]
    assert [ints(ok(o).outputs[0]) for o in outs] == [[(1, 2)], [(1, 10)]]
    assert [hosts.num_outputs(i) for i in (3, 4)] == [1, 0]
    with pytest.raises(UsageError, match=r"^run: no hosted node has index 4 \(hosted: 3, 5\)$"):
        hosts.run(Invocation(4, 0, PHASE_PROCESS, 1, [None]))


def test_a_restart_keeps_opened_instances_and_replaces_side_packets() -> None:
    hosts = KernelHosts()
    first = recipe("SumKernel", index=0, side_packets={"s": Packet.from_int(1)})
    hosts.host([first, recipe("ScaleKernel", index=1)])
    kept = hosts[0]
    ok(kept.run(Invocation(0, -1, PHASE_OPEN, TS_UNSTARTED, [None])))
    ok(kept.run(Invocation(0, 0, PHASE_PROCESS, 0, [Packet.from_int(5, 0)])))
    again = NodeRecipe(0, first.spec, first.kernel_cls, False, {"s": Packet.from_int(2)})
    hosts.host([again])  # node 1 is no longer placed here
    assert hosts[0] is kept
    assert 1 not in hosts
    assert kept._side_packets["s"].as_int() == 2
    ok(kept.run(Invocation(0, 1, PHASE_PROCESS, 1, [Packet.from_int(1, 1)])))  # no open: the total goes on
    assert ints(ok(kept.run(Invocation(0, 9, PHASE_CLOSE, TS_DONE, [None]))).outputs[0]) == [(TS_POST_STREAM, 6)]


def test_a_changed_recipe_gets_a_new_instance() -> None:
    hosts = KernelHosts()
    hosts.host([recipe("ScaleKernel", options={"factor": 2})])
    old = hosts[0]
    hosts.host([recipe("ScaleKernel", options={"factor": 3})])
    assert hosts[0] is not old
    hosts.host([recipe("ScaleKernel", options={"factor": 3}, strict=True)])
    assert hosts[0].recipe.strict_ports


def test_hosting_is_all_or_nothing() -> None:
    hosts = KernelHosts()
    hosts.host([recipe("ScaleKernel", index=0)])
    old = hosts[0]
    with pytest.raises(ConfigError, match="constructing kernel `BrokenConstructor` failed"):
        hosts.host([recipe("SumKernel", index=0), recipe(BrokenConstructor, index=1)])
    assert hosts[0] is old and len(hosts) == 1
    with pytest.raises(UsageError, match=r"^host: two recipes for node index 0$"):
        hosts.host([recipe("ScaleKernel", index=0), recipe("SumKernel", index=0)])
    assert hosts[0] is old
