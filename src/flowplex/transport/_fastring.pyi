"""Type stub of the optional C hot paths (see ``_fastring.c``)."""

from collections.abc import Callable
from mmap import mmap
from typing import Any

SLOT_SIZE: int
PAYLOAD_SIZE: int
MAX_ESCAPE: int
FLAG_CONTINUES: int
FLAG_FIRST: int
FLAG_TEXT: int
L_EXTRA_SLOTS: int
L_FRAGMENTED: int
L_PRODUCER_HWM: int
L_HEAD: int
L_CONSUMER_EXTRA: int
L_REASSEMBLED: int

class Lane:
    head: int
    avail: int
    base: int
    tail_i: int
    head_i: int
    index: int
    words: int
    next_msg: int
    slots: Any

class Writer:
    tail: int
    limit: int
    extra: int
    guard: int
    def __init__(self, mm: mmap, base: int, tail_off: int, lane_off: int, mask: int, lane: int) -> None: ...
    def bind(self, py_send: Callable[..., bool], /) -> None: ...
    def send(
        self,
        data: bytes | str,
        *,
        stream_id: int = 0,
        agent_type: int = 2,
        timestamp_ns: int | None = None,
        timeout: float | None = None,
    ) -> bool: ...

class Reader:
    cur: Lane
    solo: bool
    def __init__(self, mm: mmap, mask: int, message: type, agents: tuple[Any, ...], lane: Lane) -> None: ...
    def bind(self, py_recv: Callable[..., Any], /) -> None: ...
    def recv(self, timeout: float | None = None) -> Any: ...

def guard_register(mm: mmap, /) -> int: ...
def guard_unregister(token: int, /) -> None: ...
def guard_tripped(token: int, /) -> bool: ...
