"""Names in messages: control characters are rejected in names and escaped wherever text is quoted.

A node called ``"\\x1b[2J"`` would otherwise clear the screen of whoever reads the error (or the
``flowplex check`` report). C0 controls, DEL and C1 controls are the characters that terminals
act on; everything else, any script included, is left as written.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["control_char", "escape_controls"]

_CONTROLS: Final = re.compile("[\x00-\x1f\x7f-\x9f]")


def _escape(match: re.Match[str]) -> str:
    return f"\\x{ord(match.group()):02x}"


def escape_controls(text: str) -> str:
    r"""``text`` with each control character written as ``\xNN``.

    >>> escape_controls("a\x1b[31mb")
    'a\\x1b[31mb'
    """
    return _CONTROLS.sub(_escape, text)


def control_char(text: str) -> str | None:
    r"""The first control character of ``text``, escaped (``\x1b``), or ``None`` when it has none."""
    match = _CONTROLS.search(text)
    return None if match is None else _escape(match)
