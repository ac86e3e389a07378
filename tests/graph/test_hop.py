"""The hop fast path (``Scheduler.run_hop`` and the hand-overs) against the general path.

Every graph here runs twice: as built, and with the fast path switched off (``node.hop`` and
``port.chained`` cleared, so each invocation goes through ``complete`` → ``flush`` →
``deliver`` → ``schedule``). Kernel calls, outputs, errors and stats must be identical, on
each executor kind (tests/conftest.py).
"""

from __future__ import annotations

import threading
from typing import ClassVar

import pytest
from hypothesis import given
from hypothesis import strategies as st

import flowplex


@flowplex.kernel("THop")
class THop(flowplex.Kernel):
    """Records each call, then acts by option `mode`: fwd, double, even, fail (on 3), two."""

    calls: ClassVar[list[tuple[str, int, tuple[int | None, ...]]]] = []
    lock = threading.Lock()

    def process(self, cc: flowplex.Context) -> None:
        values = tuple(cc.input(i).as_int() for i in range(cc.num_inputs))
        with self.lock:
            self.calls.append((cc.node_name, cc.input_timestamp, values))
        mode = cc.option_str("mode", "fwd")
        v = next((x for x in values if x is not None), 0)
        if mode == "fail" and v == 3:
            raise ValueError("three")
        if mode == "even" and v % 2:
            return
        if mode == "two":
            cc.emit(0, v, ts=cc.input_timestamp)
            cc.emit(0, v + 1, ts=cc.input_timestamp + 1)  # inputs are spaced by 10
            return
        if cc.num_outputs:
            cc.emit(0, sum(x or 0 for x in values) * (2 if mode == "double" else 1))


def _node(name: str, inputs: list[str], outputs: list[str], mode: str = "fwd", extra: str = "") -> str:
    outs = f", output_ports: [{', '.join(outputs)}]" if outputs else ""
    return (f"  - {{ name: {name}, kernel: THop, options: {{ mode: {mode} }}, "
            f"input_ports: [{', '.join(inputs)}]{outs}{extra} }}\n")


