"""Input policies on every executor: fixed_size, sync_set, batch, back edges, max_in_flight."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

import pytest

import flowplex
from tests.conftest import KINDS_WITH

from .conftest import NO_RUN

GraphFactory = Callable[[str], flowplex.Graph]


@flowplex.kernel("PolShow")
class PolShow(flowplex.Kernel):
    """Emits what the invocation saw: ``"1,2|102|-"`` lists each port's packets (``-`` = none)."""

    def process(self, cc: flowplex.Context) -> None:
        ports = []
        for i in range(cc.num_inputs):
            values = [str(cc.input_at(i, k).as_int()) for k in range(cc.input_count(i))]
            ports.append(",".join(values) or "-")
        cc.emit(0, "|".join(ports))


@flowplex.kernel("PolBurst")
class PolBurst(flowplex.Kernel):
    """Emits `n` packets per input, at ts*100 + k, all in one flush."""

    def process(self, cc: flowplex.Context) -> None:
        for k in range(cc.option_int("n", 1)):
            cc.emit(0, cc.input(0).as_int() * 100 + k, ts=cc.input_timestamp * 100 + k)


@flowplex.kernel("PolFeedbackAdd")
class PolFeedbackAdd(flowplex.Kernel):
    """Emits input 0 plus the feedback register on input 1 (0 while the register is empty)."""

    def process(self, cc: flowplex.Context) -> None:
        fb = cc.input(1)
        cc.emit(0, cc.input(0).as_int() + (0 if fb.is_empty else fb.as_int()))


def shown(poller: flowplex.Poller) -> list[tuple[int, str]]:
    return [(p.timestamp, p.as_str() or "") for p in poller]


def settle(g: flowplex.Graph) -> None:
    """Let every executor (a DelegatingExecutor too) run what is ready."""
    g.wait_until_idle(timeout=10)


# -- fixed_size ---------------------------------------------------------------------------------


def test_fixed_size_keeps_the_newest_and_counts_drops_on_the_edge(make_graph: GraphFactory) -> None:
    g = make_graph("""
nodes:
  - { name: f, kernel: PolShow, input_ports: [a, b], output_ports: [y],
      input_policy: { type: fixed_size, capacity: 2 } }
input_ports: [a, b]
output_ports: [y]
""")
    out = g.add_poller("y")
    g.start()
    g.pause()  # pop-at-claim would otherwise take packets out of the queue before they can drop
    for ts in range(10):
        g.send("a", ts, ts=ts)
    g.send("b", 100, ts=5)
    assert g.dropped_count("a") == 8  # dropped at enqueue, even while paused
    g.resume()
    g.close_all_inputs()
    # b@5 is alone at ts 5 (a's packet 5 was dropped); a keeps its newest two, 8 and 9.
    assert shown(out) == [(5, "-|100"), (8, "8|-"), (9, "9|-")]
    g.wait_done(timeout=10)
    assert (g.dropped_count("a"), g.dropped_count("b")) == (8, 0)
    assert g.dropped_count("y") == 0


def test_fixed_size_drop_warnings_back_off(caplog: pytest.LogCaptureFixture) -> None:
    with flowplex.Graph.from_yaml("""
nodes:
  - { name: f, kernel: PolShow, input_ports: [a], output_ports: [y], input_policy: { type: fixed_size, capacity: 2 } }
input_ports: [a]
""") as g, caplog.at_level(logging.WARNING, logger="flowplex"):
        g.start()
        g.pause()
        for ts in range(20):  # 18 drops: warn at 1, 2, 4, 8 and 16
            g.send("a", ts, ts=ts)
        g.resume()
        g.close_all_inputs()
        g.wait_done(timeout=10)
        assert g.dropped_count("a") == 18
    warnings = [r.getMessage() for r in caplog.records if "fixed_size" in r.getMessage()]
    assert [int(w.split("dropped ")[1].split()[0]) for w in warnings] == [1, 2, 4, 8, 16]
    assert all(w.startswith("edge `a` has dropped") for w in warnings)


