"""Graphs with nodes on a ``RayExecutor``: the outputs of inline, from real Ray actors."""

from __future__ import annotations

import pickle
import time
from typing import Any

import numpy as np
import pytest

import flowplex
from flowplex.errors import ConfigError, KernelError, UsageError
from flowplex.executors import Executor, TaskStats
from flowplex.executors._protocol import KernelHostExecutor
from flowplex.executors.ray import RayExecutor
from flowplex.packets._buffers import is_deferred

from .conftest import WAIT_S, ray_executors, ray_yaml, run

CHAIN = """
input_ports: [x]
output_ports: [y]
nodes:
  - { name: a, kernel: ScaleKernel, executor: cluster, options: { factor: 3 }, input_ports: [x], output_ports: [m] }
  - { name: b, kernel: RCount, executor: cluster, input_ports: [m], output_ports: [n] }
  - { name: c, kernel: FilterKernel, options: { threshold: 10 }, input_ports: [n], output_ports: [y] }
"""


def values_of(packets: list[flowplex.Packet]) -> list[tuple[int, object]]:
    return [(p.timestamp, p.payload) for p in packets]


def test_the_executor_is_a_kernel_host_that_connects_nothing_before_hosting() -> None:
    ex = RayExecutor("r")
    assert isinstance(ex, Executor) and isinstance(ex, KernelHostExecutor)
    assert (ex.kind, ex.threads, ex.runs_on_caller, ex.hosts_kernels) == ("ray", 1, False, True)
    assert ex.stats() == TaskStats("ray", 1, 0, 0, 0)
    assert ex.placement == {} and ex.batches == 0
    ex.shutdown()
    ex.shutdown()  # idempotent


@pytest.mark.parametrize(("kwargs", "pattern"), [
    ({"num_cpus": -1}, r"num_cpus must be a number >= 0, got -1"),
    ({"num_gpus": float("nan")}, r"num_gpus must be a number >= 0"),
    ({"max_batch": 0}, r"max_batch must be an integer >= 1, got 0"),
    ({"max_restarts": -2}, r"max_restarts must be an integer >= 0, got -2"),
    ({"memory": 1.5}, r"memory must be an integer >= 0"),
    ({"resources": {"": 1}}, r"resource names must be non-empty strings"),
    ({"resources": {"camera": -1}}, r"resources.camera must be a number >= 0"),
    ({"address": " "}, r"address must be a non-empty string or None"),
])
def test_bad_settings_are_refused_at_construction(kwargs: dict[str, Any], pattern: str) -> None:
    with pytest.raises(UsageError, match=pattern):
        RayExecutor("r", **kwargs)


def test_a_chain_gives_the_outputs_of_inline_and_keeps_kernel_state(on_ray: Any) -> None:
    values = list(range(300))
    inline = values_of(run(flowplex.Graph.from_yaml(CHAIN.replace("executor: cluster, ", "")), values))
    g = flowplex.Graph.from_yaml(ray_yaml(CHAIN))
    try:
        got = values_of(run(g, values))
        (ex,) = ray_executors(g)
        assert set(ex.placement) == {"a", "b"}
    finally:
        g.close()
    assert got == inline
    assert got[:3] == [(0, 1000), (1, 2003), (2, 3006)]  # 3x, counted in order by one instance


def test_calls_go_to_an_actor_in_batches(on_ray: Any) -> None:
    body = """
input_ports: [x]
output_ports: [y]
nodes:
  - { name: a, kernel: PassThroughKernel, executor: cluster, input_ports: [x], output_ports: [y] }
"""
    g = flowplex.Graph.from_yaml(ray_yaml(body, ", max_batch: 64, max_batch_delay_ms: 5"))
    try:
        got = run(g, list(range(2000)))
        (ex,) = ray_executors(g)
        batches = ex.batches
    finally:
        g.close()
    assert [p.payload for p in got] == list(range(2000))
    # open + at most one call per batch of up to 64 (the first goes alone: the actor was idle)
    assert 2000 / 64 <= batches < 2000 / 4, batches


