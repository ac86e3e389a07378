"""The recorder's own MCAP writer: the files it makes are those of the ``mcap`` package's writer
for small messages (byte for byte), large frames get a chunk of their own written from their
memory, and every file reads the same through flowplex's reader and the plain ``mcap`` reader,
whole, cut at any chunk boundary, or after a write that failed. The capture's batched queue keeps
every stream in order, holds the graph back when full, and records what a packet was when it
was delivered.
"""

from __future__ import annotations

import errno
import io
import os
from pathlib import Path

import numpy as np
import pytest
from mcap.reader import make_reader
from mcap.writer import CompressionType, Writer

from flowplex import Packet
from flowplex import recording as rec_mod
from flowplex.recording import Capture, Recorder, RecordingError
from flowplex.recording import _writer as writer_mod
from flowplex.recording._codec import ENCODING, PROFILE, decode, encode_value, schema_data, schema_name

FRAME = (48, 64, 3)  # 9216 bytes: "large" for the small chunk sizes below
MCAP_COMPRESSION = {"none": CompressionType.NONE, "zstd": CompressionType.ZSTD, "lz4": CompressionType.LZ4}


def plain(v: object) -> object:
    """A value to compare: an array as its dtype, shape and bytes."""
    return (v.dtype.str, v.shape, v.tobytes()) if isinstance(v, np.ndarray) else v


def values(path: Path) -> list[tuple[str, int, object]]:
    """Every packet through flowplex's reader, arrays as ``plain``."""
    with rec_mod.open(path) as r:
        return [(s, t, plain(v)) for s, t, v in r]


def mcap_values(path: Path, *, log_time_order: bool = False) -> list[tuple[str, int, object]]:
    """Every packet through the plain ``mcap`` reader (CRCs checked), decoded by the codec."""
    out: list[tuple[str, int, object]] = []
    with open(path, "rb") as f:
        for _, channel, message in make_reader(f, validate_crcs=True).iter_messages(log_time_order=log_time_order):
            d = decode(memoryview(message.data))
            if not d.is_bound:
                out.append((channel.topic, d.ts, plain(d.value)))
    return out


# --- the same bytes as the mcap writer -------------------------------------------------------------------


def small_messages() -> list[tuple[str, int, object, int]]:
    """(stream, ts, value, wall_ns): three streams interleaved, every scalar kind."""
    out: list[tuple[str, int, object, int]] = []
    for i in range(300):
        out.append(("n", i, i * 7, 1000 + i))
        if i % 3 == 0:
            out.append(("s", i, "x" * (i % 40), 1000 + i))
        if i % 5 == 0 and i >= 100:
            out.append(("f", i, i / 3, 1000 + i))
    return out


@pytest.mark.parametrize("compression", ["none", "zstd", "lz4"])
@pytest.mark.parametrize("chunk_size", [64, 1000, 1024 * 1024])
def test_small_messages_make_the_mcap_writers_file_byte_for_byte(tmp_path: Path, compression: str,
                                                                  chunk_size: int) -> None:
    ours = tmp_path / "ours.mcap"
    with Recorder(ours, compression=compression, chunk_size=chunk_size) as rec:
        rec.add_stream("n", kind="i64")
        rec.add_stream("s", kind="str")
        for stream, ts, value, wall in small_messages()[:50]:
            rec.write_value(stream, ts, value, wall_ns=wall)
        rec.add_stream("f")  # a stream added midway goes in the open chunk, as the mcap writer puts it
        for stream, ts, value, wall in small_messages()[50:]:
            rec.write_value(stream, ts, value, wall_ns=wall)
        rec.note_dropped("s", 3)
    with open(ours, "rb") as f:
        library = make_reader(f).get_header().library

    theirs = io.BytesIO()
    w = Writer(theirs, chunk_size=chunk_size, compression=MCAP_COMPRESSION[compression])
    w.start(profile=PROFILE, library=library)
    ids = {}
    schemas = {}
    sequences = {"n": 0, "s": 0, "f": 0}
    for name, kind in (("n", "i64"), ("s", "str")):
        schemas[kind] = w.register_schema(schema_name(kind), ENCODING, schema_data(kind))
        ids[name] = w.register_channel(name, ENCODING, schemas[kind])
    for i, (stream, ts, value, wall) in enumerate(small_messages()):
        if i == 50:
            schemas["any"] = w.register_schema(schema_name("any"), ENCODING, schema_data("any"))
            ids["f"] = w.register_channel("f", ENCODING, schemas["any"])
        w.add_message(ids[stream], wall, encode_value(ts, value, wall_ns=wall)[1], wall, sequences[stream])
        sequences[stream] += 1
    w.add_metadata(writer_mod.DROPPED_METADATA, {"s": "3"})
    w.finish()  # type: ignore[no-untyped-call]
    assert ours.read_bytes() == theirs.getvalue()


