"""Properties: random DAGs with random input policies, checked against a reference model.

The model is a sequential re-statement of lm-flow's readiness rules (semantics sections 2-3).
For each node it takes the streams that really arrived on its input edges (what was sent, or
what the producer's poller recorded) and predicts the node's invocations:

* ``sync`` and ``batch`` are timing-independent: with strictly increasing input streams the
  aligned tuples are the k-way merge of the streams by timestamp; ``batch`` chunks them by N
  (the last, partial chunk once every input is closed).
* ``fixed_size`` aligns like ``sync`` over the packets that survived drop-oldest. When all
  sends happen while the graph is paused, a port fed by a graph input keeps exactly the newest
  N packets; other ports may lose any packet but the newest, and every loss is counted.
* ``immediate`` (several ports) and ``sync_set`` (several groups) group by arrival time, so
  only their per-port (per-group) order is predicted, unless every input was queued before
  the first claim (paused and fed by graph inputs only): then the whole order is exact.
  Their output may go backwards in time, so they only feed graph outputs here.

Every node is also an output with a bound-observing poller, so each edge's packets *and*
published bounds are compared with the model. A second run puts every order-keeping node on a
two-thread pool with ``max_in_flight: 2``: completions then come out of order, and the output
must still be flushed in claim order. State machines cover bounded pollers and the watermark.
"""

from __future__ import annotations

import itertools
import threading
import time
from dataclasses import dataclass, field
from typing import ClassVar

import pytest
from hypothesis import Phase, given, note, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

import flowplex
from flowplex import TS_DONE

POLICIES = ("sync", "immediate", "fixed_size", "sync_set", "batch")
EXECUTORS = ("default", "pool", "host")
"""Where a node runs: ``default`` is the kind under test (tests/conftest.py), the others are named."""
ID_BASE = 1_000_000
"""Node ids start at (k + 1) * ID_BASE for node k (see ``out_id``); sent packets use ids < ID_BASE."""

_RUNS = itertools.count()
Stream = list[tuple[int, int]]
"""(ts, id) packets of one edge, in delivery order."""
Invocation = tuple[int, tuple[tuple[int, ...], ...]]
"""(input timestamp, ids consumed on each input port)."""

LOGS: dict[int, dict[int, list[Invocation]]] = {}
"""Per run, per node: what each invocation consumed, in the order the calls recorded it."""
_LOG_LOCK = threading.Lock()


def out_id(node: int, ts: int, consumed: tuple[tuple[int, ...], ...]) -> int:
    """The id node ``node`` emits for one invocation: unique per node, whatever the run order.

    Two invocations of one node share a timestamp only under immediate or sync_set, and then
    their first non-empty ports differ.
    """
    first = next(p for p, ids in enumerate(consumed) if ids)
    return (node + 1) * ID_BASE + (ts + 1000) * 4 + first


@flowplex.kernel("PropProbe")
class PropProbe(flowplex.Kernel):
    """Records what each invocation consumed; emits one id at the input timestamp.

    Invocations whose timestamp is ``rem`` modulo ``mod`` emit nothing, which exercises
    bound propagation without packets. Even timestamps take a little longer, so that with
    ``max_in_flight: 2`` invocations complete out of claim order.
    """

    def process(self, cc: flowplex.Context) -> None:
        ts = cc.input_timestamp
        consumed = tuple(
            tuple(cc.input_at(i, k).as_int() for k in range(cc.input_count(i))) for i in range(cc.num_inputs)
        )
        run, node = cc.option_int("run"), cc.option_int("node")
        if cc.option_int("slow_even") and ts % 2 == 0:
            time.sleep(0.001)
        with _LOG_LOCK:
            LOGS[run][node].append((ts, consumed))
        mod = cc.option_int("mod")
        if mod and ts % mod == cc.option_int("rem"):
            return
        cc.emit(0, out_id(node, ts, consumed))


# -- graph description ----------------------------------------------------------------------


@dataclass
class NodeDesc:
    index: int
    inputs: list[str]
    policy: str
    capacity: int
    groups: list[list[int]]
    """sync_set: port indices per group, in declaration order."""
    executor: str
    mod: int
    rem: int
    max_in_flight: int = 1

    @property
    def output(self) -> str:
        return f"e{self.index}"

    @property
    def unordered(self) -> bool:
        """Invocation order depends on arrival time, so the output may go back in time."""
        if self.policy == "immediate":
            return len(self.inputs) > 1
        return self.policy == "sync_set" and len(self.groups) > 1


