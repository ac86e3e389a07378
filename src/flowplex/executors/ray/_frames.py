"""Frames by reference: numpy buffers cross Ray as object references, put in the object store once.

A buffer of ``FRAME_BYTES`` or more is put in Ray's object store by whoever first sends it (the
host, for a frame it made; an actor, for a frame its kernel emitted), and its packet then holds
an ``ObjectFrame``: the reference, plus the dtype and shape, so the engine routes and counts it
without the data. A batch travels as one pickle plus the list of its frames' references
(``encode``); an actor gets the data of its inputs in one ``ray.get`` per batch (zero-copy and
read-only on the same machine); the host gets it only when something reads the packet (a
poller, a host kernel). A frame forwarded from one Ray node to the next is never copied.
"""

from __future__ import annotations

import pickle
import threading
import weakref
from collections.abc import Iterable
from types import ModuleType
from typing import TYPE_CHECKING, Any, Final, final

from ...errors import BrokenError
from ...packets._buffers import DeferredArray, _Buffer, wrap_deferred

if TYPE_CHECKING:
    from ...packets import Packet
    from ...packets._buffers import Array
    from .._invocation import Invocation, Outcome

__all__ = ["FRAME_BYTES", "ObjectFrame", "decode", "encode", "keep_live_frames", "put_frames"]

FRAME_BYTES: Final = 100 * 1024
"""Buffers this large or larger go by reference (Ray inlines smaller objects in its messages)."""



@final
class ObjectFrame(DeferredArray):
    """A buffer in Ray's object store: its reference, fetched on first read."""

    __slots__ = ("__weakref__", "kept", "ref", "source")

    def __init__(self, ref: object, kept: Array | None = None, source: object = None) -> None:
        self.ref = ref
        self.kept = kept
        """The data when this process has it (it put the frame, or copied it at close)."""
        self.source = source
        """The holder the frame was put from (``put_frames``): kept alive, so that the array it
        adopted stays read-only while packets of this frame exist."""

    def fetch(self) -> Array:
        kept = self.kept
        if kept is not None:
            return kept
        import ray

        try:
            arr: Array = ray.get(self.ref)
        except ray.exceptions.RayError as exc:
            msg = (f"the data of this frame is gone from Ray's object store ({type(exc).__name__}): the actor "
                   "that made it died, or its graph was closed before it was read")
            raise BrokenError(msg) from None
        return arr

    def by_reference(self) -> bool:
        return getattr(_coding, "refs", None) is not None

    def __reduce__(self) -> tuple[object, tuple[object, ...]]:
        refs: list[object] | None = getattr(_coding, "refs", None)
        if refs is None:  # pickled by someone else (Ray itself): the reference travels as is
            return (ObjectFrame, (self.ref,))
        refs.append(self.ref)
        return (_frame_at, (len(refs) - 1,))


_coding = threading.local()
"""``refs`` (and ``arrays``, ``live``) while this thread encodes or decodes a message (``encode``,
``decode``): only then does a frame pickle as a reference."""
_coding.refs = None
_coding.arrays = None
_coding.live = None


def _frame_at(index: int) -> ObjectFrame:
    """The frame of reference ``index`` of the message being decoded (its data when fetched)."""
    arrays: list[Array] | None = _coding.arrays
    frame = ObjectFrame(_coding.refs[index], None if arrays is None else arrays[index])
    live: weakref.WeakSet[object] | None = _coding.live
    if live is not None and frame.kept is None:
        live.add(frame)
    return frame


def encode(obj: object) -> tuple[bytes, list[object]]:
    """``obj`` (a batch of invocations, or of outcomes) as one pickle, and the object references
    of the frames it holds: Ray carries those as a list beside the bytes (so it counts the
    receiver as a holder), and pickling the rest here, in one call, costs a fraction of Ray's
    serialising each invocation on its own."""
    refs: list[object] = []
    _coding.refs = refs
    try:
        return pickle.dumps(obj, pickle.HIGHEST_PROTOCOL), refs
    finally:
        _coding.refs = None


def decode(data: bytes, refs: list[object], arrays: list[Array] | None = None, *,
           live: weakref.WeakSet[object] | None = None) -> Any:
    """What ``encode`` made; each frame holds its reference (and its data, given ``arrays``);
    the frames not fetched join ``live``."""
    _coding.refs = refs
    _coding.arrays = arrays
    _coding.live = live
    try:
        return pickle.loads(data)
    finally:
        _coding.refs = None
        _coding.arrays = None
        _coding.live = None


def put_frames(ray: ModuleType, packets: Iterable[Packet | None]) -> None:
    """Put every large CPU buffer of ``packets`` that is not in the object store yet there, once
    per payload; each packet then holds the reference (its data, when here, stays readable)."""
    done: dict[int, _Buffer] = {}
    for p in packets:
        if p is None or type(p._value) is not _Buffer:
            continue
        h: _Buffer = p._value
        if h.obj is not None or h.array is None or h.array.nbytes < FRAME_BYTES:
            continue  # by reference already, a device buffer (DLPack), or small: in the message
        put = done.get(id(h))
        if put is None:
            put = done[id(h)] = wrap_deferred(ObjectFrame(ray.put(h.array), h.array, h), h.code, h.shape)
            put.array = h.array
        p._value = put


def invocation_packets(batch: Iterable[Invocation]) -> Iterable[Packet | None]:
    """Every packet an invocation carries (inputs, then batched inputs)."""
    for invocation in batch:
        yield from invocation.inputs
        if invocation.batch is not None:
            for packets in invocation.batch:
                yield from packets


def outcome_packets(outcomes: Iterable[Outcome]) -> Iterable[Packet]:
    """Every packet an outcome emits."""
    for outcome in outcomes:
        for packets in outcome.outputs:
            yield from packets


def keep_live_frames(live: weakref.WeakSet[object]) -> None:
    """Copy the frames of ``live`` not fetched yet into this process: their actors are about to
    go, and with them the objects they own (a packet kept after ``Graph.close`` stays readable)."""
    import numpy as np

    for frame in list(live):
        if not isinstance(frame, ObjectFrame) or frame.kept is not None:
            continue
        try:
            arr = np.array(frame.fetch(), copy=True)
        except BrokenError:  # lost already (its actor died): a read says so
            continue
        frame.kept = arr
