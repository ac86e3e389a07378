"""The sanitiser: an agent's raw output in, text that is safe to print (or to emulate) out.

One :class:`LogSanitizer` per agent keeps its own UTF-8 decoder and escape-sequence state, so a
code point or a sequence split across two reads never mixes with another agent's bytes (Perdix
shared one parser among agents, bug A3). In log mode only SGR (colour) sequences survive; every
other control sequence -- OSC 52 clipboard writes, title changes, cursor moves, mode switches,
device queries, DCS/APC strings -- and every C0/C1 control except newline, carriage return and
tab is removed and counted. Tabs become spaces up to the next 8-cell stop. What the renderer
needs to know about the screen survives as ops of their own: ``SCREEN`` for a clear or a cursor
move up or to a position, ``ALT_SCREEN``/``MAIN_SCREEN`` when a full-screen program enters and
leaves the alternate screen (see :mod:`flowplex.terminal._logmode` for what it makes of them).

*Verbatim* output is for an emulator: text, control characters and complete CSI and ESC
sequences are kept as they came, only control *strings* (OSC, DCS, SOS, PM, APC) are removed.
A pane's emulator gets all its output this way, and log mode gets an agent's output this way
while it is on the alternate screen (op ``VERBATIM``), to know what it leaves there.

Every escape sequence is bounded: one that runs past :data:`MAX_SEQUENCE` characters without
its end (an OSC whose BEL never comes, a CSI of endless parameters) is dropped, counted in
``cut``, and what follows it is text again, so one missing terminator cannot swallow the rest
of an agent's output (nor grow an emulator's buffer without bound).
"""

from __future__ import annotations

import codecs
import re
from typing import Final


def _display_width(text: str) -> int:
    """``_text.display_width``, imported on first use: the command line reads ``visible_controls``
    on every run, and the width tables (wcwidth) take longer to load than a ``flowplex ps`` takes."""
    global _display_width  # rebound once, to the real function
    from ._text import display_width

    _display_width = display_width
    return display_width(text)