@dataclass
class Scenario:
    nodes: list[NodeDesc]
    sent: dict[str, Stream]
    order: list[str]
    """The graph input of each send, in sending order."""
    paused: bool
    run: int = field(default_factory=lambda: next(_RUNS))

    def yaml(self) -> str:
        used = {n.executor for n in self.nodes}
        lines = ["executors:"] if used - {"default"} else []
        if "pool" in used:
            lines.append("  - { name: pool, type: ThreadPoolExecutor, num_threads: 2 }")
        if "host" in used:
            lines.append("  - { name: host, type: DelegatingExecutor }")
        lines.append("nodes:")
        for n in self.nodes:
            place = "" if n.executor == "default" else f"executor: {n.executor}, "
            if n.policy in ("fixed_size", "batch"):
                policy = f"{{ type: {n.policy}, capacity: {n.capacity} }}"
            elif n.policy == "sync_set":
                sets = ", ".join("[" + ", ".join(n.inputs[i] for i in g) + "]" for g in n.groups)
                policy = f"{{ type: sync_set, sets: [{sets}] }}"
            else:
                policy = f"{{ type: {n.policy} }}"
            lines.append(
                f"  - {{ name: n{n.index}, {place}kernel: PropProbe, input_ports: [{', '.join(n.inputs)}], "
                f"output_ports: [{n.output}], input_policy: {policy}, max_in_flight: {n.max_in_flight}, "
                f"options: {{ run: {self.run}, node: {n.index}, mod: {n.mod}, rem: {n.rem}, "
                f"slow_even: {int(n.max_in_flight > 1)} }} }}"
            )
        lines.append(f"input_ports: [{', '.join(sorted(self.sent))}]")
        lines.append(f"output_ports: [{', '.join(n.output for n in self.nodes)}]")
        return "\n".join(lines) + "\n"


@st.composite
def scenarios(draw: st.DrawFn, concurrent: bool = False) -> Scenario:
    """A random DAG; with ``concurrent`` every order-keeping node runs on the two-thread pool
    with ``max_in_flight: 2``."""
    n_inputs = draw(st.integers(1, 3))
    inputs = [f"i{k}" for k in range(n_inputs)]
    nodes: list[NodeDesc] = []
    ordered_edges = list(inputs)  # edges whose timestamps strictly increase
    for k in range(draw(st.integers(1, 8))):
        n_ports = draw(st.integers(1, min(3, len(ordered_edges))))
        ports = draw(st.lists(st.sampled_from(ordered_edges), min_size=n_ports, max_size=n_ports, unique=True))
        policy = draw(st.sampled_from(POLICIES))
        labels = draw(st.lists(st.integers(0, n_ports - 1), min_size=n_ports, max_size=n_ports))
        groups: list[list[int]] = []
        seen: dict[int, list[int]] = {}
        for port, label in enumerate(labels):  # groups ordered by their first port
            if label not in seen:
                seen[label] = []
                groups.append(seen[label])
            seen[label].append(port)
        mod = draw(st.sampled_from([0, 0, 2, 3]))
        node = NodeDesc(
            index=k,
            inputs=ports,
            policy=policy,
            capacity=draw(st.integers(1, 4)),
            groups=groups,
            executor=draw(st.sampled_from(EXECUTORS)),
            mod=mod,
            rem=draw(st.integers(0, mod - 1)) if mod else 0,
        )
        if concurrent and not node.unordered:
            # Several invocations at once, flushed in claim order (the pool has two threads).
            node.executor, node.max_in_flight = "pool", 2
        nodes.append(node)
        if not node.unordered:
            ordered_edges.append(node.output)
    used = sorted({p for n in nodes for p in n.inputs if p.startswith("i")})
    ids = itertools.count(1)
    sent: dict[str, Stream] = {}
    for name in used:
        stamps = sorted(draw(st.sets(st.integers(-5, 30), max_size=12)))
        sent[name] = [(ts, next(ids)) for ts in stamps]
    order = draw(st.permutations([name for name in used for _ in sent[name]]))
    return Scenario(nodes, sent, list(order), draw(st.booleans()))


