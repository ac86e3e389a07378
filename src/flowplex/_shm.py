"""Named shared-memory segments under ``/dev/shm``, without ``multiprocessing.shared_memory``.

Why not the stdlib class: on Python 3.11 every ``SharedMemory`` *attach* registers the segment
with the resource tracker of the attaching process tree, so a producer process that exits
unlinks the consumer's ring (or the tracker warns about a "leak" it does not own), and there is
no ``track=False`` before 3.13.  Here only the creator registers the name with the resource
tracker, so a creator that crashes (even SIGKILL) still gets its segment unlinked when its
tracker process notices the death; attachers never register, so they can come and go, crash or
be killed without unlinking anything early.  ``unlink`` unregisters again.

Trust: a segment is a file anyone can create under a name they guess, so ``attach`` refuses a
segment that another user owns or that other users may read or write (an impostor would read
every message, or feed forged ones), unless the caller passes ``trust_foreign=True`` for a
segment it deliberately shares.  ``create`` uses ``O_EXCL`` and mode 0600, and by default a
name with 48 random bits; the creator's pid in that name lets :func:`reclaim_dead` remove the
segments of creators that died with their resource tracker (a SIGKILL of the process group).

Cross-process mutual exclusion for the rare registry updates uses ``flock`` on the segment's
file descriptor: the kernel drops the lock when its holder dies, so a producer killed while
registering cannot wedge the ring.  ``flock`` locks belong to the open file description, so a
per-segment ``threading.Lock`` serialises the threads that share one descriptor.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import mmap
import os
import re
import secrets
import stat
import threading
from collections.abc import Iterator
from typing import Final, final

from .errors import UsageError

log = logging.getLogger(__name__)

SHM_DIR: Final = "/dev/shm"
NAME_PREFIX: Final = "flowplex-ring-"
_NAME_RE: Final = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,199}")
GENERATED_RE: Final = re.compile(r"flowplex-(ring|arena)-([0-9]{1,10})-[0-9a-f]{12}")
"""Names that :func:`new_name` generates (the ring's and the process pool's arena's prefixes):
``flowplex-<kind>-<creator pid>-<12 hex digits>``."""


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


def _creator_alive(pid: int) -> bool:
    """Whether process ``pid`` may still use its segments (a zombie or a missing one cannot)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True  # someone else's process (or a pid we cannot ask about): leave it alone
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            state = f.read().rsplit(b")", 1)[-1].split()[:1]
    except OSError:
        return True
    return state not in ([b"Z"], [b"X"])


def reclaim_dead(kinds: tuple[str, ...] = ("ring", "arena"), *, dry_run: bool = False) -> list[str]:
    """Unlink the generated-name segments of this user whose creator process is dead.

    Only names of the form ``flowplex-<kind>-<pid>-<hex>`` are considered, only files owned by
    the calling user, and only when no process with that pid runs (a reused pid keeps its
    segment: a leak, never a segment pulled from under a live process).  Processes that still
    have such a segment mapped keep working; only its name goes.  Named rings (``name=``) are
    never touched: nothing tells whose they are.

    Args:
        kinds: Which prefixes to reclaim: ``"ring"``, ``"arena"`` or both.
        dry_run: List what would be removed without removing it.

    Returns:
        The names removed (or, with ``dry_run``, that would be).
    """
    try:
        names = os.listdir(SHM_DIR)
    except OSError:
        return []
    uid = os.geteuid()
    me = os.getpid()
    removed: list[str] = []
    for name in sorted(names):
        m = GENERATED_RE.fullmatch(name)
        if m is None or m.group(1) not in kinds:
            continue
        pid = int(m.group(2))
        path = os.path.join(SHM_DIR, name)
        try:
            st = os.stat(path, follow_symlinks=False)
        except OSError:
            continue
        if st.st_uid != uid or not stat.S_ISREG(st.st_mode) or pid == me or _creator_alive(pid):
            continue
        if not dry_run:
            try:
                os.unlink(path)
            except OSError:
                continue  # gone already, or not ours to remove after all
            log.info("shm.reclaim.ok name=%s creator_pid=%d", name, pid)
        removed.append(name)
    return removed


def free_bytes() -> int:
    """Bytes that ``/dev/shm`` can still give (-1 when it cannot be asked)."""
    try:
        st = os.statvfs(SHM_DIR)
    except OSError:
        return -1
    return st.f_bavail * st.f_frsize


def _register(name: str) -> None:
    from multiprocessing import resource_tracker

    resource_tracker.register("/" + name, "shared_memory")


def _unregister(name: str) -> None:
    from multiprocessing import resource_tracker

    resource_tracker.unregister("/" + name, "shared_memory")


def _untrusted(st: os.stat_result) -> str | None:
    """Why a segment with these attributes must not be trusted, or None."""
    if st.st_uid != os.geteuid():
        return (
            f"it belongs to uid {st.st_uid}, not to you (uid {os.geteuid()}); pass trust_foreign=True "
            "only for a segment you share on purpose"
        )
    if st.st_mode & 0o077:
        return (
            f"its mode {stat.S_IMODE(st.st_mode):04o} lets other users read or write it (flowplex "
            "creates 0600); pass trust_foreign=True only for a segment you share on purpose"
        )
    return None


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
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        except FileExistsError:
            # No hint to attach: the name may have been taken by someone else on purpose.
            msg = (
                f"Ring.create(name={name!r}): /dev/shm/{name} exists already; pass another name, or "
                "none for a unique one (`flowplex shm clean` removes segments of dead flowplex processes)"
            )
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
    def attach(cls, name: str, *, trust_foreign: bool = False, what: str = "attach") -> Segment:
        """Map an existing segment, after checking that only the calling user can use it.

        Args:
            name: The segment name.
            trust_foreign: Accept a segment owned by another user or open to other users.
            what: The public call, for error messages.

        Raises:
            FileNotFoundError: no segment of that name (it was unlinked or never created).
            UsageError: the segment is not a regular file, is empty, or fails the trust check.
        """
        path = os.path.join(SHM_DIR, name)
        try:
            fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW)
        except OSError as exc:
            if isinstance(exc, FileNotFoundError):
                raise
            msg = f"{what}(name={name!r}): cannot open /dev/shm/{name}: {exc.strerror}"
            raise UsageError(msg) from None
        try:
            st = os.fstat(fd)
            problem = _untrusted(st) if not trust_foreign else None
            if not stat.S_ISREG(st.st_mode) or st.st_size == 0:
                problem = "it is not a regular, non-empty file"
            if problem is not None:
                msg = f"{what}(name={name!r}): refusing /dev/shm/{name}: {problem}"
                raise UsageError(msg)
            mm = mmap.mmap(fd, 0)
        except BaseException:
            os.close(fd)
            raise
        return cls(name, fd, mm, owner=False)

    def reserve(self, offset: int, length: int) -> None:
        """Give bytes ``offset .. offset + length`` of the segment their memory now (``fallocate``).

        On tmpfs a page gets its memory at the first touch, and a touch that finds the file
        system full kills the process (SIGBUS); a reserved page never faults for want of space,
        so a full ``/dev/shm`` becomes this call's ``OSError`` instead.  Reserving a range twice
        is correct but slow (tmpfs walks every page again): callers keep a mark.

        Call it holding :meth:`acquire` (which keeps the descriptor from being closed meanwhile).

        Raises:
            OSError: ``ENOSPC`` (the file system is full; nothing was reserved), ``EOPNOTSUPP``
                (a file system without ``fallocate``), or ``EBADF`` once closed.
        """
        if self._fd < 0:
            raise OSError(errno.EBADF, "the segment is closed")
        os.posix_fallocate(self._fd, offset, length)

    def file_size(self) -> int:
        """The segment file's size now (another process may have truncated it); -1 when closed."""
        with self._lock:
            if self._fd < 0:
                return -1
            return os.fstat(self._fd).st_size

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
