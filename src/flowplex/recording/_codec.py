"""One packet <-> one MCAP message: the byte layout of a flowplex recording (format ``flowplex.v1``).

A recording is an MCAP file whose Header record has profile ``flowplex``. Each stream is one
channel (topic = the stream's name, message encoding ``flowplex.v1``) whose schema names the kind
of value it carries:

========================  =========================================================
schema name               payload (after the header and the optional metadata)
========================  =========================================================
``flowplex.empty``        nothing (an empty packet: a timestamp only)
``flowplex.bytes``        the bytes, raw
``flowplex.i64``          int64, little-endian (8 bytes)
``flowplex.f64``          float64, little-endian (8 bytes; nan and inf kept bit for bit)
``flowplex.bool``         one byte, 0 or 1
``flowplex.str``          the string, UTF-8
``flowplex.buffer``       ``<BB`` ndim, len(dtype); the numpy ``dtype.str`` in ASCII (``|u1``,
                          ``<f4``...); ``ndim`` x ``<Q`` shape; the elements in C order, raw
``flowplex.any``          any of the above: a stream whose kind is not declared
========================  =========================================================

The schema's encoding is ``flowplex.v1`` and its data a small JSON document saying the same, so
a reader that knows nothing of flowplex can find out how to decode a channel.

Every message starts with the same 24-byte header, ``<qqBBHI``: the packet's timestamp (int64,
exactly as it was, sentinels included), the wall time it was recorded (int64 ns since the Unix
epoch; the MCAP ``log_time`` and ``publish_time`` hold it too, clamped at 0), the kind (the
packet's :class:`~flowplex.packets.TypeId`, 0..6, or 128 for a *bound*), the format version (1),
flags (bit 0: metadata follows) and the metadata's length in bytes. The metadata, when the packet
has any, is a JSON object (sorted keys, ASCII) of bool/int/float/str values.

A *bound* record (kind 128) has no payload: it says the stream's timestamp bound advanced to
``ts`` without a packet, so that a replay reproduces joins exactly. It may appear on any channel.

Arrays are stored C-contiguous (a strided input is copied once, at write): strides are not kept,
the values and the shape are. Their bytes are the last thing in the message, so a reader maps them
with ``np.frombuffer`` without copying (the reader's own buffer: the file's memory map when the
chunk is uncompressed, the decompressed chunk otherwise). They are not aligned in the file:
numpy reads unaligned arrays correctly.
"""

from __future__ import annotations

import json
import math
import struct
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, TypeAlias

from .._types import MetadataValue
from ..errors import FlowplexError, UsageError
from ..packets import Packet, TypeId

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = [
    "ENCODING",
    "HEADER",
    "I64",
    "I64_MESSAGE",
    "KIND_NAMES",
    "KINDS",
    "PROFILE",
    "RecordingError",
    "VERSION",
    "Decoded",
    "decode",
    "encode_bound",
    "encode_packet",
    "encode_packet_parts",
    "encode_value",
    "encode_value_parts",
    "kind_of",
    "schema_data",
    "schema_name",
]


class RecordingError(FlowplexError):
    """A recording cannot be written or read: not MCAP, not flowplex's, corrupt, or an unknown schema.

    The message is one line and names the file (and the stream or offset when it helps).
    """


PROFILE: Final = "flowplex"
"""The MCAP Header profile of every flowplex recording."""
ENCODING: Final = "flowplex.v1"
"""The message encoding of every channel and the encoding of every schema."""
VERSION: Final = 1
"""The format version in every message header."""

EMPTY: Final = int(TypeId.NONE)
BYTES: Final = int(TypeId.BYTES)
I64: Final = int(TypeId.I64)
F64: Final = int(TypeId.F64)
BOOL: Final = int(TypeId.BOOL)
STR: Final = int(TypeId.STR)
BUFFER: Final = int(TypeId.BUFFER)
BOUND: Final = 128
"""The kind of a timestamp-bound record (no packet)."""