# -- the reference model --------------------------------------------------------------------


def merge_rounds(streams: list[Stream]) -> list[tuple[int, list[list[int]]]]:
    """lm-flow's ``sync`` rule once every input is closed: one round per distinct timestamp."""
    cursors = [0] * len(streams)
    rounds = []
    while True:
        fronts = [s[c][0] for s, c in zip(streams, cursors, strict=True) if c < len(s)]
        if not fronts:
            return rounds
        ts = min(fronts)
        taken: list[list[int]] = []
        for i, s in enumerate(streams):
            if cursors[i] < len(s) and s[cursors[i]][0] == ts:
                taken.append([s[cursors[i]][1]])
                cursors[i] += 1
            else:
                taken.append([])
        rounds.append((ts, taken))


def as_invocations(rounds: list[tuple[int, list[list[int]]]]) -> list[Invocation]:
    return [(ts, tuple(tuple(ids) for ids in taken)) for ts, taken in rounds]


def batch_invocations(streams: list[Stream], n: int) -> list[Invocation]:
    """``batch``: N aligned tuples per invocation at the last tuple's timestamp."""
    rounds = merge_rounds(streams)
    out = []
    for start in range(0, len(rounds), n):
        chunk = rounds[start : start + n]
        per_port = tuple(tuple(i for _, taken in chunk for i in taken[p]) for p in range(len(streams)))
        out.append((chunk[-1][0], per_port))
    return out


def sync_set_invocations(streams: list[Stream], groups: list[list[int]]) -> list[list[Invocation]]:
    """Per group, the ``sync`` invocations restricted to that group's ports."""
    per_group = []
    for group in groups:
        rounds = merge_rounds([streams[p] for p in group])
        invs = []
        for ts, taken in rounds:
            full: list[tuple[int, ...]] = [() for _ in streams]
            for p, ids in zip(group, taken, strict=True):
                full[p] = tuple(ids)
            invs.append((ts, tuple(full)))
        per_group.append(invs)
    return per_group


def is_subsequence(sub: list[int], seq: list[int]) -> bool:
    it = iter(seq)
    return all(x in it for x in sub)


def consumed_on(log: list[Invocation], port: int) -> list[int]:
    return [i for _, taken in log for i in taken[port]]


def check_node(
    node: NodeDesc, streams: list[Stream], log: list[Invocation], all_queued_first: bool, paused: bool
) -> tuple[list[Invocation], int]:
    """Check one node's observed invocations against the model; returns them and its drops."""
    policy = node.policy
    if policy == "batch":
        assert log == batch_invocations(streams, node.capacity)
        return log, 0
    if policy == "fixed_size":
        survivors: list[Stream] = []
        for p, (edge, stream) in enumerate(zip(node.inputs, streams, strict=True)):
            got = consumed_on(log, p)
            ids = [i for _, i in stream]
            if paused and edge.startswith("i"):
                # Queued while paused: drop-oldest left exactly the newest N.
                assert got == ids[-node.capacity :], f"port {edge}"
            else:
                assert is_subsequence(got, ids), f"port {edge}: consumed out of order or invented"
                assert not ids or got[-1:] == ids[-1:], f"port {edge}: the newest packet may never be dropped"
            keep = set(got)
            survivors.append([(ts, i) for ts, i in stream if i in keep])
        assert log == as_invocations(merge_rounds(survivors))
        return log, sum(len(s) for s in streams) - sum(len(s) for s in survivors)
    # Lossless: every port consumed exactly its stream, in order.
    for p, stream in enumerate(streams):
        assert consumed_on(log, p) == [i for _, i in stream], f"port {node.inputs[p]}"
    if policy == "sync" or not node.unordered:
        assert log == as_invocations(merge_rounds(streams))
    elif policy == "sync_set":
        per_group = sync_set_invocations(streams, node.groups)
        if all_queued_first:
            # Every group ready from the start: smallest ts first, ties by declaration order.
            tagged = sorted((inv[0], g, inv) for g, invs in enumerate(per_group) for inv in invs)
            assert log == [inv for _, _, inv in tagged]
        for g, group in enumerate(node.groups):
            mine = [inv for inv in log if any(inv[1][p] for p in group)]
            assert all(not inv[1][p] for inv in mine for p in range(len(streams)) if p not in group)
            assert mine == per_group[g], f"group {g}"
    else:  # immediate over several ports: fronts with the smallest ts at claim time
        ts_of = {i: ts for s in streams for ts, i in s}
        for ts, taken in log:
            ids = [i for port in taken for i in port]
            assert ids and all(ts_of[i] == ts for i in ids), (ts, taken)
        if all_queued_first:
            assert log == as_invocations(merge_rounds(streams))
    return log, 0


