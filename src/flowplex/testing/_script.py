"""A ``ScriptedSource``'s script: Python items, their YAML encoding, and the parsed steps.

The script travels as node options (a process pool ships options, not objects), so every item
has a YAML form::

    script:
      - 1                          # I64 (2.5: F64, "hi": Str, true: Bool)
      - [1, 2, 3]                  # a numpy array: int64, or float64 when any item is a float
      - {value: [1, 2], dtype: float32}
      - {bytes: "6869"}            # Bytes, written in hex
      - {value: 3, ts: 10}         # at timestamp 10 (``At(10, 3)``)
      - {gap: 0.1}                 # wait 0.1 s without holding a worker (``Gap(0.1)``)
      - {fail: boom}               # raise: the graph fails naming the node (``Fail("boom")``)
      - {end: true}                # stop here (``EndOfStream()``); implied after the last item

``encode_item`` writes the Python items in that form and ``parse_script`` reads it back into
``Step``s, checking each entry so that a mistake names its path (``nodes[0].options.script[3]``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, final

import numpy as np

from .._suggest import did_you_mean
from ..errors import ConfigError, EndOfStream, UsageError

__all__ = ["At", "Fail", "Gap", "Step", "Where", "encode_item", "encode_script", "parse_script"]

MARKERS: Final = ("value", "bytes", "gap", "fail", "end")
"""The keys that make a mapping a script entry (exactly one per entry)."""
EXTRA: Final = {"value": ("ts", "dtype"), "bytes": ("ts",), "gap": (), "fail": (), "end": ()}
"""The keys each marker may come with."""
_I64_MIN: Final = -(2**63)
_I64_MAX: Final = 2**63 - 1


@final
@dataclass(frozen=True, slots=True)
class At:
    """A script value sent at an explicit timestamp ``ts``; later plain values count on from it."""

    ts: int
    value: object


@final
@dataclass(frozen=True, slots=True)
class Gap:
    """A pause of ``seconds`` in a script; the source yields, so no worker waits with it."""

    seconds: float


@final
@dataclass(frozen=True, slots=True)
class Fail:
    """A script step that raises ``RuntimeError(message)`` in the source: the graph fails, naming the node."""

    message: str = "scripted failure"


@final
@dataclass(frozen=True, slots=True)
class Step:
    """One parsed script entry: ``kind`` is ``emit``, ``gap``, ``fail`` or ``end``."""

    kind: str
    value: object = None
    """The packet value (``emit``), the seconds (``gap``) or the message (``fail``)."""
    ts: int = 0
    """The timestamp of an ``emit``."""


# -- Python items -> YAML ---------------------------------------------------------------------


def _encode_value(value: object, where: str) -> object:
    if isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, bytes | bytearray | memoryview):
        return {"bytes": bytes(value).hex()}
    if isinstance(value, np.ndarray):
        return {"value": value.tolist(), "dtype": str(value.dtype)}
    if isinstance(value, list | tuple) and all(isinstance(v, int | float) and not isinstance(v, bool)
                                                 for v in value):
        return list(value)
    msg = (f"{where}: cannot script a {type(value).__name__} value ({value!r}); expected int, float, str, bool, "
           f"bytes, a list of numbers, a numpy array, At, Gap, Fail or EndOfStream()")
    raise UsageError(msg)


def encode_item(item: object, where: str = "item") -> object:
    """The YAML form of one Python script item (see the module docstring)."""
    if isinstance(item, Gap):
        return {"gap": item.seconds}
    if isinstance(item, Fail):
        return {"fail": item.message}
    if isinstance(item, EndOfStream) or item is EndOfStream:
        return {"end": True}
    if isinstance(item, At):
        encoded = _encode_value(item.value, where)
        entry = dict(encoded) if isinstance(encoded, dict) else {"value": encoded}
        entry["ts"] = item.ts
        return entry
    return _encode_value(item, where)


def encode_script(items: Iterable[object]) -> list[object]:
    """The YAML form of a whole script; each bad item is named by its index (``items[3]``)."""
    return [encode_item(item, f"items[{i}]") for i, item in enumerate(items)]


# -- YAML -> steps ----------------------------------------------------------------------------


@final
@dataclass(frozen=True, slots=True)
class Where:
    """Where a value was written: its path, then the node it belongs to (the message prefix)."""

    path: str
    node: str = ""

    def at(self, suffix: str) -> Where:
        """The place of a part of this value (``.ts``, ``[3]``)."""
        return Where(self.path + suffix, self.node)

    def __str__(self) -> str:
        return f"{self.path}{self.node}"


def _number_list(value: list[object], where: Where, dtype: object = None) -> np.ndarray:
    """A list of numbers (nested for more dimensions) as a numpy array, of ``dtype`` when given."""
    if any(isinstance(v, bool) or not isinstance(v, int | float | list) for v in value):
        msg = f"{where}: a list must hold numbers only (it becomes an array), got {value!r}"
        raise ConfigError(msg)
    want: np.dtype | None = None
    if dtype is not None:
        try:
            want = np.dtype(str(dtype))
        except TypeError:
            want = None
        if want is None or want.kind not in "iuf":
            msg = f"{where}: dtype {dtype!r} is not a numeric numpy dtype (int32, float32, uint8...)"
            raise ConfigError(msg)
    try:
        arr = np.array(value, dtype=want)
    except (TypeError, ValueError) as exc:
        msg = f"{where}: cannot make an array of {value!r}: {exc}"
        raise ConfigError(msg) from None
    if arr.dtype.kind not in "iuf":
        msg = f"{where}: a list must hold numbers only (it becomes an array), got {value!r}"
        raise ConfigError(msg)
    return arr


def _value(raw: object, where: Where, dtype: object = None) -> object:
    if isinstance(raw, list):
        return _number_list(raw, where, dtype)
    if dtype is not None:
        msg = f"{where}: dtype applies to a list of numbers, not to {raw!r}"
        raise ConfigError(msg)
    if isinstance(raw, int) and not isinstance(raw, bool) and not _I64_MIN <= raw <= _I64_MAX:
        msg = f"{where}: {raw} does not fit a 64-bit integer"
        raise ConfigError(msg)
    if isinstance(raw, bool | int | float | str):
        return raw
    msg = f"{where}: expected a number, a string, a bool or a list of numbers, got {type(raw).__name__} {raw!r}"
    raise ConfigError(msg)


def _entry(raw: Mapping[object, object], where: Where) -> tuple[str, object, int | None]:
    """A mapping entry as (kind, value, explicit ts)."""
    keys = [str(k) for k in raw]
    markers = [k for k in keys if k in MARKERS]
    if len(markers) != 1:
        unknown = [k for k in keys if k not in MARKERS and k not in ("ts", "dtype")]
        hint = did_you_mean(unknown[0], MARKERS) if unknown else ""
        found = f"keys {', '.join(keys)}" if keys else "an empty mapping"
        msg = f"{where}: an entry needs exactly one of {', '.join(MARKERS)}, got {found}{hint}"
        raise ConfigError(msg)
    kind = markers[0]
    extra = [k for k in keys if k != kind and k not in EXTRA[kind]]
    if extra:
        allowed = EXTRA[kind]
        tail = f" (it takes {', '.join(allowed)})" if allowed else ""
        msg = f"{where}: `{kind}` does not take `{extra[0]}`{tail}{did_you_mean(extra[0], allowed)}"
        raise ConfigError(msg)
    body = raw[kind]
    ts = raw.get("ts")
    if ts is not None and (not isinstance(ts, int) or isinstance(ts, bool) or not _I64_MIN < ts < _I64_MAX):
        msg = f"{where.at('.ts')}: expected an integer timestamp, got {ts!r}"
        raise ConfigError(msg)
    if kind == "value":
        return "emit", _value(body, where.at(".value"), raw.get("dtype")), ts
    if kind == "bytes":
        if not isinstance(body, str):
            msg = f"{where.at('.bytes')}: expected hex text (\"6869\" for b'hi'), got {body!r}"
            raise ConfigError(msg)
        try:
            return "emit", bytes.fromhex(body), ts
        except ValueError:
            msg = f"{where.at('.bytes')}: {body!r} is not hex text (\"6869\" for b'hi')"
            raise ConfigError(msg) from None
    if kind == "gap":
        if not isinstance(body, int | float) or isinstance(body, bool) or not math.isfinite(body) or body < 0:
            msg = f"{where.at('.gap')}: expected seconds >= 0, got {body!r}"
            raise ConfigError(msg)
        return "gap", float(body), None
    if kind == "fail":
        return "fail", "scripted failure" if body is None else str(body), None
    if body is not True:
        msg = f"{where.at('.end')}: write `end: true`, got {body!r}"
        raise ConfigError(msg)
    return "end", None, None


def _int_option(options: Mapping[object, object], key: str, default: int, where: Where) -> int:
    value = options.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool):
        msg = f"{where.at('.' + key)}: expected an integer, got {value!r}"
        raise ConfigError(msg)
    return value


def parse_script(options: object, path: str, node: str = "") -> list[Step]:
    """The steps of a ``ScriptedSource``'s options (``script``, ``start``, ``step``).

    Every message starts with the entry's place: ``path`` (the options', ``nodes[0].options``)
    extended to the entry, then ``node`` (`` (node `src`)``). Timestamps must increase
    strictly, as on any port.

    Raises:
        ConfigError: An entry, ``start`` or ``step`` is malformed, or a timestamp does not increase.
    """
    where = Where(path, node)
    if options is None:
        options = {}
    if not isinstance(options, Mapping):
        msg = f"{where}: expected a mapping with `script`, got {options!r}"
        raise ConfigError(msg)
    unknown = [str(k) for k in options if k not in ("script", "start", "step")]
    if unknown:
        msg = (f"{where}: unknown option `{unknown[0]}`{did_you_mean(unknown[0], ('script', 'start', 'step'))} "
               f"(ScriptedSource takes script, start, step)")
        raise ConfigError(msg)
    start = _int_option(options, "start", 0, where)
    step = _int_option(options, "step", 1, where)
    if step < 1:
        msg = f"{where.at('.step')}: timestamps must increase, so step must be >= 1, got {step}"
        raise ConfigError(msg)
    script = options.get("script", [])
    if not isinstance(script, Sequence) or isinstance(script, str):
        msg = f"{where.at('.script')}: expected a list of entries, got {script!r}"
        raise ConfigError(msg)
    steps: list[Step] = []
    next_ts = start
    last: int | None = None
    for i, raw in enumerate(script):
        at = where.at(f".script[{i}]")
        if isinstance(raw, Mapping):
            kind, value, ts = _entry(raw, at)
        else:
            kind, value, ts = "emit", _value(raw, at), None
        if kind != "emit":
            steps.append(Step(kind, value))
            continue
        ts = next_ts if ts is None else ts
        if last is not None and ts <= last:
            msg = f"{at}: timestamp {ts} does not increase (the previous value was at {last})"
            raise ConfigError(msg)
        steps.append(Step("emit", value, ts))
        last, next_ts = ts, ts + step
    return steps
