"""The ``Packet`` handle, its factories, value conversion and the engine's fast helpers.

A packet handle is a small ``__slots__`` object: a payload (shared between handles), a type id,
its own timestamp, a metadata map (shared, replaced on write) and an *owned* flag. The engine
creates handles with :func:`_new`, shares one handle among all consumers of a fan-out and marks
it borrowed; ``take_input`` gives the kernel an owned :func:`clone_owned` handle.
"""

from __future__ import annotations

import copy as _copy
import operator
import sys
import weakref
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, SupportsFloat, SupportsIndex, TypeAlias, final

from .._timestamps import TS_UNSET, ts_name
from .._types import MetadataValue
from ..errors import UsageError
from ._buffers import (
    DType,
    _Buffer,
    array_refs,
    array_refs_exclusive,
    check_array,
    count_copy,
    host_array,
    is_deferred,
    is_dlpack,
    lend,
    lent_alone,
    numpy_dtype,
    parse_dtype,
    unadopt_exclusive,
    wrap_adopted,
    wrap_dlpack,
    wrap_owned,
)
from ._checks import (
    _BOOL,
    _BUFFER,
    _BYTES,
    _F64,
    _I64,
    _I64_MAX,
    _I64_MIN,
    _NONE,
    _STR,
    _check_i64,
    _check_key,
    _check_ts,
    _describe,
    _is_numpy,
    _metadata_value,
    _normalise_shape,
    _raise_borrowed,
    _raise_not_buffer,
)
from ._typeids import type_name

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from ._buffers import Array

    MetadataInput: TypeAlias = MetadataValue | np.bool_ | np.integer | np.floating
    """What ``set_metadata`` accepts: numpy scalars are stored as the matching Python type."""

# numpy is not imported here (see _buffers): a value can only be a numpy object once numpy is
# loaded, so the conversions below look it up in sys.modules, and code that makes arrays
# imports it where it does.

__all__ = ["Packet", "clone_owned", "new_buffer", "to_packet"]

