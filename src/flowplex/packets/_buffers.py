"""Buffer payloads: dtypes, zero-copy adoption of numpy arrays, DLPack references, CoW accounting.

A BUFFER packet's payload is a :class:`_Buffer` holder. Holders are referenced only by packet
handles (never handed to users), so ``sys.getrefcount(holder)`` counts the handles that share a
payload; that is how ``make_mutable`` knows whether it may write in place.

Adopting a numpy array registers it in a process-wide table that counts the live holders per
array, sets the array read-only on first adoption and restores its original writeability when the
last holder dies. The same registry keeps the writable view of an engine buffer read-only once its
packet was handed to a graph (``lend``, for ``new_buffer`` packets the host sends). Holders die in
``__del__`` on whatever thread drops the last reference, possibly in the middle of this module's
own code through the cyclic GC, so the finalizer never blocks: it queues the release and drains
the queue only if it can take the lock without waiting; whoever holds the lock drains the queue
when it leaves (see ``_drain``).
"""

from __future__ import annotations

import logging
import sys
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum
from typing import TYPE_CHECKING, Final, TypeAlias, final

from ..errors import UsageError

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Array: TypeAlias = npt.NDArray[np.generic]
    """A numpy array of one of the nine buffer dtypes."""

# numpy is imported on first use, not with flowplex (it is half of `import flowplex` otherwise):
# a buffer packet can only exist once someone has made an array, which imports numpy anyway.

__all__ = ["CowStats", "DType", "cow_stats", "dtype_size"]

log = logging.getLogger(__name__)

MAX_DIMS: Final = 8


class DType(IntEnum):
    """Buffer element types, with lm-flow's codes (kept verbatim for wire compatibility)."""

    U8 = 0
    I8 = 1
    U16 = 2
    I16 = 3
    I32 = 4
    I64 = 5
    F16 = 6
    F32 = 7
    F64 = 8


_ITEMSIZES: Final = (1, 1, 2, 2, 4, 8, 2, 4, 8)
"""Element size in bytes, by dtype code."""


@final
class _NumpyTables:
    """The numpy side of the dtype codes, built on first use (it needs numpy)."""

    __slots__ = ("by_kind_size", "by_num", "dtypes")

    def __init__(self) -> None:
        import numpy as np

        self.dtypes: tuple[np.dtype[np.generic], ...] = tuple(
            np.dtype(t) for t in (np.uint8, np.int8, np.uint16, np.int16, np.int32, np.int64, np.float16,
                                  np.float32, np.float64)
        )
        # (kind, itemsize) identifies a numeric dtype without depending on numpy's aliasing of
        # C types (int64 is both 'l' and 'q' on Linux, int32 is 'l' on Windows).
        self.by_kind_size = {(dt.kind, dt.itemsize): code for code, dt in enumerate(self.dtypes)}
        # The fast path: dtype.num of every builtin type character that maps to a buffer dtype.
        self.by_num = {
            np.dtype(char).num: self.by_kind_size[np.dtype(char).kind, np.dtype(char).itemsize]
            for char in np.typecodes["AllInteger"] + np.typecodes["Float"]
            if (np.dtype(char).kind, np.dtype(char).itemsize) in self.by_kind_size
        }


_tables: _NumpyTables | None = None


def numpy_tables() -> _NumpyTables:
    """The dtype tables (imports numpy the first time)."""
    global _tables
    tables = _tables
    if tables is None:
        tables = _tables = _NumpyTables()
    return tables


_CODE_BY_NAME: Final = {m.name.lower(): m for m in DType}
_SUPPORTED: Final = (
    "uint8, int8, uint16, int16, int32, int64, float16, float32 or float64 "
    "(lm-flow codes u8 i8 u16 i16 i32 i64 f16 f32 f64)"
)