def expected_events(node: NodeDesc, log: list[Invocation]) -> list[tuple[bool, int, int | None]]:
    """Packets and published bounds on the node's output edge: (is_empty, ts, id)."""
    events: list[tuple[bool, int, int | None]] = []
    published = -(2**63)
    for ts, consumed in log:
        if not (node.mod and ts % node.mod == node.rem):
            events.append((False, ts, out_id(node.index, ts, consumed)))
        if ts + 1 > published:
            published = ts + 1
            events.append((True, published, None))
    events.append((True, TS_DONE, None))
    return events


def run_scenario(scenario: Scenario) -> tuple[dict[str, list[tuple[bool, int, int | None]]], dict[str, int],
                                              dict[int, list[Invocation]]]:
    """Run the graph; returns every output edge's events, every edge's drops and the call logs.

    Exceptions escaping engine threads are collected (not left to kill a worker silently) and
    fail the example at once instead of letting ``wait_done`` wait for work that is gone.
    """
    crashed: list[BaseException | None] = []
    previous_hook = threading.excepthook
    threading.excepthook = lambda args: crashed.append(args.exc_value)
    LOGS[scenario.run] = {n.index: [] for n in scenario.nodes}
    try:
        with flowplex.Graph.from_yaml(scenario.yaml()) as g:
            pollers = {n.output: g.add_poller(n.output, observe_timestamp_bounds=True) for n in scenario.nodes}
            g.start()
            if scenario.paused:
                g.pause()
            cursors = dict.fromkeys(scenario.sent, 0)
            for name in scenario.order:
                ts, value = scenario.sent[name][cursors[name]]
                cursors[name] += 1
                g.send(name, value, ts=ts)
            g.close_all_inputs()
            if scenario.paused:
                g.resume()
            deadline = time.monotonic() + 30
            while True:
                assert not crashed, f"an engine thread died: {crashed[0]!r}"
                try:
                    g.wait_done(timeout=0.25)
                    break
                except flowplex.Timeout:
                    assert time.monotonic() < deadline, "wait_done did not finish in 30 s"
            assert not crashed, f"an engine thread died: {crashed[0]!r}"
            events = {
                edge: [(p.is_empty, p.timestamp, None if p.is_empty else p.as_int()) for p in poller]
                for edge, poller in pollers.items()
            }
            dropped = {edge: g.dropped_count(edge) for edge in [*scenario.sent, *events]}
        return events, dropped, LOGS[scenario.run]
    finally:
        threading.excepthook = previous_hook
        del LOGS[scenario.run]


def check_scenario(scenario: Scenario) -> None:
    note(scenario.yaml())
    note(f"paused={scenario.paused} order={scenario.order}")
    events, dropped, logs = run_scenario(scenario)
    streams: dict[str, Stream] = dict(scenario.sent)
    model_drops = dict.fromkeys(dropped, 0)
    for node in scenario.nodes:
        log = logs[node.index]
        if node.max_in_flight > 1:
            # Concurrent calls record in completion order; claim order is timestamp order here.
            log = sorted(log)
        inputs = [streams[e] for e in node.inputs]
        first = scenario.paused and all(e.startswith("i") for e in node.inputs)
        observed, drops = check_node(node, inputs, log, first, scenario.paused)
        if drops:
            # Drops are counted on the edge that fed each fixed_size port.
            for p, edge in enumerate(node.inputs):
                model_drops[edge] += len(streams[edge]) - len(consumed_on(observed, p))
        assert events[node.output] == expected_events(node, observed), f"edge {node.output}"
        # Bounds never move backwards and the stream ends with TS_DONE.
        bounds = [ts for empty, ts, _ in events[node.output] if empty]
        assert bounds == sorted(set(bounds)) and bounds[-1] == TS_DONE
        streams[node.output] = [(ts, v) for empty, ts, v in events[node.output] if not empty and v is not None]
    assert dropped == model_drops


