"""``Recorder``: writes streams of packets (and timestamp bounds) into a flowplex MCAP recording.

The file is chunked (``chunk_size`` bytes of messages per chunk, each compressed on its own) and
indexed, so memory stays bounded by one chunk whatever the recording's length, and a file cut
short is readable up to its last complete chunk: every chunk goes to the file, with its message
indexes, in one ``writev`` as soon as it is complete. At ``close`` the writer adds what a lossy
recording dropped (an MCAP Metadata record named ``flowplex.dropped``: stream -> count) and the
summary section (schemas, channels, statistics, chunk and metadata indexes, summary offsets)
that tools such as Foxglove read.

The MCAP records are written here (``_McapWriter``) rather than by the ``mcap`` package's
``Writer``, which builds each record in a ``BytesIO`` and copies a message's bytes several times
(about 0.2x the speed of ``ndarray.tofile`` for 1080p frames, and microseconds per small
message). Files of small messages come out byte for byte as that writer makes them
(``tests/recording/test_writer_fast.py`` checks it). The one difference is where it pays: in an
uncompressed recording, a message of ``chunk_size`` bytes or more (a video frame) gets a chunk
of its own, written straight from the array's memory (``os.writev``: the record headers, then the
buffer, with no join and no copy) and with no CRC (``0``, "not computed", as the MCAP
specification allows: a CRC would read every byte again, as slowly as the write itself). Small
messages still waiting for a chunk are written as their own chunk first, so the file keeps the
order the messages were written in.
"""

from __future__ import annotations

import errno
import os
import struct
import sys
import threading
import time
import zlib
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Final, NoReturn, TypeAlias, final

from ..errors import UsageError
from ..packets import Packet
from ._codec import (
    BOUND,
    ENCODING,
    KIND_NAMES,
    KINDS,
    PROFILE,
    Body,
    RecordingError,
    encode_bound,
    encode_packet_parts,
    encode_value_parts,
    kind_of,
    schema_data,
    schema_name,
)
from ._mcap import (
    MAGIC,
    OP_ATTACHMENT_INDEX,
    OP_CHANNEL,
    OP_CHUNK,
    OP_CHUNK_INDEX,
    OP_DATA_END,
    OP_FOOTER,
    OP_HEADER,
    OP_MESSAGE,
    OP_MESSAGE_INDEX,
    OP_METADATA,
    OP_METADATA_INDEX,
    OP_SCHEMA,
    OP_STATISTICS,
    OP_SUMMARY_OFFSET,
)

if TYPE_CHECKING:
    from types import TracebackType

    from .._types import MetadataValue

__all__ = ["COMPRESSIONS", "DROPPED_METADATA", "Recorder"]

COMPRESSIONS: Final = {"zstd": "zstd", "lz4": "lz4", "none": ""}
"""The ``compression=`` choices, each with the name an MCAP Chunk record gives it."""
DROPPED_METADATA: Final = "flowplex.dropped"
"""The name of the MCAP Metadata record that counts, per stream, the packets a lossy recording dropped."""

Encoded: TypeAlias = tuple[int, int, bytes, int]
"""One message for :meth:`Recorder.write_encoded_many`: channel id, kind, message bytes, wall time (ns)."""
_Part: TypeAlias = "bytes | bytearray | memoryview"

# --- MCAP records (https://mcap.dev/spec) ------------------------------------------------------------


