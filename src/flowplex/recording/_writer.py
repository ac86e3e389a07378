"""``Recorder``: writes streams of packets (and timestamp bounds) into a flowplex MCAP recording.

The file is written by the official ``mcap`` writer, chunked (``chunk_size`` bytes of messages
per chunk, each compressed on its own) and indexed, so memory stays bounded by one chunk whatever
the recording's length, and a file cut short is readable up to its last complete chunk. At
``close`` the writer adds what a lossy recording dropped (an MCAP Metadata record named
``flowplex.dropped``: stream -> count) and the summary section (schemas, channels, statistics,
chunk indexes) that tools such as Foxglove read.
"""

from __future__ import annotations

import os
import threading
import time
from typing import IO, TYPE_CHECKING, Final

from mcap.writer import CompressionType, Writer

from ..errors import UsageError
from ..packets import Packet
from ._codec import (
    BOUND,
    ENCODING,
    KIND_NAMES,
    KINDS,
    PROFILE,
    RecordingError,
    encode_bound,
    encode_packet,
    encode_value,
    kind_of,
    schema_data,
    schema_name,
)

if TYPE_CHECKING:
    from types import TracebackType

    from .._types import MetadataValue

__all__ = ["COMPRESSIONS", "DROPPED_METADATA", "Recorder"]

COMPRESSIONS: Final = {"zstd": CompressionType.ZSTD, "lz4": CompressionType.LZ4, "none": CompressionType.NONE}
"""The ``compression=`` choices."""
DROPPED_METADATA: Final = "flowplex.dropped"
"""The name of the MCAP Metadata record that counts, per stream, the packets a lossy recording dropped."""


def _library() -> str:
    from importlib.metadata import version

    try:
        return f"flowplex/{version('flowplex')} mcap-python/{version('mcap')}"
    except Exception:  # an uninstalled checkout: the name is informative only
        return "flowplex"


class _Stream:
    __slots__ = ("channel", "kind", "name", "sequence")

    def __init__(self, name: str, channel: int, kind: str) -> None:
        self.name = name
        self.channel = channel
        self.kind = kind
        self.sequence = 0


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
            self._file: IO[bytes] = open(self.path, "wb")  # noqa: SIM115  # closed by close()
        except OSError as exc:
            msg = f"{self.path}: cannot create the recording: {exc.strerror or exc}"
            raise RecordingError(msg) from None
        self._writer = Writer(self._file, chunk_size=chunk_size, compression=COMPRESSIONS[compression])
        self._writer.start(profile=PROFILE, library=_library())
        self._lock = threading.Lock()
        self._streams: dict[str, _Stream] = {}
        self._by_channel: dict[int, _Stream] = {}
        self._schemas: dict[str, int] = {}
        self._dropped: dict[str, int] = {}
        self._closed = False

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
                schema = self._writer.register_schema(schema_name(kind), ENCODING, schema_data(kind))
                self._schemas[kind] = schema
            channel = self._writer.register_channel(name, ENCODING, schema)
            stream = self._streams[name] = self._by_channel[channel] = _Stream(name, channel, kind)
            return stream.channel

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

        ``wall_ns`` is when it passed (ns since the epoch); now when None.

        Raises:
            UsageError: An unknown stream, a packet whose kind the stream does not carry, or one
                that cannot be recorded (a GPU buffer, a custom type).
            RecordingError: The recorder is closed.
        """
        if not isinstance(packet, Packet):
            msg = f"write: expected a Packet, got {type(packet).__name__} (write_value records plain values)"
            raise UsageError(msg)
        s = self._stream(stream)
        wall = time.time_ns() if wall_ns is None else wall_ns
        kind, data = encode_packet(packet, wall_ns=wall)
        self._add(s, kind, data, wall)

    def write_value(self, stream: str | int, ts: int, value: object, *, wall_ns: int | None = None,
                    metadata: dict[str, MetadataValue] | None = None) -> None:
        """Record a plain value (None, bool, int, float, str, bytes, numpy array) as a packet at ``ts``."""
        s = self._stream(stream)
        wall = time.time_ns() if wall_ns is None else wall_ns
        kind, data = encode_value(ts, value, wall_ns=wall, metadata=metadata)
        self._add(s, kind, data, wall)

    def write_bound(self, stream: str | int, ts: int, wall_ns: int | None = None) -> None:
        """Record that the stream's timestamp bound advanced to ``ts`` with no packet."""
        s = self._stream(stream)
        wall = time.time_ns() if wall_ns is None else wall_ns
        self._add(s, BOUND, encode_bound(ts, wall_ns=wall), wall)

    def write_encoded(self, stream: str | int, kind: int, data: bytes, wall_ns: int) -> None:
        """Record a message already encoded by ``_codec.encode_packet``/``encode_bound`` (a
        capture encodes on the graph's threads and writes on its own)."""
        self._add(self._stream(stream), kind, data, wall_ns)

    def note_dropped(self, stream: str | int, n: int = 1) -> None:
        """Count ``n`` packets a lossy recording dropped on a stream; the file says so at close."""
        s = self._stream(stream)
        if n < 0:
            msg = f"note_dropped: n must be >= 0, got {n}"
            raise UsageError(msg)
        with self._lock:
            self._dropped[s.name] = self._dropped.get(s.name, 0) + n

    def _add(self, s: _Stream, kind: int, data: bytes, wall: int) -> None:
        if s.kind != "any" and kind != BOUND and KINDS[s.kind] != kind:
            msg = f"stream {s.name!r} carries {s.kind}, not {KIND_NAMES[kind]}"
            raise UsageError(msg)
        log_time = max(wall, 0)
        with self._lock:
            self._check_open()
            seq = s.sequence
            s.sequence = (seq + 1) & 0xFFFFFFFF
            self._writer.add_message(s.channel, log_time, data, log_time, seq)

    def flush(self) -> None:
        """Finish the chunk in progress and flush it to the file (what a crash after this keeps)."""
        with self._lock:
            self._check_open()
            self._writer.flush()  # type: ignore[no-untyped-call]

    def _check_open(self) -> None:
        if self._closed:
            msg = f"{self.path}: the recording is closed"
            raise RecordingError(msg)

    # --- closing -----------------------------------------------------------------------------------

    def close(self) -> None:
        """Write the dropped counts and the summary, and close the file. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            try:
                if self._dropped:
                    self._writer.add_metadata(DROPPED_METADATA, {k: str(v) for k, v in self._dropped.items()})
                self._writer.finish()  # type: ignore[no-untyped-call]
            finally:
                self._file.close()

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
