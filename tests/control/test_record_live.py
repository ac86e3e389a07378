"""``flowplex record NAME``: a live graph's streams recorded by its own process into an MCAP file,
end to end: real graphs (in this process behind ``start(control=...)``, or ``flowplex run`` in
another), real ``flowplex record`` subprocesses, and the files read back with ``recording.open``."""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import flowplex
from flowplex import recording

from .conftest import SLOW_SOURCE, gone
from .conftest import flowplex as run_flowplex

FAST_SOURCE = SLOW_SOURCE.replace(", rate: 200", "")
"""The same chain as fast as it goes: a recorder that holds it back is the bottleneck."""


@pytest.fixture
def live(runtime: Path) -> Iterator[flowplex.Graph]:
    """The slow chain (200 packets/s, runs until closed), live as ``cam``."""
    with flowplex.Graph.from_yaml(SLOW_SOURCE) as g:
        g.start(control="cam")
        yield g


def recorder(*args: str, cwd: Path) -> subprocess.Popen[str]:
    """``flowplex record ARGS`` started in the background."""
    return subprocess.Popen([sys.executable, "-m", "flowplex", "record", *args], cwd=cwd, text=True,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def end(*procs: subprocess.Popen[str]) -> None:
    """Leave no recorder behind, and no pipe open."""
    for proc in procs:
        proc.kill()
        proc.communicate(timeout=30)


def started(proc: subprocess.Popen[str]) -> str:
    """Wait for the recorder's first line (it records from then on); the line."""
    assert proc.stderr is not None
    line = proc.stderr.readline()
    assert line.startswith("flowplex: recording "), (line, proc.stderr.read())
    return line


def created(path: Path, seconds: float = 20.0) -> None:
    """Wait until the graph created ``path``: with ``--json`` the recorder prints nothing before its
    end, and the file says that it asked (its Ctrl-C and SIGTERM handling is on by then)."""
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} was not created within {seconds} s"
        time.sleep(0.02)


def read_back(path: Path) -> dict[str, list[tuple[int, object]]]:
    """Stream -> ``(ts, value)`` of every packet in the file, checked: timestamps strictly increase."""
    got: dict[str, list[tuple[int, object]]] = {}
    with recording.open(path) as rec:
        assert rec.complete, rec.problem
        for stream in rec.streams:
            got[stream] = []
        for stream, ts, value in rec:
            got[stream].append((ts, value))
    for stream, items in got.items():
        stamps = [ts for ts, _ in items]
        assert all(a < b for a, b in itertools.pairwise(stamps)), stream  # increasing, so no duplicates
    return got


