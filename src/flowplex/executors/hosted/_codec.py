"""Invocations and outcomes to bytes and back: pickle protocol 5 with out-of-band buffers.

An executor that runs kernels in another process sends each ``Invocation`` there and gets an
``Outcome`` back. Both are pickled with protocol 5 and a ``buffer_callback``, so the memory of
numpy buffer payloads stays out of the pickle stream: ``encode`` returns a small ``header`` plus
the raw ``buffers``, which a shared-memory arena can carry without copying, or ``to_frame``
packs into one blob for a pipe. On decode, a buffer packet's array is a read-only view of the
out-of-band memory (no copy); the decoded packet is owned by the receiver, and ``make_mutable``
copies it once (counted) before writing, so the sender's memory is never written.

Non-contiguous arrays (slices, negative strides) are made contiguous on the sender, so that they
travel out of band too; their values and shape are kept, not their strides.

The codec unpickles what it is given: use it between one's own processes only, never for bytes
from an untrusted peer. Malformed input raises ``UsageError`` with one line saying what is wrong.
This module imports no packet code: pickle finds the packet constructors by name.
"""

from __future__ import annotations

import copyreg
import io
import pickle
import struct
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Final, TypeAlias, final

from ...errors import UsageError
from .._invocation import Invocation, Outcome

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = [
    "Encoded",
    "decode",
    "decode_invocation",
    "decode_outcome",
    "encode",
    "encode_invocation",
    "encode_outcome",
    "frame_flags",
    "from_frame",
    "pack_frame",
    "to_frame",
]

PROTOCOL: Final = 5
"""The pickle protocol: the first with out-of-band buffers (PEP 574)."""
MAGIC: Final = b"FPXC"
"""The first four bytes of every frame."""
VERSION: Final = 2
"""The frame layout version ``from_frame`` reads (2: one layout for pipes and the arena)."""
ALIGN: Final = 64
"""Each buffer starts at a multiple of this offset in a frame (a cache line; any dtype fits)."""

_PREFIX: Final = struct.Struct("<4sBB2xIQ")
"""magic, version, flags, buffer count, header length; then one ``_REF`` per buffer."""
_REF: Final = struct.Struct("<QQQ")
"""One buffer's reference: its kind (``INLINE``, ``SHARED``) and two values."""
_ZEROS: Final = bytes(ALIGN)

Buffer: TypeAlias = memoryview | pickle.PickleBuffer
"""One out-of-band buffer: a ``PickleBuffer`` from ``encode``, a frame slice from ``from_frame``."""


@final
@dataclass(frozen=True, slots=True)
class Encoded:
    """One encoded message: the pickle stream and the buffers it refers to, in order."""

    header: bytes
    """The pickle stream (the buffers' memory is not in it)."""
    buffers: list[Buffer]
    """The out-of-band buffers, in the order the stream uses them."""

    @property
    def nbytes(self) -> int:
        """The header's length plus the bytes of every buffer: what a transport carries."""
        return len(self.header) + sum(memoryview(b).nbytes for b in self.buffers)


# -- generic --------------------------------------------------------------------------------------


def encode(obj: object, reducers: Mapping[type, _Reducer] | None = None) -> Encoded:
    """Pickle ``obj`` with protocol 5, its contiguous buffers out of band.

    ``reducers`` add to (or override) the pickler's dispatch table for this call: a transport
    that treats some objects its own way (a process pool's buffer holders).

    Raises:
        UsageError: ``obj`` (or something inside it) cannot be pickled.
    """
    buffers: list[Buffer] = []
    stream = io.BytesIO()
    pickler = pickle.Pickler(stream, PROTOCOL, buffer_callback=buffers.append)
    table = _dispatch_table()
    if reducers:
        table = {**(copyreg.dispatch_table if table is None else table), **reducers}
    if table is not None:
        pickler.dispatch_table = table
    try:
        pickler.dump(obj)
    except Exception as exc:
        msg = f"encode: cannot pickle {type(obj).__name__}: {type(exc).__name__}: {exc}"
        raise UsageError(msg) from None
    return Encoded(stream.getvalue(), buffers)


def decode(encoded: Encoded) -> object:
    """The object ``encoded`` holds; buffer payloads are views of ``encoded.buffers`` (no copy).

    Raises:
        UsageError: The header is not a pickle stream, refers to buffers that are missing, or
            leaves some unused.
    """
    buffers = iter(encoded.buffers)
    try:
        obj = pickle.loads(encoded.header, buffers=buffers)
    except Exception as exc:
        msg = f"decode: the header is not an encoded message ({type(exc).__name__}: {exc})"
        raise UsageError(msg) from None
    left = sum(1 for _ in buffers)
    if left:
        msg = (f"decode: {left} of {len(encoded.buffers)} out-of-band buffer(s) left unused; "
               "the buffers do not belong to this header")
        raise UsageError(msg)
    return obj


# -- typed ----------------------------------------------------------------------------------------


