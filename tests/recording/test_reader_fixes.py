"""The reader's edges: rates over the packets alone, a file missing only its summary says so, a
single stream name is a name, and what a closed or misused ``Recording`` does."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest

from flowplex import recording as rec_mod
from flowplex.recording import Recorder, RecordingError

from .._cli import flowplex_commands

S = 1_000_000_000  # one second of wall time, in ns


# --- rates --------------------------------------------------------------------------------------------


def test_the_rate_is_the_packets_over_their_own_wall_span(tmp_path: Path) -> None:
    path = tmp_path / "r.mcap"
    with Recorder(path) as rec:
        rec.add_stream("a", kind="i64")
        rec.add_stream("one", kind="i64")
        rec.add_stream("bounds", kind="i64")
        rec.write_bound("a", 1, wall_ns=1 * S)  # bounds long before and after the packets count for nothing
        for i in range(5):
            rec.write_value("a", 10 + i, i, wall_ns=100 * S + i * S // 2)  # 5 packets over 2 s
        rec.write_bound("a", 99, wall_ns=1000 * S)
        rec.write_bound("one", 1, wall_ns=1 * S)
        rec.write_value("one", 5, 5, wall_ns=50 * S)
        rec.write_bound("one", 9, wall_ns=90 * S)
        rec.write_bound("bounds", 1, wall_ns=1 * S)
        rec.write_bound("bounds", 2, wall_ns=2 * S)
    with rec_mod.open(path) as r:
        s = r.summary()
    a, one, bounds = s.streams["a"], s.streams["one"], s.streams["bounds"]
    assert (a.count, a.bounds) == (5, 2)
    assert a.rate_hz == 2.0  # 4 intervals in 2 s, not 4 in 999 s
    assert (a.first_wall_ns, a.last_wall_ns, a.wall_span_s) == (100 * S, 102 * S, 2.0)
    assert (one.count, one.bounds, one.rate_hz, one.wall_span_s) == (1, 2, None, 0.0)
    assert (bounds.count, bounds.bounds, bounds.rate_hz, bounds.first_wall_ns) == (0, 2, None, None)


# --- files that lack only their summary ------------------------------------------------------------------


def _whole(path: Path) -> bytes:
    with Recorder(path, chunk_size=256) as rec:
        rec.add_stream("n", kind="i64")
        for i in range(40):
            rec.write_value("n", i, i)
    return path.read_bytes()


def _summary_start(data: bytes) -> int:
    return int(struct.unpack_from("<Q", data, len(data) - 8 - 20)[0])


def test_a_file_without_its_summary_and_footer_says_what_is_missing(tmp_path: Path) -> None:
    data = _whole(tmp_path / "whole.mcap")
    start = _summary_start(data)  # the data section ends here, DataEnd included
    for size, missing in ((start, "summary and footer"), (start + 10, "footer"), (len(data) - 3, "footer")):
        cut = tmp_path / f"cut{size}.mcap"
        cut.write_bytes(data[:size])
        with rec_mod.open(cut) as r:
            assert not r.complete
            assert r.problem is not None and missing in r.problem, (size, r.problem)  # said at open already
            assert [v for _, _, v in r] == list(range(40))  # every message is there
            problem = r.problem
            assert problem is not None and missing in problem and f"byte {size}" in problem, (size, problem)
            assert r.summary().problem == problem
        with rec_mod.open(cut) as r:  # a read stopped early leaves the words said at open
            next(iter(r))
            assert r.problem is not None and missing in r.problem


def test_a_whole_file_has_no_problem_before_or_after_a_read(tmp_path: Path) -> None:
    _whole(tmp_path / "whole.mcap")
    with rec_mod.open(tmp_path / "whole.mcap") as r:
        assert r.complete and r.problem is None
        assert len(list(r)) == 40
        assert r.problem is None and r.summary().problem is None


def test_inspect_and_replay_print_the_readers_words(tmp_path: Path) -> None:
    data = _whole(tmp_path / "whole.mcap")
    (tmp_path / "cut.mcap").write_bytes(data[:_summary_start(data)])
    with rec_mod.open(tmp_path / "cut.mcap") as r:
        summary = r.summary()  # what a read to the end says
        truncation = r.truncation
    problem = summary.problem
    assert problem is not None and "right after its data" in problem
    assert truncation == (f"{tmp_path / 'cut.mcap'} is truncated: {problem}; read up to its last complete chunk "
                          f"({summary.messages} messages)")
    inspect, replay = flowplex_commands(["inspect", "cut.mcap"], ["replay", "cut.mcap", "-n", "1"], cwd=tmp_path)
    warning = f"flowplex: warning: cut.mcap is truncated: {problem}; read up to its last complete chunk "
    assert inspect.returncode == 0 and inspect.stdout.splitlines()[-1] == problem
    assert inspect.stderr == f"{warning}({summary.messages} messages)\n", inspect.stderr
    # Even when it prints one packet, replay says where the file was cut: what a read to the end says.
    assert replay.returncode == 0 and replay.stderr == (
        f"{warning}({summary.messages} messages)\nflowplex: 1 packet(s) from cut.mcap\n"), replay.stderr
    with rec_mod.open(tmp_path / "whole.mcap") as r:
        assert r.truncation is None


# --- stream names ---------------------------------------------------------------------------------------


def _abc(path: Path) -> Path:
    with Recorder(path) as rec:
        for name in ("abc", "a", "b"):
            rec.add_stream(name, kind="i64")
        for i, name in enumerate(("abc", "a", "b", "abc")):
            rec.write_value(name, i, i)
    return path


def test_a_single_str_is_one_stream_name_not_its_letters(tmp_path: Path) -> None:
    with rec_mod.open(_abc(tmp_path / "abc.mcap")) as r:
        assert [(x.stream, x.ts) for x in r.messages(streams="abc")] == [("abc", 0), ("abc", 3)]
        assert [x.ts for x in r.messages(streams=("a", "b"))] == [1, 2]
        with pytest.raises(RecordingError, match=r"no stream 'ab' in the recording"):
            r.messages(streams="ab")  # 'a' and 'b' are there, 'ab' is not


def test_diff_takes_a_single_str_as_one_stream_name(tmp_path: Path) -> None:
    a = _abc(tmp_path / "a.mcap")
    with Recorder(tmp_path / "b.mcap") as rec:
        for name in ("abc", "a", "b"):
            rec.add_stream(name, kind="i64")
        for i, name in enumerate(("abc", "a", "b", "abc")):
            rec.write_value(name, i, i if name == "abc" else -1)  # only 'abc' agrees
    assert rec_mod.diff(a, tmp_path / "b.mcap", streams="abc") is None
    assert rec_mod.compare(a, tmp_path / "b.mcap", streams="abc").streams == ("abc",)
    assert rec_mod.diff(a, tmp_path / "b.mcap") is not None


def test_an_unknown_stream_is_an_error_when_messages_is_called(tmp_path: Path) -> None:
    with rec_mod.open(_abc(tmp_path / "abc.mcap")) as r, pytest.raises(RecordingError, match="no stream 'x'"):
        r.messages(streams=["x"])  # not at the first next(): at the call


# --- other edges ------------------------------------------------------------------------------------------


def test_every_kind_comes_back_as_its_packet_with_its_metadata(tmp_path: Path) -> None:
    path = tmp_path / "k.mcap"
    values: list[object] = [True, 7, 1.5, "s", b"\x00", np.arange(3, dtype=np.int16)]
    with Recorder(path) as rec:
        rec.add_stream("x")
        for i, v in enumerate(values):
            rec.write_value("x", i, v, metadata={"i": i})
        rec.write_value("x", 9, None)  # an empty packet carries no metadata
    with rec_mod.open(path) as r:
        packets = [x.to_packet() for x in r.messages()]
    assert [p.timestamp for p in packets] == [*range(len(values)), 9]
    assert [p.metadata("i") for p in packets[:-1]] == list(range(len(values)))
    assert packets[-1].is_empty


def test_reading_a_closed_recording_is_a_one_line_error(tmp_path: Path) -> None:
    r = rec_mod.open(_abc(tmp_path / "abc.mcap"))
    assert len(list(r)) == 4
    r.close()
    with pytest.raises(RecordingError, match=r"abc\.mcap: the recording is closed"):
        list(r)
    with pytest.raises(RecordingError, match="closed"):
        r.summary()
