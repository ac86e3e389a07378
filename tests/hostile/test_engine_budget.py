"""The graph's budget counts every payload kind, and no single ``process`` call can outgrow it.

Before: only buffer (numpy) payloads counted toward the default 64 MiB, so a source emitting
1 MiB ``bytes`` or ``str`` packets into a slow consumer grew to gigabytes (``counted_bytes``
stayed 0); and the packets one ``process`` call emitted were all staged before any was
delivered, so one call emitting millions of packets held them all (1.1-1.3 GB for 10 M), in
the host's process or, on a process pool, in a worker and then in one outcome.
Each case runs in its own process under a memory cap and a timeout.
"""

from __future__ import annotations

import json
import os
import sys

import pytest

from .conftest import run_limited

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MIB = 1 << 20
DEFAULT_LIMIT_BYTES = 64 * MIB
PER_CALL_BYTES = 8 * MIB


def _drive(case: str, executor: str, arg: str, *, mem_mb: int, timeout_s: float) -> dict[str, float]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.path.join(ROOT, "src"),
                                                        os.environ.get("PYTHONPATH", "")]))
    done = run_limited([sys.executable, "-m", "tests.hostile._budget_driver", case, executor, arg],
                       mem_mb=mem_mb, timeout_s=timeout_s, stdout_path=None, env=env)
    assert not done.hung, f"{case} {executor} {arg} hung: {done.stderr[-2000:]}"
    assert done.rc == 0, f"{case} {executor} {arg} failed (rc {done.rc}): {done.stderr[-2000:]}"
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


@pytest.mark.parametrize("executor", ["inline", "threads", "processes"])
@pytest.mark.parametrize("kind", ["bytes", "str", "numpy"])
def test_every_payload_kind_counts_toward_the_byte_budget(kind: str, executor: str) -> None:
    # A source emitting 8 x 1 MiB per call for a second or more: unbounded, gigabytes (the cap stops it).
    r = _drive("burst", executor, kind, mem_mb=1536, timeout_s=40)
    assert r["limit_bytes"] == DEFAULT_LIMIT_BYTES
    assert r["counted_bytes"] >= DEFAULT_LIMIT_BYTES // 2, f"the budget never saw the payloads: {r}"
    # A source is held between calls: the bound plus one call's payloads (and their overheads).
    assert r["counted_bytes"] <= DEFAULT_LIMIT_BYTES + PER_CALL_BYTES + MIB, r
    assert r["processed"] > 0, r
    if executor != "processes":  # (a pool's payloads live in its workers and its arena)
        assert r["grown_mib"] < 400, f"peak memory grew by {r['grown_mib']:.0f} MiB: {r}"


FLOOD = 200_000
"""About 40 times the bound: staged whole, these hold 30-36 MiB (measured with ``SPILL_SLICE`` set
out of reach: ``counted`` then peaks at ~200 k), over the 24 MiB the test allows; delivered in
slices, the growth is a flat ~3.5 MiB whatever the count (500 k packets cost twice the time and
proved nothing more)."""
DEFAULT_LIMIT_PACKETS = 4096
SPILL_SLICE = 1024  # flowplex.kernels._context.SPILL_SLICE: packets one port stages before a spill


@pytest.mark.parametrize("executor", ["inline", "threads"])
@pytest.mark.parametrize("case", ["flood", "flood-input"])
def test_one_call_emitting_200_000_packets_stays_within_the_budget(case: str, executor: str) -> None:
    # Staged whole, 200 k packets hold 30-36 MiB (10 M: 1.1-1.3 GB); delivered in slices of 1024
    # and held at the budget, the queues never pass 4096 + 1024 and memory stays flat. The sink
    # runs on the emitter's executor: on ``inline``, on the emitting thread itself.
    r = _drive(case, executor, str(FLOOD), mem_mb=1024, timeout_s=60)
    assert r["seen"] == FLOOD, f"packets lost: {r}"
    assert r["disorder"] == 0, f"order broken: {r}"
    assert r["counted"] <= DEFAULT_LIMIT_PACKETS + SPILL_SLICE, f"the budget did not hold inside the call: {r}"
    assert r["grown_mib"] < 24, f"peak memory grew by {r['grown_mib']:.0f} MiB: {r}"


POOL_FLOOD = 100_000
"""About 20 times the bound: shipped in one outcome, these grow this process by ~32 MiB (measured
as for ``FLOOD``), over the 24 MiB allowed; in slices by a flat ~3.7 MiB."""


@pytest.mark.parametrize("executor", ["inline", "threads"])
def test_one_call_on_a_process_pool_is_delivered_in_slices_within_the_budget(executor: str) -> None:
    # The source runs in a pool's worker, the sink here (on the receiving thread, or a thread of
    # its own). Before, the worker shipped the call's packets in one outcome: ``counted`` peaked
    # at all of them and this process grew by ~60 MiB per 200 k. Each partial outcome now waits for room.
    r = _drive("flood-pool", executor, str(POOL_FLOOD), mem_mb=1536, timeout_s=60)
    assert r["seen"] == POOL_FLOOD, f"packets lost: {r}"
    assert r["disorder"] == 0, f"order broken: {r}"
    assert r["counted"] <= DEFAULT_LIMIT_PACKETS + SPILL_SLICE, f"the budget did not hold inside the call: {r}"
    assert r["grown_mib"] < 24, f"peak memory grew by {r['grown_mib']:.0f} MiB: {r}"


@pytest.mark.parametrize("executor", ["inline", "threads"])
def test_one_big_call_into_a_poller_read_after_the_end_does_not_hang(executor: str) -> None:
    # Nothing can make room while the call runs (the host reads only after ``wait_done``): the
    # call must go on unheld, as lm-flow's run-then-read programs expect, and lose nothing.
    # 50 k packets are ten times the bound (4096 + a slice): a call held at it would never end.
    r = _drive("flood-poller", executor, "50000", mem_mb=1024, timeout_s=30)
    assert r["seen"] == 50_000 and r["disorder"] == 0, r
    assert r["elapsed_s"] < 20, r
