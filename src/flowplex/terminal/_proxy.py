"""While a display is live, ``print`` and stray writes to ``sys.stdout``/``sys.stderr`` become
lines of a pseudo-agent instead of bytes that would tear the frame."""

from __future__ import annotations

import io
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Final

from ..transport import AgentType
from ._display import Display

__all__ = ["STDERR_STREAM_ID", "STDOUT_STREAM_ID", "redirect_std_streams"]

STDOUT_STREAM_ID: Final = -1
STDERR_STREAM_ID: Final = -2


class _LineProxy(io.TextIOBase):
    """A text stream that hands whole lines to a display (any thread)."""

    def __init__(self, display: Display, stream_id: int, name: str, agent_type: AgentType, encoding: str) -> None:
        super().__init__()
        self._display = display
        self._stream_id = stream_id
        self._name = name
        self._agent_type = agent_type
        self._encoding = encoding
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


@contextmanager
def redirect_std_streams(display: Display) -> Iterator[None]:
    """Route ``sys.stdout`` and ``sys.stderr`` into ``display`` line by line while inside.

    Output shows up as the agents ``stdout`` (INFO) and ``stderr`` (ERROR), created on first
    use. Code that kept a reference to the original streams (a ``logging.StreamHandler``
    created earlier) is not affected.
    """
    saved = sys.stdout, sys.stderr
    out = _LineProxy(display, STDOUT_STREAM_ID, "stdout", AgentType.INFO, getattr(saved[0], "encoding", "utf-8"))
    err = _LineProxy(display, STDERR_STREAM_ID, "stderr", AgentType.ERROR, getattr(saved[1], "encoding", "utf-8"))
    sys.stdout, sys.stderr = out, err
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved
        out.drain()
        err.drain()
