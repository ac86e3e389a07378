"""Invocations and outcomes as pipe messages whose frames stay in the shared-memory arena.

The codec pickles a message with its buffers out of band; here each buffer of a page or more
travels as a reference into the arena: one already there (a frame a worker made with
``new_buffer``, a packet that crossed before) is not copied at all, any other is written into a
fresh block once. Smaller buffers travel inside the message, where copying them costs less than
arranging shared memory. The sender credits the receiver with a hold on every block it refers
to, so a block outlives the sender's interest in it until the receiver has its own.

Whether the receiver may write a buffer in place is decided by the sender, with the rule of one
process: only when the packet was the only handle of its payload and nothing else referred to
the array (``sole_holder``); a copy the message itself made (inline, or written into the arena)
is the receiver's alone. Otherwise the receiver's array is read-only and ``make_mutable``
copies it once.

The frame is the codec's one layout (``hosted._codec``): an arena buffer is a ``SHARED``
reference (its offset and length), a small one ``INLINE``; the flags byte says ``PARTIAL`` for
a partial outcome, which the receiver must know before it decodes one.
"""

from __future__ import annotations

import pickle
import sys
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Final

from ...errors import UsageError
from ...packets._buffers import _Buffer, host_array, is_deferred, wrap_adopted, wrap_owned
from ...packets._packet import sole_holder
from .._invocation import Invocation, Outcome
from ..hosted import _codec as codec
from ._arena import PAGE, rooted

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from ...packets import Packet
    from ._arena import Arena

__all__ = ["decode_invocation", "decode_outcome", "encode_invocation", "encode_outcome", "is_partial"]

PARTIAL: Final = 1
"""The flag of a frame that holds a partial outcome (``Outcome.partial``)."""


def encode_invocation(invocation: Invocation, arena: Arena, to_slot: int) -> bytes:
    """``invocation`` as one message for the worker of arena slot ``to_slot``.

    Raises:
        UsageError: Something in it does not pickle, or the arena has no room (after waiting).
    """
    packets: list[Packet | None] = list(invocation.inputs)
    for port in invocation.batch or ():
        packets.extend(port)
    reducers = _reducers(arena, packets, to_slot)
    del packets
    if reducers is None:
        return _plain(invocation)
    return _frame(codec.encode_invocation(invocation, reducers), arena, to_slot)


def encode_outcome(outcome: Outcome, arena: Arena, to_slot: int) -> bytes:
    """``outcome`` as one message for the host (``to_slot`` 0)."""
    packets = [p for port in outcome.outputs for p in port]
    reducers = _reducers(arena, packets, to_slot)
    del packets
    flags = PARTIAL if outcome.partial else 0
    if reducers is None and outcome.exception is None:
        return _plain(outcome, flags)
    return _frame(codec.encode_outcome(outcome, reducers), arena, to_slot, flags)


def is_partial(frame: bytes | memoryview) -> bool:
    """Whether ``frame`` holds a partial outcome (read before decoding it: the call it belongs
    to still runs, and keeps its inputs held)."""
    return codec.frame_flags(frame) & PARTIAL != 0


def decode_invocation(frame: bytes | memoryview, arena: Arena) -> Invocation:
    """The invocation in ``frame``; its large buffers are views of the arena (no copy)."""
    try:
        return codec.decode_invocation(codec.from_frame(frame, _adopter(arena), writable=True))
    finally:
        _decoding.held = None


def decode_outcome(frame: bytes | memoryview, arena: Arena) -> Outcome:
    """The outcome in ``frame``; its large buffers are views of the arena (no copy)."""
    try:
        return codec.decode_outcome(codec.from_frame(frame, _adopter(arena), writable=True))
    finally:
        _decoding.held = None


# -- buffers --------------------------------------------------------------------------------------


