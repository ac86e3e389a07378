"""Agent types and the Perdix ANSI formatting, reproduced byte for byte (and fixed).

Perdix's GPU kernel turns an agent's text into::

    ESC[<colour>m [LABEL]<space> ESC[0m  body-with-highlighted-keywords  ESC[0m

Only the label is coloured.  In the body the whole-word, case-sensitive keywords ``ERROR``,
``WARNING`` and ``SUCCESS`` become ``ESC[91m``/``ESC[93m``/``ESC[92m`` + keyword + ``ESC[0m``; a
word boundary is a neighbouring byte that is not an ASCII letter or digit (the start and end of
the text count as boundaries).  The final ``ESC[0m`` is left out when the message continues in
another chunk.  With ANSI disabled the text is copied unchanged.

What is deliberately *not* reproduced (``perdix-semantics.md`` section 7): the 240-byte output
budget that truncated the body (R12, G3) -- long output is fragmented by the ring instead -- and
the unchecked table lookup for agent types >= 8, which raises here.  For any message that fit
Perdix's budget the bytes are identical.
"""

from __future__ import annotations

import enum
import re
from typing import Final

from ..errors import UsageError

ESC: Final = b"\x1b"
RESET: Final = b"\x1b[0m"


class AgentType(enum.IntEnum):
    """The kind of agent a message comes from; selects the label and its colour.

    The values are Perdix's ``#[repr(u8)]`` values and travel in the slot header.
    """

    SYSTEM = 0
    USER = 1
    ASSISTANT = 2
    ERROR = 3
    WARNING = 4
    INFO = 5
    DEBUG = 6
    TRACE = 7


AGENT_TYPES: Final[tuple[AgentType, ...]] = tuple(AgentType)
"""``AGENT_TYPES[i]`` is ``AgentType(i)`` without the enum lookup cost (hot path)."""

# SGR colour and label per agent type (perdix v0.1.2 perdix_kernel.cu, get_agent_color + labels).
COLOURS: Final[tuple[bytes, ...]] = (
    b"\x1b[34m",  # SYSTEM    blue
    b"\x1b[32m",  # USER      green
    b"\x1b[36m",  # ASSISTANT cyan
    b"\x1b[31m",  # ERROR     red
    b"\x1b[33m",  # WARNING   yellow
    b"\x1b[37m",  # INFO      white
    b"\x1b[35m",  # DEBUG     magenta
    b"\x1b[90m",  # TRACE     bright black
)
LABELS: Final[tuple[bytes, ...]] = (
    b"[SYSTEM] ",
    b"[USER] ",
    b"[ASSISTANT] ",
    b"[ERROR] ",
    b"[WARNING] ",
    b"[INFO] ",
    b"[DEBUG] ",
    b"[TRACE] ",
)
KEYWORD_COLOURS: Final[dict[bytes, bytes]] = {
    b"ERROR": b"\x1b[91m",
    b"WARNING": b"\x1b[93m",
    b"SUCCESS": b"\x1b[92m",
}
_KEYWORD_RE: Final = re.compile(rb"(?<![A-Za-z0-9])(ERROR|WARNING|SUCCESS)(?![A-Za-z0-9])")


def _highlight(match: re.Match[bytes]) -> bytes:
    word = match.group(1)
    return KEYWORD_COLOURS[word] + word + RESET


def prefix_for(agent_type: int) -> bytes:
    """The coloured label that starts a formatted message, e.g. ``ESC[36m[ASSISTANT] ESC[0m``."""
    return COLOURS[agent_type] + LABELS[agent_type] + RESET


def format_ansi(
    message: object,
    *,
    agent_type: int | None = None,
    prefix: bool = True,
    continues: bool = False,
    enable_ansi: bool = True,
) -> bytes:
    """Format one agent message the way Perdix's GPU kernel does, without its truncation.

    Args:
        message: A received :class:`Message` (its ``data`` and ``agent_type`` are used), or the
            text as ``str`` (encoded as UTF-8) or ``bytes``.
        agent_type: Overrides the message's agent type; ``ASSISTANT`` for plain text if omitted.
        prefix: Emit the coloured label.  Pass False for the later chunks of a long message
            (Perdix repeated the label on every chunk, bug R12).
        continues: The text continues in another chunk: omit the final ``ESC[0m`` (Perdix's
            ``is_continuation``).
        enable_ansi: False returns the text unchanged (Perdix's ``enable_ansi``).

    Returns:
        The formatted bytes.

    Raises:
        UsageError: ``message`` has another type, or the agent type is not 0..7.

    >>> format_ansi("build SUCCESS", agent_type=AgentType.USER)
    b'\\x1b[32m[USER] \\x1b[0mbuild \\x1b[92mSUCCESS\\x1b[0m\\x1b[0m'
    """
    data, kind = _text_and_type(message)
    if agent_type is None:
        agent_type = kind
    if not isinstance(agent_type, int) or not 0 <= agent_type < len(LABELS):
        msg = f"format_ansi(agent_type={agent_type!r}): expected an AgentType (0..7)"
        raise UsageError(msg)
    if not enable_ansi:
        return data
    body = _KEYWORD_RE.sub(_highlight, data)
    head = prefix_for(agent_type) if prefix else b""
    return head + body if continues else head + body + RESET


def _text_and_type(message: object) -> tuple[bytes, int]:
    if isinstance(message, bytes):
        return message, AgentType.ASSISTANT
    if isinstance(message, str):
        return message.encode(), AgentType.ASSISTANT
    data = getattr(message, "data", None)
    kind = getattr(message, "agent_type", None)
    if isinstance(data, bytes) and isinstance(kind, int):
        return data, kind
    msg = f"format_ansi(message={message!r:.60}): expected a Message, str or bytes"
    raise UsageError(msg)
