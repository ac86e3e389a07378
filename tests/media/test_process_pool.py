"""Decoded frames on a process pool live in its shared-memory arena: no copy into it, none in place."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import flowplex
from flowplex.executors.processes import ProcessPoolExecutor

from . import kernels as kernels  # registers the test kernels (workers import them by reference)
from .conftest import WAIT_S, decoded, write_clip

WIDTH, HEIGHT, FRAMES = 192, 128, 6
"""73 KiB RGB frames: above the 64 KiB from which buffers live in the arena."""


@pytest.fixture(scope="module")
def big_clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_clip(tmp_path_factory.mktemp("pool") / "clip.mp4", FRAMES, width=WIDTH, height=HEIGHT)


@pytest.mark.parametrize("source_on", ["host", "pool"])
def test_frames_are_allocated_in_the_arena_and_written_in_place(big_clip: Path, source_on: str) -> None:
    executor = ", executor: pool" if source_on == "pool" else ""
    yaml = (
        "stats: full\n"
        "executors: [{ name: pool, type: ProcessPoolExecutor, num_processes: 1 }]\n"
        f"nodes:\n  - {{ name: src, kernel: VideoFileSource, output_ports: [f], options: {{ path: '{big_clip}' }}"
        f"{executor} }}\n"
        "  - { name: ink, kernel: MediaTestInPlace, input_ports: [f], output_ports: [out], executor: pool }\n"
        "output_ports: [out]\n")
    expected = decoded(big_clip)
    with flowplex.Graph.from_yaml(yaml) as g:
        poller = g.add_poller("out")
        g.start()
        (pool,) = (ex for ex in g._engine.executors if isinstance(ex, ProcessPoolExecutor))
        for ts, pixels in expected:
            p = poller.next(timeout=WAIT_S)
            assert p is not None and p.timestamp == ts
            arr = p.as_numpy()
            assert pool.in_arena(arr)
            want = pixels.copy()
            want.reshape(-1)[0] = 7
            np.testing.assert_array_equal(arr, want)
            del arr, p
        g.wait_done(timeout=WAIT_S)
        stats = pool.arena_stats()
        assert stats is not None and (stats.writes, stats.write_bytes) == (0, 0)  # the host copied nothing in
        assert {n.node_name: n.copies for n in g.stats().nodes} == {"src": 0, "ink": 0}
