"""Reading a flowplex recording: ``open(path)`` maps the file and iterates its messages in file order.

The reader parses MCAP's records itself over a read-only memory map rather than through the
``mcap`` package's readers, for two reasons. Zero copy: an array in an uncompressed chunk is a
``np.frombuffer`` view of the map (in a compressed chunk, of the decompressed chunk), where the
``mcap`` readers copy every message's bytes. And damaged files: it knows exactly where a file cut
short (``kill -9``, a full disk) stops making sense, reads every complete record before that point
and says what it found, where the ``mcap`` readers raise on the first missing byte.

Only the records a recording needs are interpreted (Header, Schema, Channel, Message, Chunk,
Metadata, DataEnd, Footer); the others are skipped, as the MCAP specification asks of readers.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import struct
import zlib
from collections.abc import Generator, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final, NoReturn

from ..errors import UsageError
from ..packets import Packet
from ._codec import (
    BOUND,
    CHANNEL_KINDS,
    ENCODING,
    HEADER,
    KIND_NAMES,
    PROFILE,
    RecordingError,
    decode,
)
from ._mcap import (
    MAGIC,
    OP_CHANNEL,
    OP_CHUNK,
    OP_DATA_END,
    OP_FOOTER,
    OP_HEADER,
    OP_MESSAGE,
    OP_METADATA,
    OP_SCHEMA,
)
from ._writer import DROPPED_METADATA

if TYPE_CHECKING:
    from types import TracebackType

    from .._types import MetadataValue

__all__ = ["Record", "Recording", "RecordingSummary", "StreamSummary", "open_recording"]

_OP_NAMES: Final = {1: "Header", 2: "Footer", 3: "Schema", 4: "Channel", 5: "Message", 6: "Chunk",
                    7: "MessageIndex", 8: "ChunkIndex", 9: "Attachment", 10: "AttachmentIndex",
                    11: "Statistics", 12: "Metadata", 13: "MetadataIndex", 14: "SummaryOffset",
                    15: "DataEnd"}
_REC: Final = struct.Struct("<BQ")  # opcode, body length
_MSG: Final = struct.Struct("<HIQQ")  # channel id, sequence, log time, publish time
_CHUNK: Final = struct.Struct("<QQQI")  # start time, end time, uncompressed size, uncompressed crc
_FOOTER_SIZE: Final = _REC.size + 20


@dataclass(frozen=True, slots=True)
class Record:
    """One message of a recording: a packet's value, or a bound (``kind == "bound"``, value None).

    ``kind`` is the value's kind: ``"empty"``, ``"bytes"``, ``"i64"``, ``"f64"``, ``"bool"``,
    ``"str"``, ``"buffer"`` or ``"bound"``. A buffer's value is a read-only numpy view of the
    reader's memory.
    """

    stream: str
    kind: str
    ts: int
    value: object
    wall_ns: int
    metadata: dict[str, MetadataValue] | None = None

    @property
    def is_bound(self) -> bool:
        """Whether this record is a timestamp-bound advance (no packet)."""
        return self.kind == "bound"

    def to_packet(self) -> Packet:
        """The packet this record holds (an array is adopted without copying).

        Raises:
            UsageError: This is a bound, not a packet.
        """
        if self.is_bound:
            msg = f"a bound record of stream {self.stream!r} holds no packet"
            raise UsageError(msg)
        v = self.value
        if self.kind == "empty":
            empty = Packet()
            empty.timestamp = self.ts
            return empty
        p: Packet = {"i64": Packet.from_int, "f64": Packet.from_float, "bool": Packet.from_bool, "str": Packet.from_str,
             "bytes": Packet.from_bytes, "buffer": Packet.from_numpy}[self.kind](v, self.ts)  # type: ignore[operator]
        for k, mv in (self.metadata or {}).items():
            p.set_metadata(k, mv)
        return p


@dataclass(slots=True)
class StreamSummary:
    """What one stream of a recording holds."""

    name: str
    kind: str
    """The declared kind (the channel's schema): a value kind or ``"any"``."""
    kinds: tuple[str, ...] = ()
    """The value kinds its packets have, sorted."""
    count: int = 0
    """Packets (bounds not counted)."""
    bounds: int = 0
    first_ts: int | None = None
    last_ts: int | None = None
    first_wall_ns: int | None = None
    """When its first packet was recorded (ns since the epoch; bounds not counted)."""
    last_wall_ns: int | None = None
    """When its last packet was recorded (bounds not counted)."""
    dropped: int = 0
    """Packets a lossy recording dropped (0 when the file does not say)."""

    @property
    def wall_span_s(self) -> float:
        """Seconds of wall time between the first and the last packet (0 with fewer than two)."""
        if self.first_wall_ns is None or self.last_wall_ns is None:
            return 0.0
        return (self.last_wall_ns - self.first_wall_ns) / 1e9

    @property
    def rate_hz(self) -> float | None:
        """Packets per second over the wall time they span; None with fewer than two packets or no span.

        Bounds count for nothing: a stream's last bound may come long after its last packet (the
        bound that closes it, when the graph ends).
        """
        span = self.wall_span_s
        return (self.count - 1) / span if self.count > 1 and span > 0 else None


@dataclass(slots=True)
class RecordingSummary:
    """A recording at a glance: its streams, and whether the file is whole."""

    path: str
    streams: dict[str, StreamSummary] = field(default_factory=dict)
    complete: bool = True
    """Whether the file ends with its MCAP footer (closed properly)."""
    problem: str | None = None
    """What the file lacks, in words, when it is not complete (where it was cut short), else None."""

    @property
    def messages(self) -> int:
        """Packets and bounds, all streams together."""
        return sum(s.count + s.bounds for s in self.streams.values())


@dataclass(frozen=True, slots=True)
class _Channel:
    id: int
    name: str
    kind: str


class Recording:
    """A flowplex recording opened for reading (see :func:`open_recording`).

    Iterating gives ``(stream, ts, value)`` for every packet in file order; :meth:`messages` gives
    :class:`Record` objects, bounds included on request. The file is memory-mapped; arrays read
    from it are views that keep the map alive after :meth:`close`.
    """

    def __init__(self, path: str | os.PathLike[str], *, verify_crc: bool = True) -> None:
        self.path = os.fspath(path)
        self.verify_crc = verify_crc
        try:
            with open(self.path, "rb") as f:
                size = os.fstat(f.fileno()).st_size
                self._map: mmap.mmap | None = (
                    mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if size else None
                )
        except OSError as exc:
            self._fail(f"cannot open: {exc.strerror or exc}")
        self._size = size
        self._buf = memoryview(self._map) if self._map is not None else memoryview(b"")
        self._schemas: dict[int, tuple[str, str]] = {}
        self._channels: dict[int, _Channel] = {}
        self._by_name: dict[str, _Channel] = {}
        self._dropped: dict[str, int] = {}
        self._all_channels = False
        self._scanned = False
        self._read_to_cut: int | None = None
        """Messages (packets and bounds) a read to the end of the data found, once one did."""
        self._closed = False
        try:
            self._data_start = self._check_header()
            self.complete = self._read_summary_section()
            """Whether the file ends with its MCAP footer (the recorder closed it)."""
        except RecordingError:
            self.close()  # the map holds a descriptor of its own: not kept by a file that failed
            raise
        self.problem: str | None = None if self.complete else self._tail_problem(None)
        """What the file lacks when it is not complete, in words, else None.

        Said at open (the file ends without its summary and footer); a read to the end of the data
        says more exactly where it was cut (inside a chunk, after the data section...).
        """

    # --- errors ------------------------------------------------------------------------------------

    def _fail(self, what: str) -> NoReturn:
        """Raise the one-line ``RecordingError`` that names this file (with no chained context)."""
        msg = f"{self.path}: {what}"
        raise RecordingError(msg) from None

    # --- the header and the summary section --------------------------------------------------------

    def _check_header(self) -> int:
        buf, size = self._buf, self._size
        head = bytes(buf[:len(MAGIC)])
        if size == 0:
            self._fail("empty file, not a recording")
        if not MAGIC.startswith(head):
            self._fail("not an MCAP file (bad magic bytes)")
        if size < len(MAGIC) + _REC.size:
            self._fail(f"truncated at byte {size}, before its MCAP header record")
        opcode, length = _REC.unpack_from(buf, len(MAGIC))
        if opcode != OP_HEADER:
            self._fail(f"not a valid MCAP file: the first record is opcode {opcode:#x}, not a Header")
        body = len(MAGIC) + _REC.size
        if body + length > size:
            self._fail(f"truncated at byte {size}, inside its MCAP header record")
        try:
            profile, pos = _string(buf, body, body + length)
            library, pos = _string(buf, pos, body + length)
        except _Bad:
            self._fail("not a valid MCAP file: malformed Header record")
        if profile != PROFILE:
            self._fail(f"an MCAP file not written by flowplex (profile {profile!r}, library {library!r})")
        return int(body + length)

    def _read_summary_section(self) -> bool:
        """Whether the file is whole; reads its channels from the summary section when it is."""
        buf, size = self._buf, self._size
        start = size - len(MAGIC) - _FOOTER_SIZE
        if start < self._data_start or bytes(buf[size - len(MAGIC):]) != MAGIC:
            return False
        opcode, length = _REC.unpack_from(buf, start)
        if opcode != OP_FOOTER or length != _FOOTER_SIZE - _REC.size:
            return False
        summary_start = struct.unpack_from("<Q", buf, start + _REC.size)[0]
        if summary_start == 0:  # no summary: the channels are found by reading the data
            return True
        if not self._data_start <= summary_start <= start:
            self._fail(f"corrupt footer: the summary section starts at byte {summary_start}")
        pos = summary_start
        while pos < start:
            opcode, body, end = self._next_record(pos, start)
            if end < 0:
                self._fail(f"corrupt summary section at byte {pos}")
            self._interpret(self._buf, opcode, body, end, pos)
            pos = end
        self._all_channels = True
        return True

    def _tail_problem(self, data_end: int | None) -> str:
        """What an incomplete file lacks at its end; ``data_end``: where its data section ended, if
        a read found its end (a DataEnd record), else None."""
        size = self._size
        if bytes(self._buf[size - len(MAGIC):]) == MAGIC:
            return f"its footer (before the closing magic bytes at byte {size - len(MAGIC)}) is malformed"
        if data_end is None:
            return f"cut short at byte {size}: it ends without its summary and footer"
        if data_end >= size:
            return f"cut short at byte {size}, right after its data: it ends without its summary and footer"
        return f"cut short at byte {size}, inside its summary section: it ends without its footer"

    # --- records -----------------------------------------------------------------------------------

    def _next_record(self, pos: int, limit: int) -> tuple[int, int, int]:
        """(opcode, body start, body end) of the record at ``pos``; end is -1 if it runs past ``limit``."""
        if pos + _REC.size > limit:
            return -1, pos, -1
        opcode, length = _REC.unpack_from(self._buf, pos)
        body = pos + _REC.size
        if length > limit - body:
            return opcode, body, -1
        return opcode, body, body + length

    def _interpret(self, buf: memoryview, opcode: int, body: int, end: int, at: int) -> None:
        """Register a Schema, Channel or Metadata record of ``buf`` (others are skipped)."""
        try:
            if opcode == OP_SCHEMA:
                sid = struct.unpack_from("<H", buf, body)[0]
                name, pos = _string(buf, body + 2, end)
                encoding, pos = _string(buf, pos, end)
                self._schemas[sid] = (name, encoding)
            elif opcode == OP_CHANNEL:
                cid, sid = struct.unpack_from("<HH", buf, body)
                topic, pos = _string(buf, body + 4, end)
                encoding, pos = _string(buf, pos, end)
                self._add_channel(cid, sid, topic, encoding)
            elif opcode == OP_METADATA:
                name, pos = _string(buf, body, end)
                if name == DROPPED_METADATA:
                    for key, value in _string_map(buf, pos, end).items():
                        self._dropped[key] = int(value)
        except (_Bad, struct.error, ValueError):
            self._fail(f"corrupt {_OP_NAMES.get(opcode, '')} record at byte {at}")

    def _add_channel(self, cid: int, sid: int, topic: str, encoding: str) -> None:
        schema = self._schemas.get(sid)
        kind = schema[0].removeprefix("flowplex.") if schema is not None else None
        if schema is None or encoding != ENCODING or schema[1] != ENCODING or kind not in CHANNEL_KINDS:
            described = "no schema" if schema is None else f"schema {schema[0]!r} ({schema[1] or 'no encoding'})"
            self._fail(f"stream {topic!r}: unknown schema: {described}, message encoding {encoding!r}; "
                              f"flowplex reads {ENCODING} channels")
        channel = _Channel(cid, topic, str(kind))
        known = self._channels.get(cid)
        if known is not None and known != channel:
            self._fail(f"corrupt: channel {cid} is both {known.name!r} and {topic!r}")
        self._channels[cid] = channel
        self._by_name[topic] = channel

    def _raw(self) -> Iterator[tuple[_Channel, memoryview, int]]:
        """Every message in file order: (channel, its data, its offset); sets ``problem`` at a cut."""
        self._check_open()
        pos, size = self._data_start, self._size
        problem = None
        n = 0
        while True:
            if pos == size:
                problem = self._tail_problem(None)
                break
            opcode, body, end = self._next_record(pos, size)
            if end < 0:
                what = _OP_NAMES.get(opcode, "record") if opcode >= 0 else "record header"
                problem = f"cut short at byte {size}: its last {what} (at byte {pos}) is incomplete"
                break
            if opcode == OP_MESSAGE:
                yield self._message(self._buf, body, end, pos)
                n += 1
            elif opcode == OP_CHUNK:
                n += yield from self._chunk(body, end, pos)
            elif opcode in (OP_DATA_END, OP_FOOTER):
                if not self.complete:  # the data is whole: what follows it is not
                    problem = self._tail_problem(end)
                break
            else:
                self._interpret(self._buf, opcode, body, end, pos)
            pos = end
        self.problem = problem
        self._read_to_cut = n
        self._all_channels = self._scanned = True

    def _message(self, buf: memoryview, body: int, end: int, at: int) -> tuple[_Channel, memoryview, int]:
        if end - body < _MSG.size:
            self._fail(f"corrupt Message record at byte {at}")
        cid = struct.unpack_from("<H", buf, body)[0]
        channel = self._channels.get(cid)
        if channel is None:
            self._fail(f"corrupt: a message at byte {at} names channel {cid}, which was never defined")
        return channel, buf[body + _MSG.size:end], at

    def _chunk(self, body: int, end: int, at: int) -> Generator[tuple[_Channel, memoryview, int], None, int]:
        """The chunk's messages; returns how many there were."""
        buf = self._buf
        try:
            _start, _end, usize, crc = _CHUNK.unpack_from(buf, body)
            compression, pos = _string(buf, body + _CHUNK.size, end)
            rlen = struct.unpack_from("<Q", buf, pos)[0]
            pos += 8
            if rlen > end - pos:
                raise _Bad
        except (_Bad, struct.error):
            self._fail(f"corrupt Chunk record at byte {at}")
        data = buf[pos:pos + rlen]
        if compression:
            data = memoryview(self._decompress(compression, data, usize, at))
        if len(data) != usize:
            self._fail(f"corrupt Chunk at byte {at}: {len(data)} bytes where its header says {usize}")
        if self.verify_crc and crc and zlib.crc32(data) != crc:
            self._fail(f"corrupt Chunk at byte {at}: its checksum does not match")
        pos, n, count = 0, len(data), 0
        while pos < n:
            if pos + _REC.size > n:
                self._fail(f"corrupt Chunk at byte {at}: a record header runs past its end")
            opcode, length = _REC.unpack_from(data, pos)
            rbody = pos + _REC.size
            if length > n - rbody:
                self._fail(f"corrupt Chunk at byte {at}: a record runs past its end")
            if opcode == OP_MESSAGE:
                yield self._message(data, rbody, rbody + length, at)
                count += 1
            elif opcode in (OP_SCHEMA, OP_CHANNEL):
                self._interpret(data, opcode, rbody, rbody + length, at)
            pos = rbody + length
        return count

    def _decompress(self, compression: str, data: memoryview, usize: int, at: int) -> bytes:
        try:
            if compression == "zstd":
                import zstandard

                return zstandard.ZstdDecompressor().decompress(data, max_output_size=usize)
            if compression == "lz4":
                import lz4.frame  # type: ignore[import-untyped]

                return bytes(lz4.frame.decompress(data))
        except Exception as exc:  # each library raises its own types
            self._fail(f"corrupt Chunk at byte {at}: {compression} data does not decompress "
                              f"({type(exc).__name__})")
        self._fail(f"Chunk at byte {at} uses compression {compression!r}, which flowplex cannot read")

    # --- the public side ---------------------------------------------------------------------------

    @property
    def streams(self) -> list[str]:
        """The stream names, in channel order (a file cut short: those it defines before the cut)."""
        if not self._all_channels:
            for _ in self._raw():
                pass
        return [c.name for c in sorted(self._channels.values(), key=lambda c: c.id)]

    def kind(self, stream: str) -> str:
        """A stream's declared kind (``"i64"``..., or ``"any"``)."""
        self._check_streams((stream,))
        return self._by_name[stream].kind

    def _check_streams(self, streams: Iterable[str]) -> set[str]:
        wanted = set(streams)
        missing = sorted(wanted - set(self.streams))
        if missing:
            self._fail(f"no stream {', '.join(map(repr, missing))} in the recording "
                              f"(it has {', '.join(map(repr, self.streams)) or 'none'})")
        return wanted

    def messages(self, *, bounds: bool = False, streams: Iterable[str] | str | None = None) -> Iterator[Record]:
        """Every packet (and, with ``bounds=True``, every bound) as a :class:`Record`, in file order.

        ``streams`` keeps only those streams; a single ``str`` is one stream's name (not its letters).

        Raises:
            RecordingError: At the call: a stream not in the file, or the recording is closed.
                While iterating: a corrupt message (naming the stream and byte offset). A file cut
                short is not an error: reading stops at the last complete chunk and
                :attr:`problem` says where.
        """
        self._check_open()
        if isinstance(streams, str):
            streams = (streams,)
        wanted = self._check_streams(streams) if streams is not None else None
        return self._records(bounds, wanted)

    def _records(self, bounds: bool, wanted: set[str] | None) -> Iterator[Record]:
        for channel, data, at in self._raw():
            if wanted is not None and channel.name not in wanted:
                continue
            try:
                d = decode(data)
            except RecordingError as exc:
                self._fail(f"stream {channel.name!r}, message at byte {at}: {exc}")
            if d.kind == BOUND:
                if bounds:
                    yield Record(channel.name, "bound", d.ts, None, d.wall_ns)
                continue
            kind = KIND_NAMES[d.kind]
            if channel.kind != "any" and channel.kind != kind:
                self._fail(f"stream {channel.name!r}, message at byte {at}: a {kind} value in a "
                                  f"{channel.kind} stream (schema mismatch)")
            yield Record(channel.name, kind, d.ts, d.value, d.wall_ns, d.metadata)

    def __iter__(self) -> Iterator[tuple[str, int, object]]:
        """``(stream, ts, value)`` for every packet in file order (bounds left out)."""
        for r in self.messages():
            yield r.stream, r.ts, r.value

    def summary(self) -> RecordingSummary:
        """Per stream: kinds, counts, first/last timestamps and wall times, rate, drops (one pass).

        Only the message headers are read, not the values.

        Raises:
            RecordingError: A corrupt message, or the recording is closed.
        """
        self._check_open()
        out = RecordingSummary(self.path, complete=self.complete)
        streams: dict[int, StreamSummary] = {}
        kinds: dict[int, set[str]] = {}
        for channel, data, at in self._raw():
            s = streams.get(channel.id)
            if s is None:
                s = streams[channel.id] = StreamSummary(channel.name, channel.kind)
                kinds[channel.id] = set()
            if len(data) < HEADER.size:
                self._fail(f"stream {channel.name!r}, message at byte {at}: shorter than its header")
            ts, wall, kind = HEADER.unpack_from(data)[:3]
            if kind == BOUND:
                s.bounds += 1
            else:
                s.count += 1
                kinds[channel.id].add(KIND_NAMES.get(kind, f"unknown {kind}"))
                if s.first_ts is None:
                    s.first_ts = ts
                    s.first_wall_ns = wall
                s.last_ts = ts
                s.last_wall_ns = wall
        for c in sorted(self._channels.values(), key=lambda c: c.id):
            s = streams.get(c.id) or StreamSummary(c.name, c.kind)
            s.kinds = tuple(sorted(kinds.get(c.id, ())))
            s.dropped = self._dropped.get(c.name, 0)
            out.streams[c.name] = s
        out.problem = self.problem
        return out

    @property
    def truncation(self) -> str | None:
        """One line saying that the file was cut short, where, and what of it can be read; None
        when it is complete.

        The line names the file and reads ``FILE is truncated: PROBLEM; read up to its last
        complete chunk (N messages)``, N counting packets and bounds. The first time, it reads the
        file to its cut (as :attr:`streams` does) to count them.

        Raises:
            RecordingError: A corrupt message before the cut, or the recording is closed.
        """
        if self.complete:
            return None
        if self._read_to_cut is None:
            for _ in self._raw():
                pass
        return (f"{self.path} is truncated: {self.problem}; read up to its last complete chunk "
                f"({self._read_to_cut} messages)")

    @property
    def dropped(self) -> dict[str, int]:
        """Stream -> packets a lossy recording dropped (read from the file's ``flowplex.dropped``)."""
        if not self._scanned:  # the counts sit at the end of the data section: one pass reads them
            for _ in self._raw():
                pass
        return dict(self._dropped)

    def _check_open(self) -> None:
        if self._closed:
            self._fail("the recording is closed")

    def close(self) -> None:
        """Release the memory map (at once if no array view of it is alive, else when the last goes).

        Reading afterwards is a ``RecordingError``; the arrays already read stay valid.
        """
        self._closed = True
        self._buf = memoryview(b"")
        m, self._map = self._map, None
        if m is not None:
            with contextlib.suppress(BufferError):  # arrays still view it: they keep it alive, the GC closes it
                m.close()

    def __enter__(self) -> Recording:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "complete" if self.complete else "incomplete"
        return f"<Recording {self.path!r} {state}, {self._size} bytes>"


def open_recording(path: str | os.PathLike[str], *, verify_crc: bool = True) -> Recording:
    """Open a flowplex recording (exported as ``flowplex.recording.open``).

    ``verify_crc`` checks each chunk's CRC (the recorder writes them) before reading it.

    Raises:
        RecordingError: The file cannot be read, is not MCAP, was not written by flowplex, or has a
            channel whose schema flowplex does not know. One line, naming the file.
    """
    return Recording(path, verify_crc=verify_crc)


# --- MCAP primitives --------------------------------------------------------------------------------


class _Bad(Exception):
    """A string or map runs past its record."""


def _string(buf: memoryview, pos: int, end: int) -> tuple[str, int]:
    if pos + 4 > end:
        raise _Bad
    n = struct.unpack_from("<I", buf, pos)[0]
    pos += 4
    if n > end - pos:
        raise _Bad
    try:
        return str(buf[pos:pos + n], "utf-8"), pos + n
    except UnicodeDecodeError:
        raise _Bad from None


def _string_map(buf: memoryview, pos: int, end: int) -> dict[str, str]:
    if pos + 4 > end:
        raise _Bad
    n = struct.unpack_from("<I", buf, pos)[0]
    pos += 4
    stop = pos + n
    if stop > end:
        raise _Bad
    out: dict[str, str] = {}
    while pos < stop:
        key, pos = _string(buf, pos, stop)
        value, pos = _string(buf, pos, stop)
        out[key] = value
    return out

