"""``flowplex inspect``, ``replay`` and ``diff``: what a recording holds, its packets as ``echo`` prints
them, and whether two recordings agree; a file that cannot be read is one line and exit 2.

A few commands run as ``python -m flowplex`` processes of their own; the many small ones run in one
interpreter each (``tests._cli``), as the console script runs them.
"""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest

from flowplex.recording import Recorder

from .._cli import flowplex_commands

W = 1_700_000_000_000_000_000  # wall times, fixed: the rates are exact
FRAME = np.arange(6, dtype=np.uint8).reshape(2, 3)
ONES = np.ones((2, 2), dtype=np.float32)


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "flowplex", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=60, stdin=subprocess.DEVNULL, check=False)


def _mixed(path: Path) -> Path:
    with Recorder(path, chunk_size=512) as r:
        r.add_stream("n", kind="i64")
        r.add_stream("s", kind="str")
        r.add_stream("raw", kind="bytes")
        r.add_stream("img", kind="buffer")
        r.add_stream("x")
        for i in range(5):
            r.write_value("n", i, i * 10, wall_ns=W + i * 250_000_000, metadata={"k": "v"} if i == 2 else None)
        r.write_bound("n", 9, wall_ns=W + 1_000_000_000)
        r.write_value("s", 1, "hi\x1b]0;x\x07", wall_ns=W)
        r.write_value("s", 2, "two", wall_ns=W + 2_000_000_000)
        r.write_value("raw", 3, b"\x00\xff", wall_ns=W)
        r.write_value("img", 4, FRAME, wall_ns=W)
        r.write_value("img", 5, ONES, wall_ns=W)
        r.write_value("x", 6, 1.5, wall_ns=W)
        r.write_value("x", 7, None, wall_ns=W)
        r.write_value("x", 8, True, wall_ns=W)
        r.note_dropped("s", 3)
    return path


