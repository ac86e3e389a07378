"""Acquire/release access to the 64-bit words that processes use to hand slots to each other.

The ring's protocol (see ``_ring``) needs exactly four kinds of access to shared words:

``load(i)``
    an *acquire* load: no later read or write of this process may be performed before it.
``store(i, v)``
    a *release* store: every earlier read and write of this process is performed before it.
``store_fence(i, v)``
    a store followed by a full fence: later writes (a drop_oldest producer's payload) cannot
    become visible before it.
``load_after(i)``
    a load ordered after every earlier load (the second read of a seqlock check).

Why two implementations.  On x86-64 (TSO) the hardware already gives loads acquire and
stores release semantics, and an aligned 8-byte ``mov`` is atomic.  CPython performs a
``memoryview.cast("Q")`` item access as one aligned 8-byte ``memcpy`` inside a C call, which
compilers emit as a single ``mov``; the compiler cannot move it across the surrounding C calls
(``struct.pack_into`` of the payload, the slice copy of a payload), because those are separate
calls through function pointers that may alias the mapping.  So plain item access *is* the
acquire/release access on x86-64, at ~50 ns, and the hot path uses it.  TSO does allow a
store to be reordered after a later load (store->load), and the protocol never relies on that
order: every wait re-reads with a deadline and a bounded back-off, so a late observation costs
latency, never correctness.

On arm64 (and every other machine) plain stores may become visible out of order: a consumer
could see the new ``tail`` before the payload bytes it publishes.  There we call the C11
atomics of ``patomic`` (shipped by the ``atomics`` package) with explicit orders: ``store`` is
``memory_order_release`` (``stlr``), ``load`` is ``memory_order_acquire`` (``ldar``),
``store_fence`` is a ``seq_cst`` exchange (an RMW with acquire semantics, so later stores stay
after it) and ``load_after`` is an ``acq_rel`` ``fetch_add(0)`` (its release half keeps earlier
loads before it).  Each of those costs about a microsecond through ctypes, which is the price
of correctness on weakly ordered machines.

``Words.ordered`` gives the first two as ``words[i]`` and ``words[i] = v`` (the hot paths use
it: on x86-64 it is the raw ``memoryview``, so no Python frame is entered).

``set_memory_model("weak")`` forces the patomic path on x86 too, so the tests exercise it.

The C hot paths (``_fastring.c``, used when the extension is built) do the same two accesses
on the tail and head words with ``__atomic_load_n(..., __ATOMIC_ACQUIRE)`` and
``__atomic_store_n(..., __ATOMIC_RELEASE)``, which compile to the right instructions on every
machine (a plain ``mov`` on x86-64, ``ldar``/``stlr`` on arm64), and they write the slot's bytes
with plain stores before the release store of the tail, exactly as above.
"""

from __future__ import annotations

import ctypes
import mmap
import platform
from collections.abc import Callable
from typing import Final, Literal

from ..errors import UsageError

MemoryModel = Literal["tso", "weak"]

_TSO_MACHINES: Final = frozenset({"x86_64", "amd64", "i386", "i686", "x86"})
_forced: MemoryModel | None = None

# C11 memory orders as patomic numbers them.
_ACQUIRE: Final = 2
_RELEASE: Final = 3
_ACQ_REL: Final = 4
_SEQ_CST: Final = 5


def memory_model() -> MemoryModel:
    """The memory model the next mapped ring uses: ``"tso"`` on x86, else ``"weak"``."""
    if _forced is not None:
        return _forced
    return "tso" if platform.machine().lower() in _TSO_MACHINES else "weak"


def set_memory_model(model: MemoryModel | None) -> None:
    """Force a memory model for rings mapped from now on (``None`` restores detection).

    Only tests should call this; forcing ``"tso"`` on arm64 would be unsound.
    """
    global _forced
    if model not in (None, "tso", "weak"):
        msg = f"set_memory_model(model={model!r}): expected 'tso', 'weak' or None"
        raise UsageError(msg)
    _forced = model


