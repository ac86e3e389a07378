"""Lifecycle and control: on_error, reset, cancel, pause/resume, stalls, routes, subgraphs, executors."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import ClassVar

import pytest

import flowplex
from flowplex import TS_DONE

from .conftest import NO_RUN

GraphFactory = Callable[[str], flowplex.Graph]


@flowplex.kernel("LcLife")
class LcLife(flowplex.Kernel):
    """Forwards; fails on the value in option `bad`; records open/process/close."""

    events: ClassVar[list[tuple[str, int]]] = []

    def open(self, cc: flowplex.Context) -> None:
        LcLife.events.append(("open", 0))

    def process(self, cc: flowplex.Context) -> None:
        v = cc.input(0).as_int()
        LcLife.events.append(("process", cc.input_timestamp))
        if v == cc.option_int("bad", -1):
            raise ValueError(f"bad value {v}")
        cc.forward(0, 0)

    def close(self, cc: flowplex.Context) -> None:
        LcLife.events.append(("close", cc.close_reason))


@flowplex.kernel("LcPair")
class LcPair(flowplex.Kernel):
    def process(self, cc: flowplex.Context) -> None:
        a, b = cc.input(0).as_int(), cc.input(1).as_int()
        cc.emit(0, (a or 0) * 1000 + (b or 0))


@flowplex.kernel("LcDouble")
class LcDouble(flowplex.Kernel):
    def process(self, cc: flowplex.Context) -> None:
        cc.emit(0, cc.input(0).as_int() * 2)


@pytest.fixture(autouse=True)
def _clear_events() -> None:
    LcLife.events.clear()


def values(poller: flowplex.Poller) -> list[tuple[int, int | None]]:
    return [(p.timestamp, p.as_int()) for p in poller]


def kinds(name: str) -> list[tuple[str, int]]:
    return [e for e in LcLife.events if e[0] == name]


# -- on_error ------------------------------------------------------------------------------------

SKIP = """
nodes:
  - { name: f, kernel: LcLife, input_ports: [x], output_ports: [y], on_error: skip, options: { bad: 7 } }
  - { name: j, kernel: LcPair, input_ports: [y, x], output_ports: [z] }
input_ports: [x]
output_ports: [y, z]
"""


def test_on_error_skip_counts_warns_with_back_off_and_still_advances_the_bound(
    make_graph: GraphFactory, caplog: pytest.LogCaptureFixture
) -> None:
    g = make_graph(SKIP)
    bounds = g.add_poller("y", observe_timestamp_bounds=True)
    joined = g.add_poller("z")
    with caplog.at_level(logging.WARNING, logger="flowplex"):
        g.start()
        for ts in range(12):  # every odd ts carries the bad value: 6 failures
            g.send("x", 7 if ts % 2 else 1, ts=ts)
        g.close_all_inputs()
        g.wait_done(timeout=10)
    # The join never waits on a skipped timestamp: the bound moved past it.
    assert values(joined) == [(ts, 7 if ts % 2 else 1001) for ts in range(12)]
    events = [(p.is_empty, p.timestamp) for p in bounds]
    assert [ts for empty, ts in events if not empty] == list(range(0, 12, 2))
    assert [ts for empty, ts in events if empty] == [*range(1, 13), TS_DONE]
    node = next(n for n in g.node_stats() if n.node_name == "f")
    assert (node.errors, node.processed) == (6, 6)
    skips = [r.getMessage() for r in caplog.records if "on_error=skip" in r.getMessage()]
    assert [int(m.split("), ")[1].split()[0]) for m in skips] == [1, 2, 4]
    assert all(m.startswith("node `f`: skipping a failed packet (on_error=skip)") for m in skips)
    assert all("ValueError: bad value 7" in m for m in skips)
    assert g.last_error() == ""


@pytest.mark.without_workers(
    reason="both nodes fail on the same packet: `first` fails first only where they run one after the other in "
    "YAML order; on a pool they race",
)
def test_on_error_abort_keeps_the_first_error(caplog: pytest.LogCaptureFixture) -> None:
    # On the default executor both nodes are claimed by the same send, so the second failure
    # happens after the first was recorded.
    with flowplex.Graph.from_yaml("""