@final
class Packet:
    """A timestamped value travelling through a graph: empty, a scalar, bytes, a string or a buffer.

    Payloads are immutable once shared: readers never copy, and ``make_mutable`` copies a buffer
    only when another handle (or the host) still references it. ``Packet()`` is an empty packet,
    which carries only a timestamp. The attribute names follow lm-flow's ``lmflow.Packet``.

    >>> p = Packet.from_int(5, ts=3)
    >>> p
    Packet{type=I64(5), ts=3}
    >>> p.as_int(), p.as_float(), p.type_name
    (5, None, 'I64')
    >>> Packet()
    Packet{type=Empty, ts=Unset}
    """

    # Engine code reads and writes these slots directly (``_value is None`` means empty).
    # ``__weakref__``: a buffer handed over by ``Graph.send`` remembers the host's handle weakly.
    __slots__ = ("__weakref__", "_meta", "_owned", "_tid", "_ts", "_value", "_writable")

    _value: object
    """The payload: an exact int/float/bool/str/bytes, a ``_Buffer`` holder, or None when empty."""
    _tid: int
    """The type id (:class:`TypeId`); 0 for an empty packet."""
    _ts: int
    """The timestamp; engine code reads and writes it directly."""
    _meta: dict[str, MetadataValue] | None
    """The metadata map, shared between clones and never mutated: setters install a new dict."""
    _owned: bool
    """False while the engine holds this handle (and may share it); mutators then raise."""
    _writable: Array | None
    """The writable view this handle handed out (``make_mutable``, ``new_buffer``), else None."""

    def __init__(self) -> None:
        self._value = None
        self._tid = _NONE
        self._ts = TS_UNSET
        self._meta = None
        self._owned = True
        self._writable = None

    # --- properties ------------------------------------------------------------------------------

    @property
    def timestamp(self) -> int:
        """The packet's timestamp (``TS_UNSET`` by default). Owned packets only may set it."""
        return self._ts

    @timestamp.setter
    def timestamp(self, ts: int) -> None:
        if not self._owned:
            _raise_borrowed("setting timestamp")
        self._ts = _check_ts(ts)

    @property
    def is_empty(self) -> bool:
        """Whether the packet has no payload (only a timestamp)."""
        return self._value is None

    @property
    def type_id(self) -> int:
        """The payload's type id (:class:`TypeId` values); 0 for an empty packet."""
        return self._tid

    @property
    def type_name(self) -> str:
        """The display name of ``type_id`` (``"I64"``, ``"Buffer"``...)."""
        return type_name(self.type_id)

    @property
    def device(self) -> str | None:
        """Where a buffer's memory lives (``"cpu"``, ``"cuda:0"``...); None for other packets."""
        if self._tid != _BUFFER:
            return None
        h: _Buffer = self._value  # type: ignore[assignment]
        return h.device

    @property
    def payload(self) -> object:
        """The payload as a Python object, without copying.

        Scalars, strings and bytes are returned as is, a numpy buffer as a read-only view (as
        :meth:`as_numpy`), a DLPack buffer as the original object (a CuPy array, a torch tensor...),
        and an empty packet as None.
        """
        if self._tid != _BUFFER:
            return self._value
        h: _Buffer = self._value  # type: ignore[assignment]
        return h.obj if h.obj is not None and not is_deferred(h) else self.as_numpy()

    # --- readers: exact type match or None, never a conversion --------------------------------

    def as_int(self) -> int | None:
        """The value of an I64 packet; None for any other packet (a Bool packet too)."""
        return self._value if self._tid == _I64 else None  # type: ignore[return-value]

    def as_float(self) -> float | None:
        """The value of an F64 packet; None for any other packet (an I64 packet too)."""
        return self._value if self._tid == _F64 else None  # type: ignore[return-value]

    def as_bool(self) -> bool | None:
        """The value of a Bool packet; None for any other packet."""
        return self._value if self._tid == _BOOL else None  # type: ignore[return-value]

    def as_str(self) -> str | None:
        """The value of a Str packet; None for any other packet."""
        return self._value if self._tid == _STR else None  # type: ignore[return-value]

    def as_bytes(self) -> bytes | None:
        """The value of a Bytes packet; None for any other packet."""
        return self._value if self._tid == _BYTES else None  # type: ignore[return-value]

    def as_numpy(self) -> Array:
        """A read-only view of a buffer packet's data, without copying.

        The view stays valid as long as you keep it (it keeps the memory alive). A CPU DLPack
        buffer is exposed through ``np.from_dlpack`` on first use.

        Raises:
            ValueError: The packet is not a buffer, or its memory is not on the CPU.
        """
        if self._tid != _BUFFER:
            _raise_not_buffer("as_numpy", self._tid, self._value)
        view = host_array(self._value, "as_numpy").view()  # type: ignore[arg-type]
        view.setflags(write=False)
        return view

    # --- copy-on-write ---------------------------------------------------------------------------

    def make_mutable(self) -> Array:
        """A writable array of this buffer packet's data, copying only if the data is shared.

        Writes in place (returning the same memory, with its strides) when the payload is
        exclusively held: no other handle shares it, nothing else references the array (a host
        variable, a view, a kernel that kept an earlier writable array), and an adopted array owns
        its memory and was writeable. Otherwise makes one contiguous copy, points this handle at it
        (other handles keep the original, untouched) and counts the copy in :func:`cow_stats`.
        Calling it again on the same handle returns the same array. Do not write to it after
        sending or emitting the packet.

        Raises:
            UsageError: The packet is borrowed: take it with ``ctx.take_input(i)`` first.
            ValueError: The packet is not a buffer, or lives on a device flowplex cannot copy.
        """
        h: _Buffer = self._value  # type: ignore[assignment]  # the local _HOLDER_REFS_EXCLUSIVE counts
        if self._tid != _BUFFER:
            _raise_not_buffer("make_mutable", self._tid, self._value)
        if not self._owned:
            _raise_borrowed("make_mutable")
        refs = _holder_refs(h)
        exclusive = holder_refs_exclusive()
        if refs == exclusive or (refs == exclusive + 1 and _host_holds(h, self)):
            mine = self._writable
            if mine is not None:
                # Exclusivity was proven when this view was made; every reference to the memory
                # made since then descends from this handle, i.e. from its owner.
                return mine
            adopted_exclusive, owned_exclusive = array_refs_exclusive()
            if h.mutable:
                # Views lent at a hand-over (read-only, kept by the registry) are known references.
                lent = h.lent
                if array_refs(h) == owned_exclusive + (0 if lent is None else len(lent)) and (
                    lent is None or lent_alone(h)
                ):
                    mine = self._writable = h.array.view()  # type: ignore[union-attr]
                    return mine
            elif (
                h.key is not None
                and array_refs(h) == adopted_exclusive
                and h.array.base is None  # type: ignore[union-attr]  # a view: someone else's memory
                and unadopt_exclusive(h)
            ):
                mine = self._writable = h.array.view()  # type: ignore[union-attr]
                return mine
        import numpy as np

        src = host_array(h, "make_mutable")
        copied = np.array(src, copy=True, order="C")
        count_copy(copied.nbytes)
        self._value = wrap_owned(copied, h.code)
        mine = self._writable = copied.view()
        return mine

    # --- metadata ---------------------------------------------------------------------------------

    def set_metadata(self, key: str, value: MetadataInput) -> None:
        """Set a metadata entry (a bool, an int64, a float or a str), without copying the payload.

        Raises:
            UsageError: The packet is borrowed or empty, the key is empty, or an int does not fit
                64 bits.
            TypeError: The key is not a str or the value is of another type.
        """
        if not self._owned:
            _raise_borrowed("set_metadata")
        if self._value is None:
            msg = "set_metadata: an empty packet has no body to carry metadata"
            raise UsageError(msg)
        _check_key(key)
        stored = _metadata_value(key, value)
        meta = self._meta
        self._meta = {key: stored} if meta is None else {**meta, key: stored}  # others keep the old map

    def metadata(self, key: str) -> MetadataValue | None:
        """The value stored under ``key``, or None."""
        meta = self._meta
        return meta.get(key) if meta is not None else None

    def has_metadata(self, key: str) -> bool:
        """Whether ``key`` is set."""
        meta = self._meta
        return meta is not None and key in meta

    def remove_metadata(self, key: str) -> bool:
        """Remove ``key``; returns whether it was set.

        Raises:
            UsageError: The packet is borrowed.
        """
        if not self._owned:
            _raise_borrowed("remove_metadata")
        meta = self._meta
        if meta is None or key not in meta:
            return False
        new = dict(meta)
        del new[key]
        self._meta = new or None
        return True

    def metadata_keys(self) -> list[str]:
        """The metadata keys in lexicographic order."""
        meta = self._meta
        return sorted(meta) if meta is not None else []

    # --- factories (static, as in lm-flow) --------------------------------------------------------

    @staticmethod
    def from_int(value: SupportsIndex, ts: SupportsIndex = TS_UNSET) -> Packet:
        """An I64 packet. ``value`` may be any integer (numpy ones too) that fits 64 bits."""
        try:
            number = operator.index(value)
        except TypeError:
            msg = f"from_int: expected an int, got {type(value).__name__}"
            raise TypeError(msg) from None
        return _new(_check_i64(number, "from_int"), _I64, _check_ts(ts))

    @staticmethod
    def from_float(value: SupportsFloat, ts: SupportsIndex = TS_UNSET) -> Packet:
        """An F64 packet; integers are converted."""
        if not isinstance(value, (float, int)) and not _is_numpy(value, "floating", "integer"):
            msg = f"from_float: expected a float, got {type(value).__name__}"
            raise TypeError(msg)
        return _new(float(value), _F64, _check_ts(ts))

    @staticmethod
    def from_bool(value: bool | np.bool_, ts: SupportsIndex = TS_UNSET) -> Packet:
        """A Bool packet; only ``bool`` and ``numpy.bool_`` are accepted (1 is not a bool)."""
        if not isinstance(value, bool) and not _is_numpy(value, "bool_"):
            msg = f"from_bool: expected a bool, got {type(value).__name__}"
            raise TypeError(msg)
        return _new(bool(value), _BOOL, _check_ts(ts))

    @staticmethod
    def from_str(value: str, ts: SupportsIndex = TS_UNSET) -> Packet:
        """A Str packet."""
        if not isinstance(value, str):
            msg = f"from_str: expected a str, got {type(value).__name__}"
            raise TypeError(msg)
        return _new(str.__str__(value), _STR, _check_ts(ts))

    @staticmethod
    def from_bytes(value: bytes | bytearray | memoryview, ts: SupportsIndex = TS_UNSET) -> Packet:
        """A Bytes packet. ``bytearray`` and ``memoryview`` are copied, since they can change."""
        if not isinstance(value, (bytes, bytearray, memoryview)):
            msg = f"from_bytes: expected bytes, got {type(value).__name__}"
            raise TypeError(msg)
        return _new(bytes(value), _BYTES, _check_ts(ts))

    @staticmethod
    def from_numpy(array: Array, ts: SupportsIndex = TS_UNSET) -> Packet:
        """A buffer packet that adopts ``array`` without copying.

        The array keeps its address and strides (transposed, sliced and negative-stride views
        too). It is read-only while any packet references it, and gets its original writeability
        back when the last one is released, on whichever thread that happens.

        Raises:
            ValueError: The dtype or the number of dimensions is unsupported.
            TypeError: ``array`` is not a numpy array.

        >>> import numpy as np
        >>> a = np.zeros((2, 3), np.uint8)
        >>> p = Packet.from_numpy(a, ts=7)
        >>> print(p)
        Packet{type=Buffer[2x3] dtype=U8 external, ts=7}
        >>> a.flags.writeable
        False
        >>> del p
        >>> a.flags.writeable
        True
        """
        if not _is_numpy(array, "ndarray"):
            msg = f"from_numpy: expected a numpy.ndarray, got {type(array).__name__}"
            raise TypeError(msg)
        ts = _check_ts(ts)
        return _new(wrap_adopted(array, check_array(array)), _BUFFER, ts)

    @staticmethod
    def from_dlpack(obj: object, ts: SupportsIndex = TS_UNSET) -> Packet:
        """A buffer packet that references a DLPack array (CuPy, PyTorch, JAX) on any device.

        The object travels by reference: flowplex never copies it and never calls its
        ``__dlpack__`` unless you ask for ``as_numpy()`` on a CPU array. ``payload`` returns it.
        A numpy array is adopted as by :meth:`from_numpy`.

        Raises:
            ValueError: Its dtype (read from ``obj.dtype``) or shape is unsupported.
            TypeError: ``obj`` does not export ``__dlpack__`` and ``__dlpack_device__``.
        """
        if _is_numpy(obj, "ndarray"):
            return Packet.from_numpy(obj, ts)  # type: ignore[arg-type]
        if not is_dlpack(obj):
            msg = f"from_dlpack: {type(obj).__name__} does not export __dlpack__ and __dlpack_device__"
            raise TypeError(msg)
        ts = _check_ts(ts)
        return _new(wrap_dlpack(obj), _BUFFER, ts)

    # --- Python protocols ------------------------------------------------------------------------

    def __repr__(self) -> str:
        return f"Packet{{type={_describe(self._tid, self._value)}, ts={ts_name(self._ts)}}}"

    def __copy__(self) -> Packet:
        return clone_owned(self)

    def __deepcopy__(self, memo: dict[int, object]) -> Packet:
        if self._tid != _BUFFER:
            return clone_owned(self)
        h: _Buffer = self._value  # type: ignore[assignment]
        if h.obj is not None and not is_deferred(h):
            holder = wrap_dlpack(_copy.deepcopy(h.obj, memo))
        else:
            import numpy as np

            holder = wrap_owned(np.array(host_array(h, "deepcopy"), copy=True, order="C"), h.code)
        p = _new(holder, _BUFFER, self._ts)
        p._meta = self._meta
        return p

    def __reduce__(self) -> tuple[object, tuple[object, ...]]:
        # An unpickled packet is owned by its receiver; a buffer arrives as a freshly adopted array.
        return (_restore, (self._value, self._tid, self._ts, self._meta))