_REC: Final = struct.Struct("<BQ")
"""Every record's opcode and body length."""
_MESSAGE: Final = struct.Struct("<BQHIQQ")
"""A Message record up to its data: opcode, length, channel id, sequence, log time, publish time."""
_MESSAGE_FIXED: Final = _MESSAGE.size - _REC.size
_PAIR: Final = struct.Struct("<QQ")
"""One MessageIndex entry: log time, offset of the message in the chunk's records."""
_CHUNK: Final = struct.Struct("<BQQQQI")
"""A Chunk record up to its compression name: opcode, length, start, end, records size, records CRC."""
_CHUNK_FIXED: Final = _CHUNK.size - _REC.size + 4 + 8  # + the compression name's length and the records' length
_MESSAGE_INDEX: Final = struct.Struct("<BQHI")
"""A MessageIndex record up to its entries: opcode, length, channel id, entries' length."""
_CHUNK_INDEX: Final = struct.Struct("<QQQQ")
_INDEX_OFFSET: Final = struct.Struct("<HQ")
_STATISTICS: Final = struct.Struct("<QHIIIIQQ")
_SUMMARY_OFFSET: Final = struct.Struct("<BQQ")
_FOOTER: Final = struct.Struct("<BQQQ")
_U16: Final = struct.Struct("<H")
_U32: Final = struct.Struct("<I")
_U64: Final = struct.Struct("<Q")
_SEQUENCE_MASK: Final = 0xFFFFFFFF


def _string(value: str) -> bytes:
    data = value.encode()
    return _U32.pack(len(data)) + data


def _string_map(values: dict[str, str]) -> bytes:
    data = b"".join(_string(k) + _string(v) for k, v in values.items())
    return _U32.pack(len(data)) + data


def _record(opcode: int, body: bytes) -> bytes:
    return _REC.pack(opcode, len(body)) + body


def _log_times(index: bytearray) -> Sequence[int]:
    """The log times of a channel's MessageIndex entries (every other ``<Q``), without a loop in Python."""
    if sys.byteorder == "little":
        return memoryview(index).cast("Q")[::2]
    return [t for t, _ in _PAIR.iter_unpack(index)]


def _library() -> str:
    from importlib.metadata import version

    try:
        return f"flowplex/{version('flowplex')}"
    except Exception:  # an uninstalled checkout: the name is informative only
        return "flowplex"


class _Channel:
    """An MCAP channel as the writer tracks it: its id, next sequence number, message count, and
    the MessageIndex entries of its messages in the open chunk."""

    __slots__ = ("count", "id", "index", "sequence")

    def __init__(self, channel_id: int) -> None:
        self.id = channel_id
        self.sequence = 0
        self.count = 0
        self.index = bytearray()


