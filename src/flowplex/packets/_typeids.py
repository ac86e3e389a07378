"""Packet type ids: the built-in kinds, FNV-1a ids for custom types, and the descriptor registry.

Type ids are lm-flow's: ``0..6`` are the built-in payload kinds, ``7`` (HostObject) and
``8..15`` are rejected, and ids from 16 up name custom types by the FNV-1a hash of a stable
name. Custom ids must be registered with a descriptor before a contract or a packet may use them.
"""

from __future__ import annotations

import threading
from enum import IntEnum
from typing import Final, NamedTuple

from ..errors import UsageError

__all__ = [
    "TypeId",
    "register_type_descriptor",
    "type_align",
    "type_id",
    "type_name",
    "type_size",
    "validate_type_id",
]


class TypeId(IntEnum):
    """The built-in type ids (lm-flow's values, kept verbatim for wire compatibility).

    Members compare equal to plain ints, so ``packet.type_id == TypeId.I64`` works although
    ``Packet.type_id`` returns an ``int``.
    """

    NONE = 0
    """Undeclared / any. Also the ``type_id`` of an empty packet."""
    BYTES = 1
    I64 = 2
    F64 = 3
    BOOL = 4
    STR = 5
    BUFFER = 6
    HOST_OBJECT = 7
    """Reserved by lm-flow and rejected everywhere: Python objects do not travel between kernels."""


FIRST_CUSTOM_ID: Final = 16
"""The smallest id a custom type may have; ``8..15`` are reserved for future built-ins."""

_U64_MASK: Final = 2**64 - 1
_FNV_OFFSET_BASIS: Final = 0xCBF29CE484222325
_FNV_PRIME: Final = 0x100000001B3

_BUILTIN_NAMES: Final = (
    "any/undeclared",
    "Bytes",
    "I64",
    "F64",
    "Bool",
    "Str",
    "Buffer",
    "HostObject",
)


class _Descriptor(NamedTuple):
    name: str
    size: int
    align: int


# The registry is process-global (as in lm-flow). Lookups read the dict without the lock (a single
# dict.get is atomic under the GIL); registration decides under the lock so that two threads
# registering conflicting descriptors cannot both succeed.
_registry: dict[int, _Descriptor] = {}
_ids_by_name: dict[str, int] = {}
_registry_lock = threading.Lock()


def type_id(stable_name: str) -> int:
    """The 64-bit type id of a custom type: FNV-1a over the UTF-8 bytes of ``stable_name``.

    A hash below 16 is shifted up by 16 so that it never collides with a built-in id. The value
    is identical to lm-flow's, so ids agree across languages and processes.

    Args:
        stable_name: A name that does not depend on the toolchain, e.g. ``"acme.vision.Box"``.

    Returns:
        An id in ``16..2**64-1``.

    Raises:
        ValueError: ``stable_name`` is empty.
        TypeError: ``stable_name`` is not a ``str``.

    >>> hex(type_id("lmflow.test.Stable"))
    '0xbfb531b283179309'
    """
    if not isinstance(stable_name, str):
        msg = f"type_id: stable_name must be a str, got {type(stable_name).__name__}"
        raise TypeError(msg)
    if not stable_name:
        msg = "type_id: the stable name must not be empty"
        raise UsageError(msg)
    return _fnv1a(stable_name)


def _fnv1a(name: str) -> int:
    h = _FNV_OFFSET_BASIS
    for byte in name.encode("utf-8"):
        h = ((h ^ byte) * _FNV_PRIME) & _U64_MASK
    return h + FIRST_CUSTOM_ID if h < FIRST_CUSTOM_ID else h


def type_name(type_id: int) -> str:
    """The display name of a type id.

    Built-ins have fixed names (``"I64"``, ``"Buffer"``...; 0 is ``"any/undeclared"``), a
    registered custom id has its registered name, and anything else prints as ``"type#<id>"``.

    >>> type_name(2), type_name(0), type_name(12345)
    ('I64', 'any/undeclared', 'type#12345')
    """
    if 0 <= type_id < len(_BUILTIN_NAMES):
        return _BUILTIN_NAMES[type_id]
    desc = _registry.get(type_id)
    return desc.name if desc is not None else f"type#{type_id}"