def test_fixed_size_on_an_internal_edge_drops_without_blocking_the_producer(executor_kind: str | None) -> None:
    with flowplex.Graph.from_yaml("""
nodes:
  - { name: p, kernel: PolBurst, input_ports: [x], output_ports: [m], options: { n: 5 } }
  - { name: f, kernel: PolShow, input_ports: [m], output_ports: [y], input_policy: { type: fixed_size, capacity: 1 } }
input_ports: [x]
output_ports: [y]
""") as g:
        out = g.add_poller("y")
        g.start()
        for ts in range(3):
            g.send("x", ts, ts=ts)
        g.close_all_inputs()
        seen = shown(out)
        g.wait_done(timeout=10)
        dropped = g.dropped_count("m")
        sent = g.stats().node("p").packets_out
    # Every packet is either shown or counted as dropped, never both, never neither; the newest
    # always survives (nothing comes after it to push it out); the producer never blocks.
    assert sent == 15
    assert len(seen) + dropped == 15
    assert seen == sorted(set(seen)) and seen[-1] == (204, "204")
    assert set(seen) <= {(t, str(t)) for t in range(300) if t % 100 < 5}
    assert g.dropped_count("x") == 0
    if executor_kind in KINDS_WITH["on_caller"]:
        # A send runs the work it made ready before it returns: each burst of 5 lands in an
        # empty queue of capacity 1, so exactly its last packet survives. Where the consumer
        # runs on a worker of its own, a burst may also push out the last one of the burst
        # before it (how many is thread timing).
        assert seen == [(4, "4"), (104, "104"), (204, "204")]


@NO_RUN
def test_dropped_count_of_an_unknown_edge_is_a_key_error() -> None:
    with flowplex.Graph.from_yaml("""
nodes: [{ name: f, kernel: PolShow, input_ports: [a], output_ports: [y] }]
input_ports: [a]
""") as g, pytest.raises(KeyError, match="no edge named `nope`"):
        g.dropped_count("nope")


# -- sync_set -------------------------------------------------------------------------------------

SYNC_SET = """
nodes:
  - {{ name: s, kernel: PolShow, input_ports: [a, b, c], output_ports: [y],
      input_policy: {{ type: sync_set, sets: {sets} }} }}
input_ports: [a, b, c]
output_ports: [y]
"""


def test_sync_set_groups_align_independently(make_graph: GraphFactory) -> None:
    g = make_graph(SYNC_SET.format(sets="[[a, b], [c]]"))
    out = g.add_poller("y")
    g.start()
    g.send("a", 10, ts=1)
    g.send("c", 30, ts=3)
    settle(g)
    # c's group fires at once; a waits for b, which could still deliver ts 1.
    assert shown_now(out) == [(3, "-|-|30")]
    g.send("b", 20, ts=1)
    settle(g)
    assert shown_now(out) == [(1, "10|20|-")]  # earlier than what the other group emitted
    g.close_all_inputs()
    g.wait_done(timeout=10)


def shown_now(poller: flowplex.Poller) -> list[tuple[int, str]]:
    got = []
    while (p := poller.try_next()) is not None:
        got.append((p.timestamp, p.as_str() or ""))
    return got


@pytest.mark.parametrize(
    ("sets", "expected"),
    [
        ("[[a, b], [c]]", [(4, "-|-|40"), (5, "11|21|-"), (5, "-|-|41"), (6, "-|-|42")]),
        ("[[c], [a, b]]", [(4, "-|-|40"), (5, "-|-|41"), (5, "11|21|-"), (6, "-|-|42")]),
    ],
)
def test_sync_set_smallest_timestamp_first_then_declaration_order(
    make_graph: GraphFactory, sets: str, expected: list[tuple[int, str]]
) -> None:
    g = make_graph(SYNC_SET.format(sets=sets))
    out = g.add_poller("y")
    g.start()
    g.pause()
    g.send("a", 11, ts=5)
    g.send("b", 21, ts=5)
    for v, ts in ((40, 4), (41, 5), (42, 6)):
        g.send("c", v, ts=ts)
    g.resume()
    g.close_all_inputs()
    # Ports of the group that did not fire are delivered empty (never a residual value)
    # and keep their packets for a later invocation.
    assert shown(out) == expected
    g.wait_done(timeout=10)


# -- batch ------------------------------------------------------------------------------------------