__all__ = [
    "ALT_SCREEN", "CR", "MAIN_SCREEN", "MAX_SEQUENCE", "NEWLINE", "SCREEN", "TEXT", "VERBATIM", "LogSanitizer", "Op",
    "safe_label", "visible_controls",
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
"""Op kind: the agent left the alternate screen."""
VERBATIM: Final = 6
"""Op kind: output for an emulator: text with its controls and CSI/ESC sequences kept, control
strings removed (on the alternate screen in log mode; always for a pane)."""

Op = tuple[int, str]

MAX_SEQUENCE: Final = 4096
"""Characters an escape sequence may run to (an OSC title or clipboard write, a CSI's
parameters); a longer one is dropped and counted, and what follows it is text."""

# Anything that is not a C0/C1 control, DEL, or a bidi override/isolate (which could make a
# line display as something else) is plain text.
_PLAIN: Final = re.compile("[^\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]*(\r?\n|\r)?")
"""A run of plain text and the line end after it (the commonest input: one match a line)."""
_INTRODUCER: Final = re.compile("[\x1b\x90\x98\x9b\x9d-\x9f]")
"""What starts a sequence in verbatim output (everything before it goes through as it is)."""
_CR_OP: Final = (CR, "")
_NEWLINE_OP: Final = (NEWLINE, "")
_STRING_END: Final = re.compile("[\x07\x18\x1a\x1b\x9c]")
"""What ends a control string: BEL, ST (``ESC \\`` or 0x9c), or CAN/SUB/ESC, which abort it."""
_SHORT_CSI: Final = re.compile("(\x1b\\[[\x20-\x3f]{0,64})([\x40-\x7e])")
"""A whole CSI sequence: ESC ``[`` and up to 64 parameter characters (group 1), and its final."""
_CSI_PARAMS: Final = re.compile("[\x20-\x3f]*")
"""A CSI's parameter and intermediate characters."""
_SGR_PARAMS: Final = re.compile("[0-9;:]{0,64}")
TAB_STOP: Final = 8
"""A tab moves to the next multiple of 8 cells, as terminals do."""

# The parser's states; the order matters to ``feed``: the string states come last.
_GROUND: Final = 0
_CSI: Final = 1
_ESC: Final = 2
_ESC_INTERMEDIATE: Final = 3
_STRING: Final = 4
_STRING_ESC: Final = 5

_STRING_INTRODUCERS: Final = frozenset("]PX^_")
_SCREEN_FINALS: Final = frozenset("HfdAFJ")
"""CUP, HVP, VPA, CUU, CPL and ED: only a full-screen program moves up or clears the screen."""
_ALT_MODES: Final = frozenset({"1049", "1047", "47"})
"""The private modes of xterm's alternate screen (1049 also saves the cursor)."""
_C1_STRINGS: Final = frozenset("\x90\x98\x9d\x9e\x9f")


class LogSanitizer:
    """Incremental filter from an agent's raw stream to safe ops.

    Args:
        verbatim: Keep controls and CSI/ESC sequences for an emulator (a pane): every op is
            ``VERBATIM`` and the alternate screen is the emulator's business. Without it
            (log mode), ops are text, line ends and screen events, and the output switches to
            ``VERBATIM`` only between ``ALT_SCREEN`` and ``MAIN_SCREEN``.

    Not thread-safe: one instance per agent, fed by one thread at a time.

    >>> s = LogSanitizer()
    >>> s.feed(b"\\x1b]52;c;ZXZpbA==\\x07\\x1b[31mred\\x1b[0m\\x1b[?25l\\n")
    [(0, '\\x1b[31mred\\x1b[0m'), (1, '')]
    >>> s.stripped
    2
    >>> ops = s.feed(b"\\x1b]0;" + b"x" * 5000 + b"after\\n")  # an OSC that never ends: cut at 4 KiB
    >>> ops[0][1][-8:], s.cut
    ('xxxafter', 1)
    """

    __slots__ = ("_column", "_decoder", "_panes", "_seq", "_seq_len", "_state", "cut", "stripped", "verbatim")

    def __init__(self, *, verbatim: bool = False) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._state = _GROUND
        self._seq: list[str] = []
        """The sequence being read (CSI parameters; in verbatim output the whole of it)."""
        self._seq_len = 0
        """Characters of the sequence being read so far (strings included), for the bound."""
        self._column = 0
        """Cells of text since the line began (tabs stop at every 8th)."""
        self._panes = verbatim
        self.verbatim = verbatim
        """Output goes to an emulator now (always for a pane; on the alternate screen in log mode)."""
        self.stripped = 0
        """Control sequences and control characters removed so far."""
        self.cut = 0
        """Escape sequences dropped for running past ``MAX_SEQUENCE`` (also in ``stripped``)."""

    def restart(self) -> None:
        """The stream ended: what comes next (a restarted command) begins on the main screen,
        outside any sequence; the counters stay."""
        self._decoder.reset()
        self._state = _GROUND
        self._seq.clear()
        self._column = 0
        self.verbatim = self._panes

    def feed(self, data: bytes | str) -> list[Op]:
        """Filter the next chunk; returns the ops it completes."""
        text = self._decoder.decode(data) if isinstance(data, bytes) else data
        ops: list[Op] = []
        pieces: list[str] = []
        i = 0
        n = len(text)
        while i < n:
            state = self._state
            if state == _GROUND:
                i = self._verbatim_run(text, i, ops, pieces) if self.verbatim else self._plain_run(text, i, ops, pieces)
            elif state == _CSI:
                i = self._csi(text, i, ops, pieces)
            elif state >= _STRING:
                i = self._string(text, i)
            else:
                i = self._escape(text, i, ops, pieces)
        self._flush(ops, pieces)
        return ops

    # -- the steps of feed: each reads from text[i], returns where it stopped ------------------------

    def _plain_run(self, text: str, i: int, ops: list[Op], pieces: list[str]) -> int:
        """Log-mode text: lines, tabs and dropped controls, up to the next escape sequence."""
        n = len(text)
        while i < n:
            m = _PLAIN.match(text, i)
            assert m is not None  # every part of the pattern is optional: it always matches
            end = m.end()
            if end > i:
                eol = m.group(1)
                run = text[i : m.start(1)] if eol else text[i:end]
                i = end
                if run:
                    pieces.append(run)
                    self._column += _display_width(run)
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
            if ch == "\t":
                spaces = TAB_STOP - self._column % TAB_STOP
                pieces.append(" " * spaces)
                self._column += spaces
            elif ch == "\x1b" and (short := _SHORT_CSI.match(text, i - 1)) is not None:
                # The commonest sequence (a colour), whole in this chunk: at once, then the text after it.
                i = short.end()
                self._final(short.group(1), short.group(2), ops, pieces)
                if self.verbatim:
                    return i  # it entered the alternate screen
            elif ch == "\x1b" or ch == "\x9b" or ch in _C1_STRINGS:
                self._begin(ch)
                return i
            else:
                self.stripped += 1
        return i

    def _verbatim_run(self, text: str, i: int, ops: list[Op], pieces: list[str]) -> int:
        """Verbatim text: everything up to the next escape sequence goes through as it is, and so
        does a whole short CSI sequence."""
        n = len(text)
        while i < n:
            m = _INTRODUCER.search(text, i)
            if m is None:
                pieces.append(text[i:])
                return n
            start = m.start()
            if start > i:
                pieces.append(text[i:start])
            short = _SHORT_CSI.match(text, start)
            if short is None:
                self._begin(text[start])
                return start + 1
            i = short.end()
            self._final(short.group(1), short.group(2), ops, pieces)
            if not self.verbatim:
                return i  # it left the alternate screen
        return i

    def _begin(self, ch: str) -> None:
        """A sequence starts with ``ch`` (ESC, or a C1 CSI or string introducer)."""
        self._seq.clear()
        self._seq_len = 1
        if ch == "\x1b":
            self._state = _ESC
        elif ch == "\x9b":
            self._seq.append("\x1b[")
            self._state = _CSI
        else:
            self._state = _STRING

    def _escape(self, text: str, i: int, ops: list[Op], pieces: list[str]) -> int:
        """After ESC (and its intermediates): which sequence it is."""
        ch = text[i]
        i += 1
        self._seq_len += 1
        if self._state == _ESC:
            if ch == "[":
                self._seq.append("\x1b[")
                self._state = _CSI
                return self._csi(text, i, ops, pieces) if i < len(text) else i  # the commonest: at once
            if ch in _STRING_INTRODUCERS:
                self._state = _STRING
                return i
            if ch == "\x1b":  # ESC ESC: the first is cancelled, the second begins a sequence
                self.stripped += 1
                self._seq_len = 1
                return i
            self._seq.append("\x1b")
        if "\x20" <= ch <= "\x2f":  # an intermediate: ESC ( B, ESC # 8...
            self._seq.append(ch)
            self._state = _ESC_INTERMEDIATE
            if self._seq_len > MAX_SEQUENCE:
                self._cut()
            return i
        # The final: ESC c (full reset), ESC 7/8, ESC D/M, ESC \ (a dangling ST)...
        self._state = _GROUND
        if ch == "c" and self.verbatim and not self._panes:
            self._leave_alt(ops, pieces)  # a full reset leaves the alternate screen (xterm)
        elif self.verbatim:
            self._seq.append(ch)
            pieces.append("".join(self._seq))
        else:
            self.stripped += 1  # all dropped in a log
        self._seq.clear()
        return i

    def _csi(self, text: str, i: int, ops: list[Op], pieces: list[str]) -> int:
        """Inside a CSI: parameters and intermediates, then the final."""
        n = len(text)
        start = i
        m = _CSI_PARAMS.match(text, i)
        assert m is not None  # `*`: it always matches
        i = m.end()
        if i > start:
            self._seq.append(text[start:i])
            self._seq_len += i - start
            if self._seq_len > MAX_SEQUENCE:
                # Runaway parameters: drop what came, and what follows the bound is text.
                over = self._seq_len - MAX_SEQUENCE
                self._cut()
                return i - over
        if i == n:
            return i
        ch = text[i]
        self._state = _GROUND
        seq = "".join(self._seq)
        self._seq.clear()
        if not "\x40" <= ch <= "\x7e":
            # A control character inside a sequence cancels it (ECMA-48); reprocess it.
            self.stripped += 1
            return i
        self._final(seq, ch, ops, pieces)
        return i + 1

    def _final(self, seq: str, final: str, ops: list[Op], pieces: list[str]) -> None:
        """A complete CSI sequence (``seq`` is ESC [ and its parameters): keep, drop or report it."""
        params = seq[2:]
        if not self._panes and final in "hl" and _is_alt_screen(params):
            self.stripped += 1  # the switch itself is not logged
            if final == "l":
                self._leave_alt(ops, pieces)
            else:
                self._flush(ops, pieces)
                ops.append((ALT_SCREEN, ""))
                self.verbatim = True
            return
        if self.verbatim:
            pieces.append(seq + final)
        elif final == "m" and _SGR_PARAMS.fullmatch(params):
            pieces.append(f"{seq}m")
        else:
            self.stripped += 1
            if final in _SCREEN_FINALS:
                self._flush(ops, pieces)
                ops.append((SCREEN, ""))

    def _string(self, text: str, i: int) -> int:
        """Inside a control string (OSC, DCS, SOS, PM, APC): dropped up to its end, or to the bound."""
        if self._state == _STRING_ESC:
            # ESC inside the string: ESC \ ends it, ESC + anything else aborts it and begins
            # a sequence (decided here when the ESC came last in its chunk).
            self.stripped += 1
            if text[i] == "\\":
                self._state = _GROUND
                return i + 1
            self._begin("\x1b")
            return i
        limit = i + MAX_SEQUENCE + 1 - self._seq_len
        m = _STRING_END.search(text, i, limit)
        if m is None:
            end = min(len(text), limit)
            self._seq_len += end - i
            if self._seq_len > MAX_SEQUENCE:
                self._cut()
            return end
        self._seq_len += m.end() - i
        if m.group() == "\x1b":
            self._state = _STRING_ESC
        else:
            self._state = _GROUND  # BEL or ST ends it; CAN or SUB aborts it
            self.stripped += 1
        return m.end()

    def _leave_alt(self, ops: list[Op], pieces: list[str]) -> None:
        """Log mode: the agent left the alternate screen (or was never on it: still reported)."""
        self._flush(ops, pieces)
        ops.append((MAIN_SCREEN, ""))
        self.verbatim = False

    def _cut(self) -> None:
        """The sequence being read ran past ``MAX_SEQUENCE``: drop it, what follows is text."""
        self._seq.clear()
        self._state = _GROUND
        self.cut += 1
        self.stripped += 1

    def _flush(self, ops: list[Op], pieces: list[str]) -> None:
        """The text collected so far becomes an op of its own (before a line end or an event)."""
        if pieces:
            ops.append((VERBATIM if self.verbatim else TEXT, "".join(pieces)))
            pieces.clear()


def _is_alt_screen(params: str) -> bool:
    """``?1049``, ``?47;1000``...: the parameters of a private mode set or reset that switch
    to or from the alternate screen."""
    return params[:1] == "?" and not _ALT_MODES.isdisjoint(params[1:].split(";"))


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