KIND_NAMES: Final = {EMPTY: "empty", BYTES: "bytes", I64: "i64", F64: "f64", BOOL: "bool", STR: "str",
                     BUFFER: "buffer", BOUND: "bound"}
"""Kind code -> its name (the schema name is ``flowplex.<name>``)."""
KINDS: Final = {name: code for code, name in KIND_NAMES.items() if code != BOUND}
"""Value kind name -> code; the channel kinds are these and ``any``."""
CHANNEL_KINDS: Final = frozenset({*KINDS, "any"})

HEADER: Final = struct.Struct("<qqBBHI")
"""ts, wall_ns, kind, version, flags, metadata length."""
_HAS_META: Final = 1
_I64S: Final = struct.Struct("<q")
_F64S: Final = struct.Struct("<d")
_BUF: Final = struct.Struct("<BB")
_SHAPE_DIM: Final = 8
_I64_MIN: Final = -(2**63)
_I64_MAX: Final = 2**63 - 1
_MAX_DIMS: Final = 32
_NUMERIC_KINDS: Final = frozenset("biufc")

_PAYLOADS: Final = {
    "empty": "nothing",
    "bytes": "the bytes, raw",
    "i64": "int64 little-endian",
    "f64": "float64 little-endian",
    "bool": "uint8 0 or 1",
    "str": "UTF-8",
    "buffer": "<BB ndim, len(dtype); numpy dtype.str ASCII; ndim x <Q shape; C-order elements, raw",
    "any": "by the header's kind",
}


def schema_name(kind: str) -> str:
    """The MCAP schema name of a channel kind (``"i64"`` -> ``"flowplex.i64"``)."""
    return f"flowplex.{kind}"


def schema_data(kind: str) -> bytes:
    """The schema's data: a JSON description of the message layout for readers without flowplex."""
    doc = {
        "format": ENCODING,
        "kind": kind,
        "header": "<qqBBHI: ts, wall_ns, kind (TypeId 0..6, 128 = bound), version (1), flags (1 = metadata), "
                  "metadata length",
        "metadata": "JSON object, UTF-8, when flags & 1",
        "payload": _PAYLOADS[kind],
    }
    return json.dumps(doc, sort_keys=True).encode()


def kind_of(kind: str | int) -> str:
    """Check a channel kind given by name (``"i64"``, ``"any"``) or type id; return its name."""
    if isinstance(kind, int) and not isinstance(kind, bool):
        name = KIND_NAMES.get(int(kind))
        if name is None or name == "bound":
            msg = f"cannot record type id {kind}: recordings hold type ids 0..6 (empty, bytes, i64, f64, bool, str, " \
                  "buffer)"
            raise UsageError(msg)
        return name
    if kind not in CHANNEL_KINDS:
        msg = f"unknown stream kind {kind!r}: expected one of {', '.join(sorted(CHANNEL_KINDS))}"
        raise UsageError(msg)
    return str(kind)


# --- encoding ---------------------------------------------------------------------------------------
#
# A message is encoded as two parts, ``head`` (the header, the metadata and every byte of a scalar
# payload) and ``body`` (the bytes of a ``bytes`` value or an array, as they are, or ``b""``), so
# that a writer holding the packet (``Recorder.write``) can hand an array's memory to the file
# without copying it; ``encode_packet`` and ``encode_value`` join the two, which copies the array
# once, for a caller that keeps the message after the packet may change (a capture's queue).

Body: TypeAlias = "bytes | memoryview"
"""The second part of an encoded message: a ``bytes`` value, an array's memory, or ``b""``."""

_EMPTY_BODY: Final = b""
I64_MESSAGE: Final = struct.Struct("<qqBBHIq")
"""A whole I64 message with no metadata: the header, then the value (one ``pack`` per packet):
``I64_MESSAGE.pack(ts, wall_ns, I64, VERSION, 0, 0, value)``."""
_SCALAR_I64: Final = I64_MESSAGE
_SCALAR_F64: Final = struct.Struct("<qqBBHId")
_SCALAR_BOOL: Final = struct.Struct("<qqBBHIB")