def register_type_descriptor(type_id: int, name: str, size: int, align: int) -> None:
    """Register a custom type so that contracts and packets may use its id.

    Registering the identical descriptor again is a no-op, so modules can register at import
    time without coordinating. Thread-safe.

    Args:
        type_id: Must equal ``flowplex.packets.type_id(name)`` (hence ``>= 16``).
        name: The stable name the id was computed from.
        size: The shallow size of one value in bytes (``> 0``), used for byte accounting.
        align: The alignment in bytes, a power of two.

    Raises:
        ValueError: An argument is invalid, or a different descriptor is already registered for
            this id or this name.

    >>> tid = type_id("acme.doc.Point")
    >>> register_type_descriptor(tid, "acme.doc.Point", 16, 8)
    >>> type_name(tid), type_size(tid), type_align(tid)
    ('acme.doc.Point', 16, 8)
    """
    _check_u64(type_id, "register_type_descriptor: type_id")
    if type_id < FIRST_CUSTOM_ID:
        msg = (
            f"register_type_descriptor: type id {type_id} is built-in or reserved; custom ids are "
            f">= {FIRST_CUSTOM_ID} and come from type_id(name)"
        )
        raise UsageError(msg)
    if not isinstance(name, str) or not name:
        msg = "register_type_descriptor: name must be a non-empty str"
        raise UsageError(msg)
    if isinstance(size, bool) or not isinstance(size, int) or size <= 0:
        msg = f"register_type_descriptor({name!r}): size must be an int > 0, got {size!r}"
        raise UsageError(msg)
    if isinstance(align, bool) or not isinstance(align, int) or align <= 0 or align & (align - 1):
        msg = f"register_type_descriptor({name!r}): align must be a power of two, got {align!r}"
        raise UsageError(msg)
    expected = _fnv1a(name)
    if type_id != expected:
        msg = (
            f"register_type_descriptor({name!r}): type id {type_id} does not match "
            f"type_id({name!r}) = {expected}; pass type_id(name)"
        )
        raise UsageError(msg)
    new = _Descriptor(name, size, align)
    with _registry_lock:
        old = _registry.get(type_id)
        if old is None:
            _registry[type_id] = new
            _ids_by_name[name] = type_id
            return
    if old != new:
        msg = (
            f"register_type_descriptor({name!r}): type id {type_id} is already registered as "
            f"(name={old.name!r}, size={old.size}, align={old.align}); "
            f"got (size={size}, align={align})"
        )
        raise UsageError(msg)


def type_size(type_id: int) -> int:
    """The registered size of a custom type in bytes; 0 for built-ins and unregistered ids."""
    desc = _registry.get(type_id)
    return desc.size if desc is not None else 0


def type_align(type_id: int) -> int:
    """The registered alignment of a custom type in bytes; 0 for built-ins and unregistered ids."""
    desc = _registry.get(type_id)
    return desc.align if desc is not None else 0


def validate_type_id(type_id: int) -> None:
    """Check that a type id may appear in a contract or on a packet; raise if not.

    ``0..6`` are accepted, 7 (HostObject) and ``8..15`` are rejected, and custom ids must be
    registered. The engine calls this for contract declarations and runtime type checks.

    Raises:
        ValueError: The id is rejected; the message says why and what to do instead.

    >>> validate_type_id(6)
    >>> try:
    ...     validate_type_id(7)
    ... except ValueError as exc:
    ...     print(exc)  # doctest: +ELLIPSIS
    type id 7 (HostObject) is not supported: ...; send a Buffer (numpy array) or a Str holding JSON
    """
    _check_u64(type_id, "type id")
    if type_id <= TypeId.BUFFER:
        return
    if type_id == TypeId.HOST_OBJECT:
        msg = (
            "type id 7 (HostObject) is not supported: Python objects cannot travel between "
            "kernels; send a Buffer (numpy array) or a Str holding JSON"
        )
        raise UsageError(msg)
    if type_id < FIRST_CUSTOM_ID:
        msg = f"type id {type_id} is reserved for future built-in types; custom ids come from type_id(name)"
        raise UsageError(msg)
    if type_id not in _registry:
        msg = (
            f"type id {type_id} is not registered; call "
            "register_type_descriptor(type_id(name), name, size, align) first"
        )
        raise UsageError(msg)


def _check_u64(value: object, what: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        msg = f"{what} must be an int, got {type(value).__name__}"
        raise TypeError(msg)
    if not 0 <= value <= _U64_MASK:
        msg = f"{what} must be in 0..2**64-1, got {value}"
        raise UsageError(msg)
