"""Packets: timestamped, immutable-once-shared values, with lm-flow's type ids and debug strings.

Ownership model:

1. A packet handle = shared payload + shared metadata map + its own timestamp + an *owned* flag.
2. The engine shares one handle among all consumers of a fan-out, marks it borrowed and never
   mutates it; mutators (``make_mutable``, metadata setters, ``timestamp =``) on it raise.
3. ``take_input`` hands the kernel an owned ``clone_owned`` handle and drops the engine's own.
4. ``make_mutable`` writes in place only when the payload is exclusively held (one handle, no
   outside reference to the array); otherwise it copies once and repoints just this handle.
5. Adopted numpy arrays are read-only while any packet holds them; the last release restores them.

For the engine: ``to_packet``, ``clone_owned``, ``validate_type_id`` and, with underscore names,
``_new`` (unchecked constructor), ``_borrow``, ``_byte_size`` and ``_thread_cow_counts``. Engine
code may read the slots ``_value`` (None when empty), ``_tid``, ``_ts`` and ``_owned`` directly,
and write ``_ts`` and ``_owned``.
"""

from __future__ import annotations

from ._buffers import CowStats as CowStats
from ._buffers import DType as DType
from ._buffers import _thread_cow_counts as _thread_cow_counts
from ._buffers import cow_stats as cow_stats
from ._buffers import dtype_size as dtype_size
from ._packet import Packet as Packet
from ._packet import _borrow as _borrow
from ._packet import _byte_size as _byte_size
from ._packet import _new as _new
from ._packet import clone_owned as clone_owned
from ._packet import new_buffer as new_buffer
from ._packet import to_packet as to_packet
from ._typeids import TypeId as TypeId
from ._typeids import register_type_descriptor as register_type_descriptor
from ._typeids import type_align as type_align
from ._typeids import type_id as type_id
from ._typeids import type_name as type_name
from ._typeids import type_size as type_size
from ._typeids import validate_type_id as validate_type_id

__all__ = [
    "CowStats",
    "DType",
    "Packet",
    "TypeId",
    "clone_owned",
    "cow_stats",
    "dtype_size",
    "new_buffer",
    "register_type_descriptor",
    "to_packet",
    "type_align",
    "type_id",
    "type_name",
    "type_size",
    "validate_type_id",
]