def dtype_size(code: int) -> int:
    """The element size in bytes of a dtype code; 0 for an unknown code (as in lm-flow).

    >>> dtype_size(DType.F32), dtype_size(42)
    (4, 0)
    """
    return _ITEMSIZES[code] if 0 <= code < len(_ITEMSIZES) else 0


def numpy_dtype(code: int) -> np.dtype[np.generic]:
    """The numpy dtype of a valid dtype code."""
    return numpy_tables().dtypes[code]


def parse_dtype(dtype: object) -> DType:
    """Normalise the dtype forms ``new_buffer`` accepts to a :class:`DType`.

    Accepted: a :class:`DType` or its int code, an lm-flow code string (``"u8"``, ``"f32"``...,
    case-insensitive), or anything ``numpy.dtype`` understands (``np.float32``, ``"float32"``,
    ``"<f4"``). lm-flow codes win over numpy's spellings: ``"u8"`` and ``"i8"`` mean uint8 and
    int8 here, not numpy's uint64 and int64.
    """
    if isinstance(dtype, int) and not isinstance(dtype, bool):
        if 0 <= dtype < len(_ITEMSIZES):
            return DType(dtype)
        msg = f"dtype code {dtype} is unknown; codes are 0 (U8) to 8 (F64)"
        raise UsageError(msg)
    if isinstance(dtype, str):
        code = _CODE_BY_NAME.get(dtype.lower())
        if code is not None:
            return code
    import numpy as np

    try:
        dt = np.dtype(dtype)  # type: ignore[call-overload]
    except TypeError:
        msg = f"dtype {dtype!r} is not a dtype; use one of {_SUPPORTED}"
        raise UsageError(msg) from None
    return DType(_dtype_code(dt))


def _dtype_code(dt: np.dtype[np.generic]) -> int:
    code = numpy_tables().by_kind_size.get((dt.kind, dt.itemsize))
    if code is not None and dt.isnative and dt.names is None and dt.subdtype is None:
        return code
    hint = "convert first, e.g. arr.astype(np.float32)"
    if dt.kind == "b":
        hint = "convert first with arr.astype(np.uint8)"
    elif dt.kind == "u" and dt.itemsize > 2:
        hint = "convert first with arr.astype(np.int64)"
    elif code is not None and not dt.isnative:
        hint = "byte-swap first with arr.astype(arr.dtype.newbyteorder('='))"
    msg = f"unsupported dtype {dt}: buffers hold {_SUPPORTED}; {hint}"
    raise UsageError(msg)


def check_ndim(ndim: int) -> None:
    """Raise unless ``ndim`` is in ``1..8``."""
    if not 1 <= ndim <= MAX_DIMS:
        hint = "use arr.reshape(1), or .item() to send a scalar" if ndim == 0 else "reshape it first"
        msg = f"unsupported ndim {ndim}: buffers have 1 to {MAX_DIMS} dimensions; {hint}"
        raise UsageError(msg)


def check_array(arr: Array) -> int:
    """Validate an array for adoption and return its dtype code."""
    if not 1 <= arr.ndim <= MAX_DIMS:
        check_ndim(arr.ndim)
    dt = arr.dtype
    code = numpy_tables().by_num.get(dt.num)
    if code is not None and dt.isnative:
        return code
    return _dtype_code(dt)


# --- DLPack -------------------------------------------------------------------------------------

# DLDeviceType values from dlpack.h.
_DEVICE_NAMES: Final = {
    1: "cpu",
    2: "cuda",
    3: "cuda_host",
    4: "opencl",
    7: "vulkan",
    8: "metal",
    9: "vpi",
    10: "rocm",
    11: "rocm_host",
    12: "ext_dev",
    13: "cuda_managed",
    14: "oneapi",
    15: "webgpu",
    16: "hexagon",
    17: "maia",
}
_KDL_CPU: Final = 1


def is_dlpack(obj: object) -> bool:
    """Whether ``obj`` exports the DLPack protocol."""
    return hasattr(obj, "__dlpack__") and hasattr(obj, "__dlpack_device__")