def test_nodes_live_in_actors_of_their_own_and_replicas_in_several(on_ray: Any) -> None:
    body = """
input_ports: [x]
output_ports: [y, z]
nodes:
  - { name: a, kernel: RPid, executor: cluster, input_ports: [x], output_ports: [y] }
  - { name: b, kernel: RPid, executor: cluster, max_in_flight: 2, input_ports: [x], output_ports: [z] }
"""
    g = flowplex.Graph.from_yaml(ray_yaml(body, ", max_batch: 4"))
    z = g.add_poller("z")
    try:
        y = run(g, list(range(200)))
        pids_z = {p.payload for p in z}
        (ex,) = ray_executors(g)
        placement = ex.placement
    finally:
        g.close()
    assert len(y) == 200 and len({p.payload for p in y}) == 1
    assert [pid for pid, _, _ in placement["b"]] and len(placement["b"]) == 2
    assert pids_z == {pid for pid, _, _ in placement["b"]}  # both replicas took calls
    assert {p.payload for p in y} == {placement["a"][0][0]}
    assert placement["a"][0][0] not in pids_z


def test_a_source_on_ray_runs_to_its_end(on_ray: Any) -> None:
    body = """
output_ports: [y]
nodes:
  - { name: s, kernel: RSource, executor: cluster, options: { count: 7 }, output_ports: [y] }
"""
    g = flowplex.Graph.from_yaml(ray_yaml(body))
    try:
        out = g.add_poller("y")
        g.start()
        got = [p.payload for p in out]
        g.wait_done(timeout=WAIT_S)
    finally:
        g.close()
    assert got == list(range(7))


FRAMES = """
input_ports: [x]
output_ports: [y, flags, sums]
nodes:
  - { name: make, kernel: RFrame, executor: cluster, options: { rows: 200 }, input_ports: [x], output_ports: [f] }
  - { name: stamp, kernel: RStamp, executor: cluster, input_ports: [f], output_ports: [g, flags] }
  - { name: pass, kernel: PassThroughKernel, executor: cluster, input_ports: [g], output_ports: [y] }
  - { name: sum, kernel: RSum, input_ports: [g], output_ports: [sums] }
"""


def test_frames_go_actor_to_actor_by_reference_and_the_host_reads_them_on_demand(on_ray: Any) -> None:
    g = flowplex.Graph.from_yaml(ray_yaml(FRAMES, ", max_batch: 4"))
    flags = g.add_poller("flags")
    sums = g.add_poller("sums")
    try:
        got = run(g, list(range(6)))
        unread = [is_deferred(p._value) and p._value.array is None for p in got]
        arrays = [p.as_numpy() for p in got]
        flag_values = [p.payload for p in flags]
        sum_values = [p.payload for p in sums]
    finally:
        g.close()
    assert unread == [True] * 6  # the host held references only, until it read them
    for x, arr in enumerate(arrays):
        expected = np.full((200, 1024), x % 251, dtype=np.uint8)
        expected[0, 0] = 255
        assert arr.shape == (200, 1024) and not arr.flags.writeable
        np.testing.assert_array_equal(arr, expected)
    assert flag_values == [True] * 6  # an actor reads its input frame read-only, from the store
    assert sum_values == [int(a.sum()) for a in arrays]  # a host kernel reads the same data


def test_a_frame_from_the_host_crosses_once_and_comes_back_intact(on_ray: Any) -> None:
    body = """
input_ports: [x]
output_ports: [y]
nodes:
  - { name: a, kernel: PassThroughKernel, executor: cluster, input_ports: [x], output_ports: [m] }
  - { name: b, kernel: PassThroughKernel, executor: cluster, input_ports: [m], output_ports: [y] }
"""
    frames = [np.arange(300 * 1024, dtype=np.int32).reshape(300, 1024) + i for i in range(4)]
    g = flowplex.Graph.from_yaml(ray_yaml(body))
    try:
        got = run(g, frames)
    finally:
        g.close()
    for frame, packet in zip(frames, got, strict=True):
        np.testing.assert_array_equal(packet.as_numpy(), frame)  # readable after close too


def test_a_kernel_error_is_the_nodes_error_and_skip_counts_it(on_ray: Any) -> None:
    body = """
input_ports: [x]
output_ports: [y]
nodes:
  - { name: f, kernel: RFailOn, executor: cluster, options: { bad: 3 }, on_error: %s, input_ports: [x],
      output_ports: [y] }
"""
    g = flowplex.Graph.from_yaml(ray_yaml(body % "skip"))
    try:
        got = run(g, list(range(8)))
        errors = g.stats().node("f").errors
    finally:
        g.close()
    assert [p.payload for p in got] == [0, 1, 2, 4, 5, 6, 7]
    assert errors == 1
    g = flowplex.Graph.from_yaml(ray_yaml(body % "abort"))
    try:
        with pytest.raises(KernelError, match=r"\[f\] ValueError: bad value 3") as info:
            run(g, list(range(8)))
    finally:
        g.close()
    assert (info.value.node, info.value.ts) == ("f", 3)


