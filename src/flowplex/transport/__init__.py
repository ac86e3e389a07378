"""Shared-memory transport: a ring buffer of fixed slots for streaming many agents' output.

Perdix (``perdix-semantics.md``) done right: many producers (threads or processes) send into
one consumer through ``/dev/shm``, nothing is lost without being counted, long messages are
fragmented and reassembled, dead peers turn into ``BrokenError`` instead of hangs, and the
Perdix ANSI formatting is reproduced byte for byte, on the CPU or (extra ``cuda``) on the GPU.

>>> from flowplex.transport import Ring
>>> with Ring.create(capacity=16) as ring:
...     producer, consumer = ring.producer(), ring.consumer()
...     producer.send("hi ERROR", agent_type=AgentType.ERROR)
...     format_ansi(consumer.recv(timeout=1))
True
b'\\x1b[31m[ERROR] \\x1b[0mhi \\x1b[91mERROR\\x1b[0m\\x1b[0m'
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._batch import make_batch as make_batch
    from ._batch import messages_from_rows as messages_from_rows
    from ._consumer import Consumer as Consumer
    from ._format import AgentType as AgentType
    from ._format import format_ansi as format_ansi
    from ._gpu import GpuFormatter as GpuFormatter
    from ._layout import FLAG_CONTINUES as FLAG_CONTINUES
    from ._layout import FLAG_FIRST as FLAG_FIRST
    from ._layout import FLAG_TEXT as FLAG_TEXT
    from ._layout import FLAG_TRUNCATED as FLAG_TRUNCATED
    from ._layout import PAYLOAD_SIZE as PAYLOAD_SIZE
    from ._layout import SLOT_DTYPE as SLOT_DTYPE
    from ._layout import SLOT_SIZE as SLOT_SIZE
    from ._message import Message as Message
    from ._message import RingStats as RingStats
    from ._producer import Producer as Producer
    from ._ring import FullPolicy as FullPolicy
    from ._ring import Ring as Ring

__all__ = [
    "FLAG_CONTINUES",
    "FLAG_FIRST",
    "FLAG_TEXT",
    "FLAG_TRUNCATED",
    "PAYLOAD_SIZE",
    "SLOT_DTYPE",
    "SLOT_SIZE",
    "AgentType",
    "Consumer",
    "FullPolicy",
    "GpuFormatter",
    "Message",
    "Producer",
    "Ring",
    "RingStats",
    "format_ansi",
    "make_batch",
    "messages_from_rows",
]

_HOMES = {
    "make_batch": "_batch",
    "messages_from_rows": "_batch",
    "Consumer": "_consumer",
    "AgentType": "_format",
    "format_ansi": "_format",
    "GpuFormatter": "_gpu",
    "FLAG_CONTINUES": "_layout",
    "FLAG_FIRST": "_layout",
    "FLAG_TEXT": "_layout",
    "FLAG_TRUNCATED": "_layout",
    "PAYLOAD_SIZE": "_layout",
    "SLOT_DTYPE": "_layout",
    "SLOT_SIZE": "_layout",
    "Message": "_message",
    "RingStats": "_message",
    "Producer": "_producer",
    "FullPolicy": "_ring",
    "Ring": "_ring",
}
"""Where each public name lives. They load on first use, so that what needs one small part (the
agent terminal reads ``AgentType``) does not load the ring, numpy and the C path with it."""


def __getattr__(name: str) -> object:
    home = _HOMES.get(name)
    if home is None:
        msg = f"module 'flowplex.transport' has no attribute {name!r}"
        raise AttributeError(msg)
    value = getattr(import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value
