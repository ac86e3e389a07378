"""Timestamp sentinels and arithmetic, with lm-flow's exact values.

Timestamps are plain Python ``int`` values in the signed 64-bit range; the sentinels sit at the
two ends of that range so that ordinary timestamps compare between them.
"""

from __future__ import annotations

from typing import Final

TS_UNSET: Final = -(2**63)
"""No timestamp: the default of every packet; on emit it means "use the input timestamp"."""
TS_UNSTARTED: Final = -(2**63) + 1
"""The context timestamp during ``open``."""
TS_PRE_STREAM: Final = -(2**63) + 2
"""The single slot before all data; the initial bound of every input port."""
TS_MIN: Final = -(2**63) + 3
"""The smallest ordinary timestamp."""
TS_MAX: Final = 2**63 - 4
"""The largest ordinary timestamp."""
TS_POST_STREAM: Final = 2**63 - 3
"""The single slot after all data (summaries emitted in ``close``)."""
TS_ONE_OVER_POST_STREAM: Final = 2**63 - 2
"""The bound after ``TS_POST_STREAM``."""
TS_DONE: Final = 2**63 - 1
"""The port is closed: nothing more will come. The context timestamp during ``close``."""

INVALID_ID: Final = 2**64 - 1
"""Returned by port lookups that find nothing (C's ``(size_t)-1``)."""

_I64_MIN: Final = -(2**63)
_I64_MAX: Final = 2**63 - 1

_NAMES: Final = {
    TS_UNSET: "Unset",
    TS_UNSTARTED: "Unstarted",
    TS_PRE_STREAM: "PreStream",
    TS_POST_STREAM: "PostStream",
    TS_ONE_OVER_POST_STREAM: "OneOverPostStream",
    TS_DONE: "Done",
}


def next_allowed(ts: int) -> int:
    """The smallest timestamp that may follow ``ts`` in a stream."""
    if ts >= TS_MAX or ts == TS_PRE_STREAM:
        return TS_ONE_OVER_POST_STREAM
    if ts < TS_MIN:
        return TS_MIN
    return ts + 1


def previous_allowed(ts: int) -> int:
    """The largest timestamp that may precede ``ts`` in a stream."""
    if ts <= TS_MIN or ts == TS_POST_STREAM:
        return TS_UNSTARTED
    if ts > TS_MAX:
        return TS_MAX
    return ts - 1


def is_allowed_in_stream(ts: int) -> bool:
    """Whether a packet may carry ``ts`` (``PRE_STREAM`` through ``POST_STREAM``)."""
    return TS_PRE_STREAM <= ts <= TS_POST_STREAM


def is_range_value(ts: int) -> bool:
    """Whether ``ts`` is an ordinary timestamp (``MIN`` through ``MAX``)."""
    return TS_MIN <= ts <= TS_MAX


def is_i64(ts: int) -> bool:
    """Whether ``ts`` fits a signed 64-bit integer."""
    return _I64_MIN <= ts <= _I64_MAX


def saturating_add(ts: int, delta: int) -> int:
    """``ts + delta`` clamped to the signed 64-bit range."""
    return max(_I64_MIN, min(_I64_MAX, ts + delta))


def ts_name(ts: int) -> str:
    """The display form of a timestamp: a sentinel's name or the integer."""
    return _NAMES.get(ts, str(ts))
