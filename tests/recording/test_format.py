"""The recording format: every value kind round-trips exactly, files cut short or foreign fail cleanly.

Values go through the codec alone (fast, many examples) and through whole files; files are also
read by the plain ``mcap`` reader, so the format stays readable without flowplex.
"""

from __future__ import annotations

import math
import os
import struct
import tempfile
import threading
from pathlib import Path

import hypothesis.extra.numpy as hnp
import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import given, settings
from mcap.reader import make_reader
from mcap.writer import Writer

from flowplex import Packet, UsageError
from flowplex import recording as rec_mod
from flowplex._timestamps import TS_MAX, TS_MIN, TS_POST_STREAM, TS_PRE_STREAM, TS_UNSET
from flowplex.recording import Recorder, RecordingError
from flowplex.recording._codec import ENCODING, decode, encode_value, schema_data

I64 = st.integers(-(2**63), 2**63 - 1)
DTYPES = st.sampled_from(["|u1", "|i1", "<u2", "<i2", "<i4", "<i8", "<f2", "<f4", "<f8", "|b1", "<c8", ">i4", ">f8"])
ARRAYS = DTYPES.flatmap(lambda dt: hnp.arrays(np.dtype(dt), hnp.array_shapes(min_dims=0, max_dims=4, min_side=0,
                                                                              max_side=4)))
SCALARS = st.one_of(
    st.none(), st.booleans(), I64, st.floats(allow_nan=True, allow_infinity=True),
    st.text(), st.binary(),
)
METADATA = st.none() | st.dictionaries(
    st.text(min_size=1, max_size=8),
    st.booleans() | I64 | st.floats(allow_nan=False) | st.text(max_size=8), max_size=3,
)