def chain_yaml(modes: list[str], sink: bool = True, extra: str = "", tap: str = "") -> str:
    text = "nodes:\n"
    for i, mode in enumerate(modes):
        text += _node(f"n{i}", [f"e{i}"], [f"e{i + 1}"], mode, extra if i == len(modes) // 2 else "")
    out = f"[{tap}]"
    if sink:
        text += _node("sink", [f"e{len(modes)}"], [])
    else:
        out = f"[e{len(modes)}]"
    return text + f"input_ports: [e0]\noutput_ports: {out}\n"


DIAMOND = (
    "nodes:\n"
    + _node("l", ["e0"], ["a"])
    + _node("r", ["e0"], ["b"], "even")
    + _node("j", ["a", "b"], ["y"])
    + _node("sink", ["y"], [])
    + "input_ports: [e0]\noutput_ports: []\n"
)

HOP_PATH = pytest.mark.local_kernels(
    reason="the hop fast path is for the engine's own kernels: a hosted node (loopback) crosses the seam on every "
    "call, and run() checks that the graph uses the path",
)
"""The tests comparing the fast path with the general one (through ``run``)."""

Outcome = tuple[object, ...]


def run(yaml_text: str, values: list[int], *, fast: bool, poll: str | None = None, on_error: str = "",
        after_abort: bool = True) -> Outcome:
    """Run a graph; return the calls, outputs, error text and per-node counters (with
    ``after_abort=False``, only the error text of a graph that failed on several threads)."""
    text = yaml_text
    if on_error:
        text = text.replace("kernel: THop", f"on_error: {on_error}, kernel: THop")
    THop.calls.clear()
    error = ""
    outputs: list[tuple[int, int | None]] = []
    with flowplex.Graph.from_yaml(text) as g:
        engine = g._engine
        assert any(node.hop for node in engine.nodes)  # the graph does use the fast path
        # Several workers interleave the nodes freely (a pool): the order of work is not fixed.
        interleaved = g.stats().executors[0].threads > 1
        if not fast:
            for node in engine.nodes:
                node.hop = False
                for port in node.inputs:
                    port.chained = False
        poller = g.add_poller(poll) if poll else None
        g.start()
        try:
            for v in values:
                g.send("e0", v, ts=v * 10)
            g.close_all_inputs()
            g.wait_done(timeout=10)
        except flowplex.KernelError as exc:
            error = str(exc)
        if poller is not None:
            try:
                for p in poller:
                    outputs.append((p.timestamp, p.as_int()))
            except flowplex.KernelError as exc:  # raised once the delivered packets are read
                error = error or str(exc)
        # A pool's queue peaks depend on thread timing (how far the sender ran ahead), not on
        # the path: compare them only where the order of work is deterministic.
        stats = [(n.node_name, n.processed, n.errors, n.packets_in, n.packets_out,
                  None if interleaved else n.peak_queue_depth, n.queued)
                 for n in g.node_stats()]
    calls = list(THop.calls)
    if interleaved and error and not after_abort:
        # A pool's workers go on running what they had claimed until the abort reaches them:
        # how far each node got is thread timing, not the path. The error itself is the same.
        return [], [], error, []
    if interleaved:  # compare what each node saw
        calls.sort()
    return calls, outputs, error, stats


def assert_same(yaml_text: str, values: list[int], **kw: object) -> Outcome:
    fast = run(yaml_text, values, fast=True, **kw)  # type: ignore[arg-type]
    general = run(yaml_text, values, fast=False, **kw)  # type: ignore[arg-type]
    assert fast == general
    return fast


@HOP_PATH
def test_chain() -> None:
    calls, _, error, stats = assert_same(chain_yaml(["fwd", "double", "fwd"]), list(range(8)))
    assert error == ""
    assert len(calls) == 4 * 8
    assert [s[1] for s in stats] == [8, 8, 8, 8]


@HOP_PATH
def test_diamond_with_a_sync_join() -> None:
    calls, _, _, stats = assert_same(DIAMOND, list(range(6)))
    joins = [c for c in calls if c[0] == "j"]
    assert [c[2] for c in sorted(joins)] == [(v, v if v % 2 == 0 else None) for v in range(6)]
    assert [s[0] for s in stats] == ["l", "r", "j", "sink"]


@HOP_PATH
def test_filter_emits_nothing_and_bounds_still_flow() -> None:
    _, outputs, _, _ = assert_same(chain_yaml(["fwd", "even", "fwd"], sink=False), list(range(7)), poll="e3")
    assert outputs == [(0, 0), (20, 2), (40, 4), (60, 6)]


@HOP_PATH
def test_two_packets_per_call_take_the_general_path() -> None:
    _, outputs, _, _ = assert_same(chain_yaml(["two", "fwd"], sink=False), [1, 2], poll="e2")
    assert outputs == [(10, 1), (11, 2), (20, 2), (21, 3)]


@HOP_PATH
def test_a_poller_in_the_middle_of_a_chain() -> None:
    _, outputs, _, _ = assert_same(chain_yaml(["fwd", "double", "fwd"], tap="e2"), [1, 2, 3], poll="e2")
    assert outputs == [(10, 2), (20, 4), (30, 6)]


@HOP_PATH
def test_a_failing_hop_fails_the_graph_the_same_way() -> None:
    # On a pool, how far the other nodes got before the abort reached them is thread timing:
    # compare the error only there (after_abort=False); the failing call itself happened.
    _, _, error, _ = assert_same(chain_yaml(["fwd", "fail", "fwd"]), list(range(6)), after_abort=False)
    assert "[n1] ValueError: three" in error
    assert ("n1", 30, (3,)) in THop.calls  # the calls of the last run (the general path)


@HOP_PATH
def test_a_failing_hop_with_on_error_skip() -> None:
    _, _, error, stats = assert_same(chain_yaml(["fwd", "fail", "fwd"]), list(range(6)), on_error="skip")
    assert error == ""
    assert stats[1][2] == 1  # n1 counted one error
    assert stats[2][1] == 5  # n2 saw the five others


@HOP_PATH
def test_lossless_capacity_downstream() -> None:
    # A capacity-limited consumer port is not a plain port: the producer takes the general path
    # (backpressure), its neighbours keep the fast one.
    extra = ", input_queues: { packets: 1 }"
    _, outputs, _, stats = assert_same(chain_yaml(["fwd", "fwd", "fwd", "fwd"], sink=False, extra=extra),
                                       list(range(10)), poll="e4")
    assert [v for _, v in outputs] == list(range(10))
    assert [s[1] for s in stats] == [10, 10, 10, 10]


@HOP_PATH
@given(modes=st.lists(st.sampled_from(["fwd", "double", "even", "fail", "two"]), min_size=1, max_size=5),
       values=st.lists(st.integers(0, 6), unique=True, max_size=8).map(sorted),
       on_error=st.sampled_from(["", "skip"]))
def test_random_chains_behave_the_same_on_both_paths(modes: list[str], values: list[int], on_error: str) -> None:
    assert_same(chain_yaml(modes, sink=False), values, poll=f"e{len(modes)}", on_error=on_error, after_abort=False)


@pytest.mark.parametrize("fast", [True, False])
@pytest.mark.parametrize(("capacity", "overflow"), [(0, "block"), (2, "drop_oldest"), (2, "drop_newest")])
def test_output_pollers_on_both_paths(fast: bool, capacity: int, overflow: str) -> None:
    """An output read by one unbounded poller takes the hop path; bounded ones keep their policy."""
    with flowplex.Graph.from_yaml(chain_yaml(["fwd", "double"], sink=False)) as g:
        if not fast:
            for node in g._engine.nodes:
                node.hop = False
        poller = g.add_poller("e2", capacity=capacity, overflow=overflow)
        g.start()
        interleaved = []
        for v in range(3):  # send, then read right away (the latency benchmark's pattern)
            g.send("e0", v, ts=v)
            interleaved.append(poller.next(timeout=5).as_int())  # type: ignore[union-attr]
        for v in range(3, 8):  # then more than a bounded poller keeps
            g.send("e0", v, ts=v)
        g.close_all_inputs()
        g.wait_done(timeout=10)
        rest = [p.as_int() for p in poller]
        engine_sole = g._engine.edges["e2"].sole_poller
    assert interleaved == [0, 2, 4]
    assert (engine_sole is not None) == (capacity == 0)
    expected = {0: [6, 8, 10, 12, 14], 2: [12, 14] if overflow == "drop_oldest" else [6, 8]}[capacity]
    assert rest == expected


@HOP_PATH
def test_a_tap_on_a_chain_edge_sees_every_packet_and_turns_the_shortcut_off_there() -> None:
    # ``Delivery.flush_port`` is where taps attach (as observers): an edge with one is no hop
    # edge, so every packet on it passes the tap while the rest of the chain still hops.
    THop.calls.clear()
    seen: list[tuple[int, int | None]] = []
    lock = threading.Lock()

    def tap(p: flowplex.Packet) -> None:
        with lock:
            seen.append((p.timestamp, p.as_int()))

    with flowplex.Graph.from_yaml(chain_yaml(["fwd", "double", "fwd", "fwd"], tap="e2")) as g:
        g.observe("e2", tap)
        edge = g._engine.edges["e2"]
        assert edge.solo is None and edge.sole_poller is None
        g.start()
        for v in range(6):
            g.send("e0", v, ts=v * 10)
        g.close_all_inputs()
        g.wait_done(timeout=10)
    assert sorted(seen) == [(v * 10, v * 2) for v in range(6)]
    assert sorted(c for c in THop.calls if c[0] == "sink") == [("sink", v * 10, (v * 2,)) for v in range(6)]
