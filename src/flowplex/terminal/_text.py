"""Display width of text in terminal cells (``wcwidth``), and cutting text to a width."""

from __future__ import annotations

from functools import lru_cache

from wcwidth import wcwidth

__all__ = ["char_width", "display_width", "fit", "truncate_to_width"]


@lru_cache(maxsize=4096)
def char_width(ch: str) -> int:
    """Cells taken by one character: 0 (combining), 1, or 2 (wide); controls count as 0."""
    w = wcwidth(ch)
    return w if w > 0 else 0


def display_width(text: str) -> int:
    """Cells ``text`` takes on a terminal.

    >>> display_width("ab中")
    4
    """
    if text.isascii():
        return len(text)
    return sum(char_width(ch) for ch in text)


def truncate_to_width(text: str, width: int) -> str:
    """The longest prefix of ``text`` that fits in ``width`` cells (a wide character never
    straddles the limit).

    >>> truncate_to_width("中文字", 5)
    '中文'
    """
    if width <= 0:
        return ""
    if text.isascii():
        return text[:width]
    used = 0
    for i, ch in enumerate(text):
        w = char_width(ch)
        if used + w > width:
            return text[:i]
        used += w
    return text


def fit(text: str, width: int) -> str:
    """``text`` cut or padded with spaces to exactly ``width`` cells.

    >>> fit("ab", 4) + "|"
    'ab  |'
    """
    cut = truncate_to_width(text, width)
    return cut + " " * (width - display_width(cut))
