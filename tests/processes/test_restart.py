"""``restart: on_failure``: a worker that dies is replaced, its nodes hosted and opened again."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest

import flowplex
from flowplex.errors import ConfigError, UsageError
from flowplex.executors.processes import ProcessPoolExecutor, _restarts

from .conftest import WAIT_S, pool_yaml

RESTART = ", restart: on_failure"


def killer(kill: int, extra: str = "", options: str = "") -> str:
    return f"""
nodes:
  - {{ name: k, kernel: PKillOn, input_ports: [x], output_ports: [y], executor: pool, on_error: skip{extra},
      options: {{ kill: {kill}{options} }} }}
input_ports: [x]
output_ports: [y]
"""


def run(g: flowplex.Graph, n: int, close_error: str = "") -> tuple[list[tuple[int, int]], int, list[int]]:
    """Send 0..n-1; the ``(x, pid)`` that came out, the errors of node k, and the pool's pids at
    the start and the end. ``close_error``: the graph fails with it (the close of a node that
    cannot run fails, whatever its ``on_error``)."""
    (pool,) = [ex for ex in g._engine.executors if isinstance(ex, ProcessPoolExecutor)]
    out = g.add_poller("y")
    g.start()
    started = list(pool.pids)
    for ts in range(n):
        g.send("x", ts, ts=ts)
    g.close_all_inputs()
    got: list[tuple[int, int]] = []
    if close_error:
        with pytest.raises(flowplex.KernelError) as info:
            got.extend(divmod(p.as_int() or 0, 1_000_000) for p in out)
        assert re.fullmatch(close_error, str(info.value)), str(info.value)
        with pytest.raises(flowplex.KernelError):
            g.wait_done(timeout=WAIT_S)
    else:
        got.extend(divmod(p.as_int() or 0, 1_000_000) for p in out)
        g.wait_done(timeout=WAIT_S)
    errors = next(s.errors for s in g.node_stats() if s.node_name == "k")
    return got, errors, started + pool.pids


def messages(caplog: pytest.LogCaptureFixture, part: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if part in r.getMessage()]


def test_a_replica_whose_worker_is_killed_is_restarted_and_only_its_packet_is_lost(
        caplog: pytest.LogCaptureFixture, no_leftover_workers: None) -> None:
    with caplog.at_level(logging.INFO, logger="flowplex"), \
            flowplex.Graph.from_yaml(pool_yaml(killer(2, ", max_in_flight: 2"), 2, pool=RESTART)) as g:
        got, errors, pids = run(g, 8)
    before, after = pids[:2], pids[2:]
    (killed,) = set(before) - set(after)
    (fresh,) = set(after) - set(before)
    assert [x for x, _ in got] == [0, 1, 3, 4, 5, 6, 7]  # in order, the killed one skipped
    assert errors == 1  # counted as on_error says
    assert {pid for x, pid in got if x < 2} == set(before)  # two replicas...
    assert {pid for x, pid in got if x > 2} <= set(after) and fresh in {pid for _, pid in got}  # ...one replaced
    (restarted,) = messages(caplog, "process.worker.restarted")
    assert f"pid={fresh} old_pid={killed} how='was killed by signal 9 (SIGKILL)' nodes=['k'] restart=1" in restarted
    assert messages(caplog, "process.worker.reopened") == [f"process.worker.reopened executor='pool' pid={fresh} "
                                                           "node='k'"]
    assert messages(caplog, "skipping a failed packet") == [
        f"node `k`: skipping a failed packet (on_error=skip), 1 so far: BrokenError: worker process {killed} of "
        f"executor `pool` was killed by signal 9 (SIGKILL) while running node `k` (restarted as worker process "
        f"{fresh})"]


def test_without_restart_every_later_packet_fails_naming_the_node_and_the_signal(
        caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="flowplex"), flowplex.Graph.from_yaml(pool_yaml(killer(1), 1)) as g:
        got, errors, pids = run(g, 4, r"kernel failed: \[k\] BrokenError: worker process \d+ of executor `pool` was "
                                      r"killed by signal 9 \(SIGKILL\); node `k` cannot run on it")
    assert [x for x, _ in got] == [0]
    assert errors == 3
    pid = pids[0]
    assert pids == [pid, pid]  # not replaced
    assert messages(caplog, "skipping a failed packet") == [
        f"node `k`: skipping a failed packet (on_error=skip), {n} so far: BrokenError: worker process {pid} of "
        f"executor `pool` was killed by signal 9 (SIGKILL){how}" for n, how in [
            (1, " while running node `k`"), (2, "; node `k` cannot run on it")]]
    assert not messages(caplog, "restart")


def test_restarts_are_bounded_and_the_error_says_how_many(caplog: pytest.LogCaptureFixture,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_restarts, "RESTARTS_MAX", 1)  # a kernel that kills every worker it runs in
    with caplog.at_level(logging.WARNING, logger="flowplex"), \
            flowplex.Graph.from_yaml(pool_yaml(killer(-1), 1, pool=RESTART)) as g:
        got, errors, pids = run(g, 4, r"kernel failed: \[k\] BrokenError: worker process \d+ .*; node `k` cannot run "
                                      r"on it \(not restarted: it was restarted 1 time within 60 s; no more restarts\)")
    assert got == []
    assert errors == 4  # the graph still finishes: on_error skip
    first, second = pids
    assert first != second
    assert len(messages(caplog, "process.worker.restarted")) == 1
    (given_up,) = messages(caplog, "process.worker.restart.given_up")
    assert f"pid={second} how='was killed by signal 9 (SIGKILL)' nodes=['k']" in given_up
    why = "(not restarted: it was restarted 1 time within 60 s; no more restarts)"
    assert messages(caplog, "skipping a failed packet")[1:] == [
        f"node `k`: skipping a failed packet (on_error=skip), {n} so far: BrokenError: worker process {second} of "
        f"executor `pool` was killed by signal 9 (SIGKILL){how} {why}" for n, how in [
            (2, " while running node `k`"), (4, "; node `k` cannot run on it")]]


def test_a_kernel_that_cannot_be_opened_again_fails_its_later_packets(tmp_path: Path,
                                                                     caplog: pytest.LogCaptureFixture) -> None:
    mark = tmp_path / "locked"
    body = killer(1, options=f', mark: "{mark}"')
    with caplog.at_level(logging.WARNING, logger="flowplex"), \
            flowplex.Graph.from_yaml(pool_yaml(body, 1, pool=RESTART)) as g:
        got, errors, _ = run(g, 4, r"kernel failed: \[k\] BrokenError: node `k` could not be opened again .*")
    assert [x for x, _ in got] == [0]
    fresh = int(re.findall(r"pid=(\d+)", messages(caplog, "process.worker.restarted")[0])[0])
    why = (f"node `k` could not be opened again in worker process {fresh} of executor `pool` after a restart: "
           "RuntimeError: the device is still locked")
    assert errors == 3  # packets 1 (killed), 2 and 3 (the kernel is not open)
    assert messages(caplog, "skipping a failed packet")[1] == (
        f"node `k`: skipping a failed packet (on_error=skip), 2 so far: BrokenError: {why}")
    assert len(messages(caplog, "process.worker.reopen.failed")) == 1


def test_restart_in_yaml_and_its_validation() -> None:
    with flowplex.Graph.from_yaml(pool_yaml(killer(0), 1, pool=RESTART)) as g:
        (pool,) = [ex for ex in g._engine.executors if isinstance(ex, ProcessPoolExecutor)]
    assert pool.restart == "on_failure"
    assert ProcessPoolExecutor("p", 1).restart == "never"
    with pytest.raises(UsageError, match=r"^ProcessPoolExecutor `p`: unknown restart 'always'; expected never or "
                                         r"on_failure$"):
        ProcessPoolExecutor("p", 1, restart="always")
    for executor, pattern in [
        ("{ name: t, num_threads: 2, restart: on_failure }",
         r"^executors\[0\]\.restart: `restart` applies to ProcessPoolExecutor only \(this executor is a "
         r"ThreadPoolExecutor; drop the field or change its `type`\)$"),
        ("{ name: p, type: ProcessPoolExecutor, restart: always }",
         r"^executors\[0\]\.restart: unknown value `always` \(expected 'never' or 'on_failure'\)$"),
    ]:
        with pytest.raises(ConfigError, match=pattern):
            flowplex.Graph.from_yaml(f"executors: [{executor}]\n" + killer(0).replace("executor: pool", "executor: "
                                                                                     + executor.split(",")[0][8:]))