def _device_name(obj: object) -> tuple[str, bool]:
    """The device string of a DLPack exporter (``"cpu"``, ``"cuda:0"``) and whether it is the CPU."""
    try:
        dev_type, dev_id = obj.__dlpack_device__()  # type: ignore[attr-defined]
        dev_type, dev_id = int(dev_type), int(dev_id)
    except Exception as exc:
        msg = f"{type(obj).__name__}.__dlpack_device__() failed or returned no (type, id) pair: {exc}"
        raise UsageError(msg) from exc
    if dev_type == _KDL_CPU:
        return "cpu", True
    return f"{_DEVICE_NAMES.get(dev_type, f'device{dev_type}')}:{dev_id}", False


def _foreign_dtype_code(obj: object) -> int:
    """The dtype code of a DLPack exporter, read from its ``dtype`` attribute (not from DLPack).

    CuPy and JAX expose numpy dtypes; PyTorch exposes ``torch.float32``, whose last dotted part is
    a numpy name.
    """
    import numpy as np

    raw = getattr(obj, "dtype", None)
    dt: np.dtype[np.generic] | None = None
    for candidate in (raw, str(raw).rsplit(".", 1)[-1]):
        try:
            dt = np.dtype(candidate)
            break
        except TypeError:
            continue
    if raw is None or dt is None:
        msg = f"cannot tell the dtype of {type(obj).__name__} (dtype={raw!r}); buffers hold {_SUPPORTED}"
        raise UsageError(msg)
    return _dtype_code(dt)


def _foreign_shape(obj: object) -> tuple[int, ...]:
    try:
        shape = tuple(int(n) for n in obj.shape)  # type: ignore[attr-defined]
    except (AttributeError, TypeError) as exc:
        msg = f"{type(obj).__name__} exports __dlpack__ but has no usable .shape: {exc}"
        raise UsageError(msg) from None
    check_ndim(len(shape))
    return shape


# --- holders ------------------------------------------------------------------------------------


@final
class _Adopted:
    """One adopted array in the registry: how many live holders reference it."""

    __slots__ = ("array", "count", "was_writeable")

    def __init__(self, array: Array) -> None:
        self.array = array
        self.count = 1
        self.was_writeable = False


# The adoption registry, keyed by id(array): an entry keeps its array alive, so the id stays unique.
# A re-entrant lock: a GC pass inside a critical section may run user finalizers that adopt arrays
# on this same thread. _depth > 0 while a critical section runs; finalizers that re-enter on the
# owning thread leave their release queued instead of draining in the middle of that section.
_adopted: dict[int, _Adopted] = {}
_lock = threading.RLock()
_pending: deque[int] = deque()
_depth = 0


def adopt(arr: Array) -> int:
    """Register one more holder of ``arr``; make it read-only on its first adoption. Returns the key."""
    global _depth
    key = id(arr)
    with _lock:
        _depth += 1
        try:
            entry = _adopted.get(key)
            if entry is None:
                entry = _Adopted(arr)  # a GC pass here only queues releases (see _drain)
                if arr.flags.writeable:
                    entry.was_writeable = True
                    arr.setflags(write=False)  # setflags: twice as fast as flags.writeable = ...
                _adopted[key] = entry
            else:
                entry.count += 1
        finally:
            _depth -= 1
    if _pending:
        _drain()
    return key


def _release(key: int) -> None:
    """Queue the release of one holder of the array registered under ``key``; never blocks."""
    _pending.append(key)
    _drain()