# --- large frames -----------------------------------------------------------------------------------------


def frames_and_ticks(path: Path, *, compression: str = "none", chunk_size: int = 4096, flush_every: int = 0,
                     shape: tuple[int, ...] = FRAME) -> list[tuple[str, int, object]]:
    """Frames (each larger than a chunk) interleaved with small messages on two other streams."""
    expected: list[tuple[str, int, object]] = []
    rng = np.random.default_rng(7)
    with Recorder(path, compression=compression, chunk_size=chunk_size) as rec:
        rec.add_stream("cam", kind="buffer")
        rec.add_stream("n", kind="i64")
        rec.add_stream("any")
        for i in range(12):
            frame = rng.integers(0, 255, shape, dtype=np.uint8)
            if i % 4 == 3:
                frame = frame[:, ::-1]  # strided: stored C-contiguous
            rec.write("cam", Packet.from_numpy(frame, ts=i))
            expected.append(("cam", i, plain(np.ascontiguousarray(frame))))
            for j in range(i % 3):
                rec.write("n", Packet.from_int(i * 10 + j, ts=i))
                expected.append(("n", i, i * 10 + j))
            if i % 2:
                rec.write_value("any", i, np.arange(i, dtype=np.float32))  # small arrays stay in chunks
                expected.append(("any", i, plain(np.arange(i, dtype=np.float32))))
            if flush_every and i % flush_every == flush_every - 1:
                rec.flush()
    return expected


@pytest.mark.parametrize("compression", ["none", "zstd", "lz4"])
def test_large_frames_round_trip_through_both_readers_in_order(tmp_path: Path, compression: str) -> None:
    path = tmp_path / "f.mcap"
    expected = frames_and_ticks(path, compression=compression)
    assert values(path) == expected
    assert mcap_values(path) == expected  # file order: each stream in the order it was written
    for stream in ("cam", "n", "any"):  # and by log time, as tools read it
        assert [v for v in mcap_values(path, log_time_order=True) if v[0] == stream] == [
            v for v in expected if v[0] == stream]
    with open(path, "rb") as f:
        summary = make_reader(f).get_summary()
    assert summary is not None and summary.statistics is not None
    counts = {summary.channels[c].topic: n for c, n in summary.statistics.channel_message_counts.items()}
    assert counts == {s: sum(1 for v in expected if v[0] == s) for s in ("cam", "n", "any")}
    assert summary.statistics.message_count == len(expected)
    assert summary.statistics.chunk_count == len(summary.chunk_indexes)


def test_an_uncompressed_frame_gets_a_chunk_of_its_own_read_without_a_copy(tmp_path: Path) -> None:
    path = tmp_path / "f.mcap"
    frames_and_ticks(path)
    with open(path, "rb") as f:
        summary = make_reader(f).get_summary()
    assert summary is not None
    cam = next(c for c, ch in summary.channels.items() if ch.topic == "cam")
    alone = [ci for ci in summary.chunk_indexes if list(ci.message_index_offsets) == [cam]]
    assert len(alone) == 12 and all(ci.compression == "" for ci in alone)
    with rec_mod.open(path) as r:
        arrays = [m.value for m in r.messages(streams=["cam"])]
        assert all(isinstance(a, np.ndarray) and not a.flags.owndata and not a.flags.writeable for a in arrays)
        del arrays


