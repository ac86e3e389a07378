"""Typed, dot-path access to a node's ``options`` subtree (lm-flow's getter rules)."""

from __future__ import annotations

import json
import math

from .._types import OptionValue

_MISSING = object()


def lookup(options: OptionValue, key: str) -> object:
    """The value at dot path ``key`` (``"roi.x"``), or ``_MISSING``."""
    node: object = options
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return _MISSING
        node = node[part]
    return node


def is_missing(value: object) -> bool:
    """Whether ``lookup`` found nothing."""
    return value is _MISSING


def as_int(value: object) -> int | None:
    """An int option (YAML ints only: floats and bools are not converted)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return None


def as_float(value: object) -> float | None:
    """A float option (YAML floats and ints, ``scale: 2`` reads as 2.0)."""
    if isinstance(value, float):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return None


def as_bool(value: object) -> bool | None:
    """A bool option (YAML booleans only)."""
    return value if isinstance(value, bool) else None


def as_str(value: object) -> str | None:
    """A string option (YAML strings only)."""
    return value if isinstance(value, str) else None


def int_array(value: object) -> list[int]:
    """A list of ints; non-numeric items read as 0 (lm-flow's rule); missing → ``[]``."""
    if not isinstance(value, list):
        return []
    out = []
    for item in value:
        if isinstance(item, bool):
            out.append(0)
        elif isinstance(item, int):
            out.append(item)
        elif isinstance(item, float) and math.isfinite(item):
            out.append(int(item))
        else:
            out.append(0)
    return out


def float_array(value: object) -> list[float]:
    """A list of floats; non-numeric items read as 0.0; missing → ``[]``."""
    if not isinstance(value, list):
        return []
    return [as_float(item) or 0.0 for item in value]


def str_array(value: object) -> list[str]:
    """A list of strings; non-string items read as ``""``; missing → ``[]``."""
    if not isinstance(value, list):
        return []
    return [item if isinstance(item, str) else "" for item in value]


def to_json(options: OptionValue) -> str:
    """The whole options subtree as JSON; ``"{}"`` when there are none."""
    if options is None:
        return "{}"
    return json.dumps(options, sort_keys=False, separators=(",", ":"))