def _drain() -> None:
    """Apply queued releases if the lock is free; otherwise its holder applies them on leaving."""
    global _depth
    while _pending:
        if not _lock.acquire(blocking=False):
            return  # another thread is inside; it calls _drain after releasing the lock
        if _depth:
            _lock.release()  # re-entered on the owning thread; the outer section drains on exit
            return
        _depth += 1
        freed: list[_Adopted] = []
        try:
            while _pending:
                try:
                    key = _pending.popleft()
                except IndexError:
                    break
                entry = _adopted.get(key)
                if entry is None:
                    log.error("packets.release.unknown key=%d (flowplex bug; please report it)", key)
                    continue
                entry.count -= 1
                if entry.count == 0:
                    del _adopted[key]
                    freed.append(entry)
                    if entry.was_writeable:
                        try:
                            entry.array.setflags(write=True)
                        except ValueError:
                            log.debug("packets.release.writeable_failed key=%d", key)
        finally:
            _depth -= 1
            _lock.release()
        # Dropping the last reference to an array may run arbitrary finalizers: do it unlocked.
        del freed


def unadopt_exclusive(h: _Buffer) -> bool:
    """Turn an exclusively held adopted array into engine-owned memory (writeable again).

    The caller has already checked that no other handle shares ``h`` and that nothing outside
    the registry references the array. Returns False (the caller copies) if the registry says
    otherwise: another adoption of the same array, a queued release, or an originally read-only
    array.
    """
    global _depth
    key = h.key
    if key is None:
        return False
    with _lock:
        _depth += 1
        try:
            entry = _adopted.get(key)
            if entry is None or entry.count != 1 or not entry.was_writeable or key in _pending:
                return False
            del _adopted[key]
            h.key = None
            h.mutable = True
            entry.array.setflags(write=True)
        finally:
            _depth -= 1
    if _pending:
        _drain()
    return True


def lend(h: _Buffer, view: Array) -> None:
    """Make the writable ``view`` of engine buffer ``h`` read-only until ``h`` dies (a hand-over).

    The registry keeps the view alive and read-only; the view's reference to the memory is then
    a known one, which ``lent_alone`` lets ``make_mutable`` discount. Restored like an adoption.
    """
    key = adopt(view)
    lent = h.lent
    h.lent = (key,) if lent is None else (*lent, key)


def lent_alone(h: _Buffer) -> bool:
    """Whether nothing but ``h`` holds the views lent by ``h`` (none adopted them again)."""
    lent = h.lent
    if lent is None:
        return True
    for key in lent:
        entry = _adopted.get(key)
        if entry is None or entry.count != 1 or key in _pending:
            return False
    return True


def adoption_count(arr: Array) -> int:
    """How many live holders have adopted ``arr`` (0 when none). For tests and diagnostics."""
    entry = _adopted.get(id(arr))
    return entry.count if entry is not None and entry.array is arr else 0


class DeferredArray:
    """A CPU array kept elsewhere (Ray's object store), fetched on first read (``host_array``).

    A subclass implements ``fetch``; a holder made by ``wrap_deferred`` describes the array
    (dtype, shape) without touching it, so a packet of it flows through the engine, is counted
    in byte budgets and is sent on by reference without its data ever reaching this process.
    """

    __slots__ = ()

    def fetch(self) -> Array:
        """The array (read-only is fine); called at most once per holder."""
        raise NotImplementedError

    def by_reference(self) -> bool:
        """Whether pickling now carries the reference (a message of the system that keeps the
        array) rather than the data (anywhere else: a pickle that outlives the reference)."""
        return False