def encode_invocation(invocation: Invocation, reducers: Mapping[type, _Reducer] | None = None) -> Encoded:
    """``encode`` for an ``Invocation`` (its packets' buffers go out of band)."""
    if type(invocation) is not Invocation:
        msg = f"encode_invocation: expected an Invocation, got {type(invocation).__name__}"
        raise UsageError(msg)
    return encode(invocation, reducers)


def decode_invocation(encoded: Encoded) -> Invocation:
    """``decode``, checking that the message is an ``Invocation``."""
    obj = decode(encoded)
    if type(obj) is not Invocation:
        msg = f"decode_invocation: the message holds a {type(obj).__name__}, not an Invocation"
        raise UsageError(msg)
    return obj


def encode_outcome(outcome: Outcome, reducers: Mapping[type, _Reducer] | None = None) -> Encoded:
    """``encode`` for an ``Outcome``; its exception travels only if it pickles.

    The exception is pickled on its own: when that fails here, or unpickling it fails on the
    receiver (a class it cannot import, an ``__init__`` that pickle cannot call again), the
    decoded outcome has ``exception=None``, and ``error`` and ``traceback`` still tell.
    """
    if type(outcome) is not Outcome:
        msg = f"encode_outcome: expected an Outcome, got {type(outcome).__name__}"
        raise UsageError(msg)
    exc = outcome.exception
    if exc is not None:
        outcome = replace(outcome, exception=_pickled_exception(exc))
    return encode(outcome, reducers)


def decode_outcome(encoded: Encoded) -> Outcome:
    """``decode``, checking that the message is an ``Outcome``."""
    obj = decode(encoded)
    if type(obj) is not Outcome:
        msg = f"decode_outcome: the message holds a {type(obj).__name__}, not an Outcome"
        raise UsageError(msg)
    return obj


@final
class _PickledException(Exception):
    """An exception already pickled on the sender; it unpickles as the original, or None."""

    def __init__(self, blob: bytes) -> None:
        super().__init__()
        self.blob = blob

    def __reduce__(self) -> tuple[Callable[[bytes], BaseException | None], tuple[bytes]]:
        return (_unpickle_exception, (self.blob,))


def _pickled_exception(exc: BaseException) -> _PickledException | None:
    try:
        return _PickledException(pickle.dumps(exc, PROTOCOL))
    except Exception:
        return None


def _unpickle_exception(blob: bytes) -> BaseException | None:
    """The exception in ``blob``, or None when it does not unpickle cleanly (never raises)."""
    try:
        exc = pickle.loads(blob)
    except Exception:
        return None
    return exc if isinstance(exc, BaseException) else None


# -- frames ---------------------------------------------------------------------------------------
#
# The one frame layout, for a pipe (``to_frame``) and for the process pool's arena
# (``processes._transfer``): ``MAGIC``, version (u8), flags (u8, the transport's), 2 zero bytes,
# buffer count (u32), header length (u64); per buffer a reference of three u64, its kind and two
# values (``INLINE``: its length, 0; ``SHARED``: its offset in the transport's shared memory,
# its length); the header; then each inline buffer, starting at a multiple of ``ALIGN``.

INLINE: Final = 0
"""A buffer that travels inside the frame."""
SHARED: Final = 1
"""A buffer that stays in the transport's shared memory; the frame holds its offset."""
FLAGS_AT: Final = 5
"""The offset of the flags byte, which a receiver may read before decoding (``frame_flags``)."""

Adopt: TypeAlias = Callable[[list[tuple[int, int]]], list[Buffer]]
"""A transport's reader of ``SHARED`` buffers: their (offset, length) pairs to views, in order."""


def to_frame(encoded: Encoded, flags: int = 0) -> bytes:
    """One blob for a pipe: every buffer inline. Copies every buffer once (a pipe needs the
    bytes in one place)."""
    raws = [pickle.PickleBuffer(b).raw() for b in encoded.buffers]
    return pack_frame(encoded.header, [(INLINE, raw.nbytes, 0) for raw in raws], raws, flags)


def pack_frame(header: bytes, refs: list[tuple[int, int, int]], inline: list[memoryview],
               flags: int = 0) -> bytes:
    """A frame of ``header`` and one reference per buffer; ``inline`` holds the bytes of the
    ``INLINE`` ones, in order."""
    head = [_PREFIX.pack(MAGIC, VERSION, flags, len(refs), len(header)),
            *(_REF.pack(*ref) for ref in refs), header]
    return join_aligned(head, inline)


def frame_flags(frame: bytes | memoryview) -> int:
    """The transport's flags of ``frame`` (0 when it is too short to have any)."""
    return frame[FLAGS_AT] if len(frame) > FLAGS_AT else 0


def join_aligned(head: list[bytes], buffers: list[memoryview]) -> bytes:
    """``head`` then each of ``buffers``, each starting at a multiple of ``ALIGN`` (zero padding)."""
    parts: list[bytes | memoryview] = list(head)
    size = sum(len(part) for part in head)
    for raw in buffers:
        pad = -size % ALIGN
        if pad:
            parts.append(_ZEROS[:pad])
        parts.append(raw)
        size += pad + raw.nbytes
    return b"".join(parts)