class Words:
    """The 64-bit words of a mapping with the four ordered accessors described above.

    The accessors are plain attributes (bound callables) so the hot path pays for one call and
    nothing else.  ``plain`` is the raw ``memoryview`` for words that carry statistics only and
    need atomicity but no ordering.

    Args:
        buf: The shared mapping; it must stay open until :meth:`release` is called.
        model: ``"tso"`` or ``"weak"``; ``None`` uses :func:`memory_model`.
    """

    __slots__ = ("_anchor", "_ops", "load", "load_after", "model", "ordered", "plain", "store", "store_fence")

    load: Callable[[int], int]
    store: Callable[[int, int], None]
    store_fence: Callable[[int, int], None]
    load_after: Callable[[int], int]

    def __init__(self, buf: mmap.mmap, model: MemoryModel | None = None) -> None:
        self.model: MemoryModel = model if model is not None else memory_model()
        self.plain: memoryview = memoryview(buf).cast("Q")
        self._anchor: ctypes.c_char | None = None
        self._ops: object = None
        self.ordered: memoryview | _OrderedWords = self.plain
        if self.model == "tso":
            self.load = self.plain.__getitem__
            self.store = self.plain.__setitem__
            self.store_fence = self.plain.__setitem__
            self.load_after = self.plain.__getitem__
        else:
            self._bind_patomic(buf)

    def _bind_patomic(self, buf: mmap.mmap) -> None:
        # atomics' public view API re-validates the buffer on every call (~12 us); the raw
        # patomic function table it wraps is the same C code without that overhead.
        from atomics._impl.patomic import Patomic

        ops = Patomic.ops(8)
        self._ops = ops
        anchor = ctypes.c_char.from_buffer(buf)
        self._anchor = anchor
        base = ctypes.addressof(anchor)
        fp_load = ops.fp_load
        fp_store = ops.fp_store
        fp_exchange = ops.xchg_ops.fp_exchange
        fp_fetch_add = ops.unsigned_ops.fp_fetch_add
        byref = ctypes.byref
        c_u64 = ctypes.c_uint64

        def load(i: int) -> int:
            out = c_u64()
            fp_load(base + 8 * i, _ACQUIRE, byref(out))
            return out.value

        def store(i: int, value: int) -> None:
            fp_store(base + 8 * i, byref(c_u64(value)), _RELEASE)

        def store_fence(i: int, value: int) -> None:
            out = c_u64()
            fp_exchange(base + 8 * i, byref(c_u64(value)), _SEQ_CST, byref(out))

        def load_after(i: int) -> int:
            out = c_u64()
            fp_fetch_add(base + 8 * i, byref(c_u64(0)), _ACQ_REL, byref(out))
            return out.value

        self.load = load
        self.store = store
        self.store_fence = store_fence
        self.load_after = load_after
        self.ordered = _OrderedWords(load, store)

    def release(self) -> None:
        """Drop every export of the mapping so that it can be closed."""
        self.load = self.store = self.store_fence = self.load_after = _released  # type: ignore[assignment]
        self.ordered = _OrderedWords(_released, _released_store)
        self.plain.release()
        self._anchor = None
        self._ops = None


class _OrderedWords:
    """``words[i]`` is an acquire load and ``words[i] = v`` a release store (weak memory model).

    On TSO machines ``Words.ordered`` is the plain ``memoryview`` instead, whose item access is
    a C call with no Python frame: the hot paths index ``ordered`` and get the right one.
    """

    __slots__ = ("_load", "_store")

    def __init__(self, load: Callable[[int], int], store: Callable[[int, int], None]) -> None:
        self._load = load
        self._store = store

    def __getitem__(self, i: int) -> int:
        return self._load(i)

    def __setitem__(self, i: int, value: int) -> None:
        self._store(i, value)


def _released(*_args: int) -> int:
    msg = "the ring's shared memory was closed"
    raise ValueError(msg)


def _released_store(_i: int, _value: int) -> None:
    _released()