def _floats(path: Path, values: list[float], frame: np.ndarray | None = None, ts_shift: int = 0,
            extra: bool = False, streams: tuple[str, ...] = ("f", "g")) -> Path:
    with Recorder(path) as r:
        for s in streams:
            r.add_stream(s)
        for i, v in enumerate(values):
            if "f" in streams:
                r.write_value("f", i + (ts_shift if i == 1 else 0), v)
            if "g" in streams:
                r.write_value("g", i, i)
        if extra:
            r.write_value("g", len(values), 99)
        if frame is not None and "f" in streams:
            r.write_value("f", 100, frame)
    return path


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("rec")
    _mixed(d / "m.mcap")
    arr = np.array([[1.0, np.nan], [3.0, 4.0]])
    _floats(d / "a.mcap", [1.0, math.nan, 3.0], arr)
    _floats(d / "same.mcap", [1.0, math.nan, 3.0], arr.copy())
    _floats(d / "value.mcap", [1.0, math.nan, 3.5], arr)
    _floats(d / "ts.mcap", [1.0, math.nan, 3.0], arr, ts_shift=1)
    _floats(d / "extra.mcap", [1.0, math.nan, 3.0], arr, extra=True)
    _floats(d / "nog.mcap", [1.0, math.nan, 3.0], arr, streams=("f",))
    _floats(d / "near.mcap", [1.0 + 1e-9, math.nan, 3.0], arr + 1e-9)
    _floats(d / "far.mcap", [1.0, math.nan, 3.0], arr + np.array([[0.0, 0.0], [0.0, 0.5]]))
    with Recorder(d / "long.mcap", chunk_size=200) as r:
        r.add_stream("n", kind="i64")
        for i in range(100):
            r.write_value("n", i, i)
    data = (d / "long.mcap").read_bytes()
    (d / "cut.mcap").write_bytes(data[: len(data) // 2])
    (d / "dir.mcap").mkdir()
    (d / "empty.mcap").write_bytes(b"")
    (d / "text.mcap").write_text("hello, not a recording\n")
    return d


# --- inspect ----------------------------------------------------------------------------------------


def test_inspect_table(files: Path) -> None:
    done = _cli("inspect", "m.mcap", cwd=files)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    size = (files / "m.mcap").stat().st_size
    assert done.stdout.splitlines() == [
        f"m.mcap: 5 stream(s), 13 packet(s), 1 bound(s), 3 dropped, {size} bytes, complete",
        "STREAM  KIND                 PACKETS  BOUNDS  FIRST TS  LAST TS  SPAN    RATE/S  DROPPED",
        "n       i64                  5        1       0         4        1.000s  4.00    0",
        "s       str                  2        0       1         2        2.000s  0.50    3",
        "raw     bytes                1        0       3         3        0.000s  -       0",
        "img     buffer               2        0       4         5        0.000s  -       0",
        "x       any(bool,empty,f64)  3        0       6         8        0.000s  -       0",
    ]


def test_inspect_json_and_a_file_cut_short(files: Path) -> None:
    whole, cut, text = flowplex_commands(["inspect", "m.mcap", "--json"], ["inspect", "cut.mcap"],
                                         ["inspect", "cut.mcap", "--json"], cwd=files)
    assert whole.returncode == 0
    doc = json.loads(whole.stdout)
    assert (doc["path"], doc["complete"], doc["problem"]) == ("m.mcap", True, None)
    assert (doc["packets"], doc["bounds"], doc["dropped"]) == (13, 1, 3)
    by = {s["name"]: s for s in doc["streams"]}
    assert list(by) == ["n", "s", "raw", "img", "x"]
    assert by["n"] == {"name": "n", "kind": "i64", "kinds": ["i64"], "packets": 5, "bounds": 1, "first_ts": 0,
                       "last_ts": 4, "ts_span": 4, "first_wall_ns": W, "last_wall_ns": W + 1_000_000_000,
                       "wall_span_s": 1.0, "rate_hz": 4.0, "dropped": 0}
    assert by["x"]["kind"] == "any" and by["x"]["kinds"] == ["bool", "empty", "f64"]
    assert by["s"]["dropped"] == 3
    assert cut.returncode == 0
    lines = cut.stdout.splitlines()
    kept = int(lines[2].split()[2])
    assert 0 < kept < 100
    assert lines[0].endswith("bytes, INCOMPLETE")
    assert lines[-1].startswith("cut short at byte ") and lines[-1].endswith("is incomplete")
    doc = json.loads(text.stdout)
    assert doc["complete"] is False and doc["problem"] == lines[-1] and doc["packets"] == kept
    warning = f"flowplex: warning: cut.mcap is truncated: {lines[-1]}; read up to its last complete chunk "
    assert cut.stderr == text.stderr == f"{warning}({kept + doc['bounds']} messages)\n"


# --- replay -----------------------------------------------------------------------------------------


def test_replay_prints_each_packet_as_echo_does(files: Path) -> None:
    done = _cli("replay", "m.mcap", cwd=files)
    assert done.returncode == 0, done.stderr
    crc_frame, crc_ones = f"{zlib.crc32(FRAME.tobytes()):08x}", f"{zlib.crc32(ONES.tobytes()):08x}"
    assert done.stdout.splitlines() == [
        "n\tts=0\tI64\t0",
        "n\tts=1\tI64\t10",
        'n\tts=2\tI64\t20\t{"k": "v"}',
        "n\tts=3\tI64\t30",
        "n\tts=4\tI64\t40",
        "s\tts=1\tStr\t'hi\\x1b]0;x\\x07'",  # a string's control characters are shown, never sent
        "s\tts=2\tStr\t'two'",
        "raw\tts=3\tBytes\t'00ff'",
        f"img\tts=4\tBuffer\tuint8[2x3] 6 B crc32={crc_frame}",
        f"img\tts=5\tBuffer\tfloat32[2x2] 16 B crc32={crc_ones}",
        "x\tts=6\tF64\t1.5",
        "x\tts=7\tany/undeclared\tnull",
        "x\tts=8\tBool\ttrue",
    ]
    assert "\x1b" not in done.stdout
    assert done.stderr == "flowplex: 13 packet(s) from m.mcap\n"


def test_replay_n_streams_bounds_json(files: Path) -> None:
    first, some, bounds, as_json, cut = flowplex_commands(
        ["replay", "m.mcap", "-n", "2"], ["replay", "m.mcap", "--streams", "img, s"],
        ["replay", "m.mcap", "--streams", "n", "--bounds"], ["replay", "m.mcap", "--json", "--streams", "img,raw"],
        ["replay", "cut.mcap"], cwd=files)
    assert first.stdout.splitlines() == ["n\tts=0\tI64\t0", "n\tts=1\tI64\t10"] and first.returncode == 0
    assert first.stderr == "flowplex: 2 packet(s) from m.mcap\n"
    assert [line.split("\t")[:2] for line in some.stdout.splitlines()] == [
        ["s", "ts=1"], ["s", "ts=2"], ["img", "ts=4"], ["img", "ts=5"]]
    assert bounds.stdout.splitlines()[-2:] == ["n\tts=4\tI64\t40", "n\tts=9\tbound"]
    assert bounds.stderr == "flowplex: 5 packet(s), 1 bound(s) from m.mcap\n"
    events = [json.loads(line) for line in as_json.stdout.splitlines()]
    assert [e["stream"] for e in events] == ["raw", "img", "img"]
    assert events[0] == {"stream": "raw", "ts": 3, "ts_name": "3", "type": "Bytes", "value": "00ff", "wall_ns": W}
    assert events[1]["value"] == {"shape": [2, 3], "dtype": "uint8", "nbytes": 6,
                                  "crc32": f"{zlib.crc32(FRAME.tobytes()):08x}"}
    assert cut.returncode == 0
    printed = cut.stdout.splitlines()
    assert printed == [f"n\tts={i}\tI64\t{i}" for i in range(len(printed))] and 0 < len(printed) < 100
    warning, count = cut.stderr.splitlines()
    assert re.fullmatch(r"flowplex: warning: cut\.mcap is truncated: cut short at byte \d+: [^;]+; read up to its "
                        rf"last complete chunk \({len(printed)} messages\)", warning), warning
    assert count == f"flowplex: {len(printed)} packet(s) from cut.mcap"


# --- diff -------------------------------------------------------------------------------------------


def test_diff_exit_codes(files: Path) -> None:
    equal = _cli("diff", "a.mcap", "same.mcap", cwd=files)
    assert (equal.returncode, equal.stdout, equal.stderr) == (
        0, "flowplex: a.mcap and same.mcap are equal: 2 stream(s), 7 packet(s)\n", "")
    differ = _cli("diff", "a.mcap", "value.mcap", cwd=files)
    assert (differ.returncode, differ.stdout, differ.stderr) == (
        1, "flowplex: a.mcap and value.mcap differ: stream 'f' #2 (ts=2): value 3.0 vs 3.5\n", "")
    bad = _cli("diff", "a.mcap", "missing.mcap", cwd=files)
    assert (bad.returncode, bad.stdout, bad.stderr) == (
        2, "", "flowplex: error: missing.mcap: cannot open: No such file or directory\n")


def test_diff_first_divergence_lines(files: Path) -> None:
    runs = flowplex_commands(
        ["diff", "a.mcap", "ts.mcap"], ["diff", "a.mcap", "extra.mcap"], ["diff", "extra.mcap", "a.mcap"],
        ["diff", "a.mcap", "nog.mcap"], ["diff", "a.mcap", "nog.mcap", "--streams", "f"],
        ["diff", "a.mcap", "near.mcap"], ["diff", "a.mcap", "near.mcap", "--atol", "1e-6"],
        ["diff", "a.mcap", "far.mcap", "--atol", "1e-6"], ["diff", "a.mcap", "far.mcap", "--atol", "0.5"],
        ["diff", "long.mcap", "cut.mcap"], cwd=files)
    got = [(r.returncode, r.stdout) for r in runs]
    assert got[:9] == [
        (1, "flowplex: a.mcap and ts.mcap differ: stream 'f' #1: ts=1 vs ts=2 (f64 nan vs f64 nan)\n"),
        (1, "flowplex: a.mcap and extra.mcap differ: stream 'g' #3: a.mcap ends after 3 record(s); extra.mcap "
            "has i64 99 at ts=3\n"),
        (1, "flowplex: extra.mcap and a.mcap differ: stream 'g' #3: a.mcap ends after 3 record(s); extra.mcap "
            "has i64 99 at ts=3\n"),
        (1, "flowplex: a.mcap and nog.mcap differ: stream 'g': in a.mcap, not in nog.mcap\n"),
        (0, "flowplex: a.mcap and nog.mcap are equal: 1 stream(s), 4 packet(s)\n"),
        (1, "flowplex: a.mcap and near.mcap differ: stream 'f' #0 (ts=0): value 1.0 vs 1.000000001\n"),
        (0, "flowplex: a.mcap and near.mcap are equal: 2 stream(s), 7 packet(s)\n"),  # NaN == NaN, arrays too
        (1, "flowplex: a.mcap and far.mcap differ: stream 'f' #3 (ts=100): array float64[2x2]: element [1, 1] "
            "4.0 vs 4.5 (1 of 4 element(s) differ; atol 1e-06)\n"),
        (0, "flowplex: a.mcap and far.mcap are equal: 2 stream(s), 7 packet(s)\n"),
    ]
    assert all(r.stderr == "" for r in runs[:9])
    cut = runs[9]
    assert cut.returncode == 1 and cut.stdout.startswith("flowplex: long.mcap and cut.mcap differ: stream 'n' #")
    assert cut.stdout.endswith(" record(s); long.mcap has i64 " + cut.stdout.split("#")[1].split(":")[0]
                               + " at ts=" + cut.stdout.split("#")[1].split(":")[0] + "\n")
    assert cut.stderr.startswith("flowplex: warning: cut.mcap is truncated: cut short at byte ")
    assert cut.stderr.count("\n") == 1 and cut.stderr.endswith(" messages)\n"), cut.stderr


def test_diff_usage_errors(files: Path) -> None:
    unknown, neg, nan = flowplex_commands(
        ["diff", "a.mcap", "nog.mcap", "--streams", "f,gg"], ["diff", "a.mcap", "a.mcap", "--atol", "-1"],
        ["diff", "a.mcap", "a.mcap", "--atol", "nan"], cwd=files)
    assert (unknown.returncode, unknown.stdout) == (2, "")
    assert unknown.stderr == ("flowplex: error: --streams: no stream 'gg' in a.mcap or nog.mcap (they have 'f', 'g'); "
                              "did you mean `g`?\n")
    assert (neg.returncode, neg.stderr) == (2, "flowplex: error: --atol must be a number >= 0, not -1.0\n")
    assert (nan.returncode, nan.stderr) == (2, "flowplex: error: --atol must be a number >= 0, not nan\n")


# --- bad input --------------------------------------------------------------------------------------


def test_bad_files_are_one_line_and_exit_2(files: Path) -> None:
    why = {"dir.mcap": "cannot open: Is a directory", "missing.mcap": "cannot open: No such file or directory",
           "empty.mcap": "empty file, not a recording", "text.mcap": "not an MCAP file (bad magic bytes)"}
    argvs = [argv for name in why for argv in (["inspect", name], ["replay", name], ["diff", "a.mcap", name],
                                               ["diff", name, "a.mcap"])]
    argvs += [["replay", "m.mcap", "--streams", "imgs"], ["replay", "m.mcap", "--streams", ","],
              ["replay", "m.mcap", "-n", "0"]]
    runs = flowplex_commands(*argvs, cwd=files)
    for argv, r in zip(argvs, runs, strict=True):
        assert r.returncode == 2 and r.stdout == "", (argv, r)
        assert r.stderr.count("\n") == 1 and r.stderr.startswith("flowplex: error: "), (argv, r.stderr)
    for k, (name, text) in enumerate(why.items()):
        assert {r.stderr for r in runs[4 * k:4 * k + 4]} == {f"flowplex: error: {name}: {text}\n"}
    assert runs[-3].stderr == ("flowplex: error: --streams: no stream 'imgs' in m.mcap (it has 'n', 's', 'raw', "
                               "'img', 'x'); did you mean `img`?\n")
    assert runs[-2].stderr == "flowplex: error: --streams ',' names no stream\n"
    assert runs[-1].stderr == "flowplex: error: -n must be at least 1, not 0\n"