def test_batch_of_one_port_flushes_the_remainder_at_close(make_graph: GraphFactory) -> None:
    g = make_graph("""
nodes:
  - { name: b, kernel: PolShow, input_ports: [a], output_ports: [y], input_policy: { type: batch, capacity: 3 } }
input_ports: [a]
output_ports: [y]
""")
    out = g.add_poller("y")
    g.start()
    for ts in range(1, 8):
        g.send("a", ts, ts=ts)
    settle(g)
    assert shown_now(out) == [(3, "1,2,3"), (6, "4,5,6")]  # input_timestamp = the last tuple's
    g.close_all_inputs()
    assert shown(out) == [(7, "7")]
    g.wait_done(timeout=10)


BATCH2 = """
nodes:
  - { name: b, kernel: PolShow, input_ports: [a, b], output_ports: [y], input_policy: { type: batch, capacity: 3 } }
input_ports: [a, b]
output_ports: [y]
"""


def test_batch_counts_aligned_tuples_not_packets_per_port(make_graph: GraphFactory) -> None:
    g = make_graph(BATCH2)
    out = g.add_poller("y")
    g.start()
    for ts in range(1, 8):
        g.send("a", ts, ts=ts)
    for ts in (2, 3, 5, 7):
        g.send("b", 100 + ts, ts=ts)
    settle(g)
    # Tuples: 1 (a), 2 (a b), 3 (a b) | 4 (a), 5 (a b), 6 (a) | 7 ... b could still send 7.x
    assert shown_now(out) == [(3, "1,2,3|102,103"), (6, "4,5,6|105")]
    g.close_input("a")
    g.send("b", 108, ts=8)
    settle(g)
    assert shown_now(out) == []  # only two tuples left (7, 8): b is still open
    g.close_input("b")
    assert shown(out) == [(8, "7|107,108")]
    g.wait_done(timeout=10)


COUNTS: list[tuple[int, int, bool, bool]] = []


@flowplex.kernel("PolCounts")
class PolCounts(flowplex.Kernel):
    def process(self, cc: flowplex.Context) -> None:
        COUNTS.append((
            cc.input_count(0),
            cc.input_count(1),
            cc.input_at(0, 0).as_int() == cc.input(0).as_int(),
            cc.input_at(0, 1).is_empty,
        ))


@pytest.mark.in_process(reason="PolCounts records what it sees in COUNTS, a list of this interpreter")
def test_single_packet_policies_report_counts_of_zero_or_one(make_graph: GraphFactory) -> None:
    COUNTS.clear()
    g = make_graph("""
nodes:
  - { name: c, kernel: PolCounts, input_ports: [a, b] }
input_ports: [a, b]
""")
    g.start()
    g.send("a", 1, ts=1)
    g.send("b", 2, ts=2)
    g.close_all_inputs()
    g.wait_done(timeout=10)
    assert COUNTS == [(1, 0, True, True), (0, 1, True, True)]


# -- back edges -----------------------------------------------------------------------------------


def test_feedback_self_loop_accumulates(make_graph: GraphFactory) -> None:
    g = make_graph("""
nodes:
  - { name: f, kernel: PolFeedbackAdd, input_ports: [x, y], output_ports: [y], back_edges: [y] }
input_ports: [x]
output_ports: [y]
""")
    out = g.add_poller("y")
    g.start()
    for ts in range(5):
        g.send("x", 1, ts=ts)
    g.close_all_inputs()
    assert [(p.timestamp, p.as_int()) for p in out] == [(0, 1), (1, 2), (2, 3), (3, 4), (4, 5)]
    # The back edge never holds termination: its producer is the node itself.
    g.wait_done(timeout=10)


FEEDBACK = """
nodes:
  - { name: src, kernel: PolShow, input_ports: [x], output_ports: [fb] }
  - { name: f, kernel: PolFeedbackAdd, input_ports: [t, fb], output_ports: [y], back_edges: [fb] }
input_ports: [x, t]
output_ports: [y]
"""


@flowplex.kernel("PolValue")
class PolValue(flowplex.Kernel):
    def process(self, cc: flowplex.Context) -> None:
        cc.emit(0, cc.input(0).as_int())