def from_frame(frame: bytes | bytearray | memoryview, adopt: Adopt | None = None, *,
               writable: bool = False) -> Encoded:
    """The ``Encoded`` message in a frame; its inline buffers are slices of ``frame`` (no copy),
    or of one writable copy of it with ``writable`` (when it has any), its ``SHARED`` ones what
    ``adopt`` makes of them.

    Raises:
        UsageError: ``frame`` is not a frame of this version, is truncated, has bytes left over,
            or refers to shared memory and no ``adopt`` was given.
    """
    view = _byte_view(frame)
    header_len, specs, offset = _read_prefix(view)
    header = bytes(view[offset:offset + header_len])
    offset += header_len
    if writable and any(kind == INLINE for kind, _, _ in specs):
        view = memoryview(bytearray(view))
    shared_refs = [(a, b) for kind, a, b in specs if kind == SHARED]
    if shared_refs and adopt is None:
        msg = (f"from_frame: {len(shared_refs)} buffer(s) of the frame are in a process pool's shared "
               "memory; only that pool can read it")
        raise UsageError(msg)
    shared = iter(adopt(shared_refs) if adopt is not None and shared_refs else ())
    buffers: list[Buffer] = []
    size = view.nbytes
    for kind, n, _ in specs:
        if kind == SHARED:
            buffers.append(next(shared))
            continue
        offset += -offset % ALIGN
        if offset + n > size:
            msg = (f"from_frame: truncated frame: {size} bytes, but buffer {len(buffers)} ends at byte "
                   f"{offset + n}")
            raise UsageError(msg)
        buffers.append(view[offset:offset + n])
        offset += n
    if offset != size:
        msg = f"from_frame: {size - offset} byte(s) after the last buffer of the frame"
        raise UsageError(msg)
    return Encoded(header, buffers)


def _byte_view(frame: bytes | bytearray | memoryview) -> memoryview:
    try:
        view = memoryview(frame)
        if view.format != "B" or view.ndim != 1:
            view = view.cast("B")
    except TypeError as exc:
        msg = f"from_frame: expected bytes, got {type(frame).__name__} ({exc})"
        raise UsageError(msg) from None
    return view


def _read_prefix(view: memoryview) -> tuple[int, list[tuple[int, int, int]], int]:
    """The header length, the buffer references and the header's offset of a frame."""
    size = view.nbytes
    if size < _PREFIX.size:
        msg = f"from_frame: truncated frame: {size} bytes, shorter than the {_PREFIX.size}-byte prefix"
        raise UsageError(msg)
    magic, version, _, count, header_len = _PREFIX.unpack_from(view)
    if magic != MAGIC:
        msg = f"from_frame: not a flowplex frame: it starts with {bytes(magic)!r}, expected {MAGIC!r}"
        raise UsageError(msg)
    if version != VERSION:
        msg = f"from_frame: frame version {version}; this flowplex reads version {VERSION}"
        raise UsageError(msg)
    offset = _PREFIX.size + _REF.size * count
    if offset + header_len > size:
        msg = (f"from_frame: truncated frame: {size} bytes, but its prefix announces {count} buffer(s) "
               f"and a {header_len}-byte header")
        raise UsageError(msg)
    specs = list(_REF.iter_unpack(view[_PREFIX.size:offset]))
    for i, (kind, _, _) in enumerate(specs):
        if kind not in (INLINE, SHARED):
            msg = f"from_frame: buffer {i} has kind {kind}; a frame's buffers are inline (0) or shared (1)"
            raise UsageError(msg)
    return header_len, specs, offset


# -- arrays ---------------------------------------------------------------------------------------

_Reducer: TypeAlias = Callable[[Any], Any]
"""A ``copyreg`` reducer: ``fn(obj)`` returns what ``__reduce__`` would."""

_tables: tuple[object, int, dict[type, _Reducer]] | None = None
"""(numpy module, size of copyreg's table, pickler dispatch table), built on first use."""


def _dispatch_table() -> Mapping[type, _Reducer] | None:
    """copyreg's table plus the array reducer; None while numpy is not loaded (no array exists)."""
    global _tables
    np = sys.modules.get("numpy")
    if np is None:
        return None
    tables = _tables
    if tables is None or tables[0] is not np or tables[1] != len(copyreg.dispatch_table):
        table: dict[type, _Reducer] = dict(copyreg.dispatch_table)
        table[np.ndarray] = _reduce_array
        tables = _tables = (np, len(copyreg.dispatch_table), table)
    return tables[2]


def _reduce_array(arr: npt.NDArray[np.generic]) -> object:
    """numpy's own protocol-5 reduction, after making a non-contiguous array contiguous.

    numpy pickles a non-contiguous array in band (into the header); one contiguous copy here
    sends it out of band like the others, at the same cost.
    """
    flags = arr.flags
    if not (flags.c_contiguous or flags.f_contiguous):
        import numpy as np

        arr = np.ascontiguousarray(arr)
    return arr.__reduce_ex__(PROTOCOL)