nodes:
  - { name: first, kernel: LcLife, input_ports: [x], output_ports: [a], options: { bad: 1 } }
  - { name: second, kernel: LcLife, input_ports: [x], output_ports: [b], options: { bad: 1 } }
input_ports: [x]
""") as g, caplog.at_level(logging.WARNING, logger="flowplex"):
        g.start()
        g.send("x", 1, ts=0)
        with pytest.raises(flowplex.KernelError, match=r"^kernel failed: \[first\] ValueError: bad value 1$"):
            g.wait_done(timeout=10)
        with pytest.raises(flowplex.KernelError, match=r"\[first\]"):
            g.send("x", 2, ts=1)
    ignored = [r.getMessage() for r in caplog.records if "subsequent error" in r.getMessage()]
    assert len(ignored) == 1 and ignored[0].startswith("(subsequent error, ignored) ")
    assert sorted(kinds("close")) == [("close", flowplex.CloseReason.ERROR)] * 2


@pytest.mark.without_workers(
    reason="both nodes fail on the same packet: `second` is the subsequent one only where they run one after the "
    "other in YAML order; on a pool they race",
)
def test_a_subsequent_error_is_logged_with_its_node(caplog: pytest.LogCaptureFixture) -> None:
    with flowplex.Graph.from_yaml("""
nodes:
  - { name: first, kernel: LcLife, input_ports: [x], output_ports: [a], options: { bad: 1 } }
  - { name: second, kernel: LcLife, input_ports: [x], output_ports: [b], options: { bad: 1 } }
input_ports: [x]
""") as g, caplog.at_level(logging.WARNING, logger="flowplex"):
        g.start()
        g.send("x", 1, ts=0)
        with pytest.raises(flowplex.KernelError):
            g.wait_done(timeout=10)
    ignored = [r.getMessage() for r in caplog.records if "subsequent error" in r.getMessage()]
    assert ignored == ["(subsequent error, ignored) kernel failed: [second] ValueError: bad value 1"]


# -- reset -----------------------------------------------------------------------------------------


@pytest.mark.in_process(reason="LcLife records its calls in a class list of this interpreter")
def test_reset_reruns_with_opened_kernels_and_clears_run_state() -> None:
    with flowplex.Graph.from_yaml("""
nodes:
  - { name: f, kernel: LcLife, input_ports: [x], output_ports: [m], options: { bad: 99 } }
  - { name: k, kernel: LcDouble, input_ports: [m], output_ports: [y], input_policy: { type: fixed_size, capacity: 1 } }
input_ports: [x]
output_ports: [y]
""") as g:
        out = g.add_poller("y", observe_timestamp_bounds=True)
        with pytest.raises(RuntimeError, match=r"reset needs a terminated, idle graph; call wait_done\(\) first"):
            g.reset()
        # Run 1 fails.
        g.start()
        g.send("x", 99, ts=5)
        with pytest.raises(flowplex.KernelError, match="bad value 99"):
            g.wait_done(timeout=10)
        g.reset()
        assert g.state == flowplex.GraphState.INITIALIZED and g.last_error() == ""
        # Runs 2 and 3: earlier timestamps are allowed again, kernels are not reopened.
        runs = []
        for _ in range(2):
            g.start()
            with pytest.raises(RuntimeError, match="call wait_done"):
                g.reset()
            for ts in range(3):
                g.send("x", ts, ts=ts)
            g.close_all_inputs()
            g.wait_done(timeout=10)
            out_events = [(p.is_empty, p.timestamp, p.as_int()) for p in out]
            runs.append((out_events, g.dropped_count("m")))
            g.reset()
        assert runs[0] == runs[1]
        assert [e for e in runs[0][0] if not e[0]] == [(False, 0, 0), (False, 1, 2), (False, 2, 4)]
    assert kinds("open") == [("open", 0)]
    closes = [reason for _, reason in kinds("close")]
    assert closes == [flowplex.CloseReason.ERROR, flowplex.CloseReason.NORMAL, flowplex.CloseReason.NORMAL]


@flowplex.kernel("LcCount")
class LcCount(flowplex.Kernel):
    def process(self, cc: flowplex.Context) -> None:
        cc.counter_add("seen")


def test_reset_clears_drops_and_counters() -> None:
    with flowplex.Graph.from_yaml("""