# --- engine-internal fast paths ---------------------------------------------------------------------

_alloc = object.__new__


def _new(value: object, type_id: int, ts: int) -> Packet:
    """A new owned packet, with no checks: the engine's constructor for the hot path.

    ``value`` must already be the exact payload for ``type_id`` (an ``int`` in the int64 range
    for ``_I64``, a ``_Buffer`` holder for ``_BUFFER``...), and ``ts`` an int64.
    """
    p = _alloc(Packet)
    p._value = value
    p._tid = type_id
    p._ts = ts
    p._meta = None
    p._owned = True
    p._writable = None
    return p


def clone_owned(p: Packet) -> Packet:
    """A new owned handle sharing ``p``'s payload, metadata and timestamp; nothing is copied.

    ``take_input`` and poller delivery hand this to the user, then drop the engine's handle, so
    that the user's handle is the payload's only holder and ``make_mutable`` can write in place.

    >>> p = Packet.from_int(1, ts=2)
    >>> q = clone_owned(p)
    >>> q is p, q.as_int(), q.timestamp
    (False, 1, 2)
    """
    q = _alloc(Packet)
    q._value = p._value
    q._tid = p._tid
    q._ts = p._ts
    q._meta = p._meta
    q._owned = True
    q._writable = None
    return q


def _borrow(p: Packet) -> Packet:
    """Mark ``p`` as held by the engine (mutators raise ``UsageError`` on it) and return it."""
    p._owned = False
    return p