def test_feedback_register_keeps_only_the_newest_and_never_triggers(make_graph: GraphFactory) -> None:
    g = make_graph(FEEDBACK.replace("PolShow", "PolValue"))
    out = g.add_poller("y")
    g.start()
    for ts in range(4):
        g.send("x", 10 * (ts + 1), ts=ts)
    settle(g)
    assert out.try_next() is None  # feedback alone never fires the node
    g.send("t", 1, ts=0)
    g.send("t", 2, ts=1)  # the register was consumed by the first call: now empty
    g.close_all_inputs()
    assert [(p.timestamp, p.as_int()) for p in out] == [(0, 41), (1, 2)]
    g.wait_done(timeout=10)


def test_feedback_register_overwrites_are_counted_apart_from_drops(caplog: pytest.LogCaptureFixture) -> None:
    # lm-lmflow reports replaced feedback values as fixed_size drops (dropped_count, same WARN);
    # flowplex counts them as overwrites: keeping only the newest value is what a register is for.
    with flowplex.Graph.from_yaml(FEEDBACK.replace("PolShow", "PolValue")) as g, caplog.at_level(logging.WARNING):
        g.start()
        for ts in range(4):
            g.send("x", ts, ts=ts)
        g.send("t", 1, ts=0)
        g.close_all_inputs()
        g.wait_done(timeout=10)
        assert (g.overwritten_count("fb"), g.dropped_count("fb")) == (3, 0)
        assert g.overwritten_count("y") == 0  # not a back edge
        with pytest.raises(KeyError, match="no edge named `nope`"):
            g.overwritten_count("nope")
    assert not [r for r in caplog.records if "fixed_size" in r.getMessage()]


@flowplex.kernel("PolBatchFeedback")
class PolBatchFeedback(flowplex.Kernel):
    """Batch kernel: emits the batch sum; shows the register through input_count/input_at and input."""

    def process(self, cc: flowplex.Context) -> None:
        batch = [cc.input_at(0, k).as_int() for k in range(cc.input_count(0))]
        register = [cc.input_at(1, k).as_int() for k in range(cc.input_count(1))]
        fb = cc.input(1)
        BATCH_FEEDBACK.append((cc.input_timestamp, batch, None if fb.is_empty else fb.as_int(), register))
        cc.emit(0, sum(batch))


BATCH_FEEDBACK: list[tuple[int, list[int], int | None, list[int]]] = []
BATCH_FEEDBACK_YAML = """
nodes:
  - { name: f, kernel: PolBatchFeedback, input_ports: [x, y], output_ports: [y], back_edges: [y],
      input_policy: { type: batch, capacity: 2 } }
input_ports: [x]
output_ports: [y]
"""


def run_batch_feedback() -> list[tuple[int, int | None]]:
    BATCH_FEEDBACK.clear()
    with flowplex.Graph.from_yaml(BATCH_FEEDBACK_YAML) as g:
        out = g.add_poller("y")
        g.start()
        for ts in range(5):
            g.send("x", ts + 1, ts=ts)
        g.close_all_inputs()
        g.wait_done(timeout=10)
        return [(p.timestamp, p.as_int()) for p in out]


@pytest.mark.in_process(reason="the kernel records what it sees in BATCH_FEEDBACK, a list of this interpreter")
def test_batch_reads_the_feedback_register_once_per_batch() -> None:
    assert run_batch_feedback() == [(1, 3), (3, 7), (4, 5)]
    assert [(ts, batch, fb) for ts, batch, fb, _ in BATCH_FEEDBACK] == [(1, [1, 2], None), (3, [3, 4], 3), (4, [5], 7)]


@pytest.mark.in_process(reason="the kernel records what it sees in BATCH_FEEDBACK, a list of this interpreter")
def test_batch_reports_the_feedback_register_through_input_count() -> None:
    run_batch_feedback()
    assert [register for *_, register in BATCH_FEEDBACK] == [[], [3], [7]]