@final
class _Buffer:
    """The shared payload of a BUFFER packet.

    Attributes:
        array: The numpy array; for a DLPack object, the host view made on first ``as_numpy``.
        code: The :class:`DType` code.
        shape: The shape, also known without touching a DLPack object's data.
        device: ``"cpu"`` or the DLPack device (``"cuda:0"``).
        external: The memory came from outside the engine (adoption or DLPack).
        key: The adoption registry key while ``array`` is adopted, else None.
        lent: Registry keys of writable views of ``array`` that were handed over with their
            packet (``lend``): read-only until this holder dies, each one known reference to the
            memory. None when there are none.
        host: A weak reference to the host's handle of a handed-over packet (``Graph.send`` of a
            ``new_buffer`` packet): the host may keep and read it, and ``make_mutable`` on the
            graph's handles does not count it. None when there is none.
        mutable: The memory belongs to the engine and only this holder references it, so the
            handles sharing the holder may write to it once they are the only handle.
        obj: The DLPack exporter for by-reference buffers, or the ``DeferredArray`` of a
            buffer kept elsewhere, else None.
    """

    __slots__ = ("array", "code", "device", "external", "host", "key", "lent", "mutable", "obj", "shape")

    array: Array | None
    code: int
    shape: tuple[int, ...]
    device: str
    external: bool
    key: int | None
    lent: tuple[int, ...] | None
    host: Callable[[], object] | None
    mutable: bool
    obj: object

    def __del__(self, _release: Callable[[int], None] = _release) -> None:
        # The default argument keeps _release reachable during interpreter shutdown.
        key = self.key
        if key is not None:
            _release(key)
        lent = self.lent
        if lent is not None:
            for key in lent:
                _release(key)

    def __reduce__(self) -> tuple[object, tuple[object, ...]]:
        # Pickling carries the data; the receiving side adopts its own fresh array.
        obj = self.obj
        if obj is not None:
            if isinstance(obj, DeferredArray):
                if obj.by_reference():  # the reference travels, never the fetched data
                    return (wrap_deferred, (obj, self.code, self.shape))
                return (_array_from_pickle, (host_array(self, "pickle"), True))
            return (_dlpack_from_pickle, (obj,))
        return (_array_from_pickle, (self.array, self.external))

    def nbytes(self) -> int:
        """The bytes the buffer describes (elements times element size)."""
        n = _ITEMSIZES[self.code]
        for dim in self.shape:
            n *= dim
        return n


def _cpu_holder(arr: Array, code: int, *, external: bool, mutable: bool) -> _Buffer:
    h = _Buffer()
    h.key = None
    h.lent = None
    h.host = None
    h.array = arr
    h.code = code
    h.shape = arr.shape
    h.device = "cpu"
    h.external = external
    h.mutable = mutable
    h.obj = None
    return h


def _by_reference(obj: object, code: int, shape: tuple[int, ...], device: str) -> _Buffer:
    """A read-only holder whose data ``obj`` keeps (DLPack, or kept elsewhere); not touched here."""
    h = _Buffer()
    h.key = None
    h.lent = None
    h.host = None
    h.array = None
    h.code = code
    h.shape = shape
    h.device = device
    h.external = True
    h.mutable = False
    h.obj = obj
    return h


def wrap_adopted(arr: Array, code: int, *, external: bool = True) -> _Buffer:
    """A holder that adopts ``arr`` without copying (``arr`` was validated by ``check_array``)."""
    h = _cpu_holder(arr, code, external=external, mutable=False)
    h.key = adopt(arr)  # last: __del__ must only release what was registered
    return h


def wrap_owned(arr: Array, code: int, *, external: bool = False) -> _Buffer:
    """A holder for engine-owned memory nobody else references (``new_buffer``, CoW copies)."""
    return _cpu_holder(arr, code, external=external, mutable=True)


def wrap_dlpack(obj: object) -> _Buffer:
    """A by-reference holder for a DLPack exporter; its data is not touched."""
    device, _ = _device_name(obj)
    shape = _foreign_shape(obj)
    return _by_reference(obj, _foreign_dtype_code(obj), shape, device)


def wrap_deferred(obj: DeferredArray, code: int, shape: tuple[int, ...]) -> _Buffer:
    """A read-only holder of an array kept elsewhere; ``obj.fetch()`` runs on its first read."""
    return _by_reference(obj, code, shape, "cpu")


def is_deferred(h: _Buffer) -> bool:
    """Whether the holder's data is kept elsewhere (``wrap_deferred``), fetched or not."""
    return isinstance(h.obj, DeferredArray)


