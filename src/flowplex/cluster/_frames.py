"""Frames by reference: numpy buffers cross Ray as object references, put in the object store once.

A buffer of ``FRAME_BYTES`` or more is put in Ray's object store by whoever first sends it (the
host, for a frame it made; an actor, for a frame its kernel emitted), and its packet then holds
an ``ObjectFrame``: the reference, plus the dtype and shape, so the engine routes and counts it
without the data. An actor gets the data of its inputs in one ``ray.get`` per batch (zero-copy
and read-only on the same machine); the host gets it only when something reads the packet (a
poller, a host kernel). A frame forwarded from one Ray node to the next is never copied.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable
from types import ModuleType
from typing import TYPE_CHECKING, Final, final

from ..packets._buffers import DeferredArray, _Buffer, wrap_deferred

if TYPE_CHECKING:
    from ..executors._invocation import Invocation, Outcome
    from ..packets import Packet
    from ..packets._buffers import Array

__all__ = ["FRAME_BYTES", "ObjectFrame", "fetch_inputs", "keep_live_frames", "put_frames"]

FRAME_BYTES: Final = 100 * 1024
"""Buffers this large or larger go by reference (Ray inlines smaller objects in its messages)."""

_live: weakref.WeakSet[ObjectFrame] = weakref.WeakSet()
"""This process's frames not fetched yet (``keep_live_frames`` at close)."""


@final
class ObjectFrame(DeferredArray):
    """A buffer in Ray's object store: its reference, fetched on first read."""

    __slots__ = ("__weakref__", "kept", "ref")

    def __init__(self, ref: object, kept: Array | None = None) -> None:
        self.ref = ref
        self.kept = kept
        """The data when this process has it (it put the frame, or copied it at close)."""
        if kept is None:
            _live.add(self)

    def fetch(self) -> Array:
        kept = self.kept
        if kept is not None:
            return kept
        import ray

        arr: Array = ray.get(self.ref)
        _live.discard(self)
        return arr

    def __reduce__(self) -> tuple[type[ObjectFrame], tuple[object]]:
        return (ObjectFrame, (self.ref,))


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
            put = done[id(h)] = wrap_deferred(ObjectFrame(ray.put(h.array), h.array), h.code, h.shape)
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


def fetch_inputs(ray: ModuleType, batch: list[Invocation]) -> None:
    """Get the data of every referenced input of ``batch`` in one ``ray.get`` (in an actor)."""
    holders: dict[int, _Buffer] = {}
    for p in invocation_packets(batch):
        if p is not None and type(p._value) is _Buffer:
            h: _Buffer = p._value
            if h.array is None and isinstance(h.obj, ObjectFrame):
                holders[id(h)] = h
    if holders:
        todo = list(holders.values())
        arrays = ray.get([h.obj.ref for h in todo if isinstance(h.obj, ObjectFrame)])
        for h, arr in zip(todo, arrays, strict=True):
            h.array = arr


def keep_live_frames() -> None:
    """Copy every frame not fetched yet into this process: their actors are about to go, and
    with them the objects they own (a packet kept after ``Graph.close`` stays readable)."""
    import numpy as np

    for frame in list(_live):
        try:
            arr = np.array(frame.fetch(), copy=True)
        except Exception:  # lost already (its actor died): a read says so
            continue
        frame.kept = arr