def test_write_hands_the_frames_memory_to_the_file_without_joining(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    frame = np.arange(np.prod(FRAME), dtype=np.uint8).reshape(FRAME)
    seen: list[list[object]] = []
    real = os.writev

    def spy(fd: int, parts: list[object]) -> int:
        seen.append(list(parts))
        return real(fd, parts)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "writev", spy)
    with Recorder(tmp_path / "f.mcap", compression="none", chunk_size=4096) as rec:
        rec.add_stream("cam", kind="buffer")
        rec.write("cam", Packet.from_numpy(frame, ts=1))
        views = [p for call in seen for p in call if isinstance(p, memoryview) and p.nbytes == frame.nbytes]
        assert len(views) == 1 and np.shares_memory(np.asarray(views[0]), frame)


# --- files cut short, and writes that fail ----------------------------------------------------------------


def chunk_ends(path: Path) -> list[int]:
    """Where each chunk and its message indexes end, from the summary's chunk indexes."""
    with open(path, "rb") as f:
        summary = make_reader(f).get_summary()
    assert summary is not None
    return [ci.chunk_start_offset + ci.chunk_length + ci.message_index_length for ci in summary.chunk_indexes]


@pytest.mark.parametrize("compression", ["none", "zstd"])
def test_a_file_cut_at_or_between_chunk_boundaries_reads_every_complete_chunk(tmp_path: Path, compression: str) -> None:
    full = tmp_path / "full.mcap"
    expected = frames_and_ticks(full, compression=compression, flush_every=2, chunk_size=512, shape=(16, 16, 3))
    data = full.read_bytes()
    ends = chunk_ends(full)
    per_chunk = []  # how many packets the file holds once each chunk is complete
    for end in ends:
        (tmp_path / "c.mcap").write_bytes(data[:end])
        per_chunk.append(len(values(tmp_path / "c.mcap")))
    assert per_chunk == sorted(per_chunk) and per_chunk[-1] == len(expected)
    cut = tmp_path / "cut.mcap"
    sizes = sorted({*range(0, len(data), 7), *ends, *(e - 1 for e in ends), *(e + 1 for e in ends)})
    for size in sizes:
        cut.write_bytes(data[:size])
        try:
            got = values(cut)
        except RecordingError as exc:
            assert size < ends[0], f"cut at {size}: {exc}"  # only before the first chunk may it refuse
            continue
        complete = sum(1 for e in ends if e <= size)
        assert got == expected[:len(got)], size
        assert len(got) >= (per_chunk[complete - 1] if complete else 0), size