@NO_RUN
@pytest.mark.parametrize(
    ("nodes", "pattern"),
    [
        (
            "  - { name: a, kernel: PolFeedbackAdd, input_ports: [x, y], output_ports: [y] }\n",
            r"nodes\[0\]\.input_ports\[1\] \(node `a`\): topology cycle: node `a` -> `a`; mark a feedback input "
            r"with `back_edges` \(e\.g\. `back_edges: \[y\]` on node `a`\)",
        ),
        (
            "  - { name: a, kernel: PolFeedbackAdd, input_ports: [x, z], output_ports: [y] }\n"
            "  - { name: b, kernel: PolValue, input_ports: [y], output_ports: [z] }\n",
            r"topology cycle: node `a` -> `b` -> `a`",
        ),
    ],
)
def test_cycles_without_a_back_edge_are_rejected_at_build(nodes: str, pattern: str) -> None:
    with pytest.raises(flowplex.ConfigError, match=pattern):
        flowplex.Graph.from_yaml(f"nodes:\n{nodes}input_ports: [x]\noutput_ports: [y]\n")


# -- max_in_flight ----------------------------------------------------------------------------------


@flowplex.kernel("PolPairs")
class PolPairs(flowplex.Kernel):
    """Even timestamps wait until the next odd one has completed: completion order is 1, 0, 3, 2..."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.events: dict[int, threading.Event] = {}
        self.completed: list[int] = []

    def _event(self, pair: int) -> threading.Event:
        with self.lock:
            return self.events.setdefault(pair, threading.Event())

    def process(self, cc: flowplex.Context) -> None:
        ts = cc.input_timestamp
        if ts % 2 == 0:
            assert self._event(ts // 2).wait(10), "the odd partner never ran: max_in_flight not honoured"
        cc.emit(0, ts)
        with self.lock:
            self.completed.append(ts)
        if ts % 2 == 1:
            self._event(ts // 2).set()
        PAIRS_COMPLETED[:] = self.completed


PAIRS_COMPLETED: list[int] = []


def test_out_of_order_completion_is_flushed_in_claim_order() -> None:
    with flowplex.Graph.from_yaml("""
executors: [{ name: cpu, type: ThreadPoolExecutor, num_threads: 2 }]
nodes:
  - { name: p, kernel: PolPairs, executor: cpu, max_in_flight: 2, input_ports: [x], output_ports: [y] }
  - { name: after, kernel: PolValue, input_ports: [y], output_ports: [z] }
input_ports: [x]
output_ports: [y, z]
""") as g:
        out = g.add_poller("y", observe_timestamp_bounds=True)
        downstream = g.add_poller("z")
        g.start()
        for ts in range(8):
            g.send("x", ts, ts=ts)
        g.close_all_inputs()
        g.wait_done(timeout=20)
        events = [(p.is_empty, p.timestamp) for p in out]
        assert [p.as_int() for p in downstream] == list(range(8))
    assert PAIRS_COMPLETED == [1, 0, 3, 2, 5, 4, 7, 6]
    packets = [ts for empty, ts in events if not empty]
    bounds = [ts for empty, ts in events if empty]
    assert packets == list(range(8))
    assert bounds == sorted(set(bounds)) and bounds[-1] == flowplex.TS_DONE


@flowplex.kernel("PolSlowFirst")
class PolSlowFirst(flowplex.Kernel):
    """The invocation at ts 0 takes 200 ms; every other one returns at once."""

    def process(self, cc: flowplex.Context) -> None:
        if cc.input_timestamp == 0:
            time.sleep(0.2)
        cc.forward(0, 0)


@pytest.mark.executors("threads", reason="max_in_flight needs a multi-thread pool: its one node is pinned to `cpu`")
def test_out_of_order_completion_beyond_the_context_pool_loses_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    crashed: list[BaseException | None] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: crashed.append(args.exc_value))
    with flowplex.Graph.from_yaml("""
executors: [{ name: cpu, type: ThreadPoolExecutor, num_threads: 2 }]
nodes:
  - { name: s, kernel: PolSlowFirst, executor: cpu, max_in_flight: 2, input_ports: [x], output_ports: [y] }
input_ports: [x]
output_ports: [y]
""") as g:
        out = g.add_poller("y")
        g.start()
        for ts in range(6):  # ts 1, 2... finish while ts 0 sleeps
            g.send("x", ts, ts=ts)
        g.close_all_inputs()
        g.wait_done(timeout=10)
        assert crashed == []
        assert [p.timestamp for p in out] == list(range(6))