def wait_complete(path: Path, seconds: float = 15.0) -> None:
    """Wait until ``path`` is a finished recording (the graph's process finishes it on its own)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with contextlib.suppress(recording.RecordingError), recording.open(path) as rec:
            if rec.complete:
                return
        time.sleep(0.05)
    pytest.fail(f"{path} was not finished within {seconds} s")


def test_a_duration_records_every_stream_and_the_file_reads_back(live: flowplex.Graph, tmp_path: Path) -> None:
    out = tmp_path / "cam.mcap"
    t0 = time.monotonic()
    done = run_flowplex("record", "cam", "-o", "cam.mcap", "--duration", "1", "--json", cwd=tmp_path, check=True)
    assert 1.0 <= time.monotonic() - t0 < 10
    result = json.loads(done.stdout)
    assert done.stderr == ""  # --json: the one object, nothing else
    assert result["name"] == "cam" and result["path"] == str(out)  # made absolute by the client
    assert result["reason"] == "duration" and result["error"] is None
    assert list(result["streams"]) == ["a", "b"] == live.streams()  # default: every stream
    assert 0.95 <= result["duration_s"] < 5
    got = read_back(out)
    assert list(got) == ["a", "b"]
    for stream, expect in (("a", 1), ("b", 2)):
        items = got[stream]
        assert len(items) == result["streams"][stream]["packets"] and result["streams"][stream]["dropped"] == 0
        assert 100 <= len(items) <= 400  # about a second at 200/s
        assert [v for _, v in items] == [expect * ts for ts, _ in items]  # a = ts, b = 2 ts
        stamps = [ts for ts, _ in items]
        assert stamps == list(range(stamps[0], stamps[0] + len(stamps)))  # none lost in between
    assert result["packets"] == len(got["a"]) + len(got["b"])
    assert result["bytes"] == out.stat().st_size


def test_streams_and_the_text_form(live: flowplex.Graph, tmp_path: Path) -> None:
    done = run_flowplex("record", "cam", "-o", str(tmp_path / "b.mcap"), "--streams", "b", "--duration", "0.5",
                        "--compression", "none", cwd=tmp_path, check=True)
    rows = done.stdout.splitlines()
    assert rows[0].split() == ["STREAM", "PACKETS", "DROPPED"]
    assert len(rows) == 2 and rows[1].split()[0] == "b" and rows[1].split()[2] == "0"
    n = int(rows[1].split()[1])
    lines = done.stderr.splitlines()
    assert lines[0] == f"flowplex: recording 1 stream(s) of cam into {tmp_path / 'b.mcap'} for 0.5 s (Ctrl-C stops)"
    assert re.fullmatch(rf"flowplex: recorded {n} packet\(s\) of 1 stream\(s\) from cam into \S+b\.mcap in "
                        r"0\.\d s \(--duration passed\); 0 dropped", lines[1]), lines
    got = read_back(tmp_path / "b.mcap")
    assert list(got) == ["b"] and len(got["b"]) == n > 0


def test_lossless_by_default_a_fast_graph_waits_for_the_recorder(runtime: Path, tmp_path: Path) -> None:
    with flowplex.Graph.from_yaml(FAST_SOURCE) as g:
        g.start(control="fast")
        done = run_flowplex("record", "fast", "-o", "f.mcap", "--streams", "a", "--duration", "0.5", "--json",
                            cwd=tmp_path, check=True)
    result = json.loads(done.stdout)
    stamps = [ts for ts, _ in read_back(tmp_path / "f.mcap")["a"]]
    assert len(stamps) == result["packets"] > 1000 and result["dropped"] == 0
    assert stamps == list(range(stamps[0], stamps[0] + len(stamps)))  # every packet between the first and the last


def test_lossy_counts_what_it_drops(runtime: Path, tmp_path: Path) -> None:
    with flowplex.Graph.from_yaml(FAST_SOURCE) as g:
        g.start(control="fast")
        done = run_flowplex("record", "fast", "-o", "l.mcap", "--duration", "0.5", "--lossy", "--json",
                            cwd=tmp_path, check=True)
    result = json.loads(done.stdout)
    assert result["lossy"] is True
    with recording.open(tmp_path / "l.mcap") as rec:
        summary = rec.summary()
    for stream, counts in result["streams"].items():
        assert summary.streams[stream].count == counts["packets"]
        assert summary.streams[stream].dropped == counts["dropped"]  # the file counts the same drops


def test_ctrl_c_and_sigterm_stop_the_recording_and_print_it(live: flowplex.Graph, tmp_path: Path) -> None:
    for sig, name in ((signal.SIGINT, "int.mcap"), (signal.SIGTERM, "term.mcap")):
        proc = recorder("cam", "-o", name, "--json", cwd=tmp_path)
        try:
            created(tmp_path / name)
            time.sleep(0.3)
            proc.send_signal(sig)
            out, err = proc.communicate(timeout=30)
        finally:
            end(proc)
        assert proc.returncode == 0, err
        result = json.loads(out)
        assert result["reason"] == "interrupted" and result["packets"] > 0
        got = read_back(tmp_path / name)
        assert len(got["a"]) == result["streams"]["a"]["packets"]


def test_a_killed_recorder_leaves_a_finished_file(live: flowplex.Graph, tmp_path: Path) -> None:
    out = tmp_path / "killed.mcap"
    proc = recorder("cam", "-o", str(out), cwd=tmp_path)
    try:
        started(proc)
        time.sleep(0.5)
    finally:
        end(proc)  # SIGKILL: no stop is sent; the connection closes
    wait_complete(out)
    got = read_back(out)
    assert list(got) == ["a", "b"] and len(got["a"]) > 20
    # The file is free again: a new recording of it starts.
    run_flowplex("record", "cam", "-o", str(out), "--duration", "0.2", cwd=tmp_path, check=True)
    assert read_back(out)["a"]


def test_the_graph_ending_ends_the_recording_with_its_last_packets(tmp_path: Path, runtime: Path) -> None:
    graph = tmp_path / "short.yaml"
    graph.write_text(SLOW_SOURCE.replace("count: 1000000000", "count: 300"))
    run = subprocess.Popen([sys.executable, "-m", "flowplex", "run", "--name", "short", str(graph)], cwd=tmp_path,
                           stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 20
        while not (runtime / "short.sock").exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        done = run_flowplex("record", "short", "-o", "short.mcap", "--json", cwd=tmp_path, check=True)
        result = json.loads(done.stdout)
        assert result["reason"] in ("closed", "graph closed") and result["error"] is None
        got = read_back(tmp_path / "short.mcap")
        assert got["a"][-1] == (299, 299) and got["b"][-1] == (299, 598)  # up to the very last packet
        assert len(got["a"]) == result["streams"]["a"]["packets"]
        run.communicate(timeout=30)
        assert run.returncode == 0
    finally:
        run.kill()
        run.communicate(timeout=30)


def test_closing_the_graph_finishes_the_recording(runtime: Path, tmp_path: Path) -> None:
    g = flowplex.Graph.from_yaml(SLOW_SOURCE)
    g.start(control="cam")
    proc = recorder("cam", "-o", "closed.mcap", "--json", cwd=tmp_path)
    try:
        created(tmp_path / "closed.mcap")
        time.sleep(0.3)
        g.close()
        out, err = proc.communicate(timeout=30)
    finally:
        end(proc)
        g.close()
    assert proc.returncode == 0, err
    result = json.loads(out)
    assert result["reason"] == "graph closed"
    assert len(read_back(tmp_path / "closed.mcap")["b"]) == result["streams"]["b"]["packets"] > 0


def test_two_clients_record_at_once_but_never_one_file_twice(live: flowplex.Graph, tmp_path: Path) -> None:
    first = recorder("cam", "-o", "one.mcap", "--streams", "a", "--duration", "1", "--json", cwd=tmp_path)
    second = recorder("cam", "-o", "two.mcap", "--duration", "1", "--json", cwd=tmp_path)
    try:
        created(tmp_path / "one.mcap")
        again = run_flowplex("record", "cam", "-o", "one.mcap", "--duration", "0.2", cwd=tmp_path)
        results = [json.loads(p.communicate(timeout=30)[0]) for p in (first, second)]
    finally:
        end(first, second)
    assert again.returncode == 2
    assert again.stderr == (f"flowplex: error: cam: {tmp_path / 'one.mcap'} is being recorded already "
                            "(a file takes one recording at a time)\n")
    assert [list(r["streams"]) for r in results] == [["a"], ["a", "b"]]
    one, two = read_back(tmp_path / "one.mcap"), read_back(tmp_path / "two.mcap")
    assert len(one["a"]) == results[0]["packets"] and len(two["a"]) + len(two["b"]) == results[1]["packets"]
    common = {ts for ts, _ in one["a"]} & {ts for ts, _ in two["a"]}
    assert len(common) > 50  # both recorded the same packets at the same time


def test_bad_input_is_one_line_and_exit_2(live: flowplex.Graph, tmp_path: Path) -> None:
    (tmp_path / "adir").mkdir()
    cases = [
        (["cam", "-o", "x.mcap", "--streams", "a,bb"], r"cam: no stream named 'bb'; did you mean `b`\? "
                                                       r"\(streams: a, b\)"),
        (["cam", "-o", "adir"], r"-o adir: is a directory \(give a file, e\.g\. adir/recording\.mcap\)"),
        (["cam", "-o", "nowhere/x.mcap"], rf"-o nowhere/x\.mcap: no such directory {re.escape(str(tmp_path))}"
                                          r"/nowhere"),
        (["cam", "-o", "x.mcap", "--compression", "xz"], r"--compression: 'xz' is not one of zstd, lz4, none"),
        (["cam", "-o", "x.mcap", "--duration", "0"], r"--duration must be a positive number of seconds, not 0"),
        (["cam", "-o", "x.mcap", "--streams", " , "], r"--streams ' , ' names no stream"),
    ]
    for args, message in cases:
        done = run_flowplex("record", *args, cwd=tmp_path)
        assert done.returncode == 2, (args, done.stderr)
        assert re.fullmatch(rf"flowplex: error: {message}\n", done.stderr), (args, done.stderr)
        assert done.stdout == ""
    # A name that is not live is exit 1, as for top, echo, stop and every live command.
    for argv in (["record", "camm", "-o", "x.mcap"], ["top", "camm", "--once"]):
        done = run_flowplex(*argv, cwd=tmp_path)
        assert (done.returncode, done.stdout) == (1, ""), (argv, done.stderr)
        assert done.stderr == "flowplex: error: no live graph named 'camm'; did you mean `cam`?\n", argv
    assert not (tmp_path / "x.mcap").exists()  # nothing was created for a refused request
    assert live.state == flowplex.GraphState.RUNNING  # and the graph ran on


def test_every_op_of_a_live_graph_is_a_known_op(live: flowplex.Graph) -> None:
    """``KNOWN_OPS`` (an op of some endpoint is no typo, so no did-you-mean) holds each op a graph
    answers, ``record`` included: asked for an agents op, the graph lists its own."""
    from flowplex.control import connect
    from flowplex.control._server import KNOWN_OPS
    from flowplex.errors import ControlError

    with connect("cam") as client, pytest.raises(ControlError) as caught:
        client.request("attach")
    found = re.fullmatch(r"cam is a graph: it has no op 'attach' \(its ops: (.*)\)", str(caught.value))
    assert found is not None, str(caught.value)
    ops = set(found[1].split(", "))
    assert "record" in ops and ops <= KNOWN_OPS, ops - KNOWN_OPS


def test_a_graph_that_ended_has_nothing_to_record(runtime: Path, tmp_path: Path) -> None:
    with flowplex.Graph.from_yaml(SLOW_SOURCE.replace("count: 1000000000", "count: 3")) as g:
        g.start(control="done")
        g.wait_done(timeout=10)
        ended = run_flowplex("record", "done", "-o", "x.mcap", cwd=tmp_path)
    assert ended.returncode == 1
    assert ended.stderr == "flowplex: error: done: the graph is terminated: it has nothing to record\n"


def test_a_graph_killed_while_recording_is_a_runtime_error(tmp_path: Path, runtime: Path) -> None:
    graph = tmp_path / "cam.yaml"
    graph.write_text(SLOW_SOURCE)
    name = run_flowplex("run", "-d", str(graph), cwd=tmp_path, check=True).stdout.strip()
    pid = next(i["pid"] for i in json.loads(run_flowplex("ps", "--json", cwd=tmp_path, check=True).stdout))
    proc = recorder(name, "-o", "cut.mcap", cwd=tmp_path)
    try:
        started(proc)
        time.sleep(1.5)  # a chunk or more reaches the file... or not: it is readable either way
        os.kill(pid, signal.SIGKILL)
        assert gone(pid)
        out, err = proc.communicate(timeout=30)
    finally:
        end(proc)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    assert proc.returncode == 1 and out == ""
    assert err.endswith(f"flowplex: error: {name}: the graph went away while recording; {tmp_path / 'cut.mcap'} is "
                        "cut short (readable up to its last complete chunk)\n"), err
    with contextlib.suppress(recording.RecordingError), recording.open(tmp_path / "cut.mcap") as rec:
        assert not rec.complete  # (an empty file when no chunk was written yet: a one-line error)
