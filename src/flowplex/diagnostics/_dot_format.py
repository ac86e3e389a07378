"""Small pure formatting helpers of the DOT export: quoting, truncation, durations, colours."""

from __future__ import annotations

from typing import Final

__all__ = [
    "EXECUTOR_FILLS",
    "STATE_BORDERS",
    "TIMES",
    "attrs",
    "fmt_duration_us",
    "fmt_rate",
    "heat_colour",
    "quote",
    "truncate",
]

NODE_NAME_MAX: Final = 24
KERNEL_NAME_MAX: Final = 28
PORT_NAME_MAX: Final = 28
CLUSTER_NAME_MAX: Final = 24

EXECUTOR_FILLS: Final = ("#cde4ff", "#d7f0d0", "#ffe6c7", "#ead7f7", "#fff3b0", "#d3f3f1", "#f9d6e4", "#e2e2e2")
"""Node fill per executor index in the topology view (delegating executors are white)."""

STATE_BORDERS: Final[dict[str, tuple[str, int]]] = {
    "CREATED": ("#777777", 1),
    "IDLE": ("#4c78a8", 1),
    "WAITING_SOURCE": ("#d6a700", 2),
    "RUNNING": ("#2ca02c", 3),
    "CLOSED": ("#777777", 1),
    "ERROR": ("#d62728", 3),
}
"""Border colour and pen width per node state (lm-flow's node-state legend)."""

TIMES: Final = "\u00d7"
"""The multiplication sign lm-flow writes after counts (``bp 3<TIMES> / 1.2ms``)."""

_COOL: Final = (0xB7, 0xE1, 0xA1)
_HOT: Final = (0xE8, 0x8A, 0x7D)


def quote(text: str) -> str:
    """``text`` as a DOT double-quoted string; newlines become ``\\n`` line breaks.

    Backslashes are doubled so that names cannot inject Graphviz escapes such as ``\\N``.

    >>> print(quote('a "b"\\\\c\\nd'))
    "a \\"b\\"\\\\c\\nd"
    """
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\r", "").replace("\n", "\\n")
    return f'"{escaped}"'


def attrs(**values: str | int | float) -> str:
    """``[k=v, ...]``; strings are quoted, numbers are not. Keyword order is kept."""
    parts = []
    for key, value in values.items():
        parts.append(f"{key}={quote(value) if isinstance(value, str) else value}")
    return f"[{', '.join(parts)}]"


def truncate(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters with a trailing ``…``.

    >>> truncate("abcdef", 4), truncate("abc", 4)
    ('abc…', 'abc')
    """
    return text if len(text) <= limit else text[: limit - 1] + "…"


def fmt_duration_us(us: float) -> str:
    """Adaptive duration: ``Nµs``, ``N.Nms`` or ``N.NNs``.

    >>> fmt_duration_us(251), fmt_duration_us(3_500), fmt_duration_us(171_800), fmt_duration_us(2_345_000)
    ('251µs', '3.5ms', '171.8ms', '2.35s')
    """
    if us < 1000:
        return f"{us:.0f}µs"
    if us < 1_000_000:
        return f"{us / 1000:.1f}ms"
    return f"{us / 1_000_000:.2f}s"


def fmt_rate(count: int, window_us: float | None) -> str:
    """Events per second over a window: integers from 10/s up, one decimal below.

    >>> fmt_rate(21, 171_800), fmt_rate(1, 171_800), fmt_rate(0, 0), fmt_rate(0, 1000), fmt_rate(3, None)
    ('122/s', '5.8/s', '0/s', '0.0/s', 'rate n/a')
    """
    if window_us is None:
        return "rate n/a"
    if window_us <= 0:
        return "0/s"
    rate = count * 1e6 / window_us
    return f"{rate:.0f}/s" if rate >= 10 else f"{rate:.1f}/s"


def heat_colour(ratio: float) -> str:
    """Latency heat-map fill: green at 0, red at 1.

    >>> heat_colour(0.0), heat_colour(1.0)
    ('#B7E1A1', '#E88A7D')
    """
    r = min(1.0, max(0.0, ratio))
    channels = (round(c + (h - c) * r) for c, h in zip(_COOL, _HOT, strict=True))
    return "#" + "".join(f"{c:02X}" for c in channels)