def test_a_write_that_fails_leaves_the_file_readable_to_its_last_chunk(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "full.mcap"
    real = os.writev
    calls = [0]

    def full_disk(fd: int, parts: list[bytes]) -> int:
        calls[0] += 1
        if calls[0] > 6:  # a torn write: half the first part, then the disk is full
            real(fd, [memoryview(parts[0])[:len(parts[0]) // 2]])
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(fd, parts)

    monkeypatch.setattr(os, "writev", full_disk)
    rec = Recorder(path, compression="none", chunk_size=4096)
    rec.add_stream("cam", kind="buffer")
    frame = np.ones(FRAME, np.uint8)
    with pytest.raises(RecordingError, match=r"full\.mcap: cannot write the recording: No space left on device"):
        for i in range(20):
            rec.write("cam", Packet.from_numpy(frame, ts=i))
    with pytest.raises(RecordingError, match="failed earlier"):
        rec.write("cam", Packet.from_numpy(frame, ts=99))
    rec.close()  # no summary after a torn record
    with rec_mod.open(path) as r:
        got = [t for _, t, _ in r]
        assert got == list(range(5)) and r.problem is not None and "cut short" in r.problem


def test_short_writes_are_finished(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    expected = frames_and_ticks(tmp_path / "whole.mcap")
    real = os.writev

    def dribble(fd: int, parts: list[bytes]) -> int:  # a file that takes 1000 bytes at a time
        first = next((p for p in parts if len(p)), b"")
        return real(fd, [memoryview(first)[:1000]])

    monkeypatch.setattr(os, "writev", dribble)
    path = tmp_path / "dribbled.mcap"
    frames_and_ticks(path)
    monkeypatch.undo()
    assert values(path) == expected == mcap_values(path)


# --- the capture's queue ----------------------------------------------------------------------------------


def test_a_capture_batches_many_streams_in_order(tmp_path: Path) -> None:
    path = tmp_path / "c.mcap"
    cap = Capture(Recorder(path, compression="zstd", chunk_size=8192))
    taps = {s: cap.stream(s) for s in ("a", "b", "c")}
    for i in range(20000):
        for s, (on_packet, on_bound) in taps.items():
            if s != "c" or i % 7 == 0:
                on_packet(Packet.from_int(i, ts=i))
                on_bound(i + 1)  # implied by the packet: not recorded
    taps["c"][1](50000)  # a bound no packet implies: recorded
    cap.close()
    got = values(path)
    for s in ("a", "b", "c"):
        step = 7 if s == "c" else 1
        assert [(t, v) for n, t, v in got if n == s] == [(i, i) for i in range(0, 20000, step)]
    with rec_mod.open(path) as r:
        assert [(m.stream, m.ts) for m in r.messages(bounds=True) if m.is_bound] == [("c", 50000)]
    assert cap.dropped == {} and mcap_values(path) == got


def test_a_full_capture_holds_the_graph_back_and_loses_nothing(tmp_path: Path) -> None:
    path = tmp_path / "c.mcap"
    frame = np.zeros(FRAME, np.uint8)
    cap = Capture(Recorder(path, compression="none", chunk_size=4096), queue_bytes=3 * frame.nbytes)
    on_packet, _ = cap.stream("cam")
    for i in range(200):
        frame[0, 0, 0] = i % 256
        on_packet(Packet.from_numpy(frame, ts=i))
    cap.close()
    with rec_mod.open(path) as r:
        got = [(t, int(v[0, 0, 0])) for _, t, v in r]  # type: ignore[index]
    assert got == [(i, i % 256) for i in range(200)]


def test_a_capture_records_a_frame_as_it_was_when_delivered(tmp_path: Path) -> None:
    """The graph may write a buffer in place once the tap returns: the capture copied it."""
    path = tmp_path / "c.mcap"
    cap = Capture(Recorder(path, compression="none", chunk_size=1024))
    on_packet, _ = cap.stream("cam")
    frame = np.zeros(FRAME, np.uint8)
    for i in range(5):
        frame[...] = 0
        on_packet(Packet.from_numpy(frame, ts=i))
        frame[...] = 255  # an in-place node, after delivery
    cap.close()
    assert [v for _, _, v in values(path)] == [plain(np.zeros(FRAME, np.uint8))] * 5


def test_a_lossy_capture_counts_what_it_drops(tmp_path: Path) -> None:
    path = tmp_path / "c.mcap"
    cap = Capture(Recorder(path, compression="none"), lossy=True, queue_bytes=64)
    on_packet, _ = cap.stream("n")
    for i in range(5000):
        on_packet(Packet.from_int(i, ts=i))
    cap.close()
    got = [t for _, t, _ in values(path)]
    assert got == sorted(got) and len(got) + cap.dropped.get("n", 0) == 5000
    with rec_mod.open(path) as r:
        assert r.dropped == ({"n": cap.dropped["n"]} if cap.dropped else {})


def test_a_writer_that_fails_stops_holding_the_graph(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_space(fd: int, parts: list[bytes]) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    path = tmp_path / "c.mcap"
    rec = Recorder(path, compression="none", chunk_size=1024)
    monkeypatch.setattr(os, "writev", no_space)
    cap = Capture(rec, queue_bytes=4 * 9216)
    on_packet, _ = cap.stream("cam")
    frame = np.zeros(FRAME, np.uint8)
    for i in range(50):  # lossless, yet never blocked for good: the dead writer's messages are counted
        on_packet(Packet.from_numpy(frame, ts=i))
    cap.close()
    assert cap.dropped == {"cam": 50}
    assert isinstance(cap.failure, RecordingError)
