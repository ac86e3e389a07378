"""Where a long message is cut into slot-sized fragments.

A message longer than one slot's payload (224 bytes) travels as consecutive fragments and is
reassembled exactly.  The cut points are chosen so that each fragment is meaningful on its own
for a consumer that renders fragments as they come: a cut never falls inside a UTF-8 code point
and never inside an ANSI escape sequence that would fit in one fragment.  For bytes that are not
UTF-8 the code-point rule backs off at most three bytes and then gives up, so any binary data
still fragments (reassembly does not depend on where the cuts are).
"""

from __future__ import annotations

from typing import Final

from ._layout import PAYLOAD_SIZE

MAX_ESCAPE: Final = 64
"""Escape sequences longer than this (rare OSC strings) may be cut."""


def _escape_closed(data: bytes, start: int, stop: int) -> bool:
    """Whether the escape sequence at ``data[start] == ESC`` ends at or before ``stop``."""
    i = start + 1
    if i >= stop:
        return False
    kind = data[i]
    if kind == 0x5B:  # CSI: ESC [ parameters intermediates final (0x40-0x7E)
        return any(0x40 <= b <= 0x7E for b in data[i + 1 : stop])
    if kind in (0x5D, 0x50, 0x5F, 0x5E):  # OSC, DCS, APC, PM: end at BEL or ESC backslash
        body = data[i + 1 : stop]
        return 0x07 in body or b"\x1b\\" in body
    while 0x20 <= kind <= 0x2F:  # nF: intermediates, then one final byte
        i += 1
        if i >= stop:
            return False
        kind = data[i]
    return True


def cut_points(data: bytes, limit: int = PAYLOAD_SIZE) -> list[int]:
    """End offsets of the fragments of ``data``; the last one is ``len(data)``.

    Args:
        data: The whole message.
        limit: The most bytes per fragment (at least 8).

    >>> cut_points(b"a" * 10, 4)
    [4, 8, 10]
    >>> cut_points("aé".encode() * 3, 4)  # never inside the 2-byte "é"
    [4, 7, 9]
    """
    n = len(data)
    ends: list[int] = []
    pos = 0
    while n - pos > limit:
        end = pos + limit
        # UTF-8: data[end] starts the next fragment; it must not be a continuation byte.
        back = end
        while back > end - 3 and back > pos + 1 and data[back] & 0xC0 == 0x80:
            back -= 1
        if data[back] & 0xC0 != 0x80:
            end = back
        esc = data.rfind(0x1B, max(pos + 1, end - MAX_ESCAPE), end)
        if esc >= 0 and not _escape_closed(data, esc, end):
            end = esc
        ends.append(end)
        pos = end
    ends.append(n)
    return ends