def _metadata_json(metadata: dict[str, MetadataValue] | None) -> bytes:
    if not metadata:
        return b""
    return json.dumps(metadata, sort_keys=True, allow_nan=True).encode()


def _header(ts: int, wall_ns: int, kind: int, meta: bytes) -> bytes:
    return HEADER.pack(ts, wall_ns, kind, VERSION, _HAS_META if meta else 0, len(meta)) + meta


def _joined(head: bytes, body: Body) -> bytes:
    return b"".join((head, body)) if body else head


def encode_value(ts: int, value: object, *, wall_ns: int,
                 metadata: dict[str, MetadataValue] | None = None) -> tuple[int, bytes]:
    """Encode one value (None, bool, int, float, str, bytes or a numpy array): ``(kind, message bytes)``.

    The message owns its bytes (an array's are copied once), so it stays right whatever happens
    to the value afterwards.

    Raises:
        UsageError: The value is of another type, an int does not fit 64 bits, or an array has a
            dtype that is not numeric.
    """
    kind, head, body = encode_value_parts(ts, value, wall_ns=wall_ns, metadata=metadata)
    return kind, _joined(head, body)


def encode_value_parts(ts: int, value: object, *, wall_ns: int,
                       metadata: dict[str, MetadataValue] | None = None) -> tuple[int, bytes, Body]:
    """Encode one value as ``(kind, head, body)``: the message is ``head + body``, where ``body``
    is a ``bytes`` value or an array's memory as it is (a view, not a copy) and ``b""`` otherwise.

    The body is only valid while the value is unchanged: write it out before anything may write
    to the array.

    Raises:
        UsageError: As :func:`encode_value`.
    """
    try:
        return _encode(ts, value, wall_ns, _metadata_json(metadata))
    except (struct.error, OverflowError) as exc:
        msg = f"cannot record {type(value).__name__} at ts={ts}: {exc}"
        raise UsageError(msg) from None


def _encode(ts: int, value: object, wall_ns: int, meta: bytes) -> tuple[int, bytes, Body]:
    cls = type(value)
    if value is None:
        return EMPTY, _header(ts, wall_ns, EMPTY, meta), _EMPTY_BODY
    if cls is bool:
        return BOOL, _header(ts, wall_ns, BOOL, meta) + (b"\x01" if value else b"\x00"), _EMPTY_BODY
    if cls is int:
        return I64, _header(ts, wall_ns, I64, meta) + _I64S.pack(value), _EMPTY_BODY
    if cls is float:
        return F64, _header(ts, wall_ns, F64, meta) + _F64S.pack(value), _EMPTY_BODY
    if cls is str:
        return (STR, _header(ts, wall_ns, STR, meta) + value.encode("utf-8", "surrogatepass"),  # type: ignore[attr-defined]
                _EMPTY_BODY)
    if cls is bytes:
        return BYTES, _header(ts, wall_ns, BYTES, meta), value  # type: ignore[return-value]
    import numpy as np

    if isinstance(value, np.ndarray):
        head, body = _array_parts(ts, value, wall_ns, meta)
        return BUFFER, head, body
    msg = f"cannot record a {cls.__name__}: values are None, bool, int, float, str, bytes or numpy arrays"
    raise UsageError(msg)


def _array_parts(ts: int, arr: npt.NDArray[np.generic], wall_ns: int, meta: bytes) -> tuple[bytes, Body]:
    import numpy as np

    dt = arr.dtype
    if dt.kind not in _NUMERIC_KINDS or dt.fields is not None or arr.ndim > _MAX_DIMS:
        msg = f"cannot record an array of dtype {dt} with {arr.ndim} dimensions: numeric dtypes, at most " \
              f"{_MAX_DIMS} dimensions"
        raise UsageError(msg)
    code = dt.str.encode("ascii")
    head = (_header(ts, wall_ns, BUFFER, meta) + _BUF.pack(arr.ndim, len(code)) + code
            + struct.pack(f"<{arr.ndim}Q", *arr.shape))
    if not arr.size:
        return head, _EMPTY_BODY
    data = arr if arr.flags.c_contiguous else np.ascontiguousarray(arr)
    return head, data.reshape(-1).view(np.uint8).data