@pytest.mark.in_process(reason="PropProbe logs its calls in LOGS, a dict of this interpreter")
@given(scenario=scenarios())
def test_random_dag_matches_the_reference_model(scenario: Scenario) -> None:
    check_scenario(scenario)


@pytest.mark.in_process(reason="PropProbe logs its calls in LOGS, a dict of this interpreter")
@settings(phases=[Phase.explicit, Phase.reuse, Phase.generate])  # a failure ends the run: no shrinking
@given(scenario=scenarios(concurrent=True))
def test_random_dag_with_max_in_flight_matches_the_reference_model(scenario: Scenario) -> None:
    check_scenario(scenario)


@st.composite
def queued_first(draw: st.DrawFn) -> Scenario:
    """One node fed by 2-3 graph inputs over few timestamps (many ties), sent while paused."""
    n_ports = draw(st.integers(2, 3))
    policy = draw(st.sampled_from(POLICIES))
    labels = draw(st.lists(st.integers(0, n_ports - 1), min_size=n_ports, max_size=n_ports))
    groups: dict[int, list[int]] = {}
    for port, label in enumerate(labels):
        groups.setdefault(label, []).append(port)
    node = NodeDesc(
        index=0,
        inputs=[f"i{k}" for k in range(n_ports)],
        policy=policy,
        capacity=draw(st.integers(1, 4)),
        groups=list(groups.values()),
        executor=draw(st.sampled_from(EXECUTORS)),
        mod=0,
        rem=0,
    )
    ids = itertools.count(1)
    sent = {name: [(ts, next(ids)) for ts in sorted(draw(st.sets(st.integers(0, 8), max_size=8)))]
            for name in node.inputs}
    order = draw(st.permutations([name for name in node.inputs for _ in sent[name]]))
    return Scenario([node], sent, list(order), paused=True)


@pytest.mark.in_process(reason="PropProbe logs its calls in LOGS, a dict of this interpreter")
@given(scenario=queued_first())
def test_every_policy_is_exact_when_all_input_is_queued_first(scenario: Scenario) -> None:
    """Paused while sending: no claim sees a partial input, so even the arrival-dependent
    policies (immediate, several sync_set groups, fixed_size drops) have one right answer."""
    check_scenario(scenario)


# -- bounded pollers ---------------------------------------------------------------------------


class BoundedPollerMachine(RuleBasedStateMachine):
    """A bounded poller behind a forwarding node on the default (inline) executor.

    The model: ``queue`` is what the poller holds, ``held`` what a ``block`` poller keeps
    waiting upstream (lossless), ``dropped`` the counted overflow.
    """

    CHAIN: ClassVar[str] = """
nodes:
  - { name: f, kernel: PropForward, input_ports: [x], output_ports: [y] }
input_ports: [x]
output_ports: [y]
"""

    def __init__(self) -> None:
        super().__init__()
        self.graph: flowplex.Graph | None = None
        self.poller: flowplex.Poller | None = None
        self.ts = 0
        self.queue: list[int] = []
        self.held: list[int] = []
        self.dropped = 0
        self.capacity = 1
        self.overflow = "block"

    @initialize(
        setup=st.sampled_from(["block", "drop_oldest", "drop_newest", "latest"]).flatmap(
            lambda o: st.tuples(st.just(o), st.just(1) if o == "latest" else st.integers(1, 4))
        )
    )
    def build(self, setup: tuple[str, int]) -> None:
        self.overflow, self.capacity = setup
        self.graph = flowplex.Graph.from_yaml(self.CHAIN)
        self.poller = self.graph.add_poller("y", capacity=self.capacity, overflow=self.overflow)
        self.graph.start()

    def _model_deliver(self, value: int) -> None:
        if len(self.queue) < self.capacity:
            self.queue.append(value)
        elif self.overflow == "block":
            self.held.append(value)
        elif self.overflow == "drop_newest":
            self.dropped += 1
        else:  # drop_oldest, latest
            self.queue.pop(0)
            self.queue.append(value)
            self.dropped += 1

    @rule(n=st.integers(1, 6))
    def send(self, n: int) -> None:
        assert self.graph is not None
        for _ in range(n):
            value = self.ts * 7
            self.graph.send("x", value, ts=self.ts)
            self.ts += 1
            if self.held:
                self.held.append(value)  # behind the blocked flush: order is kept
            else:
                self._model_deliver(value)

    @precondition(lambda self: self.graph is not None)
    @rule()
    def read(self) -> None:
        assert self.poller is not None
        p = self.poller.try_next()
        if not self.queue:
            assert p is None
            return
        assert p is not None and p.as_int() == self.queue.pop(0)
        if self.held:  # reading made room: the blocked producer resumes
            self._model_deliver(self.held.pop(0))

    @invariant()
    def matches_model(self) -> None:
        if self.poller is None:
            return
        assert len(self.poller) == len(self.queue)
        assert self.poller.dropped == self.dropped

    def teardown(self) -> None:
        if self.graph is None:
            return
        g, poller = self.graph, self.poller
        assert poller is not None
        g.close_all_inputs()
        rest = []
        while self.queue or self.held:
            p = poller.next(timeout=10)
            assert p is not None
            rest.append(p.as_int())
            expected = self.queue.pop(0)
            if self.held:
                self._model_deliver(self.held.pop(0))
            assert rest[-1] == expected
        assert poller.next(timeout=10) is None
        g.wait_done(timeout=10)
        g.close()


