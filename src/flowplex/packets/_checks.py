"""Packets' payload kinds as plain ints, and the checks and messages they share.

Kept apart from ``_packet`` (the ``Packet`` class and its engine constructors): the range
checks for timestamps and ints, metadata keys and values, ``new_buffer``'s shape, the errors
that name what a packet holds and how to read it, and lm-flow's debug text of a payload.
``_packet`` imports these names; nothing here needs the ``Packet`` class itself.
"""

from __future__ import annotations

import json
import operator
import sys
from collections.abc import Sequence
from typing import Final, NoReturn, SupportsIndex

from .._types import MetadataValue
from ..errors import UsageError
from ._buffers import DType, _Buffer
from ._typeids import type_name

# Type ids as plain ints for fast comparisons. An empty packet has type id 0 and payload None.
_NONE: Final = 0
_BYTES: Final = 1
_I64: Final = 2
_F64: Final = 3
_BOOL: Final = 4
_STR: Final = 5
_BUFFER: Final = 6

_I64_MIN: Final = -(2**63)
_I64_MAX: Final = 2**63 - 1

_READERS: Final = {
    _BYTES: "as_bytes()",
    _I64: "as_int()",
    _F64: "as_float()",
    _BOOL: "as_bool()",
    _STR: "as_str()",
}


def _is_numpy(value: object, *names: str) -> bool:
    """Whether ``value`` is an instance of one of numpy's types ``names`` (False without numpy)."""
    np = sys.modules.get("numpy")
    return np is not None and isinstance(value, tuple(getattr(np, name) for name in names))


def _normalise_shape(shape: SupportsIndex | Sequence[SupportsIndex]) -> tuple[int, ...]:
    seq = shape if isinstance(shape, Sequence) else (shape,)
    try:
        dims = tuple(map(operator.index, seq))
    except TypeError:
        msg = f"new_buffer: shape must be an int or a sequence of ints, got {shape!r}"
        raise TypeError(msg) from None
    if not 1 <= len(dims) <= 8:
        msg = f"new_buffer: unsupported ndim {len(dims)}: buffers have 1 to 8 dimensions"
        raise UsageError(msg)
    if any(d < 0 for d in dims):
        msg = f"new_buffer: dimensions must be >= 0, got {dims}"
        raise UsageError(msg)
    return dims


def _check_ts(ts: SupportsIndex) -> int:
    try:
        value = operator.index(ts)
    except TypeError:
        msg = f"timestamp must be an int, got {type(ts).__name__}"
        raise TypeError(msg) from None
    if not _I64_MIN <= value <= _I64_MAX:
        msg = f"timestamp {value} does not fit a signed 64-bit int"
        raise UsageError(msg)
    return value


def _check_i64(value: int, where: str) -> int:
    if not _I64_MIN <= value <= _I64_MAX:
        msg = (
            f"{where}: int {value} does not fit a signed 64-bit I64 packet (-2**63..2**63-1); "
            "send it as a str or a float"
        )
        raise UsageError(msg)
    return value


def _check_key(key: object) -> None:
    if not isinstance(key, str):
        msg = f"metadata key must be a str, got {type(key).__name__}"
        raise TypeError(msg)
    if not key:
        msg = "metadata key must not be empty"
        raise UsageError(msg)


def _metadata_value(key: str, value: object) -> MetadataValue:
    # bool before int: bool is an int subclass.
    if isinstance(value, bool) or _is_numpy(value, "bool_"):
        return bool(value)
    if isinstance(value, int) or _is_numpy(value, "integer"):
        return _check_i64(int(value), f"set_metadata({key!r})")  # type: ignore[call-overload]
    if isinstance(value, float) or _is_numpy(value, "floating"):
        return float(value)  # type: ignore[arg-type]
    if isinstance(value, str):
        return str.__str__(value)
    msg = f"set_metadata({key!r}): value must be bool, int, float or str, got {type(value).__name__}"
    raise TypeError(msg)


def _raise_borrowed(op: str) -> NoReturn:
    msg = (
        f"{op}: packet is borrowed (the engine still holds it and may share it with other "
        "consumers); take it with ctx.take_input(i) first"
    )
    raise UsageError(msg)


def _raise_not_buffer(op: str, tid: int, value: object) -> NoReturn:
    """``op`` needs a buffer packet; the packet (type id ``tid``) holds ``value``."""
    if value is None:
        msg = f"{op} works on buffer packets; this packet is empty"
    else:
        reader = _READERS.get(tid)
        hint = f" (read it with {reader})" if reader else ""
        msg = f"{op} works on buffer packets; this packet holds {type_name(tid)}{hint}"
    raise UsageError(msg)


def _describe(tid: int, v: object) -> str:
    """The ``<T>`` part of lm-flow's debug string (section 4.9) of a packet of type ``tid``
    holding ``v``."""
    if v is None:
        return "Empty"
    if tid == _I64:
        return f"I64({v})"
    if tid == _F64:
        return f"F64({v!r})"
    if tid == _BOOL:
        return "Bool(true)" if v else "Bool(false)"
    if tid == _STR:
        return f"Str({json.dumps(v, ensure_ascii=False)})"
    if tid == _BYTES:
        return f"Bytes[{len(v)}]"  # type: ignore[arg-type]
    if tid == _BUFFER:
        h: _Buffer = v  # type: ignore[assignment]
        text = f"Buffer[{'x'.join(map(str, h.shape))}] dtype={DType(h.code).name}"
        if h.external:
            text += " external"
        if h.device != "cpu":
            text += f" device={h.device}"
        return text
    if tid == _NONE:
        return "Native"
    return f"Foreign({type_name(tid)})"
