"""Keyboard and mouse input for panes mode: the terminal in raw mode, input decoded on a thread.

Raw mode (no echo, no line editing, no signals from Ctrl-C/Ctrl-Z) lets typing mode hand every
byte, control keys included, to the focused agent's PTY, whose own line discipline turns them
into signals for the agent. Outside typing mode the bytes are decoded into :class:`Key`,
:class:`Mouse` and :class:`Paste` events.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import select
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from ..errors import UsageError

log = logging.getLogger(__name__)

__all__ = [
    "Event", "Key", "KeyReader", "Mouse", "Paste", "decode_input", "decode_keys", "mouse_of", "split_typing",
    "typing_key_byte",
]

MOUSE_ON: Final = "\x1b[?1000h\x1b[?1006h"
"""Report clicks and the wheel, in SGR encoding (``ESC[<b;x;yM``)."""
MOUSE_OFF: Final = "\x1b[?1006l\x1b[?1000l"
PASTE_ON: Final = "\x1b[?2004h"
"""Bracketed paste: a paste arrives between ``ESC[200~`` and ``ESC[201~``."""
PASTE_OFF: Final = "\x1b[?2004l"
PASTE_BEGIN: Final = b"\x1b[200~"
PASTE_END: Final = b"\x1b[201~"
MOUSE_RE: Final = re.compile(rb"\x1b\[<(\d+);(\d+);(\d+)([Mm])")

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
    "\x1b[5~": "pgup",
    "\x1b[6~": "pgdn",
    "\x1b[H": "home",
    "\x1b[F": "end",
    "\x1b[1~": "home",
    "\x1b[4~": "end",
}
_CONTROL_NAMES: Final = {"\x7f": "backspace", "\x08": "backspace"}


@dataclass(frozen=True, slots=True)
class Key:
    """A key: a printable character, or a name (``tab``, ``pgup``, ``ctrl-a``...)."""

    name: str


@dataclass(frozen=True, slots=True)
class Mouse:
    """A mouse report: ``button`` 0-2 (left, middle, right), 64/65 (wheel up/down); 0-based cell."""

    button: int
    x: int
    y: int
    pressed: bool

    @property
    def wheel(self) -> int:
        """-1 for wheel up, 1 for wheel down, 0 for a button."""
        return {64: -1, 65: 1}.get(self.button & ~0x1C, 0)


@dataclass(frozen=True, slots=True)
class Paste:
    """Text pasted in one go (bracketed paste), markers removed."""

    data: bytes


Event = Key | Mouse | Paste


def decode_input(data: bytes) -> list[Event]:
    """Events in ``data`` as read from a terminal in raw mode, with SGR mouse and bracketed paste.

    Control characters become ``ctrl-X`` keys (``\\x01`` is ``ctrl-a``); Enter, Tab, Esc and
    Backspace are named.

    >>> decode_input(b"a\\x01\\x1b[<0;3;2M\\x1b[200~hi\\x1b[201~")
    [Key(name='a'), Key(name='ctrl-a'), Mouse(button=0, x=2, y=1, pressed=True), Paste(data=b'hi')]
    """
    events: list[Event] = []
    i = 0
    n = len(data)
    while i < n:
        if data.startswith(PASTE_BEGIN, i):
            end = data.find(PASTE_END, i)
            stop = n if end < 0 else end
            events.append(Paste(data[i + len(PASTE_BEGIN):stop]))
            i = n if end < 0 else end + len(PASTE_END)
            continue
        match = MOUSE_RE.match(data, i)
        if match is not None:
            events.append(mouse_of(match))
            i = match.end()
            continue
        j = data.find(b"\x1b", i + 1)
        if data[i] == 0x1B:
            j = _escape_end(data, i)
        chunk = data[i:n if j < 0 else j]
        events.extend(Key(k) for k in decode_keys(chunk))
        i = n if j < 0 else j
    return events


def mouse_of(match: re.Match[bytes]) -> Mouse:
    """The :class:`Mouse` event of a :data:`MOUSE_RE` match (1-based cells become 0-based)."""
    b, x, y, kind = match.groups()
    return Mouse(int(b), int(x) - 1, int(y) - 1, kind == b"M")


def _escape_end(data: bytes, i: int) -> int:
    """Index just past the escape sequence starting at ``data[i]`` (or of the next ESC)."""
    j = i + 1
    if j < len(data) and data[j] in b"[O":
        j += 1
        while j < len(data) and not (0x40 <= data[j] <= 0x7E):
            j += 1
        return min(len(data), j + 1)
    return j


def typing_key_byte(name: str) -> bytes:
    """The byte of a typing key given as ``ctrl-a``, ``^a`` or ``C-a`` (letters, ``[ \\ ] ^ _``).

    >>> typing_key_byte("ctrl-b")
    b'\\x02'
    """
    text = name.strip().lower()
    for lead in ("ctrl-", "ctrl+", "c-", "^"):
        if text.startswith(lead):
            text = text[len(lead):]
            break
    else:
        text = ""
    if len(text) == 1 and ("a" <= text <= "z" or text in "[\\]^_"):
        return bytes([ord(text.upper()) & 0x1F])
    msg = f"--typing-key {name!r}: expected a control key such as ctrl-a, ctrl-b or ctrl-]"
    raise UsageError(msg)


def split_typing(data: bytes, typing_key: bytes) -> tuple[bytes, bool, bytes]:
    """Split input in typing mode: ``(for the agent, typing key pressed, the rest after it)``.

    The typing key twice sends it once to the agent.

    >>> split_typing(b"ab\\x01\\x01c\\x01d", b"\\x01")
    (b'ab\\x01c', True, b'd')
    """
    out = bytearray()
    i = 0
    while True:
        k = data.find(typing_key, i)
        if k < 0:
            out += data[i:]
            return bytes(out), False, b""
        out += data[i:k]
        if data.startswith(typing_key * 2, k):
            out += typing_key
            i = k + 2 * len(typing_key)
            continue
        return bytes(out), True, data[k + len(typing_key):]


def decode_keys(data: bytes) -> list[str]:
    """Key names in ``data`` as read from a terminal in cbreak mode.

    Printable keys are themselves; ``tab``, ``btab`` (shift-tab), ``enter``, ``esc``, arrows
    (``up``...), ``pgup``/``pgdn``, ``home``/``end``, ``backspace`` and control keys
    (``ctrl-a``...) are named; other escape sequences are ignored.

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
        elif ch in _CONTROL_NAMES:
            keys.append(_CONTROL_NAMES[ch])
        elif ch.isprintable():
            keys.append(ch)
        elif ord(ch) < 0x20:
            keys.append(f"ctrl-{chr(ord(ch) + 0x60)}")
        i += 1
    return keys


class KeyReader:
    """Reads a terminal on its own thread and calls ``on_input(bytes)`` with what arrived.

    ``start`` puts the terminal in raw mode (no echo, no line buffering, no signals: Ctrl-C
    arrives as a byte, for the display to quit on or to hand to an agent) and ``stop`` restores
    it exactly. Does nothing when ``fd`` is not a terminal. ``on_key`` (a key name per decoded
    key) may be given instead of ``on_input`` for callers that only want keys.
    """

    def __init__(self, fd: int, on_key: Callable[[str], None] | None = None, *,
                 on_input: Callable[[bytes], None] | None = None) -> None:
        self.fd = fd
        self.on_key = on_key
        self.on_input = on_input
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
            tty.setraw(self.fd, termios.TCSANOW)
            mode = termios.tcgetattr(self.fd)
            mode[1] |= termios.OPOST | termios.ONLCR  # output stays cooked: "\n" still starts a line
            termios.tcsetattr(self.fd, termios.TCSANOW, mode)
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
                data = os.read(self.fd, 4096)
            except OSError:
                return
            if not data:
                return
            try:
                if self.on_input is not None:
                    self.on_input(data)
                elif self.on_key is not None:
                    for key in decode_keys(data):
                        self.on_key(key)
            except Exception:  # an input handler bug must not end keyboard input
                log.exception("terminal.keys.failed data=%r", data[:64])
