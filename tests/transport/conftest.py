"""Fixtures for the transport tests: real shared-memory rings, and a /dev/shm leak check."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from flowplex.transport import Ring, _accel

from .._shm import ours

SHM = "/dev/shm"


def ring_segments() -> set[str]:
    """Names of every flowplex ring segment currently in /dev/shm."""
    return {n for n in os.listdir(SHM) if n.startswith(("flowplex-ring-", "fpx-test-"))}


@pytest.fixture(autouse=True)
def _no_shm_leak() -> Iterator[None]:
    """Every transport test must leave /dev/shm as it found it."""
    before = ring_segments()
    yield
    leaked = ours(ring_segments() - before)
    for name in leaked:  # clean up so one failure does not cascade
        os.unlink(os.path.join(SHM, name))
    assert not leaked, f"leaked shared-memory segments: {sorted(leaked)}"


@pytest.fixture(autouse=True, params=["c", "python"])
def ring_impl(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run every transport test on both hot-path implementations.

    ``c`` is the ``_fastring`` extension (skipped, with the reason, where it was not built);
    ``python`` forces the pure-Python paths, in this process and in the processes it spawns.
    """
    if request.param == "python":
        monkeypatch.setattr(_accel, "fast", None)
        monkeypatch.setenv("FLOWPLEX_PURE_PYTHON", "1")
    elif _accel.fast is None:
        if os.environ.get("FLOWPLEX_REQUIRE_EXTRAS") == "1":
            pytest.fail("the C extension flowplex.transport._fastring is not built")
        pytest.skip("the C extension flowplex.transport._fastring is not built (no compiler at install)")
    return str(request.param)


@pytest.fixture
def shm_ring() -> Iterator[Ring]:
    """A real 8-slot ring in /dev/shm, always closed and unlinked."""
    ring = Ring.create(capacity=8, max_producers=4)
    try:
        yield ring
    finally:
        ring.close()
        ring.unlink()


def require_extra(module: str, reason: str) -> object:
    """``pytest.importorskip``, unless FLOWPLEX_REQUIRE_EXTRAS=1 turns the skip into a failure."""
    if os.environ.get("FLOWPLEX_REQUIRE_EXTRAS") == "1":
        return __import__(module)
    return pytest.importorskip(module, reason=reason)