def host_array(h: _Buffer, what: str) -> Array:
    """The holder's data as a numpy array: for a CPU DLPack object, made once via
    ``np.from_dlpack``; for a deferred one, fetched once."""
    arr = h.array
    if arr is not None:
        return arr
    obj = h.obj
    if isinstance(obj, DeferredArray):
        arr = h.array = obj.fetch()
        return arr
    if h.device != "cpu":
        msg = (
            f"{what}: the buffer lives on {h.device}; flowplex never copies device memory to the "
            "host. Use packet.payload to get the original array and copy it with its own library "
            "(e.g. cupy.asnumpy or tensor.cpu())"
        )
        raise UsageError(msg)
    import numpy as np

    arr = np.from_dlpack(h.obj)  # type: ignore[arg-type]
    h.array = arr
    return arr


def _array_from_pickle(arr: Array, external: bool) -> _Buffer:
    return wrap_adopted(arr, check_array(arr), external=external)


def _dlpack_from_pickle(obj: object) -> _Buffer:
    return wrap_dlpack(obj)


# --- exclusivity by reference count -------------------------------------------------------------


def array_refs(h: _Buffer) -> int:
    """``sys.getrefcount`` of a holder's array, measured the same way as the baselines below."""
    return sys.getrefcount(h.array)


def _calibrate_array_refs(wrap: Callable[[Array, int], _Buffer]) -> int:
    """The refcount ``array_refs`` reports for an array that nothing outside the engine references.

    Expected on CPython 3.11-3.13: 3 for an adopted array (the holder's slot, the registry entry,
    the call argument) and 2 for engine memory (no registry entry). Measured rather than assumed so
    that an interpreter with different counting keeps working; if one more outside reference does
    not show up as exactly one more count, refcounts cannot be trusted and -1 disables writing in
    place (make_mutable then always copies, which is always safe).
    """
    if not hasattr(sys, "getrefcount"):
        return -1
    import numpy as np

    h = wrap(np.zeros(1, np.uint8), DType.U8)
    alone = array_refs(h)
    extra = h.array
    with_extra = array_refs(h)
    del extra
    del h  # an adoption is released through the normal finalizer path
    return alone if with_extra == alone + 1 else -1


_array_refs_exclusive: tuple[int, int] | None = None


def array_refs_exclusive() -> tuple[int, int]:
    """``array_refs`` of an exclusively held (adopted, engine-owned) array; measured on first use.

    Calibrated lazily, since it needs numpy: ``make_mutable`` is the only caller.
    """
    global _array_refs_exclusive
    refs = _array_refs_exclusive
    if refs is None:
        refs = _array_refs_exclusive = (_calibrate_array_refs(wrap_adopted), _calibrate_array_refs(wrap_owned))
    return refs


# --- copy-on-write accounting ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CowStats:
    """A snapshot of the copies ``make_mutable`` made because a payload was shared."""

    copies: int
    """Buffers copied since the process started."""
    bytes: int
    """Bytes copied since the process started."""


_cow_lock = threading.Lock()  # never taken in a finalizer
_cow_copies = 0
_cow_bytes = 0
_cow_local = threading.local()


def count_copy(nbytes: int) -> None:
    """Record one CoW copy, process-wide and for the calling thread."""
    global _cow_copies, _cow_bytes
    with _cow_lock:
        _cow_copies += 1
        _cow_bytes += nbytes
    local = _cow_local
    local.copies = getattr(local, "copies", 0) + 1
    local.bytes = getattr(local, "bytes", 0) + nbytes


def cow_stats() -> CowStats:
    """The copies ``make_mutable`` has made in this process so far (copying is counted, never silent).

    >>> s = cow_stats()
    >>> s.copies >= 0 and s.bytes >= 0
    True
    """
    with _cow_lock:
        return CowStats(_cow_copies, _cow_bytes)


def _thread_cow_counts() -> tuple[int, int]:
    """(copies, bytes) made so far on the calling thread; the engine diffs it around ``process``."""
    local = _cow_local
    return getattr(local, "copies", 0), getattr(local, "bytes", 0)
