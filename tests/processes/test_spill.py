"""One ``process`` call on a process pool delivers its output in slices, held by the budget.

A worker's kernel that stages ``SPILL_SLICE`` packets on a port sends them ahead as a partial
outcome and waits for the host's go-ahead; the host delivers them as ``Spills.spill`` does
for an in-process call. Before, the worker shipped one call's whole output in one outcome.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest

import flowplex
from flowplex.errors import BrokenError, KernelError
from flowplex.executors._invocation import Invocation, NodeRecipe, Outcome
from flowplex.executors.processes import ProcessPoolExecutor
from flowplex.kernels import kernel_class
from flowplex.kernels._context import PHASE_PROCESS
from flowplex.spec import NodeSpec, PortSpec

from .conftest import WAIT_S, alive, pool_yaml

LIMIT_PACKETS = 4096  # the default budget (``limits.max_queued_packets``)
SLICE = 1024  # flowplex.kernels._context.SPILL_SLICE


def _flood_graph(executor: str, count: int, *, frames: bool = False, replicas: int = 1) -> str:
    body = f"""
nodes:
  - {{ name: src, kernel: PFlood, input_ports: [x], output_ports: [y, s], executor: {executor},
      max_in_flight: {replicas}, options: {{ count: {count}, every: 5, frames: {str(frames).lower()} }} }}
input_ports: [x]
output_ports: [y, s]
"""
    return pool_yaml(body, num_processes=replicas)


def _run_flood(executor: str, count: int, calls: int, frames: bool = False,
               replicas: int = 1) -> tuple[list[tuple[int, object]], list[tuple[int, object]], int]:
    """Both outputs of ``calls`` flood calls, each read by a thread as it comes (the budget holds
    the calls), and the peak of counted packets seen meanwhile."""
    got: dict[str, list[tuple[int, object]]] = {"y": [], "s": []}
    peak = 0
    with flowplex.Graph.from_yaml(_flood_graph(executor, count, frames=frames, replicas=replicas)) as g:
        pollers = {port: g.add_poller(port) for port in got}
        reading = threading.Event()

        def read(port: str) -> None:
            for p in pollers[port]:
                got[port].append((p.timestamp, int(p.as_numpy()[0]) if port == "s" and frames else p.payload))

        def sample() -> None:
            nonlocal peak
            while reading.is_set():
                peak = max(peak, g.stats().counted)
                time.sleep(0.001)

        readers = [threading.Thread(target=read, args=(port,)) for port in got]
        sampler = threading.Thread(target=sample)
        g.start()
        reading.set()
        for thread in [*readers, sampler]:
            thread.start()
        try:
            for ts in range(calls):
                g.send("x", 0, ts=ts)
            g.close_all_inputs()
            for reader in readers:
                # Generous: on a loaded machine a reader may trail the graph by seconds; one still
                # reading after this fails here, never as a short list below.
                reader.join(6 * WAIT_S)
            assert not any(reader.is_alive() for reader in readers), "a poller reader did not finish"
            g.wait_done(timeout=WAIT_S)
        finally:
            reading.clear()
            sampler.join()
    return got["y"], got["s"], peak


@pytest.mark.parametrize("frames", [False, True], ids=["str", "frames"])
def test_a_call_delivered_in_slices_gives_the_same_outputs_as_inline(frames: bool) -> None:
    # 3 calls of 8000 packets on one port, 1600 on the other (strs, or 64 KiB arena frames):
    # several partial outcomes per call, each port in emit order, calls in claim order.
    *pooled, peak = _run_flood("pool", 8000, 3, frames)
    inline = list(_run_flood("default", 8000, 3, frames)[:2])
    assert pooled == inline
    assert [ts for ts, _ in pooled[0]] == list(range(24000))
    assert len(pooled[1]) == 4800
    assert peak <= LIMIT_PACKETS + 2 * SLICE, f"not delivered in slices: counted packets peaked at {peak}"


def test_calls_that_may_not_be_delivered_in_slices_keep_them_for_their_outcome() -> None:
    # Two replicas: outputs are flushed in claim order, so the host keeps each call's slices
    # staged (the worker's next slice comes at twice the count) and delivers them at the end.
    pooled = list(_run_flood("pool", 8000, 4, replicas=2)[:2])
    assert pooled == list(_run_flood("default", 8000, 4, replicas=2)[:2])
    assert [ts for ts, _ in pooled[0]] == list(range(32000))


def test_an_invocation_without_a_spill_handler_gets_its_whole_output(no_leftover_workers: None) -> None:
    # ``invoke`` without ``spill`` (a caller that is not the engine): the pool keeps the slices
    # the worker sent ahead and completes the call with all of its output, in order.
    pool = ProcessPoolExecutor("p", 1)
    spec = NodeSpec("f", "PFlood", "nodes[0]", (PortSpec("x"),), (PortSpec("y"),), options={"count": 5000})
    try:
        pool.host([NodeRecipe(0, spec, kernel_class("PFlood"), False, {})])
        pool.start()
        done = threading.Event()
        got: list[Outcome] = []

        def complete(outcome: Outcome) -> None:
            got.append(outcome)
            done.set()

        pool.invoke(Invocation(0, 0, PHASE_PROCESS, 1, [flowplex.Packet.from_int(0, 1)]), complete)
        assert done.wait(WAIT_S)
    finally:
        pool.shutdown()
    (outcome,) = got
    assert outcome.error == "" and not outcome.partial
    assert [(p.timestamp, p.payload) for p in outcome.outputs[0]] == [(5000 + i, 5000 + i) for i in range(5000)]


def test_a_call_read_while_it_runs_stays_within_the_budget() -> None:
    # 60 k packets (and 12 k on the other port) in one call, read as they come: the queues
    # never hold more than the budget plus a slice or two (before: the whole call at once).
    count = 60_000
    values, strs, peak = _run_flood("pool", count, 1)
    assert values == [(i, i) for i in range(count)]
    assert strs == [(i, f"s{i}") for i in range(0, count, 5)]
    assert 0 < peak <= LIMIT_PACKETS + 2 * SLICE, f"counted packets peaked at {peak}"


def _held_graph(pid_file: Path) -> str:
    # A call of a million packets into a slow consumer on a thread: the budget fills, and the
    # host holds the worker at its go-ahead while the consumer drains.
    return f"""executors: [{{ name: pool, type: ProcessPoolExecutor, num_processes: 1 }}, {{ name: t, num_threads: 1 }}]
