"""Recording a running graph: ``flowplex run --record`` and ``flowplex.recording.record``.

Every stream's packets come back in order with their timestamps; bounds that advance with no
packet are kept; a lossless capture holds the graph back instead of dropping, a lossy one drops
and counts, and the two add up to what flowed.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import flowplex
import flowplex.recording as recording

CHAIN = """
nodes:
  - { name: src, kernel: RangeSourceKernel, output_ports: [a], options: { count: 40 } }
  - { name: big, kernel: FilterKernel, input_ports: [a], output_ports: [b], options: { threshold: 30 } }
  - { name: double, kernel: ScaleKernel, input_ports: [b], output_ports: [c], options: { factor: 2 } }
output_ports: [c]
"""


def _cli(*args: str, cwd: Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "flowplex", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=timeout, stdin=subprocess.DEVNULL, check=False)


def test_run_record_keeps_every_stream_with_its_timestamps_and_bounds(tmp_path: Path) -> None:
    (tmp_path / "g.yaml").write_text(CHAIN)
    done = _cli("run", "--record", "out.mcap", "g.yaml", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    rec = recording.open(tmp_path / "out.mcap")
    assert rec.complete and sorted(rec.streams) == ["a", "b", "c"]
    by = {s: [(ts, v) for (name, ts, v) in rec if name == s] for s in "abc"}
    assert by["a"] == [(i, i) for i in range(40)]
    assert by["b"] == [(i, i) for i in range(30, 40)]
    assert by["c"] == [(i, 2 * i) for i in range(30, 40)]
    printed = [line.split("\t") for line in done.stdout.splitlines()]
    assert [(int(ts.removeprefix("ts=")), int(v)) for _, ts, v in printed] == by["c"]  # what ran is what was kept
    bounds = {s: [m.ts for m in rec.messages(bounds=True) if m.kind == "bound" and m.stream == s] for s in "abc"}
    done_ts = 2**63 - 1  # the stream's end
    assert bounds["b"] == [*range(1, 31), done_ts]  # each packet the filter dropped advanced b's bound
    assert bounds["a"] in ([], [done_ts])  # the bound each packet implies (its ts + 1) is not recorded


def test_streams_compression_and_mistakes(tmp_path: Path) -> None:
    (tmp_path / "g.yaml").write_text(CHAIN)
    done = _cli("run", "--record", "c.mcap", "--streams", "c", "--compression", "lz4", "g.yaml", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert recording.open(tmp_path / "c.mcap").streams == ["c"]
    wrong = _cli("run", "--record", "x.mcap", "--streams", "a,cc", "g.yaml", cwd=tmp_path)
    assert wrong.returncode == 2
    assert re.fullmatch(r"flowplex: error: .*g\.yaml: cannot record stream `cc`: the graph has no such stream; "
                        r"did you mean `c`\? \(streams: a, b, c\)\n", wrong.stderr), wrong.stderr
    bad = _cli("run", "--record", "x.mcap", "--compression", "gzip", "g.yaml", cwd=tmp_path)
    assert bad.returncode == 2 and "--compression: 'gzip' is not one of zstd, lz4, none" in bad.stderr
    alone = _cli("run", "--lossy", "g.yaml", cwd=tmp_path)
    assert alone.returncode == 2 and "go with --record FILE.mcap" in alone.stderr
    empty = _cli("run", "--record", "x.mcap", "--streams", " , ", "g.yaml", cwd=tmp_path)  # as record and replay say
    assert (empty.returncode, empty.stderr) == (2, "flowplex: error: --streams ' , ' names no stream\n")
    assert not (tmp_path / "x.mcap").exists()


FLOOD = """
nodes:
  - { name: src, kernel: RangeSourceKernel, output_ports: [a], options: { count: 3000 } }
  - { name: p, kernel: PassThroughKernel, input_ports: [a], output_ports: [b] }