def test_a_dead_actor_is_the_nodes_kernel_error(on_ray: Any) -> None:
    body = """
input_ports: [x]
output_ports: [y]
nodes:
  - { name: d, kernel: RDieOn, executor: cluster, options: { die: 5 }, input_ports: [x], output_ports: [y] }
"""
    g = flowplex.Graph.from_yaml(ray_yaml(body))
    started = time.monotonic()
    try:
        with pytest.raises(KernelError, match=r"\[d\] BrokenError: the Ray actor of node `d` \(pid \d+ on .*\), "
                           r"executor `cluster`, died: ActorDiedError") as info:
            run(g, list(range(20)))
    finally:
        g.close()
    assert time.monotonic() - started < WAIT_S
    assert info.value.node == "d"


def test_with_max_restarts_the_actor_comes_back_reopened_and_the_lost_calls_are_counted(on_ray: Any) -> None:
    body = """
input_ports: [x]
output_ports: [y, o]
nodes:
  - { name: d, kernel: RDieOn, executor: cluster, options: { die: 5 }, on_error: skip, input_ports: [x],
      output_ports: [y] }
  - { name: o, kernel: ROpens, executor: cluster, input_ports: [y], output_ports: [o] }
"""
    g = flowplex.Graph.from_yaml(ray_yaml(body, ", max_restarts: 1, max_batch: 1"))
    try:
        got = run(g, list(range(12)))
        errors = g.stats().node("d").errors
    finally:
        g.close()
    values = [p.payload for p in got]
    assert 5 not in values and values[:5] == [0, 1, 2, 3, 4]
    assert set(values[5:]) <= set(range(6, 12)) and len(values) + errors == 12
    assert values[-1] == 11  # the restarted actor serves the later calls


def test_a_resource_no_machine_offers_fails_start_naming_the_node(on_ray: Any) -> None:
    body = """
input_ports: [x]
output_ports: [y]
nodes:
  - { name: cam, kernel: PassThroughKernel, executor: cluster, input_ports: [x], output_ports: [y] }
"""
    g = flowplex.Graph.from_yaml(ray_yaml(body, ", resources: { camera: 1 }"))
    try:
        with pytest.raises(ConfigError, match=r"node `cam`.*camera: 1 per actor.*ray start --resources"):
            g.start()
    finally:
        g.close()


def test_close_kills_the_actors_and_leaves_the_instance_running(on_ray: Any) -> None:
    body = """
input_ports: [x]
output_ports: [y]
nodes:
  - { name: a, kernel: PassThroughKernel, executor: cluster, input_ports: [x], output_ports: [y] }
"""
    g = flowplex.Graph.from_yaml(ray_yaml(body))
    run(g, [1, 2])
    (ex,) = ray_executors(g)
    (actor,) = ex.actors["a"]
    g.close()
    deadline = time.monotonic() + WAIT_S
    with pytest.raises(on_ray.exceptions.RayActorError):  # ray.kill is asynchronous: soon, not at once
        while time.monotonic() < deadline:
            on_ray.get(actor.hosted.remote(), timeout=WAIT_S)
            time.sleep(0.05)
    assert on_ray.is_initialized()


def test_a_graph_restarts_on_the_same_actors_after_reset(on_ray: Any) -> None:
    body = """
input_ports: [x]
output_ports: [y]
nodes:
  - { name: b, kernel: RCount, executor: cluster, input_ports: [x], output_ports: [y] }
"""
    g = flowplex.Graph.from_yaml(ray_yaml(body))
    try:
        first = [p.payload for p in run(g, [1, 2])]
        (ex,) = ray_executors(g)
        placement = ex.placement
        g.reset()
        second = [p.payload for p in run(g, [1, 2])]
        assert ex.placement == placement
    finally:
        g.close()
    assert first == [1001, 2002]
    assert second == [3001, 4002]  # the same instance: its state kept, as on the other executors