def same(a: object, b: object) -> bool:
    """Exact equality: floats bit for bit (nan too), arrays by dtype, shape and bytes."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        assert isinstance(a, np.ndarray) and isinstance(b, np.ndarray)
        return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
    if isinstance(a, float) and isinstance(b, float):
        return struct.pack("<d", a) == struct.pack("<d", b)
    return type(a) is type(b) and a == b


def roundtrip(ts: int, value: object, metadata: dict[str, object] | None = None) -> object:
    kind, data = encode_value(ts, value, wall_ns=123, metadata=metadata)  # type: ignore[arg-type]
    d = decode(memoryview(data))
    assert d.kind == kind and d.ts == ts and d.wall_ns == 123
    assert d.metadata == (metadata or None)
    return d.value


# --- the codec ---------------------------------------------------------------------------------------


@given(I64, SCALARS)
def test_every_scalar_kind_round_trips_exactly(ts: int, value: object) -> None:
    assert same(roundtrip(ts, value), value)


@given(I64, ARRAYS)
def test_arrays_round_trip_with_dtype_and_shape(ts: int, arr: np.ndarray) -> None:  # type: ignore[type-arg]
    out = roundtrip(ts, arr)
    assert isinstance(out, np.ndarray)
    assert same(out, arr)
    assert not out.flags.writeable


@given(ARRAYS)
def test_strided_arrays_are_stored_c_contiguous_with_their_values(arr: np.ndarray) -> None:  # type: ignore[type-arg]
    for view in (arr.T, arr[::2], arr[..., ::-1]) if arr.ndim else (arr,):
        out = roundtrip(0, view)
        assert isinstance(out, np.ndarray)
        assert out.shape == view.shape and out.dtype == view.dtype
        assert np.array_equal(out, view, equal_nan=out.dtype.kind in "fc")


@given(METADATA)
def test_metadata_round_trips(meta: dict[str, object] | None) -> None:
    assert roundtrip(5, "x", meta) == "x"


@pytest.mark.parametrize("ts", [TS_UNSET, TS_PRE_STREAM, TS_MIN, TS_MAX, TS_POST_STREAM, -(2**63), 2**63 - 1])
def test_sentinel_timestamps_are_kept_exactly(ts: int) -> None:
    assert roundtrip(ts, 1) == 1


@pytest.mark.parametrize("value", [2**63, -(2**63) - 1, object(), [1], np.array(["a"])])
def test_values_that_cannot_be_recorded_are_usage_errors(value: object) -> None:
    with pytest.raises(UsageError):
        encode_value(0, value, wall_ns=0)


@pytest.mark.parametrize("data", [
    b"", b"\x00" * 10,
    struct.pack("<qqBBHI", 0, 0, 2, 9, 0, 0) + b"\x00" * 8,  # version 9
    struct.pack("<qqBBHI", 0, 0, 2, 1, 0, 0) + b"\x00" * 7,  # a short i64
    struct.pack("<qqBBHI", 0, 0, 4, 1, 0, 0) + b"\x02",  # bool 2
    struct.pack("<qqBBHI", 0, 0, 77, 1, 0, 0),  # unknown kind
    struct.pack("<qqBBHI", 0, 0, 5, 1, 0, 0) + b"\xff\xfe",  # bad UTF-8
    struct.pack("<qqBBHI", 0, 0, 5, 1, 1, 99) + b"{}",  # metadata past the end
    struct.pack("<qqBBHI", 0, 0, 5, 1, 1, 2) + b"[]",  # metadata not an object
    struct.pack("<qqBBHI", 0, 0, 6, 1, 0, 0) + struct.pack("<BB", 1, 3) + b"|O8" + struct.pack("<Q", 1) + b"\0" * 8,
    struct.pack("<qqBBHI", 0, 0, 6, 1, 0, 0) + struct.pack("<BB", 1, 3) + b"|u1" + struct.pack("<Q", 5) + b"\0" * 4,
])
def test_malformed_messages_are_recording_errors(data: bytes) -> None:
    with pytest.raises(RecordingError) as info:
        decode(memoryview(data))
    assert "\n" not in str(info.value)


def test_the_schema_data_is_json_describing_the_layout() -> None:
    import json

    doc = json.loads(schema_data("buffer"))
    assert doc["format"] == ENCODING and doc["kind"] == "buffer" and "<qqBBHI" in doc["header"]


# --- files -------------------------------------------------------------------------------------------

ALL_KINDS: list[tuple[str, object]] = [
    ("empty", None), ("bool", True), ("i64", -(2**63)), ("f64", float("nan")), ("str", "héllo ✓ \U0001f600"),
    ("bytes", b"\x00\xff"), ("buffer", np.arange(12, dtype=np.uint16).reshape(3, 4)),
]


def write_all(path: Path, compression: str = "zstd", chunk_size: int = 1024 * 1024) -> None:
    with Recorder(path, compression=compression, chunk_size=chunk_size) as rec:
        for kind, _ in ALL_KINDS:
            rec.add_stream(kind, kind=kind)
        rec.add_stream("mixed")
        for i, (kind, value) in enumerate(ALL_KINDS):
            rec.write_value(kind, i, value, wall_ns=1000 + i)
            rec.write_value("mixed", i, value, wall_ns=1000 + i)
            rec.write_bound(kind, i + 1, wall_ns=1000 + i)


@pytest.mark.parametrize("compression", ["zstd", "lz4", "none"])
def test_every_kind_round_trips_through_a_file(tmp_path: Path, compression: str) -> None:
    path = tmp_path / "all.mcap"
    write_all(path, compression)
    with rec_mod.open(path) as r:
        assert r.complete and r.problem is None
        assert r.streams == [k for k, _ in ALL_KINDS] + ["mixed"]
        got = list(r)
        want = [(s, i, v) for i, (k, v) in enumerate(ALL_KINDS) for s in (k, "mixed")]
        assert len(got) == len(want)
        for (s1, t1, v1), (s2, t2, v2) in zip(got, want, strict=True):
            assert (s1, t1) == (s2, t2) and same(v1, v2)
        records = list(r.messages(bounds=True, streams=["i64"]))
        assert [(x.kind, x.ts) for x in records] == [("i64", 2), ("bound", 3)]
        assert records[1].is_bound and records[1].value is None
        with pytest.raises(UsageError, match="holds no packet"):
            records[1].to_packet()
        assert r.problem is None


@given(st.lists(st.tuples(I64, SCALARS | ARRAYS), max_size=20), st.sampled_from(["zstd", "lz4", "none"]))
@settings(max_examples=30)
def test_random_streams_round_trip_through_a_file(items: list[tuple[int, object]], compression: str) -> None:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "r.mcap"
        with Recorder(path, compression=compression, chunk_size=256) as rec:
            rec.add_stream("s")
            for ts, value in items:
                rec.write_value("s", ts, value)
        with rec_mod.open(path) as r:
            got = list(r)
        assert len(got) == len(items)
        for (stream, ts, value), (ts0, value0) in zip(got, items, strict=True):
            assert stream == "s" and ts == ts0 and same(value, value0)


def test_packets_keep_timestamp_metadata_and_value(tmp_path: Path) -> None:
    path = tmp_path / "p.mcap"
    p = Packet.from_numpy(np.arange(6, dtype=np.float32).reshape(2, 3), ts=42)
    p.set_metadata("camera", "left")
    p.set_metadata("exposure", 0.5)
    p.set_metadata("n", 3)
    strided = Packet.from_numpy(np.arange(20, dtype=np.int32).reshape(4, 5)[:, ::2], ts=43)
    empty = Packet()
    empty.timestamp = 44
    with Recorder(path) as rec:
        rec.add_stream("frames", kind="buffer")
        rec.add_stream("any")
        rec.write("frames", p, wall_ns=5)
        rec.write("frames", strided)
        rec.write("any", empty)
        rec.write("any", Packet.from_str("s", ts=45))
    with rec_mod.open(path) as r:
        records = list(r.messages())
    assert records[0].metadata == {"camera": "left", "exposure": 0.5, "n": 3} and records[0].wall_ns == 5
    back = records[0].to_packet()
    assert back.timestamp == 42 and back.metadata("camera") == "left" and back.metadata("exposure") == 0.5
    assert np.array_equal(back.as_numpy(), p.as_numpy())
    assert np.array_equal(records[1].to_packet().as_numpy(), strided.as_numpy())
    assert records[2].to_packet().is_empty and records[2].to_packet().timestamp == 44
    assert records[3].to_packet().as_str() == "s"


def test_numpy_values_are_views_of_the_map_when_uncompressed(tmp_path: Path) -> None:
    """The design: the reader maps the file; an array in an uncompressed chunk views that map."""
    path = tmp_path / "frames.mcap"
    frame = np.random.default_rng(0).integers(0, 255, (48, 64, 3), dtype=np.uint8)
    for compression in ("none", "zstd"):
        with Recorder(path, compression=compression) as rec:
            rec.add_stream("cam", kind="buffer")
            rec.write("cam", Packet.from_numpy(frame.copy(), ts=1))
        r = rec_mod.open(path)
        (_, _, arr), = list(r)
        assert isinstance(arr, np.ndarray) and np.array_equal(arr, frame) and not arr.flags.writeable
        assert r._map is not None
        assert np.shares_memory(arr, np.frombuffer(r._map, np.uint8)) == (compression == "none")
        r.close()  # the view keeps the map alive
        assert int(arr.sum()) == int(frame.sum())
        del arr


def test_the_plain_mcap_reader_reads_a_recording(tmp_path: Path) -> None:
    path = tmp_path / "all.mcap"
    write_all(path, chunk_size=64)
    with open(path, "rb") as f:
        reader = make_reader(f)
        assert reader.get_header().profile == "flowplex"
        summary = reader.get_summary()
        assert summary is not None and summary.statistics is not None
        topics = {c.topic: summary.schemas[c.schema_id].name for c in summary.channels.values()}
        assert topics == {k: f"flowplex.{k}" for k, _ in ALL_KINDS} | {"mixed": "flowplex.any"}
        assert {c.message_encoding for c in summary.channels.values()} == {ENCODING}
        assert {s.encoding for s in summary.schemas.values()} == {ENCODING}
        assert summary.statistics.message_count == 3 * len(ALL_KINDS)
        assert summary.statistics.chunk_count > 1
        messages = list(reader.iter_messages(topics=["i64"]))
    assert [decode(memoryview(m.data)).ts for _, _, m in messages] == [2, 3]  # the packet, then its bound


def test_the_summary_counts_kinds_times_rates_and_drops(tmp_path: Path) -> None:
    path = tmp_path / "s.mcap"
    with Recorder(path) as rec:
        rec.add_stream("a", kind="i64")
        rec.add_stream("b")
        rec.add_stream("quiet")
        for i in range(11):
            rec.write("a", Packet.from_int(i, ts=10 + i), wall_ns=1_000_000_000 + i * 100_000_000)
        rec.write_bound("a", 99, wall_ns=2_000_000_000)
        rec.write("b", Packet.from_str("x", ts=1))
        rec.write("b", Packet.from_float(1.0, ts=2))
        rec.note_dropped("b", 3)
        rec.note_dropped("b")
        assert rec.dropped == {"b": 4}
    with rec_mod.open(path) as r:
        s = r.summary()
        assert r.dropped == {"b": 4}
    a, b, quiet = s.streams["a"], s.streams["b"], s.streams["quiet"]
    assert (a.kind, a.kinds, a.count, a.bounds, a.first_ts, a.last_ts) == ("i64", ("i64",), 11, 1, 10, 20)
    assert a.rate_hz is not None and math.isclose(a.rate_hz, 10 / 1.0)  # 11 packets over 1 s, then a bound at 2 s
    assert a.wall_span_s == 1.0
    assert (b.kind, b.kinds, b.count, b.dropped) == ("any", ("f64", "str"), 2, 4)
    assert (quiet.count, quiet.first_ts, quiet.rate_hz) == (0, None, None)
    assert s.complete and s.problem is None and s.messages == 14


def test_two_threads_write_at_once(tmp_path: Path) -> None:
    path = tmp_path / "t.mcap"
    n = 2000
    with Recorder(path, chunk_size=4096) as rec:
        for name in ("t0", "t1", "shared"):
            rec.add_stream(name, kind="i64")
        barrier = threading.Barrier(2)

        def work(k: int) -> None:
            barrier.wait()
            for i in range(n):
                rec.write(f"t{k}", Packet.from_int(i, ts=i))
                rec.write("shared", Packet.from_int(k, ts=i))

        threads = [threading.Thread(target=work, args=(k,)) for k in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    with rec_mod.open(path) as r:
        got = list(r)
    for k in range(2):
        assert [v for s, _, v in got if s == f"t{k}"] == list(range(n))
    assert sorted(v for s, _, v in got if s == "shared") == [0] * n + [1] * n  # type: ignore[type-var]


def test_writer_misuse_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="compression"):
        Recorder(tmp_path / "x.mcap", compression="gzip")
    rec = Recorder(tmp_path / "y.mcap")
    rec.add_stream("n", kind="i64")
    with pytest.raises(UsageError, match="already"):
        rec.add_stream("n")
    with pytest.raises(UsageError, match="kind"):
        rec.add_stream("k", kind="float")
    with pytest.raises(UsageError, match="no stream"):
        rec.write("nope", Packet.from_int(1))
    with pytest.raises(UsageError, match="carries i64, not str"):
        rec.write("n", Packet.from_str("x"))
    rec.close()
    rec.close()
    with pytest.raises(RecordingError, match="closed"):
        rec.write("n", Packet.from_int(1))


# --- damaged and foreign files ------------------------------------------------------------------------


def read_all(path: Path) -> tuple[list[tuple[str, int, object]], str | None]:
    with rec_mod.open(path) as r:
        got = [(s, t, v.tolist() if isinstance(v, np.ndarray) else v) for s, t, v in r]
        return got, r.problem


def test_a_file_cut_anywhere_reads_every_complete_chunk(tmp_path: Path) -> None:
    """kill -9 at any byte: never a hang or a traceback; what was flushed before the cut comes back."""
    full = tmp_path / "full.mcap"
    ends: list[int] = []  # file size once message i was flushed (its chunk is complete)
    values: list[tuple[str, int, object]] = []
    with Recorder(full, compression="zstd") as rec:
        rec.add_stream("n")
        rec.add_stream("frames", kind="buffer")
        for i in range(12):
            value: object = [i * 3, "s" * i, np.arange(i, dtype=np.int16)][i % 3]
            stream = "frames" if isinstance(value, np.ndarray) else "n"
            rec.write_value(stream, i, value)
            values.append((stream, i, value.tolist() if isinstance(value, np.ndarray) else value))
            if i % 2:
                rec.flush()
                ends.append(os.path.getsize(full))
    data = full.read_bytes()
    assert read_all(full) == (values, None)
    cut = tmp_path / "cut.mcap"
    for size in range(len(data)):
        cut.write_bytes(data[:size])
        try:
            got, problem = read_all(cut)
        except RecordingError as exc:
            msg = str(exc)
            assert "\n" not in msg and str(cut) in msg
            assert size < ends[0], f"cut at {size}: {msg}"  # only a cut before any chunk may refuse
            continue
        flushed = 2 * sum(1 for e in ends if e <= size)
        assert got == values[:len(got)], size
        assert len(got) >= flushed, size
        # cut anywhere, the summary and footer included, the reader says in words what is missing
        assert problem is not None and "cut short" in problem, size


def foreign_mcap(path: Path, profile: str, schema: tuple[str, str] | None, encoding: str = "flowplex.v1") -> None:
    with open(path, "wb") as f:
        w = Writer(f)
        w.start(profile=profile, library="test")
        sid = w.register_schema(schema[0], schema[1], b"{}") if schema else 0
        cid = w.register_channel("topic", encoding, sid)
        w.add_message(cid, 0, encode_value(1, "text", wall_ns=0)[1], 0)
        w.finish()


@pytest.mark.parametrize(("content", "match"), [
    (b"", "empty file"),
    (b"hello, this is not a recording\n" * 4, "not an MCAP file"),
    (b"\x89MC", "truncated at byte 3"),
    (b"\x89MCAP0\r\n" + b"\x05" + b"\x00" * 20, "not a valid MCAP file"),
])
def test_garbage_is_a_one_line_recording_error(tmp_path: Path, content: bytes, match: str) -> None:
    path = tmp_path / "bad.mcap"
    path.write_bytes(content)
    with pytest.raises(RecordingError, match=match) as info:
        rec_mod.open(path)
    assert str(info.value).startswith(f"{path}: ") and "\n" not in str(info.value)


@pytest.mark.parametrize(("profile", "schema", "encoding", "match"), [
    ("ros2", ("std_msgs/String", "ros2msg"), "cdr", "not written by flowplex .profile 'ros2'"),
    ("", None, "json", "not written by flowplex"),
    ("flowplex", ("foo.Bar", "protobuf"), "protobuf", "stream 'topic': unknown schema: schema 'foo.Bar'"),
    ("flowplex", ("flowplex.nope", "flowplex.v1"), "flowplex.v1", "unknown schema"),
    ("flowplex", None, "flowplex.v1", "unknown schema: no schema"),
])
def test_foreign_mcap_files_are_one_line_recording_errors(tmp_path: Path, profile: str,
                                                          schema: tuple[str, str] | None, encoding: str,
                                                          match: str) -> None:
    path = tmp_path / "foreign.mcap"
    foreign_mcap(path, profile, schema, encoding)
    with pytest.raises(RecordingError, match=match) as info:
        r = rec_mod.open(path)
        list(r)
    assert str(info.value).startswith(f"{path}: ") and "\n" not in str(info.value)


def test_a_value_against_its_schema_is_a_schema_mismatch(tmp_path: Path) -> None:
    path = tmp_path / "mismatch.mcap"
    foreign_mcap(path, "flowplex", ("flowplex.i64", "flowplex.v1"))  # a str message in an i64 channel
    with rec_mod.open(path) as r, pytest.raises(RecordingError, match="a str value in a i64 stream"):
        list(r)


def test_missing_files_and_streams_are_recording_errors(tmp_path: Path) -> None:
    with pytest.raises(RecordingError, match="cannot open"):
        rec_mod.open(tmp_path / "nope.mcap")
    path = tmp_path / "all.mcap"
    write_all(path)
    with rec_mod.open(path) as r, pytest.raises(RecordingError, match="no stream 'cam' in the recording"):
        list(r.messages(streams=["cam"]))


@pytest.mark.parametrize("compression", ["zstd", "lz4", "none"])
def test_a_corrupt_chunk_is_a_recording_error(tmp_path: Path, compression: str) -> None:
    path = tmp_path / "c.mcap"
    with Recorder(path, compression=compression) as rec:
        rec.add_stream("b", kind="bytes")
        rec.write_value("b", 1, os.urandom(20_000))
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF  # inside the one chunk's data
    path.write_bytes(bytes(data))
    with rec_mod.open(path) as r, pytest.raises(RecordingError, match="corrupt Chunk") as info:
        list(r)
    assert "\n" not in str(info.value)
    with rec_mod.open(path, verify_crc=False) as r:  # uncompressed, unchecked: the bytes come back as stored
        if compression == "none":
            assert len(list(r)) == 1
