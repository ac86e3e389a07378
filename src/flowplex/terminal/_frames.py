"""The frame loop's small parts: its counters, ``flush``'s handshake, and terminal resizes.

:class:`FrameCounts` holds what :meth:`Display.stats` reports about frames; :class:`FrameSync`
lets ``flush`` wait for the frame it asked for; :class:`Resizes` notices a new terminal size
(SIGWINCH or :meth:`Display.resize`) and answers it on the render thread. The loop itself, the
one that uses them, is :meth:`Display._run`.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from types import FrameType

from ._caps import TermCaps, terminal_size

__all__ = ["FrameCounts", "FrameSync", "Resizes"]


@dataclass(slots=True)
class FrameCounts:
    """The display's counters (updated under the display's lock or by the render thread only)."""

    messages: int = 0
    bytes_in: int = 0
    updates_since_frame: int = 0
    frames: int = 0
    max_frame: int = 0
    coalesced: int = 0
    skipped: int = 0
    resizes: int = 0
    render_cpu: float = 0.0

    def wrote(self, size: int) -> None:
        """A frame of ``size`` bytes was written."""
        self.frames += 1
        self.max_frame = max(self.max_frame, size)


class FrameSync:
    """Frames asked for (``flush``) and frames done (render thread), under their own lock."""

    def __init__(self) -> None:
        self._done = threading.Condition(threading.Lock())
        self._requested = 0
        self._completed = 0

    def request(self) -> int:
        """Ask for a frame; returns the number to wait for."""
        with self._done:
            self._requested += 1
            return self._requested

    def target(self) -> int:
        """The last frame asked for: the frame about to be drawn answers it."""
        with self._done:
            return self._requested

    def done(self, target: int) -> None:
        """Frames up to ``target`` are written (or never will be)."""
        with self._done:
            self._completed = max(self._completed, target)
            self._done.notify_all()

    def done_all(self) -> None:
        """Every frame asked for is answered (the display stopped)."""
        with self._done:
            self._completed = self._requested
            self._done.notify_all()

    def wait(self, target: int, timeout: float) -> bool:
        """Wait until frame ``target`` is done; False when ``timeout`` seconds passed first."""
        deadline = time.monotonic() + timeout
        with self._done:
            while self._completed < target:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._done.wait(min(left, 0.05))
        return True


class Resizes:
    """Notices a new terminal size: SIGWINCH (on the main thread) or an explicit size.

    The signal handler only sets a flag (taking a lock inside a signal handler can deadlock
    the main thread); the render thread looks at it before each frame.

    Args:
        size_fn: Returns ``(columns, rows)``; default: ask the writer's terminal.
        fd: The writer's descriptor (None: the writer is no terminal).
    """

    def __init__(self, size_fn: Callable[[], tuple[int, int]] | None, fd: int | None) -> None:
        self._size_fn = size_fn
        self._fd = fd
        self._pending = False
        self._old: Callable[[int, FrameType | None], object] | int | None = None
        self._installed = False

    def request(self, columns: int | None = None, rows: int | None = None) -> None:
        """Look at the size before the next frame; with both given, that is the size from now on."""
        if columns is not None and rows is not None:
            self._size_fn = _fixed_size(int(columns), int(rows))
        self._pending = True

    def take(self, caps: TermCaps) -> tuple[int, int] | None:
        """The new size, if one was noticed and it differs from ``caps`` (render thread)."""
        if not self._pending:
            return None
        self._pending = False
        size = self._query(caps)
        return size if size != (caps.columns, caps.rows) else None

    def _query(self, caps: TermCaps) -> tuple[int, int]:
        if self._size_fn is not None:
            return self._size_fn()
        if self._fd is not None:
            return terminal_size(self._fd)
        return caps.columns, caps.rows

    def install(self, caps: TermCaps) -> None:
        """Handle SIGWINCH (main thread only; a no-op elsewhere or without a terminal)."""
        if not caps.is_tty and self._size_fn is None:
            return
        if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "SIGWINCH"):
            return
        try:
            self._old = signal.signal(signal.SIGWINCH, self._on_winch)
        except (ValueError, OSError):
            return
        self._installed = True

    def restore(self) -> None:
        """Put back the SIGWINCH handler that was there before :meth:`install`."""
        if not self._installed:
            return
        self._installed = False
        with contextlib.suppress(ValueError, OSError, TypeError):
            signal.signal(signal.SIGWINCH, self._old if self._old is not None else signal.SIG_DFL)

    def _on_winch(self, signum: int, frame: FrameType | None) -> None:
        self._pending = True  # only a flag: see the class docstring
        old = self._old
        if callable(old):
            old(signum, frame)


def _fixed_size(columns: int, rows: int) -> Callable[[], tuple[int, int]]:
    def size() -> tuple[int, int]:
        return columns, rows

    return size
