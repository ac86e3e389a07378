"""Named displays, so that a ``TerminalSink`` in a YAML graph can draw into a display its host
program created (``options: { display: demo }``), and choosing a display for a terminal."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Final

from ..errors import UsageError
from ._caps import TermCaps
from ._display import Display
from ._writer import Writer

__all__ = ["MODES", "create_display", "get_display", "register_display", "resolve_mode"]

MODES: Final = ("auto", "panes", "log")
MIN_PANES_SIZE: Final = (40, 10)
"""Smallest terminal (columns, rows) on which ``auto`` picks panes mode."""

_lock = threading.Lock()
_displays: dict[str, Display] = {}


@contextmanager
def register_display(name: str, display: Display) -> Iterator[Display]:
    """Make ``display`` findable under ``name`` for the duration of the ``with`` block.

    Raises:
        UsageError: Another display is registered under ``name``.
    """
    with _lock:
        if name in _displays and _displays[name] is not display:
            msg = f"register_display({name!r}): a display is already registered under this name"
            raise UsageError(msg)
        _displays[name] = display
    try:
        yield display
    finally:
        with _lock:
            if _displays.get(name) is display:
                del _displays[name]


def get_display(name: str) -> Display | None:
    """The display registered under ``name``, or None."""
    with _lock:
        return _displays.get(name)


def resolve_mode(mode: str, caps: TermCaps) -> str:
    """``"panes"`` or ``"log"`` for ``mode`` on a terminal with ``caps``.

    ``auto`` means panes on a terminal of at least 40x10, log otherwise; panes mode without a
    TTY falls back to log mode (plain lines, no escape sequences).

    Raises:
        UsageError: ``mode`` is not one of ``auto``, ``panes``, ``log``.

    >>> resolve_mode("auto", TermCaps(is_tty=False))
    'log'
    """
    if mode not in MODES:
        msg = f"mode {mode!r}: expected one of {', '.join(MODES)}"
        raise UsageError(msg)
    if mode == "log" or not caps.is_tty:
        return "log"
    if mode == "panes":
        return "panes"
    big_enough = caps.columns >= MIN_PANES_SIZE[0] and caps.rows >= MIN_PANES_SIZE[1]
    return "panes" if big_enough else "log"


def create_display(
    mode: str = "auto",
    *,
    writer: Writer | None = None,
    caps: TermCaps | None = None,
    fps: float = 60.0,
    overflow: str = "drop",
) -> Display:
    """A display for ``mode`` (``auto``, ``panes`` or ``log``) on ``writer`` (default stdout).

    Not started: call ``start()`` (or use it as a context manager) on the main thread.
    ``overflow`` is ``"drop"`` or ``"block"`` (see :class:`Display`).
    """
    from ._logmode import LogRenderer
    from ._panes import PaneRenderer

    if writer is None:
        writer = Writer(_stdout_fd())
    if caps is None:
        caps = TermCaps.detect(writer.fd if writer.fd is not None else 1)
    if resolve_mode(mode, caps) == "panes":
        return PaneRenderer(writer, caps, fps=fps, overflow=overflow)
    return LogRenderer(writer, caps, fps=fps, overflow=overflow)


def _stdout_fd() -> int:
    import sys

    try:
        return sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):
        return 1
