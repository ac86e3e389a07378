"""Helpers for the process-pool tests (real worker processes: at most 2 per pool)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

import flowplex

from . import kernels as kernels  # registers the kernels in this process (workers import them by reference)

WAIT_S = 20.0
"""Generous bound on any single wait; the tests finish far sooner."""


def pool_yaml(body: str, num_processes: int = 2, extra: str = "", pool: str = "") -> str:
    """A graph with a process pool named ``pool`` declared before ``body`` (``pool``: more of its fields)."""
    return (f"executors: [{{ name: pool, type: ProcessPoolExecutor, num_processes: {num_processes}{pool} }}]\n"
            f"{extra}{body}")


def alive(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def children() -> set[int]:
    """The pids of this process's live children (from /proc), multiprocessing's helpers left out."""
    me = str(os.getpid())
    found: set[int] = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except (FileNotFoundError, ProcessLookupError):
                continue
            if fields[1] == me and fields[0] != "Z" and not _helper(entry):
                found.add(int(entry))
    return found


def _helper(pid: str) -> bool:
    """multiprocessing's own helpers (its resource tracker, a forkserver) live as long as this process."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmdline = f.read()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return b"multiprocessing.resource_tracker" in cmdline or b"multiprocessing.forkserver" in cmdline


@pytest.fixture
def no_leftover_workers() -> Iterator[None]:
    """Fail the test if it leaves a child process behind."""
    before = children()
    yield
    assert children() - before == set()


def run_values(g: flowplex.Graph, port: str, values: list[int]) -> list[object]:
    """Start ``g``, send ``values`` (ts = index), close the inputs and return what reaches ``port``."""
    out = g.add_poller(port)
    g.start()
    for ts, v in enumerate(values):
        g.send(g.plan.graph_inputs[0], v, ts=ts)
    g.close_all_inputs()
    got = [p.payload for p in out]
    g.wait_done(timeout=WAIT_S)
    return got
