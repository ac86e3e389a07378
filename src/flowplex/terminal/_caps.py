"""``TermCaps``: what the terminal on the other end of a file descriptor can do, detected once.

Everything the renderers need to know about the terminal lives here, so that tests (and users
with odd terminals) can inject a ``TermCaps`` instead of relying on detection.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Final

__all__ = ["TermCaps", "terminal_size"]

DEFAULT_COLUMNS: Final = 80
DEFAULT_ROWS: Final = 24


def terminal_size(fd: int, env: Mapping[str, str] | None = None) -> tuple[int, int]:
    """``(columns, rows)`` of the terminal on ``fd``; ``$COLUMNS``/``$LINES`` or 80x24 otherwise."""
    try:
        size = os.get_terminal_size(fd)
    except (OSError, ValueError):
        env = os.environ if env is None else env
        return _env_int(env, "COLUMNS", DEFAULT_COLUMNS), _env_int(env, "LINES", DEFAULT_ROWS)
    columns = size.columns or DEFAULT_COLUMNS
    rows = size.lines or DEFAULT_ROWS
    return columns, rows


def _env_int(env: Mapping[str, str], key: str, default: int) -> int:
    try:
        value = int(env.get(key, ""))
    except ValueError:
        return default
    return value if value > 0 else default


@dataclass(frozen=True, slots=True)
class TermCaps:
    """Capabilities of the output terminal.

    Detect them once with :meth:`detect` (at display start) and pass the result around; build
    one by hand in tests. Without a TTY every renderer falls back to plain appended lines.

    >>> TermCaps(is_tty=False).colour
    False
    """

    is_tty: bool
    """The output is a terminal (not a pipe, file or CI log)."""
    columns: int = DEFAULT_COLUMNS
    """Width in cells."""
    rows: int = DEFAULT_ROWS
    """Height in cells."""
    colour: bool = False
    """SGR colours may be written (off for pipes, ``NO_COLOR`` and ``TERM=dumb``)."""
    unicode: bool = True
    """Box-drawing characters and ``…`` may be written (off: ASCII ``+-|`` and ``...``)."""
    synchronized_output: bool = True
    """Wrap frames in DEC mode 2026. Terminals that do not know the mode ignore it, so the
    default is on; turn it off only for a terminal that misbehaves."""
    alt_screen: bool = True
    """Full-screen views use the alternate screen (``?1049``) and restore the shell's screen."""
    term: str = ""
    """``$TERM`` as seen at detection."""

    @classmethod
    def detect(cls, fd: int | None = None, env: Mapping[str, str] | None = None) -> TermCaps:
        """Detect the capabilities of the terminal on ``fd`` (default: standard output).

        Args:
            fd: The output file descriptor; ``None`` uses ``sys.stdout`` (or 1 when replaced).
            env: Environment to read ``TERM``, ``NO_COLOR``, ``COLUMNS``/``LINES`` from.

        Returns:
            The capabilities; ``is_tty`` is False for pipes, files and ``TERM=dumb``.
        """
        env = os.environ if env is None else env
        if fd is None:
            fd = _stdout_fd()
        term = env.get("TERM", "")
        try:
            tty = os.isatty(fd)
        except OSError:
            tty = False
        is_tty = tty and term != "dumb"
        columns, rows = terminal_size(fd, env)
        encoding = (getattr(sys.stdout, "encoding", None) or "").lower().replace("-", "")
        lang = " ".join(env.get(k, "") for k in ("LC_ALL", "LC_CTYPE", "LANG")).lower().replace("-", "")
        unicode = "utf8" in encoding or "utf8" in lang
        colour = is_tty and "NO_COLOR" not in env
        return cls(is_tty=is_tty, columns=columns, rows=rows, colour=colour, unicode=unicode, term=term)

    def with_size(self, columns: int, rows: int) -> TermCaps:
        """A copy with another size (after SIGWINCH)."""
        return replace(self, columns=max(1, int(columns)), rows=max(1, int(rows)))


def _stdout_fd() -> int:
    try:
        return sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):
        return 1