nodes:
  - { name: c, kernel: LcCount, input_ports: [x], input_policy: { type: fixed_size, capacity: 1 } }
input_ports: [x]
""") as g:
        for expected_drops in (3, 3):
            g.start()
            g.pause()
            for ts in range(4):
                g.send("x", ts, ts=ts)
            assert g.dropped_count("x") == expected_drops
            g.resume()
            g.close_all_inputs()
            g.wait_done(timeout=10)
            assert g.counter_value("seen") == 1
            g.reset()
            assert (g.dropped_count("x"), g.counter_value("seen")) == (0, 0)


# -- cancel, pause, resume ----------------------------------------------------------------------------


@pytest.mark.in_process(reason="LcLife, on the default slot, records its close in a class list of this interpreter")
def test_cancel_is_not_preemptive_and_discards_running_output() -> None:
    release = threading.Event()
    entered = threading.Event()

    @flowplex.kernel("LcHold")
    class LcHold(flowplex.Kernel):
        def process(self, cc: flowplex.Context) -> None:
            entered.set()
            release.wait(10)
            cc.forward(0, 0)

        def close(self, cc: flowplex.Context) -> None:
            LcLife.events.append(("close", cc.close_reason))

    with flowplex.Graph.from_yaml("""
executors: [{ name: cpu, type: ThreadPoolExecutor, num_threads: 1 }]
nodes:
  - { name: h, executor: cpu, kernel: LcHold, input_ports: [x], output_ports: [y] }
  - { name: after, kernel: LcLife, input_ports: [y], output_ports: [z] }
input_ports: [x]
output_ports: [y, z]
""") as g:
        y, z = g.add_poller("y"), g.add_poller("z")
        g.start()
        g.send("x", 1, ts=0)
        assert entered.wait(5)
        g.send("x", 2, ts=1)  # queued behind the running invocation
        g.cancel()
        with pytest.raises(flowplex.GraphCancelled):
            g.send("x", 3, ts=2)
        release.set()  # the running call finishes; its output is discarded
        with pytest.raises(flowplex.GraphCancelled) as info:
            g.wait_done(timeout=10)
        assert isinstance(info.value, RuntimeError) and not isinstance(info.value, flowplex.KernelError)
        assert (y.try_next(), z.try_next()) == (None, None)
    assert kinds("process") == []
    assert sorted(kinds("close")) == [("close", flowplex.CloseReason.CANCELLED)] * 2


@pytest.mark.in_process(reason="LcLife records its calls in a class list of this interpreter")
def test_pause_holds_claims_and_resume_runs_them(make_graph: GraphFactory) -> None:
    g = make_graph("""
nodes:
  - { name: f, kernel: LcLife, input_ports: [x], output_ports: [y] }
input_ports: [x]
output_ports: [y]
""")
    out = g.add_poller("y")
    g.start()
    g.send("x", 1, ts=0)
    g.wait_until_idle(timeout=10)
    g.pause()
    for ts in range(1, 4):
        g.send("x", ts + 1, ts=ts)  # sends still queue while paused
    g.wait_until_idle(timeout=10)
    assert [p.as_int() for p in iter(out.try_next, None)] == [1]
    assert kinds("process") == [("process", 0)]
    g.resume()
    g.close_all_inputs()
    assert values(out) == [(1, 2), (2, 3), (3, 4)]
    g.wait_done(timeout=10)


# -- stalls ----------------------------------------------------------------------------------------------

STALL = """
nodes:
  - { name: b, kernel: LcLife, input_ports: [x], output_ports: [y] }
  - { name: c, kernel: LcPair, input_ports: [x, y], output_ports: [z] }
input_ports: [x]
output_ports: [y, z]
"""


def stalled_graph() -> tuple[flowplex.Graph, flowplex.Poller, flowplex.Poller]:
    """`b` feeds a blocking poller nobody reads: after one packet it waits, and `c`, which
    joins `b`'s output with the input, starves with packets queued."""
    g = flowplex.Graph.from_yaml(STALL)
    y = g.add_poller("y", capacity=1, overflow="block")
    z = g.add_poller("z")
    g.start()
    for ts in range(4):
        g.send("x", ts, ts=ts)
    g.close_all_inputs()
    return g, y, z