output_ports: [b]
"""


def _flood(tmp_path: Path, lossy: bool) -> tuple[recording.Recording, dict[str, int]]:
    g = flowplex.Graph.from_yaml(FLOOD)
    poller = g.add_poller("b")
    path = tmp_path / f"flood-{lossy}.mcap"
    with recording.record(g, path, lossy=lossy, queue_bytes=1) as capture:  # room for one message at a time
        g.start()
        g.wait_done(timeout=60)
        g.close()
    while poller.try_next() is not None:
        pass
    return recording.open(path), capture.dropped


def test_a_lossless_capture_holds_the_graph_back_and_keeps_everything(tmp_path: Path) -> None:
    rec, dropped = _flood(tmp_path, lossy=False)
    assert dropped == {}
    for stream in ("a", "b"):
        assert [(ts, v) for (s, ts, v) in rec if s == stream] == [(i, i) for i in range(3000)]


def test_a_lossy_capture_drops_counts_and_adds_up(tmp_path: Path) -> None:
    rec, dropped = _flood(tmp_path, lossy=True)
    for stream in ("a", "b"):
        kept = [ts for (s, ts, _) in rec if s == stream]
        assert kept == sorted(set(kept))  # in order, none twice
        assert len(kept) + dropped.get(stream, 0) == 3000
    assert rec.dropped == {k: v for k, v in dropped.items() if v}  # the file says what it lost


def test_frames_are_recorded_as_they_flowed(tmp_path: Path) -> None:
    g = flowplex.Graph.from_yaml("input_ports: [x]\nnodes:\n  - { name: p, kernel: PassThroughKernel, "
                                 "input_ports: [x], output_ports: [y] }\noutput_ports: [y]\n")
    g.add_poller("y")
    frames = [np.full((4, 5, 3), i, dtype=np.uint8) for i in range(3)]
    with recording.record(g, tmp_path / "f.mcap", streams=["y"], compression="none"):
        g.start()
        for i, f in enumerate(frames):
            g.send("x", f, ts=10 * i)
        g.close_all_inputs()
        g.wait_done(timeout=30)
        g.close()
    back = list(recording.open(tmp_path / "f.mcap"))
    assert [(s, ts) for s, ts, _ in back] == [("y", 0), ("y", 10), ("y", 20)]
    for (_, _, value), frame in zip(back, frames, strict=True):
        assert isinstance(value, np.ndarray) and value.dtype == np.uint8 and np.array_equal(value, frame)


def test_a_recording_cut_by_kill_9_reads_up_to_its_cut(tmp_path: Path) -> None:
    (tmp_path / "slow.yaml").write_text(
        "nodes:\n  - { name: src, kernel: RangeSourceKernel, output_ports: [a], options: { count: 1000000000 }, "
        "rate: 50000 }\n  - { name: sink, kernel: SinkKernel, input_ports: [a] }\n")
    proc = subprocess.Popen([sys.executable, "-m", "flowplex", "run", "--no-control", "--record", "cut.mcap",
                             "--compression", "none", "slow.yaml"], cwd=tmp_path, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and (not (tmp_path / "cut.mcap").exists()
                                               or (tmp_path / "cut.mcap").stat().st_size < 1536 * 1024):
            time.sleep(0.1)  # a few chunks written
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    rec = recording.open(tmp_path / "cut.mcap")
    assert not rec.complete  # no summary: cut (a partial record at the end, if any, is named in rec.problem)
    kept = [ts for (s, ts, _) in rec if s == "a"]
    assert kept and kept == list(range(len(kept)))  # every complete chunk, in order


def test_record_refuses_a_started_graph_and_unknown_streams(tmp_path: Path) -> None:
    g = flowplex.Graph.from_yaml(CHAIN)
    with pytest.raises(flowplex.UnknownPortError, match=r"cannot record stream `z`"):
        recording.record(g, tmp_path / "z.mcap", streams=["z"])
    g.start()
    with pytest.raises(flowplex.StateError):
        recording.record(g, tmp_path / "late.mcap")
    g.close()