def _byte_size(p: Packet) -> int:
    """The payload size for byte accounting (lm-flow's ``byte_size``): 0 for empty packets."""
    tid = p._tid
    if tid == _BYTES:
        return len(p._value)  # type: ignore[arg-type]
    if tid in (_I64, _F64):
        return 8
    if tid == _BOOL:
        return 1
    if tid == _STR:
        return len(p._value.encode("utf-8"))  # type: ignore[attr-defined]
    if tid == _BUFFER:
        return p._value.nbytes()  # type: ignore[attr-defined, no-any-return]
    return 0


def _restore(value: object, tid: int, ts: int, meta: dict[str, MetadataValue] | None) -> Packet:
    p = _new(value, tid, ts)
    p._meta = meta
    return p


def _holder_refs(h: _Buffer) -> int:
    """``sys.getrefcount`` of a buffer holder, measured the same way as the baseline below."""
    return sys.getrefcount(h)


def _calibrate_holder_refs() -> int:
    """The refcount ``_holder_refs`` reports inside ``make_mutable`` when one handle holds the payload.

    Expected on CPython 3.11-3.13: 4 (the handle's slot, make_mutable's local ``h``, the parameter
    of ``_holder_refs`` and the argument of ``getrefcount``); each further handle adds one.
    Measured, not assumed; -1 (never write in place) if a second handle does not add exactly one.
    """
    if not hasattr(sys, "getrefcount"):
        return -1
    import numpy as np

    p = _new(wrap_owned(np.zeros(1, np.uint8), DType.U8), _BUFFER, TS_UNSET)
    h: _Buffer = p._value  # type: ignore[assignment]  # mirrors make_mutable's local
    alone = _holder_refs(h)
    q = clone_owned(p)
    shared = _holder_refs(h)
    del q
    return alone if shared == alone + 1 else -1