def test_a_stall_raises_a_deadlock_error_naming_the_starving_ports() -> None:
    g, y, z = stalled_graph()
    with g:
        t0 = time.monotonic()
        with pytest.raises(flowplex.DeadlockError) as info:
            g.wait_done(timeout=30)
        assert time.monotonic() - t0 < 5, "the stall was found by timing out, not by analysis"
        text = str(info.value)
        assert text.startswith("wait_done: all inputs closed but the graph is idle and nodes are not closed: [b, c]")
        assert "starving ports: [b.x (2 queued, closed), c.x (3 queued, closed)]" in text
        assert "producers blocked by full downstream queues: [b]" in text
        first = z.next(timeout=30)
        assert first is not None and first.as_int() == 0  # ts 0 was joined before b blocked
        with pytest.raises(flowplex.DeadlockError, match=r"^Poller\.next on `z`"):
            z.next(timeout=30)
        with pytest.raises(flowplex.DeadlockError, match=r"^wait_until_idle"):
            g.wait_until_idle(timeout=30)
        # A stall is a diagnosis, not a failure: reading the poller lets the graph finish.
        assert [p.as_int() for p in y] == [0, 1, 2, 3]
        g.wait_done(timeout=10)
        assert values(z) == [(1, 1001), (2, 2002), (3, 3003)]


# -- routes ------------------------------------------------------------------------------------------

ROUTE = """
nodes:
  - {{ name: r, type: route, input_ports: [x], output_ports: [hot, warm, other], mode: {mode},
      unmatched: {unmatched}, routes: [{rules}] }}
input_ports: [x]
output_ports: [hot, warm, other]
"""
RULES = "{to: hot, when: {metadata: temp, op: gt, value: 30}}, {to: warm, when: {metadata: temp, op: gt, value: 20}}"


def send_temperatures(g: flowplex.Graph, temps: tuple[int | None, ...] = (35, 25, 10, None)) -> None:
    for ts, temp in enumerate(temps):
        p = flowplex.Packet.from_int(ts + 1, ts=ts)
        if temp is not None:
            p.set_metadata("temp", temp)
        g.send("x", p)


@pytest.mark.parametrize(
    ("mode", "unmatched", "expected", "counters"),
    [
        ("first", "drop", {"hot": [(0, 1)], "warm": [(1, 2)], "other": []},
         {"matched.hot": 1, "matched.warm": 1, "emitted.hot": 1, "emitted.warm": 1, "dropped": 2}),
        ("all", "drop", {"hot": [(0, 1)], "warm": [(0, 1), (1, 2)], "other": []},
         {"matched.hot": 1, "matched.warm": 2, "emitted.hot": 1, "emitted.warm": 2, "dropped": 2}),
        ("first", "other", {"hot": [(0, 1)], "warm": [(1, 2)], "other": [(2, 3), (3, 4)]},
         {"matched.hot": 1, "matched.warm": 1, "emitted.other": 2, "dropped": 0}),
    ],
)
def test_route_modes_and_unmatched_policies(
    make_graph: GraphFactory, mode: str, unmatched: str, expected: dict[str, list[tuple[int, int]]],
    counters: dict[str, int],
) -> None:
    g = make_graph(ROUTE.format(mode=mode, unmatched=unmatched, rules=RULES))
    pollers = {port: g.add_poller(port) for port in expected}
    g.start()
    send_temperatures(g)
    g.close_all_inputs()
    g.wait_done(timeout=10)
    got = {port: [(p.timestamp, p.as_int()) for p in poller] for port, poller in pollers.items()}
    assert got == expected
    assert {name: g.counter_value(f"route.r.{name}") for name in counters} == counters