def encode_packet(packet: Packet, *, wall_ns: int) -> tuple[int, bytes]:
    """Encode a packet (its timestamp, metadata and value): ``(kind, message bytes)``.

    The message owns its bytes: a buffer's are copied once (read through ``as_numpy``), so the
    graph may reuse the buffer as soon as this returns.

    Raises:
        UsageError: A buffer that does not live on the CPU, or a custom type id.
    """
    kind, head, body = encode_packet_parts(packet, wall_ns=wall_ns)
    return kind, _joined(head, body)


def encode_packet_parts(packet: Packet, *, wall_ns: int) -> tuple[int, bytes, Body]:
    """Encode a packet as ``(kind, head, body)`` (see :func:`encode_value_parts`): a buffer's body
    is a view of its memory, valid while the packet is held and unchanged.

    An I64, F64 or bool packet with no metadata, what most small streams carry, is packed in one
    step.

    Raises:
        UsageError: A buffer that does not live on the CPU, or a custom type id.
    """
    tid = packet._tid
    if packet._meta is None:
        try:
            if tid == I64:
                return I64, _SCALAR_I64.pack(packet._ts, wall_ns, I64, VERSION, 0, 0, packet._value), _EMPTY_BODY
            if tid == F64:
                return F64, _SCALAR_F64.pack(packet._ts, wall_ns, F64, VERSION, 0, 0, packet._value), _EMPTY_BODY
            if tid == BOOL:
                return BOOL, _SCALAR_BOOL.pack(packet._ts, wall_ns, BOOL, VERSION, 0, 0, packet._value is True), \
                    _EMPTY_BODY
        except struct.error:
            pass  # a wall time out of range: the general path says so
    meta: dict[str, MetadataValue] | None = None
    keys = packet.metadata_keys()
    if keys:
        meta = {k: packet.metadata(k) for k in keys}  # type: ignore[misc]
    value: object
    if tid == BUFFER:
        try:
            value = packet.as_numpy()
        except ValueError as exc:
            msg = f"cannot record {packet!r}: {exc}"
            raise UsageError(msg) from None
    elif tid in (I64, F64, BOOL, STR, BYTES) or packet.is_empty:
        value = packet.payload
    else:
        msg = f"cannot record {packet!r}: type id {tid} has no recording codec"
        raise UsageError(msg)
    return encode_value_parts(packet.timestamp, value, wall_ns=wall_ns, metadata=meta)


def encode_bound(ts: int, *, wall_ns: int) -> bytes:
    """Encode a bound record: the stream's timestamp bound advanced to ``ts`` (no packet)."""
    if not _I64_MIN <= ts <= _I64_MAX:
        msg = f"bound {ts} does not fit 64 bits"
        raise UsageError(msg)
    return _header(ts, wall_ns, BOUND, b"")


# --- decoding ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Decoded:
    """One decoded message: a packet's value (``kind`` 0..6) or a bound (``kind == BOUND``, value None)."""

    kind: int
    ts: int
    wall_ns: int
    value: object
    metadata: dict[str, MetadataValue] | None

    @property
    def is_bound(self) -> bool:
        """Whether this is a bound record rather than a packet."""
        return self.kind == BOUND


class _Malformed(Exception):
    """Raised inside ``decode``; the caller turns it into a RecordingError naming file and stream."""


def decode(data: memoryview) -> Decoded:
    """Decode one message's bytes without copying an array's data (it views ``data``'s memory).

    Raises:
        RecordingError: The bytes are not a flowplex.v1 message (the message says why).
    """
    try:
        return _decode(data)
    except _Malformed as exc:
        raise RecordingError(str(exc)) from None
    except (struct.error, ValueError, TypeError) as exc:  # UnicodeDecodeError, JSON, numpy shapes
        msg = f"malformed message: {exc}".splitlines()[0]
        raise RecordingError(msg) from None