_holder_refs_exclusive = 0
"""``_calibrate_holder_refs()``, measured on the first ``make_mutable`` (it needs numpy); 0 before."""


def holder_refs_exclusive() -> int:
    """``_holder_refs`` of a payload held by one handle (calibrated on first use)."""
    global _holder_refs_exclusive
    refs = _holder_refs_exclusive
    if not refs:
        refs = _holder_refs_exclusive = _calibrate_holder_refs()
    return refs


def sole_holder(p: Packet) -> bool:
    """Whether ``p`` is the only handle of its engine-owned buffer and nothing else references
    the array: what ``make_mutable`` checks before writing in place. ``p`` is being handed on
    (sent to another process), so its own writable view is dropped first: its writer is done.
    """
    h: _Buffer = p._value  # type: ignore[assignment]  # mirrors make_mutable's local
    if p._tid != _BUFFER or not h.mutable:
        return False
    p._writable = None
    refs = _holder_refs(h)
    exclusive = holder_refs_exclusive()
    if not (refs == exclusive or (refs == exclusive + 1 and _host_holds(h, p))):
        return False
    lent = h.lent
    return array_refs(h) == array_refs_exclusive()[1] + (0 if lent is None else len(lent)) and (
        lent is None or lent_alone(h))


BufferAllocator: TypeAlias = "Callable[[tuple[int, ...], np.dtype[np.generic]], Array]"
"""``numpy.zeros``'s signature: where ``new_buffer`` gets memory (a process pool's shared memory)."""