@flowplex.kernel("PropForward")
class PropForward(flowplex.Kernel):
    def process(self, cc: flowplex.Context) -> None:
        cc.forward(0, 0)


@pytest.mark.on_caller(reason="the model delivers each send before the next rule runs")
def test_bounded_pollers_match_the_model() -> None:
    run_state_machine_as_test(BoundedPollerMachine)


# -- the global watermark ---------------------------------------------------------------------


class WatermarkMachine(RuleBasedStateMachine):
    """``max_queued_packets`` counts node input queues and poller queues (semantics 7.1).

    One node on a DelegatingExecutor: an idle node claims the first packet at once (pop at
    claim), so it is not queued; ``pump`` runs it, which fills the poller and claims the next.
    """

    def __init__(self) -> None:
        super().__init__()
        self.graph: flowplex.Graph | None = None
        self.poller: flowplex.Poller | None = None
        self.limit = 1
        self.ts = 0
        self.input_queue: list[int] = []
        self.claimed: int | None = None
        self.poller_queue: list[int] = []

    @initialize(limit=st.integers(1, 5))
    def build(self, limit: int) -> None:
        self.limit = limit
        self.graph = flowplex.Graph.from_yaml(f"""
max_queued_packets: {limit}
executors: [{{ name: host, type: DelegatingExecutor }}]
nodes:
  - {{ name: f, executor: host, kernel: PropForward, input_ports: [x], output_ports: [y] }}
input_ports: [x]
output_ports: [y]
""")
        self.poller = self.graph.add_poller("y")
        self.graph.start()

    @rule()
    def try_send(self) -> None:
        assert self.graph is not None
        full = len(self.input_queue) + len(self.poller_queue) >= self.limit
        accepted = self.graph.try_send("x", self.ts, ts=self.ts)
        assert accepted is not full
        if accepted:
            if self.claimed is None:
                self.claimed = self.ts
            else:
                self.input_queue.append(self.ts)
            self.ts += 1

    @rule()
    def pump(self) -> None:
        assert self.graph is not None
        ran = self.graph.pump_step()
        assert ran is (self.claimed is not None)
        if self.claimed is not None:
            self.poller_queue.append(self.claimed)
            self.claimed = self.input_queue.pop(0) if self.input_queue else None

    @rule()
    def read(self) -> None:
        assert self.poller is not None
        p = self.poller.try_next()
        if self.poller_queue:
            assert p is not None and p.as_int() == self.poller_queue.pop(0)
        else:
            assert p is None

    @invariant()
    def poller_matches(self) -> None:
        if self.poller is not None:
            assert len(self.poller) == len(self.poller_queue)

    def teardown(self) -> None:
        if self.graph is not None:
            self.graph.close()


@pytest.mark.executors("delegating", reason="the model pumps its one node step by step: it is pinned to `host`")
def test_the_watermark_matches_the_model() -> None:
    run_state_machine_as_test(WatermarkMachine)
