"""``Writer``: the one object that writes to the terminal.

Tearing starts when two writers share a terminal: POSIX promises atomic writes only up to
``PIPE_BUF`` on pipes, never on terminals, and a large ``write()`` may be short. So exactly one
``Writer`` owns the file descriptor, every frame (or batch of whole log lines) is built first
and handed over as one ``bytes`` object, and the writer loops ``os.write`` over the remainder
under its lock, never through a text stream that flushes at its own buffer boundaries.
"""

from __future__ import annotations

import errno
import logging
import os
import select
import threading
import time
from typing import BinaryIO, final

log = logging.getLogger(__name__)

__all__ = ["Writer"]

_GONE = frozenset({errno.EPIPE, errno.EIO, errno.ENXIO, errno.EBADF})


@final
class Writer:
    """Writes whole frames to one file descriptor (or binary file), one frame per call.

    Thread-safe: ``write`` takes the writer's lock, so two frames never interleave. When the
    reader goes away (broken pipe, closed terminal) the writer turns itself off quietly:
    ``write`` returns False and ``broken`` becomes True; nothing is raised.

    Args:
        target: A file descriptor (``1`` for standard output) or a binary file object such as
            ``io.BytesIO`` (tests) or ``open(path, "wb")``.
    """

    __slots__ = ("_broken", "_bytes", "_fd", "_file", "_lock", "_max_write_s", "_write_s", "_writes")

    def __init__(self, target: int | BinaryIO) -> None:
        if isinstance(target, int):
            self._fd: int | None = target
            self._file: BinaryIO | None = None
        else:
            self._fd = None
            self._file = target
        self._lock = threading.Lock()
        self._broken = False
        self._bytes = 0
        self._writes = 0
        self._write_s = 0.0
        self._max_write_s = 0.0

    @property
    def fd(self) -> int | None:
        """The file descriptor written to, or None for a file object."""
        return self._fd

    @property
    def broken(self) -> bool:
        """The reader went away; later writes are discarded."""
        return self._broken

    @property
    def bytes_written(self) -> int:
        """Bytes written so far."""
        return self._bytes

    @property
    def writes(self) -> int:
        """Frames (calls to ``write`` with data) so far."""
        return self._writes

    @property
    def write_time_s(self) -> float:
        """Total wall time spent inside ``write`` (a slow terminal shows up here)."""
        return self._write_s

    @property
    def max_write_s(self) -> float:
        """The longest single ``write``."""
        return self._max_write_s

    def write(self, data: bytes) -> bool:
        """Write ``data`` completely, as one unit; blocks while the terminal is slow.

        Returns:
            True when written; False when the writer is broken (the data is dropped).
        """
        if not data:
            return not self._broken
        with self._lock:
            if self._broken:
                return False
            start = time.perf_counter()
            try:
                if self._fd is not None:
                    _write_all(self._fd, data)
                else:
                    assert self._file is not None
                    self._file.write(data)
                    self._file.flush()
            except OSError as exc:
                if isinstance(exc, BrokenPipeError) or exc.errno in _GONE:
                    self._broken = True
                    log.debug("terminal.write.broken errno=%s", exc.errno)
                    return False
                raise
            except ValueError:  # a closed file object
                self._broken = True
                return False
            elapsed = time.perf_counter() - start
            self._bytes += len(data)
            self._writes += 1
            self._write_s += elapsed
            self._max_write_s = max(self._max_write_s, elapsed)
            return True


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        try:
            n = os.write(fd, view)
        except BlockingIOError:
            # A non-blocking descriptor (some CI runners): wait until it drains, then go on.
            select.select([], [fd], [], 1.0)
            continue
        view = view[n:]