def test_route_default_rule_takes_what_nothing_matched() -> None:
    rules = RULES + ", {to: other, default: true}"
    with flowplex.Graph.from_yaml(ROUTE.format(mode="first", unmatched="drop", rules=rules)) as g:
        other = g.add_poller("other")
        g.start()
        send_temperatures(g)
        g.close_all_inputs()
        g.wait_done(timeout=10)
        routed = list(other)
        assert [(p.timestamp, p.as_int()) for p in routed] == [(2, 3), (3, 4)]
        assert routed[0].metadata("temp") == 10  # metadata travels with the routed packet
        # As in lm-flow, default deliveries are counted apart from rule emissions.
        assert g.counter_value("route.r.default_emitted") == 2
        assert (g.counter_value("route.r.emitted.other"), g.counter_value("route.r.dropped")) == (0, 0)


def test_route_unmatched_error_fails_the_graph_or_is_skipped() -> None:
    text = ROUTE.format(mode="first", unmatched="error", rules=RULES)
    with flowplex.Graph.from_yaml(text) as g:
        g.start()
        send_temperatures(g, (35, 10))
        g.close_all_inputs()
        with pytest.raises(flowplex.KernelError, match=r"\[r\].*route packet did not match any rule"):
            g.wait_done(timeout=10)
    skip = text.replace("mode: first,", "mode: first, on_error: skip,")
    with flowplex.Graph.from_yaml(skip) as g:
        hot = g.add_poller("hot")
        g.start()
        send_temperatures(g)
        g.close_all_inputs()
        g.wait_done(timeout=10)
        assert [p.as_int() for p in hot] == [1]
        assert next(n.errors for n in g.node_stats() if n.node_name == "r") == 2


def test_route_timestamp_predicates_and_dropping_still_advance_the_bound() -> None:
    with flowplex.Graph.from_yaml("""
nodes:
  - { name: r, type: route, input_ports: [x], output_ports: [late],
      routes: [{ to: late, when: { timestamp: { op: gte, value: 2 } } }] }
  - { name: j, kernel: LcPair, input_ports: [late, x], output_ports: [z] }
input_ports: [x]
output_ports: [z]
""") as g:
        z = g.add_poller("z")
        g.start()
        for ts in range(4):
            g.send("x", ts + 1, ts=ts)
        g.close_all_inputs()
        assert values(z) == [(0, 1), (1, 2), (2, 3003), (3, 4004)]
        g.wait_done(timeout=10)
        assert g.counter_value("route.r.dropped") == 2
        assert g.counter_value("route.r.matched.late") == 2


# -- subgraphs and include, end to end ------------------------------------------------------------------


def test_a_graph_built_from_includes_and_nested_subgraphs_runs(tmp_path: Path) -> None:
    (tmp_path / "libs" / "more").mkdir(parents=True)
    (tmp_path / "libs" / "more" / "double.yaml").write_text("""
subgraphs:
  Double:
    nodes: [{ name: d, kernel: LcDouble, input_ports: [s], output_ports: [t] }]
    input_ports: [s]
    output_ports: [t]
""")
    (tmp_path / "libs" / "lib.yaml").write_text("""
include: [more/double.yaml]
subgraphs:
  Quad:
    nodes:
      - { name: first, type: Double, input_ports: [s], output_ports: [mid] }
      - { name: second, kernel: LcDouble, input_ports: [mid], output_ports: [t] }
    input_ports: [s]
    output_ports: [t]
nodes: [{ name: ignored, kernel: NoSuchKernel }]
""")
    main = tmp_path / "main.yaml"
    main.write_text("""
include: [libs/lib.yaml, libs/more/double.yaml, libs/lib.yaml]
input_ports: [x]
nodes:
  - { name: q1, type: Quad, input_ports: [x], output_ports: [y] }
  - { name: q2, type: Quad, input_ports: [y], output_ports: [z] }
output_ports: [y, z]
""")
    with flowplex.Graph.from_yaml_file(main) as g:
        y, z = g.add_poller("y"), g.add_poller("z")
        g.start()
        for ts in range(3):
            g.send("x", ts + 1, ts=ts)
        g.close_all_inputs()
        g.wait_done(timeout=10)
        assert values(y) == [(0, 4), (1, 8), (2, 12)]
        assert values(z) == [(0, 16), (1, 32), (2, 48)]
        names = [n.node_name for n in g.node_stats()]
    assert names == ["q1/first/d", "q1/second", "q2/first/d", "q2/second"]