def _decode(data: memoryview) -> Decoded:
    n = len(data)
    if n < HEADER.size:
        msg = f"malformed message: {n} bytes, shorter than the {HEADER.size}-byte header"
        raise _Malformed(msg)
    ts, wall_ns, kind, version, flags, meta_len = HEADER.unpack_from(data)
    if version != VERSION:
        msg = f"message format version {version} (this flowplex reads version {VERSION})"
        raise _Malformed(msg)
    pos = HEADER.size
    metadata: dict[str, MetadataValue] | None = None
    if flags & _HAS_META:
        if pos + meta_len > n:
            msg = "malformed message: metadata runs past its end"
            raise _Malformed(msg)
        loaded = json.loads(str(data[pos:pos + meta_len], "utf-8"))
        if not isinstance(loaded, dict) or not all(
            isinstance(v, (bool, int, float, str)) for v in loaded.values()
        ):
            msg = "malformed message: metadata is not an object of bool/int/float/str values"
            raise _Malformed(msg)
        metadata = loaded
        pos += meta_len
    elif meta_len:
        msg = "malformed message: metadata length without the metadata flag"
        raise _Malformed(msg)
    rest = n - pos
    value: object
    if kind in (EMPTY, BOUND):
        if rest:
            msg = f"malformed message: {rest} bytes after an {KIND_NAMES[kind]} record"
            raise _Malformed(msg)
        value = None
    elif kind == I64:
        _fixed(rest, 8, "i64")
        value = _I64S.unpack_from(data, pos)[0]
    elif kind == F64:
        _fixed(rest, 8, "f64")
        value = _F64S.unpack_from(data, pos)[0]
    elif kind == BOOL:
        _fixed(rest, 1, "bool")
        b = data[pos]
        if b > 1:
            msg = f"malformed message: bool byte {b}"
            raise _Malformed(msg)
        value = b == 1
    elif kind == STR:
        value = str(data[pos:], "utf-8", "surrogatepass")
    elif kind == BYTES:
        value = bytes(data[pos:])
    elif kind == BUFFER:
        value = _decode_array(data, pos)
    else:
        msg = f"malformed message: unknown kind {kind}"
        raise _Malformed(msg)
    return Decoded(kind, ts, wall_ns, value, metadata)


def _fixed(rest: int, size: int, name: str) -> None:
    if rest != size:
        msg = f"malformed message: {rest} payload bytes for an {name} (expected {size})"
        raise _Malformed(msg)


def _decode_array(data: memoryview, pos: int) -> npt.NDArray[np.generic]:
    import numpy as np

    ndim, code_len = _BUF.unpack_from(data, pos)
    pos += _BUF.size
    code = str(data[pos:pos + code_len], "ascii")
    pos += code_len
    if ndim > _MAX_DIMS:
        msg = f"malformed message: an array with {ndim} dimensions"
        raise _Malformed(msg)
    shape = struct.unpack_from(f"<{ndim}Q", data, pos)
    pos += ndim * _SHAPE_DIM
    try:
        dt = np.dtype(code)
    except TypeError:
        dt = None
    if dt is None or dt.kind not in _NUMERIC_KINDS or dt.fields is not None or dt.str != code:
        msg = f"malformed message: unknown array dtype {code!r}"
        raise _Malformed(msg)
    count = math.prod(shape)
    if len(data) - pos != count * dt.itemsize:
        msg = f"malformed message: {len(data) - pos} data bytes for an array {shape} of {dt} " \
              f"(expected {count * dt.itemsize})"
        raise _Malformed(msg)
    arr = np.frombuffer(data, dt, count, pos) if count else np.empty(0, dt)
    arr = arr.reshape(shape)
    arr.setflags(write=False)
    return arr