nodes:
  - {{ name: src, kernel: PFlood, input_ports: [x], output_ports: [y], executor: pool,
      options: {{ count: 1000000, pid_file: "{pid_file}" }} }}
  - {{ name: slow, kernel: PSlow, input_ports: [y], executor: t, options: {{ sleep_s: 0.0002 }} }}
input_ports: [x]
"""


def _until_held(g: flowplex.Graph) -> None:
    """Until the budget is full while ``src`` still runs: the worker waits for its go-ahead."""
    deadline = time.monotonic() + WAIT_S
    while g.stats().counted < LIMIT_PACKETS - SLICE:
        assert time.monotonic() < deadline, "the call's output never reached the graph while it ran"
        time.sleep(0.005)
    (src,) = (n for n in g.node_stats() if n.node_name == "src")
    assert src.in_flight == 1 and src.processed == 0, f"the call was not held: {src}"


def test_a_worker_killed_while_its_call_is_held_fails_the_graph_naming_the_node(tmp_path: Path,
                                                                                no_leftover_workers: None) -> None:
    pid_file = tmp_path / "pid"
    with flowplex.Graph.from_yaml(_held_graph(pid_file)) as g:
        g.start()
        pid = int(pid_file.read_text())
        g.send("x", 0, ts=0)
        _until_held(g)
        killed = time.monotonic()
        os.kill(pid, signal.SIGKILL)
        with pytest.raises(KernelError) as info:
            g.wait_done(timeout=WAIT_S)
        took = time.monotonic() - killed
    assert took < 5.0
    err = info.value
    assert err.node == "src"
    assert str(err) == (f"kernel failed: [src] BrokenError: worker process {pid} of executor `pool` was killed by "
                        "signal 9 (SIGKILL) while running node `src`")
    assert isinstance(err.__cause__, BrokenError)
    assert not alive(pid)


@pytest.mark.parametrize("how", ["close", "cancel"])
def test_close_or_cancel_while_a_call_is_held_ends_promptly(how: str, tmp_path: Path,
                                                            no_leftover_workers: None) -> None:
    g = flowplex.Graph.from_yaml(_held_graph(tmp_path / "pid"))
    g.start()
    pid = int((tmp_path / "pid").read_text())
    g.send("x", 0, ts=0)
    _until_held(g)
    started = time.monotonic()
    if how == "cancel":
        g.cancel()
    g.close()
    assert time.monotonic() - started < 8.0
    assert not alive(pid)
