"""The log-mode sanitiser: an agent's raw output in, text that is safe to print out.

One :class:`LogSanitizer` per agent keeps its own UTF-8 decoder and escape-sequence state, so a
code point or a sequence split across two reads never mixes with another agent's bytes (Perdix
shared one parser among agents, bug A3). Only SGR (colour) sequences survive; every other
control sequence -- OSC 52 clipboard writes, title changes, cursor moves, mode switches,
device queries, DCS/APC strings -- and every C0/C1 control except newline, carriage return
and tab is removed and counted. Tabs become spaces up to the next 8-cell stop. What the renderer
needs to know about the screen survives as ops of their own: ``SCREEN`` for a clear or a cursor
move up or to a position, ``ALT_SCREEN``/``MAIN_SCREEN`` when a full-screen program enters and
leaves the alternate screen (see :mod:`flowplex.terminal._logmode` for what it makes of them).
"""

from __future__ import annotations

import codecs
import re
from typing import Final

from ._text import display_width

__all__ = [
    "ALT_SCREEN", "CR", "MAIN_SCREEN", "NEWLINE", "SCREEN", "TEXT", "LogSanitizer", "Op", "safe_label",
    "visible_controls",
]

TEXT: Final = 0
"""Op kind: printable text, possibly with SGR sequences inside."""
NEWLINE: Final = 1
"""Op kind: end of line (``\\n``)."""
CR: Final = 2
"""Op kind: carriage return (``\\r``); the renderer decides between CRLF and progress rewrite."""
SCREEN: Final = 3
"""Op kind: the agent addresses the screen (a clear, the cursor moved up or to a position): one
such op may be a ``clear`` between log lines, many in a row are a program painting the screen."""
ALT_SCREEN: Final = 4
"""Op kind: the agent entered the alternate screen (a full-screen program: vim, less, top)."""
MAIN_SCREEN: Final = 5
"""Op kind: the agent left the alternate screen (what it drew there vanishes, as on a terminal)."""

Op = tuple[int, str]

# Anything that is not a C0/C1 control, DEL, or a bidi override/isolate (which could make a
# line display as something else) is plain text.
_PLAIN: Final = re.compile("[^\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]*(\r?\n|\r)?")
"""A run of plain text and the line end after it (the commonest input: one match a line)."""
_CR_OP: Final = (CR, "")
_NEWLINE_OP: Final = (NEWLINE, "")
_STRING_END: Final = re.compile("[\x07\x1b\x9c]")
_SGR_PARAMS: Final = re.compile("[0-9;:]{0,64}")
TAB_STOP: Final = 8
"""A tab moves to the next multiple of 8 cells, as terminals do."""

_GROUND: Final = 0
_ESC: Final = 1
_CSI: Final = 2
_STRING: Final = 3
_ESC_INTERMEDIATE: Final = 4
_MAX_CSI: Final = 128

_STRING_INTRODUCERS: Final = frozenset("]PX^_")
_SCREEN_FINALS: Final = frozenset("HfdAFJ")
"""CUP, HVP, VPA, CUU, CPL and ED: only a full-screen program moves up or clears the screen."""
_ALT_SCREENS: Final = frozenset({"?1049", "?1047", "?47"})
_C1_STRINGS: Final = frozenset("\x90\x98\x9d\x9e\x9f")