SEMANTICS = {
    "a back edge (a running sum through a feedback register)": ("""
input_ports: [x]
output_ports: [y, z]
nodes:
  - { name: acc, kernel: FeedbackAddKernel, executor: cluster, input_ports: [x, y], output_ports: [y], back_edges: [y] }
  - { name: dbl, kernel: ScaleKernel, executor: cluster, options: { factor: 2 }, input_ports: [y], output_ports: [z] }
""", [1, 5, -2, 7, 0, 3]),
    "a sync join of a stream and its filtered self (bounds fill the gaps)": ("""
input_ports: [x]
output_ports: [j, t]
nodes:
  - { name: f, kernel: FilterKernel, executor: cluster, options: { threshold: 2 }, input_ports: [x],
      output_ports: [h] }
  - { name: j, kernel: ZipKernel, executor: cluster, input_ports: [x, h], output_ports: [j] }
  - { name: t, kernel: SumKernel, executor: cluster, input_ports: [j], output_ports: [t] }
""", [3, 1, 4, 1, 5, 9, 2, 6]),
    "a batch policy": ("""
input_ports: [x]
output_ports: [b]
nodes:
  - { name: b, kernel: BatchSumKernel, executor: cluster, input_policy: { type: batch, capacity: 3 },
      input_ports: [x], output_ports: [b] }
""", list(range(10))),
}


@pytest.mark.parametrize("case", list(SEMANTICS))
def test_engine_semantics_hold_across_the_seam(on_ray: Any, case: str) -> None:
    body, values = SEMANTICS[case]
    inline_graph = flowplex.Graph.from_yaml(body.replace("executor: cluster, ", ""))
    outputs = inline_graph.plan.graph_outputs
    polled = {port: inline_graph.add_poller(port) for port in outputs[1:]}
    inline = {outputs[0]: values_of(run(inline_graph, values))}
    inline.update({port: values_of(list(p)) for port, p in polled.items()})
    g = flowplex.Graph.from_yaml(ray_yaml(body, ", max_batch: 4"))
    try:
        polled = {port: g.add_poller(port) for port in outputs[1:]}
        got = {outputs[0]: values_of(run(g, values))}
        got.update({port: values_of(list(p)) for port, p in polled.items()})
    finally:
        g.close()
    assert got == inline
    assert all(got.values())


def test_a_host_that_never_reads_gets_the_deadlock_error_not_a_hang(on_ray: Any) -> None:
    body = """
max_queued_packets: 50
input_ports: [x]
output_ports: [y]
nodes:
  - { name: a, kernel: PassThroughKernel, executor: cluster, input_ports: [x], output_ports: [y] }
"""
    g = flowplex.Graph.from_yaml(ray_yaml(body, ", max_batch: 8"))
    g.add_poller("y")
    try:
        g.start()
        with pytest.raises(flowplex.DeadlockError, match=r"held by the poller\(s\) on output `y`"):
            for ts in range(500):
                g.send("x", ts, ts=ts, timeout=WAIT_S)
    finally:
        g.close()


def test_an_abort_drops_the_calls_not_sent_yet_and_a_frame_pickles_with_its_data(on_ray: Any) -> None:
    """Claims run ahead on Ray, but once the graph failed the calls still on the host are
    dropped: of 100 calls of 20 ms, failing at the 6th, only those already in the actor ran
    (batches hold about 50 ms of kernel time). And a frame packet pickled outside flowplex's
    own messages carries its data, not Ray's reference (which dies with the graph)."""
    body = """
input_ports: [x]
output_ports: [y]
nodes:
  - { name: f, kernel: RSlowFailOn, executor: cluster, options: { bad: 5 }, input_ports: [x], output_ports: [y] }
"""
    g = flowplex.Graph.from_yaml(ray_yaml(body))
    try:
        with pytest.raises(KernelError, match=r"\[f\] ValueError: bad value 5"):
            run(g, list(range(100)))
        ran = g.counter_value("ran")
    finally:
        g.close()
    assert 6 <= ran < 40, ran
    frames = FRAMES.replace("executor: cluster, ", "", 1)  # `make` inline: the others on Ray
    g = flowplex.Graph.from_yaml(ray_yaml(frames, ", max_batch: 4"))
    try:
        got = run(g, [7])
    finally:
        g.close()
    restored = pickle.loads(pickle.dumps(got[0]))
    assert restored.as_numpy()[0, 1] == 7 and restored.as_numpy()[0, 0] == 255