_zeros: BufferAllocator | None = None
"""Where ``new_buffer`` gets its memory: None is ``numpy.zeros``; a process pool's worker puts
its buffers in shared memory (``set_buffer_allocator``)."""


def set_buffer_allocator(zeros: BufferAllocator | None) -> None:
    """Make ``new_buffer`` allocate with ``zeros(shape, dtype)`` in this process (None: numpy's)."""
    global _zeros
    _zeros = zeros


# --- conversion ---------------------------------------------------------------------------------------


def to_packet(value: object, ts: SupportsIndex | None = None, host: bool = False) -> Packet:
    """Turn a value handed to ``send``/``emit``/side packets into a packet (lm-flow's order).

    A ``Packet`` is returned itself (it is surrendered to the engine) with its timestamp
    replaced when ``ts`` is given; a borrowed packet is cloned instead so that the engine's
    shared handle never changes. ``host=True`` (sends, side packets, runner inputs) hands over
    a buffer the host filled through a writable view (see ``_surrender_host``). Then: numpy
    array (adopted without copying), DLPack array (by reference), bool, int, float, bytes,
    str. numpy scalars count as bool/int/float; ``bytearray`` and ``memoryview`` become Bytes
    (copied, since they can change). ``ts=None`` means ``TS_UNSET`` for new packets.

    Raises:
        TypeError: The value is of another type.
        ValueError: An int does not fit 64 bits, or a buffer is unsupported.

    >>> to_packet(42, 3)
    Packet{type=I64(42), ts=3}
    >>> to_packet("hi")
    Packet{type=Str("hi"), ts=Unset}
    """
    if ts is None:
        t = TS_UNSET
    elif type(ts) is int and _I64_MIN <= ts <= _I64_MAX:
        t = ts
    else:
        t = _check_ts(ts)
    cls = type(value)
    # Exact built-in types first: they are the hot path and cannot be any earlier case. The
    # allocation is _new's, inlined (a call costs a fifth of this function).
    if cls is int:
        if not _I64_MIN <= value <= _I64_MAX:  # type: ignore[operator]
            _check_i64(value, "to_packet")  # type: ignore[arg-type]
        tid = _I64
    elif cls is float:
        tid = _F64
    elif cls is str:
        tid = _STR
    elif cls is Packet:
        if host:
            return _surrender_host(value, None if ts is None else t)  # type: ignore[arg-type]
        return _surrender(value, None if ts is None else t)  # type: ignore[arg-type]
    elif cls is bool:
        tid = _BOOL
    elif cls is bytes:
        tid = _BYTES
    elif isinstance(value, Packet):  # a subclass, although Packet is final
        return (_surrender_host if host else _surrender)(value, None if ts is None else t)
    else:
        return _to_packet_slow(value, t)
    p = _alloc(Packet)
    p._value = value
    p._tid = tid
    p._ts = t
    p._meta = None
    p._owned = True
    p._writable = None
    return p


def _surrender(p: Packet, ts: int | None) -> Packet:
    """``p`` itself, retimed if ``ts`` is given; a clone if it is borrowed (never retime a shared handle)."""
    if ts is None:
        return p
    if p._owned:
        p._ts = ts
        return p
    q = clone_owned(p)
    q._ts = ts
    return q


def _surrender_host(p: Packet, ts: int | None) -> Packet:
    """``_surrender`` for a packet the host hands to a graph: a buffer it filled is handed over.

    A packet with a writable view (``new_buffer``, or ``make_mutable`` on the host) keeps the
    host's handle readable, but the graph gets its own handle and the view becomes read-only
    (``lend``) until every packet sharing the buffer is gone, the host's handle included. The
    host's handle is remembered weakly, so that it does not count as a sharer in the graph's
    ``make_mutable``: the graph may write into the buffer in place, and the host's handle and
    view show it. Sending that handle again hands it over again (the graph then holds two
    handles, and writing copies).
    """
    if p._owned and p._tid == _BUFFER:
        h: _Buffer = p._value  # type: ignore[assignment]
        view = p._writable
        host = h.host
        if view is not None or (host is not None and host() is p):
            if view is not None:
                p._writable = None
                lend(h, view)
            h.host = weakref.ref(p)
            if ts is not None:
                p._ts = ts  # as ``_surrender`` retimes the packet it hands over
            return clone_owned(p)
    return _surrender(p, ts)


