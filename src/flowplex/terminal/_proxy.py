"""While a display is live, ``print`` and stray writes to ``sys.stdout``/``sys.stderr`` become
lines of a pseudo-agent instead of bytes that would tear the frame.

Log records are not an agent's output: a write made by a ``logging`` handler (one that looks
``sys.stderr`` up when it writes, as ``logging.lastResort`` does) goes to the real standard
error, unless that is where the display draws (the same terminal, or ``2>&1``): then it
becomes a notice of the display (a ``[flowplex]`` line in log mode) so that it cannot tear a
frame or a line. It never becomes a line of the ``stderr`` pseudo-agent, except on a display
without notices (panes mode draws no log lines).
"""

from __future__ import annotations

import io
import logging
import os
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import Final, TextIO

from ..transport import AgentType
from ._display import Display

__all__ = ["STDERR_STREAM_ID", "STDOUT_STREAM_ID", "redirect_std_streams"]

STDOUT_STREAM_ID: Final = -1
STDERR_STREAM_ID: Final = -2


class _LineProxy(io.TextIOBase):
    """A text stream that hands whole lines to a display (any thread)."""

    def __init__(self, display: Display, stream_id: int, name: str, agent_type: AgentType, encoding: str,
                 log_line: Callable[[str], None]) -> None:
        super().__init__()
        self._display = display
        self._stream_id = stream_id
        self._name = name
        self._agent_type = agent_type
        self._encoding = encoding
        self._log_line = log_line
        self._lock = threading.Lock()
        self._partial: list[str] = []

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return self._encoding

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return False

    def write(self, s: str) -> int:
        if not isinstance(s, str):
            msg = f"write() argument must be str, not {type(s).__name__}"
            raise TypeError(msg)
        if _from_log_handler():
            self._log_line(s)
            return len(s)
        with self._lock:
            if "\n" not in s:
                self._partial.append(s)
                return len(s)
            head, _, rest = s.rpartition("\n")
            text = "".join(self._partial) + head + "\n"
            self._partial = [rest] if rest else []
        self._display.feed(self._stream_id, text, name=self._name, agent_type=self._agent_type)
        return len(s)

    def flush(self) -> None:
        """Lines are handed over as they complete; a partial line waits for its newline."""

    def drain(self) -> None:
        """Hand over a trailing partial line (when the redirection ends)."""
        with self._lock:
            text = "".join(self._partial)
            self._partial = []
        if text:
            self._display.feed(self._stream_id, text + "\n", name=self._name, agent_type=self._agent_type)


def _from_log_handler() -> bool:
    """Whether the write being made comes from a ``logging.Handler`` (its ``emit``/``flush``).

    Looking one frame up is the one way to tell a record from a ``print`` that works for every
    handler that writes to ``sys.stderr`` at emit time, ours and the standard library's alike.
    """
    frame = sys._getframe(2)  # 0: this function, 1: write, 2: the writer
    if frame.f_code.co_name not in ("emit", "flush"):
        return False
    return isinstance(frame.f_locals.get("self"), logging.Handler)


def _log_router(display: Display, real_err: TextIO) -> Callable[[str], None]:
    """Where log records go while ``display`` is live (see the module docstring)."""
    notice = getattr(display, "notice", None)
    same_target = _same_target(display, real_err)
    lock = threading.Lock()
    partial: list[str] = []

    def log_line(s: str) -> None:
        if not same_target:
            with lock, suppress(Exception):  # logging must never break the run
                real_err.write(s)
                real_err.flush()
            return
        with lock:
            partial.append(s)
            if "\n" not in s:
                return
            text = "".join(partial)
            partial.clear()
        for line in text.splitlines():
            if not line.strip():
                continue
            if callable(notice):
                notice(line)
            else:  # a display without notices (panes): the stderr pseudo-agent, as a print
                display.feed(STDERR_STREAM_ID, line + "\n", name="stderr", agent_type=AgentType.ERROR)

    return log_line


def _same_target(display: Display, stream: TextIO) -> bool:
    """Whether ``stream`` writes where the display draws (the same terminal, pipe or file)."""
    fd = display.writer.fd
    if fd is None:
        return False
    try:
        err = os.fstat(stream.fileno())
        out = os.fstat(fd)
    except (AttributeError, OSError, ValueError):
        return False  # not a real file: it cannot tear the frame
    return (err.st_dev, err.st_ino, err.st_rdev) == (out.st_dev, out.st_ino, out.st_rdev)


@contextmanager
def redirect_std_streams(display: Display) -> Iterator[None]:
    """Route ``sys.stdout`` and ``sys.stderr`` into ``display`` line by line while inside.

    Output shows up as the agents ``stdout`` (INFO) and ``stderr`` (ERROR), created on first
    use. Code that kept a reference to the original streams (a ``logging.StreamHandler``
    created earlier) is not affected, and log records written through the redirected streams
    go around the agents (see the module docstring).
    """
    saved = sys.stdout, sys.stderr
    log_line = _log_router(display, saved[1])
    out = _LineProxy(display, STDOUT_STREAM_ID, "stdout", AgentType.INFO, getattr(saved[0], "encoding", "utf-8"),
                     log_line)
    err = _LineProxy(display, STDERR_STREAM_ID, "stderr", AgentType.ERROR, getattr(saved[1], "encoding", "utf-8"),
                     log_line)
    sys.stdout, sys.stderr = out, err
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved
        out.drain()
        err.drain()
