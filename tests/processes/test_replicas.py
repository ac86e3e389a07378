"""``max_in_flight: N`` on a process pool: N replicas, each its own instance on its own worker."""

from __future__ import annotations

import logging
import os

import pytest

import flowplex
from flowplex._log import LogLevel
from flowplex.errors import BrokenError
from flowplex.executors._invocation import NodeRecipe, Outcome
from flowplex.executors.hosted._replicas import Placement, Replicas, combine
from flowplex.executors.processes import ProcessPoolExecutor
from flowplex.spec import NodeSpec, PortSpec

from .conftest import WAIT_S, pool_yaml
from .kernels import PDouble

REPLICAS = """
nodes:
  - { name: r, kernel: PReplica, input_ports: [x], output_ports: [y], executor: pool, max_in_flight: 2,
      options: { slow_s: 0.2, fast_s: 0.01 } }
  - { name: c, kernel: PCount, input_ports: [x], output_ports: [z], executor: pool }
input_ports: [x]
output_ports: [y, z]
"""


def test_a_node_with_max_in_flight_2_runs_on_two_workers_with_outputs_in_claim_order(
        caplog: pytest.LogCaptureFixture, no_leftover_workers: None) -> None:
    n = 6
    with caplog.at_level(logging.WARNING, logger="flowplex"), flowplex.Graph.from_yaml(pool_yaml(REPLICAS)) as g:
        y, z = g.add_poller("y"), g.add_poller("z")
        g.start()
        (pool,) = [ex for ex in g._engine.executors if isinstance(ex, ProcessPoolExecutor)]
        for ts in range(n):
            g.send("x", ts, ts=ts)
        g.close_all_inputs()
        rows = [p.as_numpy().tolist() for p in y]
        counts = [divmod(p.as_int() or 0, 1_000_000) for p in z]
        g.wait_done(timeout=WAIT_S)
        pids = pool.pids
        counters = {name: g.counter_value(name) for name in ("opened", "closed")}
    *processed, closed = rows
    assert [x for x, *_ in processed] == list(range(n))  # claim order, though odd inputs finish first
    by_pid: dict[int, list[int]] = {}
    for _, pid, seen, _, _ in processed:
        by_pid.setdefault(pid, []).append(seen)
    assert sorted(by_pid) == sorted(pids) and len(pids) == 2 and os.getpid() not in pids  # a replica per worker
    assert all(seen == list(range(1, len(seen) + 1)) for seen in by_pid.values())  # each instance its own state
    spans = {x: (pid, start, end) for x, pid, _, start, end in processed}
    overlapping = [(a, b) for a in range(n) for b in range(a + 1, n)
                   if spans[a][0] != spans[b][0] and spans[a][1] < spans[b][2] and spans[b][1] < spans[a][2]]
    assert overlapping, spans  # two workers ran r at the same time
    assert counters == {"opened": 2, "closed": 2}  # open and close ran on both instances
    assert closed[0] == -1 and closed[1] == pids[0]  # the close output of replica 0 only...
    assert closed[2] == len(by_pid[pids[0]])
    messages = [r.getMessage() for r in caplog.records]
    assert "[r] close ran on 2 replicas: kept the output of replica 0, dropped 1 packet(s) the others emitted" \
        in messages  # ...and the other's, dropped, is said
    assert [seen for seen, _ in counts] == list(range(1, n + 1))  # c, max_in_flight 1: one instance
    assert len({pid for _, pid in counts}) == 1


def recipe(index: int, max_in_flight: int = 1, source: bool = False) -> NodeRecipe:
    spec = NodeSpec(f"n{index}", "PDouble", f"nodes[{index}]", () if source else (PortSpec("x"),),
                    (PortSpec("y"),), max_in_flight=max_in_flight)
    return NodeRecipe(index, spec, PDouble, False, {})


def test_placement_spreads_replicas_over_the_least_loaded_workers() -> None:
    assert Placement(3).place([recipe(i) for i in range(4)]) == {0: (0,), 1: (1,), 2: (2,), 3: (0,)}  # round robin
    placement = Placement(3)
    nodes = [recipe(0, 2), recipe(1), recipe(2, 3, source=True), recipe(3, 5)]
    placed = placement.place(nodes)
    assert placed == {0: (0, 1), 1: (2,), 2: (0,), 3: (1, 2, 0)}  # a source keeps one; at most one per worker
    assert placement.place(nodes) == placed  # kept across hosts
    again = placement.place([*nodes[:2], recipe(4, 2)])
    assert again[0] == (0, 1) and again[1] == (2,) and again[4] == (1, 2)  # loads 1, 1, 1: in turn after 3


def test_each_call_goes_to_the_least_busy_replica_ties_in_turn() -> None:
    replicas = Replicas((4, 5, 6))
    assert [replicas.pick() for _ in range(3)] == [0, 1, 2]
    replicas.done(1)
    assert replicas.pick() == 1
    replicas.done(0)
    replicas.done(2)
    assert replicas.pick() == 2 and replicas.pick() == 0
    assert replicas.busy == [1, 1, 1]


def outcome(outputs: list[int], counter: int, error: str = "", started: int = 10, duration: int = 5) -> Outcome:
    return Outcome(7, -1, [[flowplex.Packet.from_int(v, 0) for v in outputs]], counters=[("c", counter)],
                   error=error, exception=BrokenError(error) if error else None, started_ns=started,
                   duration_ns=duration)


def test_open_and_close_outcomes_combine_into_one() -> None:
    ok = combine([outcome([1], 1), outcome([2, 3], 2, started=12, duration=10)], "[n] close")
    assert [[p.as_int() for p in port] for port in ok.outputs] == [[1]]
    assert ok.counters == [("c", 1), ("c", 2)]
    assert ok.logs == [(int(LogLevel.WARN), "[n] close ran on 2 replicas: kept the output of replica 0, "
                                           "dropped 2 packet(s) the others emitted")]
    assert (ok.error, ok.started_ns, ok.duration_ns) == ("", 10, 12)
    failed = combine([outcome([1], 1), outcome([2], 2, "BrokenError: b"), outcome([], 3, "BrokenError: c")],
                     "[n] open")
    assert (failed.error, failed.outputs, failed.logs) == ("BrokenError: b", [[]], [])
    assert failed.counters == [("c", 1), ("c", 2), ("c", 3)]
    single = outcome([1], 1)
    assert combine([single], "[n] open") is single


def test_replicas_on_a_pool_with_more_workers_than_max_in_flight_use_max_in_flight_workers() -> None:
    pool = ProcessPoolExecutor("p", 3)
    placed = pool._placement.place([recipe(0, 2)])
    assert placed == {0: (0, 1)}  # placement only: no worker starts
    assert pool.pids == []
