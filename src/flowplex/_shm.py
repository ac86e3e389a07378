"""Named shared-memory segments under ``/dev/shm``, without ``multiprocessing.shared_memory``.

Why not the stdlib class: on Python 3.11 every ``SharedMemory`` *attach* registers the segment
with the resource tracker of the attaching process tree, so a producer process that exits
unlinks the consumer's ring (or the tracker warns about a "leak" it does not own), and there is
no ``track=False`` before 3.13.  Here only the creator registers the name with the resource
tracker, so a creator that crashes (even SIGKILL) still gets its segment unlinked when its
tracker process notices the death; attachers never register, so they can come and go, crash or
be killed without unlinking anything early.  ``unlink`` unregisters again.

Cross-process mutual exclusion for the rare registry updates uses ``flock`` on the segment's
file descriptor: the kernel drops the lock when its holder dies, so a producer killed while
registering cannot wedge the ring.  ``flock`` locks belong to the open file description, so a
per-segment ``threading.Lock`` serialises the threads that share one descriptor.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import mmap
import os
import re
import secrets
import threading
from collections.abc import Iterator
from typing import Final, final

from .errors import UsageError

log = logging.getLogger(__name__)

SHM_DIR: Final = "/dev/shm"
NAME_PREFIX: Final = "flowplex-ring-"
_NAME_RE: Final = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,199}")


def new_name(prefix: str = NAME_PREFIX) -> str:
    """A fresh, unguessable segment name (``flowplex-ring-<pid>-<hex>`` by default)."""
    return f"{prefix}{os.getpid()}-{secrets.token_hex(6)}"


def check_name(name: object) -> str:
    """Validate a user-supplied segment name and return it.

    Raises:
        UsageError: the name is not 1-200 characters of letters, digits, ``_ . -``.
    """
    if not isinstance(name, str) or not _NAME_RE.fullmatch(name):
        msg = (
            f"name={name!r}: a ring name is 1-200 characters of letters, digits, '_', '.' or '-'"
            " and does not start with '.' or '-'; e.g. 'agents-1'"
        )
        raise UsageError(msg)
    return name


def _register(name: str) -> None:
    from multiprocessing import resource_tracker

    resource_tracker.register("/" + name, "shared_memory")


def _unregister(name: str) -> None:
    from multiprocessing import resource_tracker

    resource_tracker.unregister("/" + name, "shared_memory")


@final
class Segment:
    """One mapped segment.  Use :meth:`create` or :meth:`attach`.

    Attributes:
        name: The segment name (the file name under ``/dev/shm``).
        mm: The writable shared mapping.
        owner: Whether this handle created the segment (and so should unlink it).
    """

    __slots__ = ("_fd", "_lock", "_pid", "_tracked", "mm", "name", "owner", "path", "size")

    def __init__(self, name: str, fd: int, mm: mmap.mmap, *, owner: bool) -> None:
        self.name = name
        self.path = os.path.join(SHM_DIR, name)
        self._fd = fd
        self.mm = mm
        self.size = len(mm)
        self.owner = owner
        self._tracked = False
        self._lock = threading.Lock()
        self._pid = os.getpid()

    @classmethod
    def create(cls, name: str, size: int) -> Segment:
        """Create and map a zero-filled segment of ``size`` bytes.

        Raises:
            UsageError: a segment of that name exists already.
            OSError: ``/dev/shm`` refused (no space, no permission).
        """
        path = os.path.join(SHM_DIR, name)
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            msg = f"Ring.create(name={name!r}): a shared-memory segment of that name exists; use Ring.attach"
            raise UsageError(msg) from None
        try:
            os.ftruncate(fd, size)
            mm = mmap.mmap(fd, size)
        except BaseException:
            os.close(fd)
            os.unlink(path)
            raise
        seg = cls(name, fd, mm, owner=True)
        _register(name)
        seg._tracked = True
        return seg

    @classmethod
    def attach(cls, name: str) -> Segment:
        """Map an existing segment.

        Raises:
            FileNotFoundError: no segment of that name (it was unlinked or never created).
        """
        path = os.path.join(SHM_DIR, name)
        fd = os.open(path, os.O_RDWR)
        try:
            mm = mmap.mmap(fd, 0)
        except BaseException:
            os.close(fd)
            raise
        return cls(name, fd, mm, owner=False)

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the segment's cross-process registry lock (blocks while another holder runs)."""
        self.acquire()
        try:
            yield
        finally:
            self.release()

    def acquire(self, *, blocking: bool = True) -> bool:
        """Take the cross-process lock (``locked`` without the context manager).

        With ``blocking=False``, gives up at once (returns False) when a thread of this process
        holds it; another process's hold is still waited for (it is brief). Never re-entrant.
        """
        if not self._lock.acquire(blocking):
            return False
        try:
            if self._pid != os.getpid():
                # A forked child shares the parent's open file description, and flock() locks
                # belong to that: reopen through /proc to get a lock of our own.
                fd = os.open(f"/proc/self/fd/{self._fd}", os.O_RDWR)
                os.close(self._fd)
                self._fd, self._pid = fd, os.getpid()
            fcntl.flock(self._fd, fcntl.LOCK_EX)
        except BaseException:
            self._lock.release()
            raise
        return True

    def release(self) -> None:
        """Let go of the lock ``acquire`` took."""
        fcntl.flock(self._fd, fcntl.LOCK_UN)
        self._lock.release()

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` ran."""
        return self.mm.closed

    def close(self) -> None:
        """Unmap and close the descriptor; idempotent.  Does not unlink."""
        with self._lock:
            if not self.mm.closed:
                self.mm.close()
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1
        if self._tracked and not os.path.exists(self.path):
            # Another handle unlinked it; the tracker must not try again at exit.
            self._tracked = False
            _unregister(self.name)

    def unlink(self) -> None:
        """Remove the name from ``/dev/shm``; idempotent.  Mappings stay valid until closed."""
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
            log.debug("ring.segment.unlinked name=%s", self.name)
        if self._tracked:
            self._tracked = False
            _unregister(self.name)
