"""Argument checks for the public graph API: normalise once, at the edge, before any state check.

Every public method that takes a timeout, a port name, a timestamp or a count calls one of
these first, so a wrong argument is reported as what it is (``TypeError`` for a wrong type,
``UsageError``, a ``ValueError``, for a wrong value) whatever state the graph is in, and the message names the
method and the argument: ``wait_done: timeout must be a number of seconds or None, got str``.

Compatibility with lm-flow (whose pybind11 binding converts arguments before it looks at the
graph): wrong types raise ``TypeError`` as there; a negative timeout means "do not wait" (lm-flow
accepts it) except in ``run_async``, which rejects it with a ``ValueError`` as lm-flow does. Where
the binding silently converts something that is a mistake in Python (``True`` as a timeout, a
timestamp or a count; ``bytes`` as a port name; NaN seconds), flowplex raises instead.
"""

from __future__ import annotations

import math
import numbers
import operator
from collections.abc import Callable
from typing import Literal, overload

from ..errors import UsageError

__all__ = [
    "check_callback",
    "check_count",
    "check_flag",
    "check_grace",
    "check_int",
    "check_name",
    "check_timeout",
    "check_ts",
]


def _kind(value: object) -> str:
    return type(value).__name__


def _seconds(value: object, what: str, name: str, allowed: str) -> float:
    # bool is an int, but `timeout=True` is always a slip: refuse it like any other non-number.
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        msg = f"{what}: {name} must be {allowed}, got {_kind(value)}"
        raise TypeError(msg)
    seconds = float(value)
    if math.isnan(seconds):
        msg = f"{what}: {name} must be {allowed}, got NaN"
        raise UsageError(msg)
    return seconds


def check_timeout(value: object, what: str, name: str = "timeout") -> float | None:
    """A blocking call's timeout: ``None`` (wait without a deadline) or seconds.

    A negative timeout is treated as 0 (poll once, then time out), as lm-flow does; infinity
    is the same as ``None``.

    Raises:
        TypeError: ``value`` is not a real number (``bool`` included) nor ``None``.
        UsageError: ``value`` is NaN.
    """
    if value is None:
        return None
    seconds = _seconds(value, what, name, "a number of seconds or None")
    if seconds == math.inf:
        return None
    return max(0.0, seconds)


@overload
def check_grace(value: object, what: str, name: str, *, optional: Literal[False]) -> float: ...
@overload
def check_grace(value: object, what: str, name: str, *, optional: Literal[True]) -> float | None: ...
def check_grace(value: object, what: str, name: str, *, optional: bool) -> float | None:
    """``run_async``'s ``timeout`` (``optional``) and ``cancel_grace``: seconds >= 0.

    Raises:
        TypeError: ``value`` is not a real number (nor ``None`` where ``optional``).
        UsageError: ``value`` is negative or NaN (lm-flow rejects negative values too).
    """
    if value is None and optional:
        return None
    allowed = "a number of seconds >= 0 or None" if optional else "a number of seconds >= 0"
    seconds = _seconds(value, what, name, allowed)
    if seconds < 0:
        msg = f"{what}: {name} must be >= 0, got {seconds:g}"
        raise UsageError(msg)
    if seconds == math.inf and optional:
        return None
    return seconds


def check_name(value: object, what: str, name: str = "port") -> str:
    """A port, side-packet or counter name: a ``str``.

    Raises:
        TypeError: ``value`` is not a ``str`` (``bytes`` included).
    """
    if not isinstance(value, str):
        msg = f"{what}: {name} must be a str, got {_kind(value)}"
        raise TypeError(msg)
    return value


def check_ts(value: object, what: str) -> int | None:
    """A timestamp: ``None`` (unset) or an integer (numpy integers included).

    The range (signed 64 bits) is checked where the packet is made, with the value in the
    message.

    Raises:
        TypeError: ``value`` is not an integer (``bool`` included) nor ``None``.
    """
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        msg = f"{what}: ts must be an int timestamp or None, got {_kind(value)}"
        raise TypeError(msg)
    return operator.index(value)


def check_int(value: object, what: str, name: str) -> int:
    """An integer argument (numpy integers included), its range checked by the caller.

    Raises:
        TypeError: ``value`` is not an integer (``bool`` included).
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        msg = f"{what}: {name} must be an int, got {_kind(value)}"
        raise TypeError(msg)
    return operator.index(value)


def check_count(value: object, what: str, name: str, *, minimum: int = 0) -> int:
    """A count such as ``max_steps``: an integer >= ``minimum``.

    Raises:
        TypeError: ``value`` is not an integer (``bool`` included).
        UsageError: ``value`` is below ``minimum``.
    """
    count = check_int(value, what, name)
    if count < minimum:
        msg = f"{what}: {name} must be >= {minimum}, got {count}"
        raise UsageError(msg)
    return count


def check_flag(value: object, what: str, name: str) -> bool:
    """A keyword switch such as ``observe_timestamp_bounds``: a ``bool``.

    Raises:
        TypeError: ``value`` is not a ``bool`` (lm-flow's binding refuses other types too).
    """
    if not isinstance(value, bool):
        msg = f"{what}: {name} must be True or False, got {_kind(value)}"
        raise TypeError(msg)
    return value


def check_callback(value: object, what: str, name: str = "fn") -> Callable[..., object]:
    """A callback: anything callable.

    Raises:
        TypeError: ``value`` is not callable.
    """
    if not callable(value):
        msg = f"{what}: {name} must be callable, got {_kind(value)}"
        raise TypeError(msg)
    return value
