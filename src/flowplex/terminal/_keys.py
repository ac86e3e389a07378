"""Keyboard input for panes mode: the terminal in cbreak mode, keys decoded on a thread."""

from __future__ import annotations

import contextlib
import logging
import os
import select
import threading
from collections.abc import Callable
from typing import Any, Final

log = logging.getLogger(__name__)

__all__ = ["KeyReader", "decode_keys"]

_SEQUENCES: Final = {
    "\x1b[Z": "btab",
    "\x1b[A": "up",
    "\x1b[B": "down",
    "\x1b[C": "right",
    "\x1b[D": "left",
    "\x1bOA": "up",
    "\x1bOB": "down",
    "\x1bOC": "right",
    "\x1bOD": "left",
}


def decode_keys(data: bytes) -> list[str]:
    """Key names in ``data`` as read from a terminal in cbreak mode.

    Printable keys are themselves; ``tab``, ``btab`` (shift-tab), ``enter``, ``esc``, arrows
    (``up``...) are named; other escape sequences are ignored.

    >>> decode_keys(b"\\t1\\x1b[Zq")
    ['tab', '1', 'btab', 'q']
    """
    text = data.decode("utf-8", "replace")
    keys: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\x1b":
            for seq, name in _SEQUENCES.items():
                if text.startswith(seq, i):
                    keys.append(name)
                    i += len(seq)
                    break
            else:
                j = i + 1
                if j < len(text) and text[j] in "[O":
                    j += 1
                    while j < len(text) and not ("\x40" <= text[j] <= "\x7e"):
                        j += 1
                    i = j + 1  # an unknown sequence: skipped whole
                else:
                    keys.append("esc")
                    i += 1
            continue
        if ch == "\t":
            keys.append("tab")
        elif ch in "\r\n":
            keys.append("enter")
        elif ch.isprintable():
            keys.append(ch)
        i += 1
    return keys


class KeyReader:
    """Reads keys from a terminal and calls ``on_key(name)`` for each, on its own thread.

    ``start`` puts the terminal in cbreak mode (no echo, no line buffering; Ctrl-C still sends
    SIGINT) and ``stop`` restores it exactly. Does nothing when ``fd`` is not a terminal.
    """

    def __init__(self, fd: int, on_key: Callable[[str], None]) -> None:
        self.fd = fd
        self.on_key = on_key
        self._saved: list[Any] | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> bool:
        """Start reading; False (and nothing changed) when ``fd`` is not a terminal."""
        import termios
        import tty

        try:
            if not os.isatty(self.fd):
                return False
            self._saved = termios.tcgetattr(self.fd)
            tty.setcbreak(self.fd, termios.TCSANOW)
        except (OSError, termios.error):
            self._saved = None
            return False
        self._thread = threading.Thread(target=self._run, name="flowplex-keys", daemon=True)
        self._thread.start()
        return True

    def stop(self) -> None:
        """Stop reading and restore the terminal's previous mode."""
        import termios

        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2.0)
            self._thread = None
        if self._saved is not None:
            with contextlib.suppress(OSError, termios.error):
                termios.tcsetattr(self.fd, termios.TCSADRAIN, self._saved)
            self._saved = None

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                ready, _, _ = select.select([self.fd], [], [], 0.1)
                if not ready:
                    continue
                data = os.read(self.fd, 256)
            except OSError:
                return
            if not data:
                return
            for key in decode_keys(data):
                try:
                    self.on_key(key)
                except Exception:  # a key handler bug must not end keyboard input
                    log.exception("terminal.keys.failed key=%r", key)