def _host_holds(h: _Buffer, p: Packet) -> bool:
    """Whether the host's handed-over handle of ``h`` (see ``_surrender_host``) is alive and not ``p``."""
    host = h.host
    if host is None:
        return False
    q = host()
    return q is not None and q is not p


def _to_packet_slow(value: object, ts: int) -> Packet:
    np = sys.modules.get("numpy")  # without numpy loaded, nothing can be a numpy object
    if np is not None and isinstance(value, np.ndarray):
        return _new(wrap_adopted(value, check_array(value)), _BUFFER, ts)
    if isinstance(value, bool) or (np is not None and isinstance(value, np.bool_)):
        return _new(bool(value), _BOOL, ts)
    if isinstance(value, int) or (np is not None and isinstance(value, np.integer)):
        return _new(_check_i64(int(value), "to_packet"), _I64, ts)
    if isinstance(value, float) or (np is not None and isinstance(value, np.floating)):
        return _new(float(value), _F64, ts)
    if is_dlpack(value):
        return _new(wrap_dlpack(value), _BUFFER, ts)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return _new(bytes(value), _BYTES, ts)
    if isinstance(value, str):
        return _new(str.__str__(value), _STR, ts)
    msg = (
        f"can only send a Packet or a built-in type (int/float/bool/str/bytes/ndarray) or a DLPack "
        f"array, got {type(value).__name__}; send structured data as a numpy N x K array or a JSON str"
    )
    raise TypeError(msg)


def new_buffer(
    shape: SupportsIndex | Sequence[SupportsIndex], dtype: DType | npt.DTypeLike,
    *, zeros: BufferAllocator | None = None,
) -> tuple[Packet, Array]:
    """A zero-filled, contiguous buffer packet and a writable view to fill it with.

    Produce into the view, then send or emit the packet; do not write to the view afterwards.
    Sending it from the host (``Graph.send``, ``Input.send``, side packets, ``KernelRunner``)
    hands the buffer over without a copy: from then on the view is read-only (a write raises
    numpy's ``ValueError``), a kernel that takes the packet may write into the same memory in
    place although you still hold ``view`` and the packet, and both keep reading that memory,
    writes included (copy it before sending if you need the original). The view becomes
    writeable again once no packet shares the buffer any more, yours included (as an adopted
    array does once its last packet is released): drop the packet to get it back after the
    graph is done with it. Sending the packet again sends the same memory (a kernel then
    copies before writing, while the graph still holds the first one). A kernel's ``emit``
    hands nothing over: the view simply must not be written after it.

    Args:
        shape: 1 to 8 non-negative dimensions, or one int for a 1-d buffer.
        dtype: A :class:`DType`, an lm-flow code (``"u8"``, ``"f32"``...; these win over numpy's
            spellings, so ``"u8"`` is uint8 and ``"i8"`` int8), or a numpy dtype or name.
        zeros: The allocator (``zeros(shape, numpy_dtype)``; default: this process's, numpy's
            unless a process pool's worker put its shared memory there).

    Raises:
        ValueError: The shape or the dtype is unsupported.

    >>> p, view = new_buffer((2, 2), "f32")
    >>> view[0, 0] = 1.5
    >>> p, float(p.as_numpy()[0, 0])
    (Packet{type=Buffer[2x2] dtype=F32, ts=Unset}, 1.5)
    """
    import numpy as np

    code = parse_dtype(dtype)
    dims = _normalise_shape(shape)
    zeros = zeros or _zeros
    arr = np.zeros(dims, dtype=numpy_dtype(code)) if zeros is None else zeros(dims, numpy_dtype(code))
    p = _new(wrap_owned(arr, code), _BUFFER, TS_UNSET)
    view = p._writable = arr.view()
    return p, view


# flowplex/__init__.py gives public classes the __module__ "flowplex", which makes doctest skip
# their docstrings when it scans this module; list the class so that its examples still run.
__test__ = {"Packet": Packet}