@final
class _McapWriter:
    """The MCAP records of one file, written to a file descriptor (see the module docstring).

    Not thread-safe: the ``Recorder`` holds its lock around every call. ``OSError`` from the file
    is the caller's to map.
    """

    def __init__(self, fd: int, *, compression: str, chunk_size: int, profile: str, library: str) -> None:
        self._fd = fd
        self._pos = 0
        self._compression = compression
        self._chunk_size = chunk_size
        self._alone = chunk_size if not compression else None
        """Messages of this many bytes or more get a chunk of their own, written from their buffer."""
        self._chunk = bytearray()
        """The open chunk's records (Schema, Channel, Message), uncompressed."""
        self._in_chunk: list[_Channel] = []
        """The channels with messages in the open chunk, in the order of their first one."""
        self._counted: list[_Channel] = []
        """The channels with messages, in the order of their first one (the Statistics order)."""
        self._schemas: list[bytes] = []
        self._channels: list[bytes] = []
        self._chunk_indexes = bytearray()
        self._metadata_indexes = bytearray()
        self._messages = 0
        self._start = 0
        self._end = 0
        self._chunks = 0
        self._metadata = 0
        self._write((MAGIC, _record(OP_HEADER, _string(profile) + _string(library))))

    def _write(self, parts: Sequence[_Part]) -> None:
        """Write ``parts`` in order, to the last byte (a file may take fewer bytes than asked)."""
        pending = list(parts)
        while pending:
            n = os.writev(self._fd, pending)
            if n == 0:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            self._pos += n
            while pending and n >= len(pending[0]):
                n -= len(pending.pop(0))
            if n:
                pending[0] = memoryview(pending[0])[n:]

    def add_schema(self, schema_id: int, name: str, encoding: str, data: bytes) -> None:
        """Define a schema: in the open chunk (as the ``mcap`` writer does, which may fill it) and in the summary."""
        rec = _record(OP_SCHEMA, _U16.pack(schema_id) + _string(name) + _string(encoding) + _U32.pack(len(data))
                      + data)
        self._schemas.append(rec)
        self._chunk += rec
        if len(self._chunk) > self._chunk_size:
            self.finish_chunk()

    def add_channel(self, channel: _Channel, schema_id: int, topic: str, encoding: str) -> None:
        """Define a channel: in the open chunk and in the summary."""
        rec = _record(OP_CHANNEL, _U16.pack(channel.id) + _U16.pack(schema_id) + _string(topic) + _string(encoding)
                      + _U32.pack(0))
        self._channels.append(rec)
        self._chunk += rec
        if len(self._chunk) > self._chunk_size:
            self.finish_chunk()

    def add_message(self, channel: _Channel, log_time: int, head: bytes, body: Body = b"") -> None:
        """Add one message (its data is ``head + body``) to the open chunk, or to a chunk of its
        own when it is large and the file uncompressed; finish the chunk once it is full."""
        size = len(head) + len(body)
        if self._alone is not None and size >= self._alone:
            self._add_alone(channel, log_time, head, body, size)
            return
        chunk = self._chunk
        if not channel.index:
            self._in_chunk.append(channel)
        channel.index += _PAIR.pack(log_time, len(chunk))
        seq = channel.sequence
        channel.sequence = (seq + 1) & _SEQUENCE_MASK
        chunk += _MESSAGE.pack(OP_MESSAGE, _MESSAGE_FIXED + size, channel.id, seq, log_time, log_time)
        chunk += head
        if body:
            chunk += body
        if len(chunk) > self._chunk_size:
            self.finish_chunk()

    def add_encoded(self, streams: dict[int, _Stream], messages: Iterable[Encoded]) -> None:
        """Add many encoded messages (see ``Recorder.write_encoded_many``): ``add_message``'s loop,
        inlined, for a capture's batches of small messages."""
        alone = self._alone
        limit = self._chunk_size
        pack_pair = _PAIR.pack
        pack_message = _MESSAGE.pack
        chunk = self._chunk
        for channel_id, kind, data, wall in messages:
            s = streams.get(channel_id)
            if s is None or (s.code >= 0 and kind != s.code and kind != BOUND):
                _refuse(s, channel_id, kind)
            log_time = wall if wall > 0 else 0
            size = len(data)
            if alone is not None and size >= alone:
                self._add_alone(s, log_time, data, b"", size)
                chunk = self._chunk
                continue
            if not s.index:
                self._in_chunk.append(s)
            s.index += pack_pair(log_time, len(chunk))
            seq = s.sequence
            s.sequence = (seq + 1) & _SEQUENCE_MASK
            chunk += pack_message(OP_MESSAGE, _MESSAGE_FIXED + size, channel_id, seq, log_time, log_time)
            chunk += data
            if len(chunk) > limit:
                self.finish_chunk()
                chunk = self._chunk

    def _add_alone(self, channel: _Channel, log_time: int, head: bytes, body: Body, size: int) -> None:
        """Write one message as a chunk of its own, its buffer handed to ``writev`` as it is."""
        self.finish_chunk()
        pending = self._chunk  # Schema and Channel records not yet in a chunk lead this one
        seq = channel.sequence
        channel.sequence = (seq + 1) & _SEQUENCE_MASK
        message = _MESSAGE.pack(OP_MESSAGE, _MESSAGE_FIXED + size, channel.id, seq, log_time, log_time)
        records = len(pending) + len(message) + size
        chunk_head = (_CHUNK.pack(OP_CHUNK, _CHUNK_FIXED + records, log_time, log_time, records, 0)
                      + _U32.pack(0) + _U64.pack(records))
        chunk_start = self._pos
        chunk_length = len(chunk_head) + records
        index = _MESSAGE_INDEX.pack(OP_MESSAGE_INDEX, 2 + 4 + _PAIR.size, channel.id, _PAIR.size) + _PAIR.pack(
            log_time, len(pending))
        self._write((chunk_head, pending, message, head, body, index))
        self._chunk = bytearray()
        self._chunk_indexes += self._chunk_index(log_time, log_time, chunk_start, chunk_length,
                                                 [(channel.id, chunk_start + chunk_length)], len(index), "",
                                                 records, records)
        self._count_chunk(log_time, log_time, [channel], [1])

    def finish_chunk(self) -> None:
        """Compress and write the open chunk with its message indexes (one ``writev``); nothing
        when it holds no message (its Schema and Channel records wait for the next one)."""
        in_chunk = self._in_chunk
        if not in_chunk:
            return
        records = self._chunk
        size = len(records)
        crc = zlib.crc32(records)
        compression = self._compression
        data: bytes | bytearray
        if compression == "zstd":
            import zstandard

            data = zstandard.compress(records)
        elif compression == "lz4":
            import lz4.frame  # type: ignore[import-untyped]

            data = lz4.frame.compress(records)
        else:
            data = records
        times = [_log_times(c.index) for c in in_chunk]
        start = min(min(t) for t in times)
        end = max(max(t) for t in times)
        del times  # the views: each index is replaced below
        head = (_CHUNK.pack(OP_CHUNK, _CHUNK_FIXED + len(compression) + len(data), start, end, size, crc)
                + _string(compression) + _U64.pack(len(data)))
        chunk_start = self._pos
        chunk_length = len(head) + len(data)
        indexes = bytearray()
        offsets: list[tuple[int, int]] = []
        counts: list[int] = []
        for c in in_chunk:
            offsets.append((c.id, chunk_start + chunk_length + len(indexes)))
            counts.append(len(c.index) // _PAIR.size)
            indexes += _MESSAGE_INDEX.pack(OP_MESSAGE_INDEX, 2 + 4 + len(c.index), c.id, len(c.index))
            indexes += c.index
        self._write((head, data, indexes))
        for c in in_chunk:
            c.index = bytearray()
        self._chunk = bytearray()
        self._in_chunk = []
        self._chunk_indexes += self._chunk_index(start, end, chunk_start, chunk_length, offsets, len(indexes),
                                                 compression, len(data), size)
        self._count_chunk(start, end, in_chunk, counts)

    @staticmethod
    def _chunk_index(start: int, end: int, offset: int, length: int, index_offsets: list[tuple[int, int]],
                     index_length: int, compression: str, compressed: int, uncompressed: int) -> bytes:
        return _record(OP_CHUNK_INDEX, _CHUNK_INDEX.pack(start, end, offset, length)
                       + _U32.pack(_INDEX_OFFSET.size * len(index_offsets))
                       + b"".join(_INDEX_OFFSET.pack(c, o) for c, o in index_offsets)
                       + _U64.pack(index_length) + _string(compression) + _U64.pack(compressed)
                       + _U64.pack(uncompressed))

    def _count_chunk(self, start: int, end: int, channels: list[_Channel], counts: list[int]) -> None:
        self._start = start if not self._messages else min(self._start, start)
        self._end = max(self._end, end)
        self._chunks += 1
        for c, n in zip(channels, counts, strict=True):
            if not c.count:
                self._counted.append(c)
            c.count += n
            self._messages += n

    def add_metadata(self, name: str, values: dict[str, str]) -> None:
        """Write a Metadata record (where the ``mcap`` writer does: before the open chunk)."""
        rec = _record(OP_METADATA, _string(name) + _string_map(values))
        offset = self._pos
        self._write((rec,))
        self._metadata += 1
        self._metadata_indexes += _record(OP_METADATA_INDEX, _U64.pack(offset) + _U64.pack(len(rec))
                                          + _string(name))

    def finish(self) -> None:
        """Write the open chunk, DataEnd, the summary section, the Footer and the closing magic."""
        self.finish_chunk()
        self._write((_record(OP_DATA_END, _U32.pack(0)),))
        summary_start = self._pos
        summary = bytearray()
        groups: list[tuple[int, int, int]] = []

        def group(opcode: int, records: bytes | bytearray) -> None:
            groups.append((opcode, summary_start + len(summary), len(records)))
            summary.extend(records)

        counts = b"".join(_INDEX_OFFSET.pack(c.id, c.count) for c in self._counted)
        statistics = (_STATISTICS.pack(self._messages, len(self._schemas), len(self._channels), 0, self._metadata,
                                       self._chunks, self._start, self._end)
                      + _U32.pack(len(counts)) + counts)
        group(OP_SCHEMA, b"".join(self._schemas))
        group(OP_CHANNEL, b"".join(self._channels))
        group(OP_STATISTICS, _record(OP_STATISTICS, statistics))
        group(OP_CHUNK_INDEX, self._chunk_indexes)
        group(OP_ATTACHMENT_INDEX, b"")
        group(OP_METADATA_INDEX, self._metadata_indexes)
        offsets_start = summary_start + len(summary)
        for opcode, start, length in groups:
            summary += _record(OP_SUMMARY_OFFSET, _SUMMARY_OFFSET.pack(opcode, start, length))
        footer = _FOOTER.pack(OP_FOOTER, 8 + 8 + 4, summary_start, offsets_start)
        crc = zlib.crc32(footer, zlib.crc32(summary))
        self._write((summary, footer, _U32.pack(crc), MAGIC))


class _Stream(_Channel):
    """A recorded stream: its MCAP channel, name and declared kind (``code`` -1 for ``any``)."""

    __slots__ = ("code", "kind", "name")

    def __init__(self, name: str, channel_id: int, kind: str) -> None:
        super().__init__(channel_id)
        self.name = name
        self.kind = kind
        self.code = KINDS.get(kind, -1)

    @property
    def channel(self) -> int:
        """The MCAP channel id."""
        return self.id


def _refuse(s: _Stream | None, channel: int, kind: int) -> NoReturn:
    if s is None:
        msg = f"no stream {channel!r} in the recording: add it with add_stream first"
        raise UsageError(msg)
    msg = f"stream {s.name!r} carries {s.kind}, not {KIND_NAMES.get(kind, kind)}"
    raise UsageError(msg)


class Recorder:
    """Write packets and bounds of named streams into an MCAP file, one channel per stream.

    Thread-safe: any thread may write to any stream (one lock around the file; encoding happens
    outside it). Use it as a context manager, or call :meth:`close`, which writes the summary.

    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "r.mcap")
    >>> with Recorder(path) as rec:
    ...     rec.add_stream("counts", kind="i64")
    ...     rec.write("counts", Packet.from_int(5, ts=1))
    1
    """

    def __init__(self, path: str | os.PathLike[str], *, compression: str = "zstd",
                 chunk_size: int = 1024 * 1024) -> None:
        if compression not in COMPRESSIONS:
            msg = f"unknown compression {compression!r}: expected zstd, lz4 or none"
            raise UsageError(msg)
        if not isinstance(chunk_size, int) or chunk_size <= 0:
            msg = f"chunk_size must be a positive number of bytes, got {chunk_size!r}"
            raise UsageError(msg)
        self.path = os.fspath(path)
        self.compression = compression
        try:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0), 0o666)
        except OSError as exc:
            msg = f"{self.path}: cannot create the recording: {exc.strerror or exc}"
            raise RecordingError(msg) from None
        self._lock = threading.Lock()
        self._streams: dict[str, _Stream] = {}
        self._by_channel: dict[int, _Stream] = {}
        self._schemas: dict[str, int] = {}
        self._dropped: dict[str, int] = {}
        self._closed = False
        self._failed: str | None = None
        """Why the file stopped taking writes (a full disk), else None: it then ends at its last
        complete chunk, as a recording cut short does."""
        try:
            self._writer = _McapWriter(self._fd, compression=COMPRESSIONS[compression], chunk_size=chunk_size,
                                       profile=PROFILE, library=_library())
        except OSError as exc:
            os.close(self._fd)
            msg = f"{self.path}: cannot write the recording: {exc.strerror or exc}"
            raise RecordingError(msg) from None

    # --- streams -----------------------------------------------------------------------------------

    def add_stream(self, name: str, *, kind: str | int = "any") -> int:
        """Add a stream (one MCAP channel, topic ``name``) and return its channel id.

        ``kind`` declares what it carries (``"i64"``, ``"buffer"``..., or a ``TypeId``); ``"any"``
        (the default) allows every kind. The channel's schema is ``flowplex.<kind>``.

        Raises:
            UsageError: The name is empty or already added, or the kind is unknown.
        """
        if not isinstance(name, str) or not name:
            msg = f"a stream name is a non-empty str, got {name!r}"
            raise UsageError(msg)
        kind = kind_of(kind)
        with self._lock:
            self._check_open()
            if name in self._streams:
                msg = f"stream {name!r} is already in the recording"
                raise UsageError(msg)
            schema = self._schemas.get(kind)
            if schema is None:
                schema = self._schemas[kind] = len(self._schemas) + 1
                self._writer.add_schema(schema, schema_name(kind), ENCODING, schema_data(kind))
            stream = _Stream(name, len(self._streams) + 1, kind)
            self._writer.add_channel(stream, schema, name, ENCODING)
            self._streams[name] = self._by_channel[stream.id] = stream
            return stream.id

    @property
    def streams(self) -> list[str]:
        """The stream names, in the order they were added."""
        return list(self._streams)

    @property
    def dropped(self) -> dict[str, int]:
        """Stream -> packets dropped (as told by :meth:`note_dropped`)."""
        with self._lock:
            return dict(self._dropped)

    def stream_name(self, channel: int) -> str:
        """The name of the stream on ``channel``."""
        return self._stream(channel).name

    def _stream(self, stream: str | int) -> _Stream:
        found = self._by_channel.get(stream) if isinstance(stream, int) else self._streams.get(stream)
        if found is None:
            msg = f"no stream {stream!r} in the recording: add it with add_stream first"
            raise UsageError(msg)
        return found

    # --- writing -----------------------------------------------------------------------------------

    def write(self, stream: str | int, packet: Packet, wall_ns: int | None = None) -> None:
        """Record one packet (timestamp, metadata, value) on a stream (its name or channel id).

        ``wall_ns`` is when it passed (ns since the epoch); now when None. A buffer's bytes go
        from its memory to the file during the call, without a copy.

        Raises:
            UsageError: An unknown stream, a packet whose kind the stream does not carry, or one
                that cannot be recorded (a GPU buffer, a custom type).
            RecordingError: The recorder is closed, or the file cannot be written.
        """
        if not isinstance(packet, Packet):
            msg = f"write: expected a Packet, got {type(packet).__name__} (write_value records plain values)"
            raise UsageError(msg)
        s = self._stream(stream)
        wall = time.time_ns() if wall_ns is None else wall_ns
        kind, head, body = encode_packet_parts(packet, wall_ns=wall)
        self._add(s, kind, head, body, wall)

    def write_value(self, stream: str | int, ts: int, value: object, *, wall_ns: int | None = None,
                    metadata: dict[str, MetadataValue] | None = None) -> None:
        """Record a plain value (None, bool, int, float, str, bytes, numpy array) as a packet at ``ts``."""
        s = self._stream(stream)
        wall = time.time_ns() if wall_ns is None else wall_ns
        kind, head, body = encode_value_parts(ts, value, wall_ns=wall, metadata=metadata)
        self._add(s, kind, head, body, wall)

    def write_bound(self, stream: str | int, ts: int, wall_ns: int | None = None) -> None:
        """Record that the stream's timestamp bound advanced to ``ts`` with no packet."""
        s = self._stream(stream)
        wall = time.time_ns() if wall_ns is None else wall_ns
        self._add(s, BOUND, encode_bound(ts, wall_ns=wall), b"", wall)

    def write_encoded(self, stream: str | int, kind: int, data: bytes, wall_ns: int) -> None:
        """Record a message already encoded by ``_codec.encode_packet``/``encode_bound`` (a
        capture encodes on the graph's threads and writes on its own)."""
        self._add(self._stream(stream), kind, data, b"", wall_ns)

    def write_encoded_many(self, messages: Iterable[Encoded]) -> None:
        """Record messages already encoded, ``(channel id, kind, data, wall_ns)`` each, in order,
        under one hold of the lock: what a capture's writer thread does with what it took from
        its queue.

        Raises:
            UsageError: An unknown channel or a kind the stream does not carry (the messages
                before it are recorded).
            RecordingError: The recorder is closed, or the file cannot be written.
        """
        with self._lock:
            self._check_open()
            try:
                self._writer.add_encoded(self._by_channel, messages)
            except OSError as exc:
                self._fail(exc)

    def note_dropped(self, stream: str | int, n: int = 1) -> None:
        """Count ``n`` packets a lossy recording dropped on a stream; the file says so at close."""
        s = self._stream(stream)
        if n < 0:
            msg = f"note_dropped: n must be >= 0, got {n}"
            raise UsageError(msg)
        with self._lock:
            self._dropped[s.name] = self._dropped.get(s.name, 0) + n

    def _add(self, s: _Stream, kind: int, head: bytes, body: Body, wall: int) -> None:
        if s.code >= 0 and kind != s.code and kind != BOUND:
            _refuse(s, s.id, kind)
        with self._lock:
            self._check_open()
            try:
                self._writer.add_message(s, max(wall, 0), head, body)
            except OSError as exc:
                self._fail(exc)

    def flush(self) -> None:
        """Finish the chunk in progress and write it to the file (what a crash after this keeps)."""
        with self._lock:
            self._check_open()
            try:
                self._writer.finish_chunk()
            except OSError as exc:
                self._fail(exc)

    def _check_open(self) -> None:
        if self._closed:
            msg = f"{self.path}: the recording is closed"
            raise RecordingError(msg)
        if self._failed is not None:
            msg = f"{self.path}: the recording failed earlier ({self._failed}); it ends at its last complete chunk"
            raise RecordingError(msg)

    def _fail(self, exc: OSError) -> None:
        """A write failed midway (a full disk): no more writes, and no summary after a torn record."""
        self._failed = exc.strerror or str(exc)
        msg = f"{self.path}: cannot write the recording: {self._failed}"
        raise RecordingError(msg) from None

    # --- closing -----------------------------------------------------------------------------------

    def close(self) -> None:
        """Write the dropped counts and the summary, and close the file. Idempotent.

        Raises:
            RecordingError: The summary cannot be written (the file then ends at its last complete
                chunk, readable as a recording cut short).
        """
        with self._lock:
            if self._closed:
                return
            self._closed = True
            try:
                if self._failed is None:
                    if self._dropped:
                        self._writer.add_metadata(DROPPED_METADATA, {k: str(v) for k, v in self._dropped.items()})
                    self._writer.finish()
            except OSError as exc:
                self._failed = exc.strerror or str(exc)
                msg = f"{self.path}: cannot finish the recording: {self._failed}"
                raise RecordingError(msg) from None
            finally:
                os.close(self._fd)

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    def __enter__(self) -> Recorder:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<Recorder {self.path!r} {state}, {len(self._streams)} streams, {self.compression}>"
