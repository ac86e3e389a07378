"""``Arena``: the shared memory that buffer payloads live in while they cross processes.

One segment per pool (``/dev/shm/flowplex-arena-<pid>-<hex>``), created by the host, mapped by
every worker. It is cut into pages; a *block* is a run of pages holding one or more buffers.
The allocator's state lives in the segment itself, so that any process allocates without
asking another: a ``used`` flag and the first page of its block per page, and per block one
hold count per *slot* (the host is slot 0, worker ``k`` slot ``k + 1``). A block is free again
when every count is zero. Updates take the segment's cross-process lock (``flock``: a process
killed while holding it lets go).

In each process one *proxy* array stands for a block: every array of that block's memory is a
view of it, so the proxy dies when the last of them does, and its death drops this process's
hold. A block that crosses in a message is credited to the receiver's slot by the sender
(``credit``); the receiver's proxy takes that hold over (``adopt``), or gives it back when it
has one already. A worker that dies loses every hold of its slot at once (``clear_slot``).

Proxies die wherever the last reference goes, possibly inside this module through the cyclic
GC, so a death never blocks: it queues the release and applies the queue when the lock is free;
whoever holds the lock applies it on leaving.

A full ``/dev/shm`` is an error, never a signal. On tmpfs a page gets its memory at its first
touch, and a touch that finds the file system full kills the process with SIGBUS. So the arena
reserves memory (``fallocate``) before it hands a page out: the tables and the first
``RESERVE_PAGES`` at creation (a ``/dev/shm`` too full for those fails the pool's start), then
the data pages in steps as the allocator first reaches them, under the lock, with the reserved
mark in the header. Reserving all of a 1 GiB arena at start would cost about 80 ms and commit
1 GiB of memory for the run, whatever it sends; in steps the arena costs what it uses, as
before. When a step finds ``/dev/shm`` full, allocation goes on in the pages reserved already and
fails, saying so, when none is free there. Pages can still vanish when another process truncates
the segment: the ring's SIGBUS guard (``_fastring``, where the extension is built) covers the
arena's mapping too, and the next allocation, write or credit reports the loss.
"""

from __future__ import annotations

import errno
import logging
import os
import struct
import time
import weakref
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, final

from ..._shm import SHM_DIR, Segment, free_bytes, new_name
from ...errors import UsageError
from ...transport import _accel

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Bytes = npt.NDArray[np.uint8]

__all__ = ["DEFAULT_ARENA_BYTES", "PAGE", "Arena", "ArenaStats"]

log = logging.getLogger(__name__)

PAGE: Final = 64 * 1024
"""The allocation unit. Buffers smaller than a page travel inside their message instead."""
DEFAULT_ARENA_BYTES: Final = 1024 * 1024 * 1024
"""The arena's default size: about 170 1080p RGB frames alive at once. Memory is only used
as it is touched (and reused first), so the default costs what the frames in flight cost."""
WAIT_S: Final = 60.0
"""How long an allocation waits for space (backpressure) before it fails, saying why."""
NAME_PREFIX: Final = "flowplex-arena-"
RESERVE_PAGES: Final = 128
"""Data pages reserved at a time (8 MiB: a handful of frames; one ``fallocate`` of about 1 ms)."""
FULL_RETRY_S: Final = 1.0
"""After ``/dev/shm`` was found full, how long allocations stay in the reserved pages before
asking for more again (a failed reservation costs the kernel an allocation and its undoing)."""
_SIZE_CHECK_EVERY_S: Final = 0.05
_MIB: Final = 1 << 20

_HEADER: Final = struct.Struct("<8sQQQQ")
"""magic, pages, slots, data offset, reserved data pages (pages ``0 .. reserved - 1`` have their
memory; changed under the lock)."""
_RESERVED_AT: Final = 32
_MAGIC: Final = b"FPXARENA"