class LogSanitizer:
    """Incremental filter from an agent's raw stream to safe text ops.

    Not thread-safe: one instance per agent, fed by one thread at a time.

    >>> s = LogSanitizer()
    >>> s.feed(b"\\x1b]52;c;ZXZpbA==\\x07\\x1b[31mred\\x1b[0m\\x1b[?25l\\n")
    [(0, '\\x1b[31mred\\x1b[0m'), (1, '')]
    >>> s.stripped
    2
    """

    __slots__ = ("_column", "_csi", "_decoder", "_state", "stripped")

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._state = _GROUND
        self._csi: list[str] = []
        self._column = 0
        """Cells of text since the line began (tabs stop at every 8th)."""
        self.stripped = 0
        """Control sequences and control characters removed so far."""

    def feed(self, data: bytes | str) -> list[Op]:
        """Filter the next chunk; returns the ops it completes (text, newline, carriage return)."""
        text = self._decoder.decode(data) if isinstance(data, bytes) else data
        ops: list[Op] = []
        pieces: list[str] = []
        i = 0
        n = len(text)
        while i < n:
            state = self._state
            if state == _GROUND:
                m = _PLAIN.match(text, i)
                assert m is not None  # every part of the pattern is optional: it always matches
                end = m.end()
                if end > i:
                    eol = m.group(1)
                    run = text[i : m.start(1)] if eol else text[i:end]
                    i = end
                    if run:
                        pieces.append(run)
                        self._column += display_width(run)
                    if eol:
                        if pieces:
                            ops.append((TEXT, "".join(pieces)))
                            pieces.clear()
                        if eol == "\r\n":
                            ops.append(_CR_OP)
                            ops.append(_NEWLINE_OP)
                        else:
                            ops.append(_NEWLINE_OP if eol == "\n" else _CR_OP)
                        self._column = 0
                    continue
                ch = text[i]
                i += 1
                if ch == "\n" or ch == "\r":
                    if pieces:
                        ops.append((TEXT, "".join(pieces)))
                        pieces.clear()
                    ops.append((NEWLINE, "") if ch == "\n" else (CR, ""))
                    self._column = 0
                elif ch == "\t":
                    spaces = TAB_STOP - self._column % TAB_STOP
                    pieces.append(" " * spaces)
                    self._column += spaces
                elif ch == "\x1b":
                    self._state = _ESC
                elif ch == "\x9b":
                    self._csi.clear()
                    self._state = _CSI
                elif ch in _C1_STRINGS:
                    self._state = _STRING
                else:
                    self.stripped += 1
            elif state == _STRING:
                m = _STRING_END.search(text, i)
                if m is None:
                    i = n
                    continue
                i = m.end()
                if m.group() == "\x1b":
                    # ESC \ ends the string; ESC + anything else aborts it and starts a sequence.
                    if i < n and text[i] == "\\":
                        i += 1
                        self._state = _GROUND
                        self.stripped += 1
                    elif i < n:
                        self.stripped += 1
                        self._state = _ESC
                    else:
                        self._state = _ESC  # decided by the next chunk; ESC \ then ends in _ESC
                else:
                    self._state = _GROUND
                    self.stripped += 1
            elif state == _ESC:
                ch = text[i]
                i += 1
                if ch == "[":
                    self._csi.clear()
                    self._state = _CSI
                elif ch in _STRING_INTRODUCERS:
                    self._state = _STRING
                elif "\x20" <= ch <= "\x2f":
                    self._state = _ESC_INTERMEDIATE
                elif ch == "\x1b":
                    self.stripped += 1
                else:
                    # ESC c (full reset), ESC 7/8, ESC D/M, ESC \ (a dangling ST)...: all dropped.
                    self._state = _GROUND
                    self.stripped += 1
            elif state == _ESC_INTERMEDIATE:
                ch = text[i]
                i += 1
                if not "\x20" <= ch <= "\x2f":
                    self._state = _GROUND
                    self.stripped += 1
            else:  # _CSI
                ch = text[i]
                if "\x40" <= ch <= "\x7e":
                    i += 1
                    params = "".join(self._csi)
                    self._csi.clear()
                    self._state = _GROUND
                    if ch == "m" and _SGR_PARAMS.fullmatch(params):
                        pieces.append(f"\x1b[{params}m")
                    else:
                        self.stripped += 1
                        kind = _screen_op(ch, params)
                        if kind is not None:
                            if pieces:
                                ops.append((TEXT, "".join(pieces)))
                                pieces.clear()
                            ops.append((kind, ""))
                elif "\x20" <= ch <= "\x3f":
                    i += 1
                    if len(self._csi) <= _MAX_CSI:  # an overlong sequence fails the SGR check below
                        self._csi.append(ch)
                else:
                    # A control character inside a sequence cancels it (ECMA-48); reprocess it.
                    self._csi.clear()
                    self._state = _GROUND
                    self.stripped += 1
        if pieces:
            ops.append((TEXT, "".join(pieces)))
        return ops


def _screen_op(final: str, params: str) -> int | None:
    """The op a (non-SGR) CSI sequence means to the log, if any."""
    if final in _SCREEN_FINALS:
        return SCREEN
    if params in _ALT_SCREENS:
        if final == "h":
            return ALT_SCREEN
        if final == "l":
            return MAIN_SCREEN
    return None


_LABEL_BAD: Final = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def safe_label(text: str, limit: int = 64) -> str:
    """``text`` without any control character, shortened to ``limit`` characters.

    For agent names, window titles and notes that end up in chrome the renderer draws.

    >>> safe_label("evil\\x1b]0;pwned\\x07name")
    'evil]0;pwnedname'
    """
    cleaned = _LABEL_BAD.sub("", text)
    return cleaned if len(cleaned) <= limit else cleaned[: max(0, limit - 1)] + "…"


_SHOWN: Final = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
"""What a printed line must not carry raw: C0/C1 controls but newline and tab, DEL, bidi
overrides/isolates, and lone surrogates (which cannot even be encoded)."""
_NAMED: Final = {"\r": "\\r"}


def visible_controls(text: str) -> str:
    """``text`` with every control character written out as a visible escape (``\\x1b``, ``\\r``).

    Every line the CLI prints that holds text it did not write itself -- packet values, a
    server's error message, node names from YAML, agent names -- goes through this, on a
    terminal and in a pipe alike: a string that carries OSC 52 or a title change shows what it
    tried instead of doing it. Newlines and tabs are kept (multi-line reports stay readable);
    everything else that a terminal would act on is shown as ``\\xNN`` (``\\uNNNN`` above U+00FF).

    >>> visible_controls("evil\\x1b]52;c;aGk=\\x07 name\\r\\n")
    'evil\\\\x1b]52;c;aGk=\\\\x07 name\\\\r\\n'
    """
    if _SHOWN.search(text) is None:
        return text
    return _SHOWN.sub(_show, text)


def _show(m: re.Match[str]) -> str:
    ch = m.group()
    named = _NAMED.get(ch)
    if named is not None:
        return named
    code = ord(ch)
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"
