"""The process-wide log callback (lm-flow's ``set_log_callback``) on top of ``logging``.

flowplex logs through the standard ``logging`` module under the ``flowplex`` logger and never
installs handlers itself; ``set_log_callback`` is the lm-flow-compatible way to receive the
same messages as ``fn(level, message)`` with lm-flow's level numbers.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from enum import IntEnum
from typing import Final

__all__ = ["LogLevel", "set_log_callback"]


class LogLevel(IntEnum):
    """lm-flow's log levels."""

    ERROR = 0
    WARN = 1
    INFO = 2
    DEBUG = 3


_TO_PY: Final = {0: logging.ERROR, 1: logging.WARNING, 2: logging.INFO, 3: logging.DEBUG}

_root = logging.getLogger("flowplex")
_kernel_log = logging.getLogger("flowplex.kernel")
_lock = threading.Lock()


def _from_py(levelno: int) -> int:
    if levelno >= logging.ERROR:
        return LogLevel.ERROR
    if levelno >= logging.WARNING:
        return LogLevel.WARN
    if levelno >= logging.INFO:
        return LogLevel.INFO
    return LogLevel.DEBUG


class _CallbackHandler(logging.Handler):
    def __init__(self, fn: Callable[[int, str], object]) -> None:
        super().__init__(logging.DEBUG)
        self.fn = fn

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.fn(_from_py(record.levelno), record.getMessage())
        except Exception:  # a failing callback must never break the engine
            self.handleError(record)


_handler: _CallbackHandler | None = None
_saved_level = logging.NOTSET


def set_log_callback(fn: Callable[[int, str], object] | None) -> None:
    """Send every flowplex log message to ``fn(level, message)``; ``None`` removes it.

    The callback runs on whichever thread logs; it must not call graph APIs.
    """
    global _handler, _saved_level
    with _lock:
        if _handler is not None:
            _root.removeHandler(_handler)
            _root.setLevel(_saved_level)
            _handler = None
        if fn is not None:
            _handler = _CallbackHandler(fn)
            _saved_level = _root.level
            _root.setLevel(logging.DEBUG)
            _root.addHandler(_handler)


def kernel_log(level: int, message: str) -> None:
    """A kernel's ``ctx.log``: forwarded at the matching ``logging`` level."""
    pylevel = _TO_PY.get(level, logging.INFO)
    if _kernel_log.isEnabledFor(pylevel):
        _kernel_log.log(pylevel, "%s", message)
