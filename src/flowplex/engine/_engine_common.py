"""What every scheduler part shares: the shape of claimed work and the failure texts.

A leaf module (it imports no other engine module at run time), so that every part of the
engine (``_claims``, ``_delivery``, ``_closing``, ``_loop``...) can use it without a cycle.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Final, Protocol

if TYPE_CHECKING:
    from ..packets import Packet

class Submitter(Protocol):
    """What claimed work is handed to: a node's executor, or the engine's ``HANDOFF`` for a
    node whose executor hosts its kernel (``_handoff``)."""

    def submit(self, fn: Callable[[object], None], arg: object, /) -> None:
        """Run ``fn(arg)`` (now, or queued: the submitter's rule)."""

    def submit_background(self, fn: Callable[[object], None], arg: object, /) -> None:
        """Run ``fn(arg)`` on another thread than this one."""


Submission = tuple[Submitter, Callable[[object], None], object]
"""One claimed task: ``submitter.submit(task, arg)``, called once the engine lock is released."""
Calls = list[tuple[Callable[["Packet"], object], "Packet"]]
"""Observer calls collected under the lock, made after it is released."""
Work = tuple[list[Submission], Calls]
"""Claimed tasks and observer calls, to run outside the lock (``Admission.accept`` returns one)."""

_BYTES: Final = 1
_STR: Final = 5
_BUFFER: Final = 6
"""Type ids of the payloads that hold memory (bytes, str, buffers); ids from 5 up and 1 are
sized by ``payload_bytes``, the scalars (2..4) and empty packets (0) count as packets only:
the hot paths test ``tid >= _STR or tid == _BYTES`` before calling it."""


def payload_bytes(p: Packet) -> int:
    """The bytes a queued packet's payload holds, for ``limit_bytes``; O(1) for every kind.

    Buffers count their elements (``nbytes``), ``bytes`` their length and ``str`` its
    in-memory size (``sys.getsizeof``: O(1), and 4 bytes a character for text that needs
    them, where a UTF-8 re-encode would cost O(n) per packet). A custom type id counts its
    payload the same way by the payload's kind; the scalars count 0 (the packet limit bounds
    them). A payload never changes while it is queued, so a packet's take books what its add
    booked.
    """
    tid = p._tid
    value = p._value
    if tid == _BUFFER:
        return value.nbytes()  # type: ignore[attr-defined, no-any-return]
    if tid == _BYTES:
        return len(value)  # type: ignore[arg-type]
    if tid == _STR:
        return sys.getsizeof(value)
    return _other_bytes(value)


def _other_bytes(value: object) -> int:
    """``payload_bytes`` of a payload under a custom type id: by the payload's kind."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return len(value) if not isinstance(value, memoryview) else value.nbytes
    if isinstance(value, str):
        return sys.getsizeof(value)
    nbytes = getattr(value, "nbytes", None)
    if callable(nbytes):
        n = nbytes()
        return n if isinstance(n, int) else 0
    return 0


def _buffer_bytes(packets: tuple[Packet, ...] | list[Packet]) -> int:
    """Payload bytes of ``packets`` (``payload_bytes`` summed), for ``limit_bytes``.

    (The name is older than the rule: every payload kind that holds memory counts, not only
    buffers.)
    """
    total = 0
    for p in packets:
        tid = p._tid
        if tid >= _STR or tid == _BYTES:
            total += payload_bytes(p)
    return total


def _is_power_of_two(n: int) -> bool:
    """Rate-limits repeated warnings: log the 1st, 2nd, 4th, 8th, ... occurrence."""
    return n > 0 and n & (n - 1) == 0