def _reducers(arena: Arena, packets: Sequence[Packet | None],
              to_slot: int) -> dict[type, Callable[[_Buffer], object]] | None:
    """A reducer for buffer holders that says whether the receiver may write in place.

    ``packets`` lists each buffer packet of the message as often as the message holds it; a
    packet held anywhere else too (another consumer's queue, a poller) is shared, whatever
    its payload says, as is a payload another handle holds (``sole_holder``) and a block of
    the arena a third process holds (a worker still reading it, or one that kept it). The
    receiver's own holds do not count: a block it holds already it treats as shared itself
    (``_unframe``).
    """
    shared: set[int] = set()
    seen: set[int] = set()
    for p in packets:
        if p is None or type(p._value) is not _Buffer or id(p) in seen:
            continue
        seen.add(id(p))
        if (sys.getrefcount(p) != _message_refs(packets.count(p)) or not sole_holder(p)
                or arena.held_elsewhere(p._value.array, to_slot)):
            shared.add(id(p._value))
    if not seen:
        return None  # no buffer: the codec's own table

    def reduce_holder(h: _Buffer) -> object:
        if is_deferred(h):  # kept in Ray's object store: a worker gets the data, in the message
            host_array(h, "send to a process pool")
            return (_arrived, (h.array, h.code, True, True))
        arr = h.array
        if h.obj is not None or arr is None:
            return h.__reduce__()  # by reference (DLPack): the codec's own rule
        private = arr.nbytes < PAGE or arena.locate_array(arr) < 0  # the message makes its own copy
        exclusive = private or id(h) not in shared
        if not exclusive:
            # The receiver reads this memory for as long as it likes (a kernel may keep it), and
            # this process cannot see its hold: from now on ``make_mutable`` here copies first.
            h.mutable = False
        return (_arrived, (arr, h.code, h.external, exclusive))

    return {_Buffer: reduce_holder}


_decoding = threading.local()
"""``held``: the address ranges of the blocks this process held before the message now being
decoded referred to them (its kernel kept them, or another message brought them)."""


def _held_before(arr: npt.NDArray[np.generic]) -> bool:
    held: list[tuple[int, int]] | None = getattr(_decoding, "held", None)
    if not held:
        return False
    at = int(arr.__array_interface__["data"][0])
    return any(start <= at < end for start, end in held)


def _message_refs(k: int) -> int:
    """``sys.getrefcount`` of a packet in ``_reducers`` that only the message holds, ``k`` times:
    the message's own lists and ``packets`` hold it ``k`` times each, plus the loop variable
    and the call's argument."""
    return 2 * k + 2


def _arrived(arr: npt.NDArray[np.generic], code: int, external: bool, exclusive: bool) -> _Buffer:
    """The receiver's holder: engine-owned (``make_mutable`` writes in place) when the sender
    held it alone, else read-only (``make_mutable`` copies).

    The memory is the receiver's to write either way (the arena, or its own copy of the
    message), so an array numpy rebuilt read-only (the sender's was) is made writeable.
    """
    if exclusive and not _held_before(arr):
        return wrap_owned(rooted(arr, writeable=True), code, external=external)
    if arr.flags.writeable:
        arr.setflags(write=False)
    return wrap_adopted(arr, code, external=external)


# -- frames ---------------------------------------------------------------------------------------


def _plain(message: Invocation | Outcome, flags: int = 0) -> bytes:
    """A message without buffers (most are): one plain pickle, no table, no buffer list.

    Raises:
        UsageError: Something in it does not pickle.
    """
    try:
        header = pickle.dumps(message, codec.PROTOCOL)
    except Exception as exc:
        msg = f"encode: cannot pickle {type(message).__name__}: {type(exc).__name__}: {exc}"
        raise UsageError(msg) from None
    return codec.pack_frame(header, [], [], flags)


def _frame(encoded: codec.Encoded, arena: Arena, to_slot: int, flags: int = 0) -> bytes:
    raws = [pickle.PickleBuffer(b).raw() for b in encoded.buffers]
    refs: list[tuple[int, int, int]] = []
    inline: list[memoryview] = []
    offsets: list[int] = []
    written = []  # proxies of blocks written here: alive until the receiver is credited
    for raw in raws:
        n = raw.nbytes
        if n < PAGE:
            refs.append((codec.INLINE, n, 0))
            inline.append(raw)
            continue
        offset = arena.locate(raw)
        if offset < 0:
            block, offset = arena.write(raw)
            written.append(block)
        offsets.append(offset)
        refs.append((codec.SHARED, offset, n))
    if offsets:
        arena.credit(offsets, to_slot)
    del written
    return codec.pack_frame(encoded.header, refs, inline, flags)


def _adopter(arena: Arena) -> codec.Adopt:
    """The arena's reader of a frame's shared buffers; it notes which blocks this process held
    before (``_decoding.held``), so that their arrays stay read-only (see the docstring)."""
    def adopt(refs: list[tuple[int, int]]) -> list[codec.Buffer]:
        views, held = arena.adopt(refs)
        _decoding.held = held
        buffers: list[codec.Buffer] = [*views]
        return buffers

    return adopt