@final
@dataclass(frozen=True, slots=True)
class ArenaStats:
    """What one process did with the arena (``ProcessPoolExecutor.arena_stats`` for the host)."""

    capacity: int
    """Bytes of payload the arena holds."""
    used: int
    """Bytes allocated now, by every process."""
    allocations: int
    """Blocks this process allocated."""
    writes: int
    """Buffers this process copied into the arena because they lived elsewhere (an array made
    with numpy rather than ``new_buffer``, a packet sent from the host): one write each."""
    write_bytes: int
    waits: int
    """Allocations that had to wait for space (backpressure)."""


def arena_size(requested: int) -> int:
    """``requested`` rounded up to pages, at most half of what ``/dev/shm`` has free.

    A segment larger than its file system's free space maps fine and then kills the process
    (SIGBUS) when a page past the space is touched, so the arena never promises more.
    """
    size = -(-requested // PAGE) * PAGE
    try:
        st = os.statvfs(SHM_DIR)
    except OSError:
        return size
    room = (st.f_bavail * st.f_frsize // 2) // PAGE * PAGE
    if size > room:
        log.warning("process.arena.shrunk requested=%d free_half=%d (%s is small)", size, room, SHM_DIR)
        size = max(room, PAGE)
    return size


@final
class Arena:
    """One process's handle on a pool's arena. Use :meth:`create` (host) or :meth:`attach`."""

    def __init__(self, seg: Segment, slot: int) -> None:
        import numpy as np

        magic, pages, slots, data_at, _ = _HEADER.unpack_from(seg.mm, 0)
        if magic != _MAGIC:
            msg = f"shared-memory segment {seg.name} is not a flowplex arena"
            raise UsageError(msg)
        self.name = seg.name
        self.slot = slot
        self.pages = pages
        self.slots = slots
        self.capacity = pages * PAGE
        self._seg = seg
        self._data_at = data_at
        self._reserved = np.frombuffer(seg.mm, np.int64, 1, _RESERVED_AT)
        """The header's reserved mark (read and written under the lock)."""
        self._full_until = 0.0
        """Until then (monotonic), ``/dev/shm`` was full: no new reservation is attempted."""
        self._size_checked = 0.0
        guard = _accel.guard
        token = -1 if guard is None else int(guard.guard_register(seg.mm))
        self._unguard = weakref.finalize(seg.mm, _unguard, token)
        """Unregisters the mapping from the fault guard: at ``close``, or when the mapping goes
        (arrays of it outlived ``close``), never twice (the token may be reused)."""
        self._guard = token
        at = _HEADER.size
        self._used = np.frombuffer(seg.mm, np.uint8, pages, at)
        at += pages
        at += -at % 8
        self._first = np.frombuffer(seg.mm, np.int64, pages, at)
        """Per page: the first page of its block (valid while the page is used)."""
        at += 8 * pages
        self._length = np.frombuffer(seg.mm, np.int64, pages, at)
        """Per first page: the block's length in pages."""
        at += 8 * pages
        self._holds = np.frombuffer(seg.mm, np.int32, pages * slots, at).reshape(pages, slots)
        self._view = memoryview(seg.mm)[data_at:data_at + self.capacity]
        self._base = np.frombuffer(self._view, np.uint8).__array_interface__["data"][0]
        self._proxies: dict[int, weakref.ref[Bytes]] = {}
        """First page → this process's proxy of that block."""
        self._pending: deque[int] = deque()
        """First pages whose proxy died, to release under the lock."""
        self._closed = False
        self._allocations = 0
        self._writes = 0
        self._write_bytes = 0
        self._waits = 0

    @classmethod
    def create(cls, size: int, slots: int, *, owner: str = "the process pool") -> Arena:
        """A new arena of ``size`` bytes (see ``arena_size``) for ``slots`` processes; slot 0 is ours.

        Reserves the tables and the first ``RESERVE_PAGES`` (see the module docstring).

        Args:
            size: Bytes of data.
            slots: Processes that hold blocks (the host and each worker).
            owner: Who the arena is for, in error messages (the pool names its executor).

        Raises:
            UsageError: ``/dev/shm`` is too full for the reservation, saying how full.
            OSError: ``/dev/shm`` refused the segment.
        """
        pages = max(1, size // PAGE)
        meta = _HEADER.size + pages
        meta += -meta % 8
        meta += 16 * pages + 4 * pages * slots
        data_at = meta + -meta % PAGE
        seg = Segment.create(new_name(NAME_PREFIX), data_at + pages * PAGE)
        try:
            first = min(pages, RESERVE_PAGES)
            with seg.locked():
                reserved = _reserve(seg, 0, data_at + first * PAGE, pages, first)
            if reserved < 0:
                msg = (f"{owner}: the shared-memory arena could not get memory: {SHM_DIR} is full "
                       f"({_free_mib()} MiB free, it needs {(data_at + first * PAGE) // _MIB + 1} MiB to start); "
                       f"free space in {SHM_DIR} (`flowplex shm clean` removes what dead flowplex processes "
                       "left), or run the graph with a larger /dev/shm (docker run --shm-size)")
                raise UsageError(msg)
            _HEADER.pack_into(seg.mm, 0, _MAGIC, pages, slots, data_at, reserved)
            return cls(seg, 0)
        except BaseException:
            seg.close()
            seg.unlink()
            raise

    @classmethod
    def attach(cls, name: str, slot: int) -> Arena:
        """Map the arena ``name`` as ``slot`` (a worker)."""
        return cls(Segment.attach(name), slot)

    # -- locking ----------------------------------------------------------------------------------

    def _lock(self) -> None:
        self._seg.acquire()

    def _unlock(self) -> None:
        """Apply queued releases, then let go; again if a release was queued meanwhile."""
        while True:
            self._apply_pending()
            self._seg.release()
            if not self._pending or not self._seg.acquire(blocking=False):
                return

    def _apply_pending(self) -> None:
        pending = self._pending
        holds = self._holds
        slot = self.slot
        while pending:
            first = pending.popleft()
            holds[first, slot] -= 1
            self._free_if_unheld(first)

    def _free_if_unheld(self, first: int) -> None:
        if not self._holds[first].any():
            self._used[first:first + self._length[first]] = 0

    def _dead(self, first: int) -> None:
        """A proxy died: release its hold now if the lock is free, else on the holder's way out."""
        if self._closed:
            return
        self._pending.append(first)
        if self._seg.acquire(blocking=False):
            self._unlock()

    # -- blocks ---------------------------------------------------------------------------------

    def allocate(self, nbytes: int, *, what: str = "buffer", wait_s: float = WAIT_S) -> Bytes:
        """A new block of at least ``nbytes``, as this process's proxy (a uint8 array).

        Waits while the arena is full (backpressure: blocks are freed as their packets are
        consumed elsewhere).

        Raises:
            UsageError: ``nbytes`` is more than the whole arena, or no space came free within
                ``wait_s``; the message says how big the arena is and what to change.
        """
        import numpy as np

        need = max(1, -(-nbytes // PAGE))
        if need > self.pages:
            msg = (f"{what} of {nbytes} bytes does not fit in the process pool's shared-memory arena "
                   f"({self.capacity} bytes); raise the executor's `arena_bytes`")
            raise UsageError(msg)
        self.check_intact()
        deadline = 0.0
        pause = 0.0002
        while True:
            self._lock()
            try:
                first = self._find(need, self.pages)
                if first >= 0 and first + need > self._reserved[0] and not self._grow(first + need):
                    first = self._find(need, int(self._reserved[0]))
                    if first < 0:
                        raise self._full_error(what, nbytes)
                if first >= 0:
                    self._used[first:first + need] = 1
                    self._first[first:first + need] = first
                    self._length[first] = need
                    holds = self._holds[first]
                    holds[:] = 0
                    holds[self.slot] = 1
                    break
            finally:
                self._unlock()
            now = time.monotonic()
            if not deadline:
                deadline = now + wait_s
                self._waits += 1
            elif now >= deadline:
                msg = (f"the process pool's shared-memory arena ({self.capacity} bytes) had no room for a "
                       f"{what} of {nbytes} bytes for {wait_s:.0f} s: packets holding frames are not being "
                       "consumed; raise the executor's `arena_bytes`, or lower `max_in_flight` or the queue limits")
                raise UsageError(msg)
            time.sleep(pause)
            pause = min(pause * 2, 0.005)
        self._allocations += 1
        start = first * PAGE
        proxy = np.frombuffer(self._view[start:start + need * PAGE], np.uint8)
        self._proxies[first] = weakref.ref(proxy, _on_dead(self, first))
        return proxy

    def _grow(self, end: int) -> bool:
        """Reserve the data pages up to at least ``end`` (under the lock); False when ``/dev/shm``
        is full, or was found full less than ``FULL_RETRY_S`` ago."""
        now = time.monotonic()
        if now < self._full_until:
            return False
        have = int(self._reserved[0])
        upto = min(self.pages, max(end, have + RESERVE_PAGES))
        reserved = _reserve(self._seg, self._data_at + have * PAGE, (upto - have) * PAGE, self.pages, upto)
        if reserved < 0 and upto > end:  # nearly full: maybe just what this block needs fits
            upto = end
            reserved = _reserve(self._seg, self._data_at + have * PAGE, (upto - have) * PAGE, self.pages, upto)
        if reserved < 0:
            self._full_until = now + FULL_RETRY_S
            log.warning("process.arena.full name=%s reserved_mib=%d free_mib=%d (%s is full)", self.name,
                        have * PAGE // _MIB, _free_mib(), SHM_DIR)
            return False
        self._reserved[0] = reserved
        return True

    def _full_error(self, what: str, nbytes: int) -> UsageError:
        reserved = int(self._reserved[0]) * PAGE
        msg = (f"the shared-memory arena could not get memory for a {what} of {nbytes} bytes: {SHM_DIR} "
               f"is full ({_free_mib()} MiB free; the {reserved // _MIB} MiB the arena reserved so far, of its "
               f"{self.capacity // _MIB} MiB, have no room for it); free space in {SHM_DIR} (`flowplex shm "
               "clean` removes what dead flowplex processes left), or keep fewer frames in flight "
               "(`max_in_flight`, the queue limits) or give the executor a smaller `arena_bytes`")
        return UsageError(msg)

    def check_intact(self) -> None:
        """Raise if the segment lost pages under this process's mapping (truncated by someone).

        Reads the fault guard's mark (no system call) and, at most every 50 ms, the file's size.

        Raises:
            UsageError: the arena lost pages; the frames in them are gone.
        """
        guard = _accel.guard
        if guard is not None and self._guard >= 0 and guard.guard_tripped(self._guard):
            msg = (f"the process pool's shared-memory arena {self.name} lost pages under its mapping "
                   f"(another process truncated {SHM_DIR}/{self.name}?); the frames in them are gone")
            raise UsageError(msg)
        now = time.monotonic()
        if now - self._size_checked >= _SIZE_CHECK_EVERY_S:
            self._size_checked = now
            size = self._seg.file_size()
            if 0 <= size < self._seg.size:
                msg = (f"the process pool's shared-memory arena {self.name} was truncated to {size} bytes "
                       f"under its {self._seg.size}-byte mapping (by another process); the frames in it are gone")
                raise UsageError(msg)

    def _find(self, need: int, limit: int) -> int:
        """The first page of ``need`` free pages in a row below page ``limit``, or -1 (under the lock)."""
        import numpy as np

        used = self._used[:limit]
        if need == 1:
            free = np.flatnonzero(used == 0)
            return int(free[0]) if free.size else -1
        edges = np.diff(np.concatenate(([1], used, [1])).astype(np.int8))
        starts = np.flatnonzero(edges == -1)
        ends = np.flatnonzero(edges == 1)
        fits = np.flatnonzero(ends - starts >= need)
        return int(starts[fits[0]]) if fits.size else -1

    def new_array(self, shape: tuple[int, ...], dtype: np.dtype[np.generic]) -> npt.NDArray[np.generic]:
        """A zero-filled array of ``shape`` and ``dtype`` in the arena (``new_buffer`` in a worker)."""
        nbytes = dtype.itemsize
        for n in shape:
            nbytes *= n
        import numpy as np

        if nbytes < PAGE:
            return np.zeros(shape, dtype)
        block = self.allocate(nbytes, what="new_buffer")
        arr = rooted(block[:nbytes].view(dtype).reshape(shape))
        arr.fill(0)
        return arr

    def write(self, raw: memoryview) -> tuple[Bytes, int]:
        """Copy ``raw`` (contiguous bytes) into a new block: ``(proxy, offset in the arena)``."""
        block = self.allocate(raw.nbytes)
        import numpy as np

        block[:raw.nbytes] = np.frombuffer(raw, np.uint8)
        self.check_intact()  # a page lost under the copy went to a private page: nobody would see it
        self._writes += 1
        self._write_bytes += raw.nbytes
        return block, int(block.__array_interface__["data"][0]) - self._base

    def locate(self, raw: memoryview) -> int:
        """The offset of ``raw`` in the arena, or -1 when its memory lies elsewhere."""
        import numpy as np

        offset = int(np.frombuffer(raw, np.uint8).__array_interface__["data"][0]) - self._base
        return offset if offset >= 0 and offset + raw.nbytes <= self.capacity else -1

    def locate_array(self, arr: npt.NDArray[np.generic]) -> int:
        """``locate`` for a numpy array: -1 unless it is contiguous and lies in the arena."""
        flags = arr.flags
        if not (flags.c_contiguous or flags.f_contiguous):
            return -1
        offset = int(arr.__array_interface__["data"][0]) - self._base
        return offset if offset >= 0 and offset + arr.nbytes <= self.capacity else -1

    def held_elsewhere(self, arr: npt.NDArray[np.generic] | None, receiver: int) -> bool:
        """Whether a process other than this one and slot ``receiver`` holds the block ``arr``
        lies in (False outside the arena).

        Read without the lock: a hold being added now is for a message on its way, whose
        sender holds the packet too (and so counts as another holder already).
        """
        if arr is None:
            return False
        offset = self.locate_array(arr)
        if offset < 0:
            return False
        holds = self._holds[int(self._first[offset // PAGE])]
        return int(holds.sum()) > int(holds[self.slot]) + int(holds[receiver])

    def credit(self, offsets: list[int], slot: int) -> None:
        """Give ``slot`` one hold on the block of each offset (it is about to receive them)."""
        self.check_intact()
        first = self._first
        holds = self._holds
        self._lock()
        try:
            for offset in offsets:
                holds[first[offset // PAGE], slot] += 1
        finally:
            self._unlock()

    def adopt(self, refs: list[tuple[int, int]]) -> tuple[list[memoryview], list[tuple[int, int]]]:
        """Memory views of the blocks received at ``(offset, nbytes)``, each kept alive by this
        process's proxy, and the address ranges of those this process held already; takes
        over the holds the sender credited (``credit``)."""
        import numpy as np

        first_of = self._first
        length = self._length
        views: list[memoryview] = []
        kept: list[Bytes] = []
        surplus: list[int] = []
        held: list[tuple[int, int]] = []
        for offset, nbytes in refs:
            first = int(first_of[offset // PAGE])
            ref = self._proxies.get(first)
            proxy = ref() if ref is not None else None
            if proxy is None:
                start = first * PAGE
                proxy = np.frombuffer(self._view[start:start + int(length[first]) * PAGE], np.uint8)
                self._proxies[first] = weakref.ref(proxy, _on_dead(self, first))
            else:
                surplus.append(first)
                start = int(proxy.__array_interface__["data"][0])
                held.append((start, start + proxy.nbytes))
            kept.append(proxy)
            at = offset - first * PAGE
            views.append(memoryview(proxy)[at:at + nbytes])  # type: ignore[arg-type]  # numpy exports its buffer
        if surplus:
            holds = self._holds
            self._lock()
            try:
                for first in surplus:
                    holds[first, self.slot] -= 1
            finally:
                self._unlock()
        return views, held

    def clear_slot(self, slot: int) -> None:
        """Drop every hold of ``slot`` (its worker died); blocks nobody else holds are free."""
        if self._closed:
            return
        self._lock()
        try:
            holds = self._holds
            for first in map(int, holds[:, slot].nonzero()[0]):
                holds[first, slot] = 0
                if self._used[first]:
                    self._free_if_unheld(first)
        finally:
            self._unlock()

    # -- lifetime ---------------------------------------------------------------------------------

    def stats(self) -> ArenaStats:
        """This process's figures, and the bytes in use by every process."""
        used = int(self._used.sum()) * PAGE if not self._closed else 0
        return ArenaStats(self.capacity, used, self._allocations, self._writes, self._write_bytes, self._waits)

    def close(self, *, unlink: bool) -> None:
        """Stop using the arena; ``unlink`` (the host) removes its name from ``/dev/shm``.

        Arrays still alive keep their memory mapped (the mapping goes with the last of them);
        their deaths no longer touch the arena. Idempotent.
        """
        if self._closed:
            return
        self._closed = True
        if unlink:
            self._seg.unlink()
        del self._used, self._first, self._length, self._holds, self._reserved
        try:
            self._view.release()
            if not self._seg.mm.closed:
                self._seg.mm.close()  # raises BufferError while arrays of it live; else unmapped
            self._unguard()  # after the unmap: a fault in a still-mapped range stays an error
            self._guard = -1
            self._seg.close()
        except BufferError:
            log.debug("process.arena.kept name=%s (arrays of it are still alive)", self.name)


def _reserve(seg: Segment, offset: int, length: int, pages: int, upto: int) -> int:
    """Reserve ``length`` bytes from ``offset`` (under the lock): ``upto`` when done, -1 when
    ``/dev/shm`` is full, ``pages`` (everything) where the file system cannot reserve.

    Raises:
        UsageError: any other refusal.
    """
    try:
        seg.reserve(offset, length)
    except OSError as exc:
        if exc.errno == errno.ENOSPC:
            return -1
        if exc.errno in (errno.EOPNOTSUPP, errno.ENOSYS):
            # No fallocate here: pages get memory at their first touch, as before (the guard is
            # then the only net); never ask again.
            log.info("process.arena.unreserved name=%s (%s)", seg.name, exc.strerror)
            return pages
        msg = f"the process pool's shared-memory arena {seg.name} could not get memory: {exc.strerror}"
        raise UsageError(msg) from None
    return upto


def _free_mib() -> int:
    return max(0, free_bytes()) // _MIB


def _unguard(token: int) -> None:
    guard = _accel.guard
    if guard is not None and token >= 0:
        guard.guard_unregister(token)


@final
class _Memory:
    """Memory numpy wraps through ``__array_interface__``; keeps what owns it alive."""

    __slots__ = ("__array_interface__", "keep")

    def __init__(self, interface: dict[str, object], keep: object) -> None:
        self.__array_interface__ = interface
        self.keep = keep


def rooted(arr: npt.NDArray[np.generic], *, writeable: bool | None = None) -> npt.NDArray[np.generic]:
    """The same memory as ``arr`` (writeable as ``arr`` is, unless said), as an array that its
    views point at.

    numpy points a new view at the array that owns its memory, or at the first one over a
    foreign buffer; an array over a block is neither. ``make_mutable`` proves that no view of
    an engine-owned array exists by counting the references to it, so each must be a root.
    """
    import numpy as np

    interface = dict(arr.__array_interface__)
    interface["data"] = (interface["data"][0], not (arr.flags.writeable if writeable is None else writeable))
    root: npt.NDArray[np.generic] = np.asarray(_Memory(interface, arr))
    return root


def _on_dead(arena: Arena, first: int) -> Callable[[object], None]:
    """The weakref callback of a proxy: holds the arena weakly (a dead arena releases nothing)."""
    ref = weakref.ref(arena)

    def dead(_: object) -> None:
        live = ref()
        if live is not None:
            live._dead(first)

    return dead