@NO_RUN
def test_include_from_text_is_rejected() -> None:
    with pytest.raises(flowplex.ConfigError, match="only supported when loading from a file"):
        flowplex.Graph.from_yaml("include: [lib.yaml]\nnodes: []\n")


# -- executor options ---------------------------------------------------------------------------------

NODE_ON_E = "nodes: [{ name: f, executor: e, kernel: LcDouble, input_ports: [x], output_ports: [y] }]\n"


@NO_RUN
@pytest.mark.parametrize(
    ("executor", "node_extra", "pattern"),
    [
        ("{ name: e, type: ThreadPoolExecutor, num_thread: 2 }", "",
         r"^executors\[0\]: unknown field `num_thread`; did you mean `num_threads`\?"),
        ("{ name: e, type: ThreadPool }", "",
         r"^executors\[0\]\.type: unknown executor type `ThreadPool` \(supported: ThreadPoolExecutor, "
         r"DelegatingExecutor, ProcessPoolExecutor, RayExecutor\)"),
        ("{ name: e, type: DelegatingExecutor, num_threads: 2 }", "",
         r"^executors\[0\]: DelegatingExecutor owns no threads"),
        ("{ name: e, type: DelegatingExecutor, priority: 5 }", "",
         r"^executors\[0\]: DelegatingExecutor owns no threads"),
        ("{ name: e, type: ThreadPoolExecutor, num_threads: -1 }", "",
         r"^executors\[0\]\.num_threads: expected a non-negative integer"),
        ("{ name: e, type: ThreadPoolExecutor, num_threads: '2' }", "",
         r"^executors\[0\]\.num_threads: expected an integer"),
        ("{ name: e, type: ThreadPoolExecutor, priority: 100 }", "", r"^executors\[0\]\.priority: must be <= 99"),
        ("{ name: e, type: ThreadPoolExecutor, affinity: [-1] }", "",
         r"^executors\[0\]\.affinity\[0\]: expected a non-negative integer"),
        ("{ name: e, type: ThreadPoolExecutor, num_threads: 1 }", ", max_in_flight: 2",
         r"^nodes\[0\]\.max_in_flight \(node `f`\): max_in_flight=2 needs an executor with more than one thread"),
    ],
)
def test_executor_options_are_validated(executor: str, node_extra: str, pattern: str) -> None:
    text = f"executors: [{executor}]\n" + NODE_ON_E.replace("output_ports: [y] }", f"output_ports: [y]{node_extra} }}")
    with pytest.raises(flowplex.ConfigError, match=pattern):
        flowplex.Graph.from_yaml(text + "input_ports: [x]\n")


@pytest.mark.executors("threads", reason="about a pool declared with num_threads: 0; its one node is pinned to it")
def test_a_pool_with_zero_threads_gets_one() -> None:
    with flowplex.Graph.from_yaml(
        "executors: [{ name: e, type: ThreadPoolExecutor, num_threads: 0 }]\n" + NODE_ON_E
        + "input_ports: [x]\noutput_ports: [y]\n"
    ) as g:
        out = g.add_poller("y")
        g.start()
        g.send("x", 21, ts=0)
        g.close_all_inputs()
        assert [p.as_int() for p in out] == [42]
        g.wait_done(timeout=10)


def test_a_reader_sees_the_end_of_the_stream_after_cancel(make_graph: Callable[[str], flowplex.Graph]) -> None:
    # Better than "GraphCancelled if the closes did not run yet": after a cancel a poller hands
    # out what was queued, then None once the cancel's closes closed its output -- whether they
    # ran on the cancelling thread (inline), on a pool or on the reading host thread.
    g = make_graph("""
nodes:
  - { name: a, kernel: TForward, input_ports: [x], output_ports: [y] }
input_ports: [x]
output_ports: [y]
""")
    y = g.add_poller("y")
    g.start()
    g.send("x", 7, ts=0)
    g.cancel()
    got = [p.as_int() for p in y]
    assert got in ([], [7])
    assert y.next(timeout=1) is None
