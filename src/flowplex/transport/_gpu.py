"""``GpuFormatter``: format a batch of agent messages on an NVIDIA GPU straight into a ring.

Needs the ``cuda`` extra (CuPy) and a GPU; CuPy is imported only when a formatter is made.

How a batch travels (fixing Perdix G1, G2, G4, G7, G8 and R7):

1. The texts are packed into one byte blob plus offsets and uploaded (device memory).
2. ``fpx_format`` formats each message into device scratch memory and counts the slots its
   fragments need; the counts come back to the host (4 bytes a message).
3. The CPU waits for that many free slots in its lane and reserves them: the base sequence
   and each message's first slot are kernel arguments, so the GPU needs no atomics on host
   memory (CPU and GPU atomics on a mapped host word are not atomic with each other over PCIe).
4. ``fpx_publish`` writes every fragment into its slot through a device pointer to the ring
   itself: the ring's shared-memory mapping is page-locked and device-mapped with
   ``cudaHostRegister(..., cudaHostRegisterMapped | cudaHostRegisterPortable)``.  Never
   managed memory (G8), which the CPU may not touch while a kernel runs on many systems.
5. After the stream synchronises, the CPU release-stores the lane's ``tail``: the consumer,
   CPU code in any process, sees whole messages only.

If the mapping cannot be registered, the GPU writes into a mapped ``cudaHostAlloc`` staging
buffer instead and the CPU copies the slots into the ring (one memcpy); the bytes are the same.
The output is byte-identical to ``producer.send(format_ansi(text, agent_type=...))`` with the
same timestamps: the kernels are a port of ``format_ansi`` and ``cut_points``.
"""

from __future__ import annotations

import ctypes
import logging
import time
from collections.abc import Sequence
from typing import Any, Final, final

import numpy as np

from ..errors import UsageError
from . import _layout as lay
from ._format import AgentType
from ._gpu_source import SOURCE
from ._producer import Producer
from ._ring import Ring

log = logging.getLogger(__name__)

_REGISTER_MAPPED: Final = 0x02  # cudaHostRegisterMapped
_REGISTER_PORTABLE: Final = 0x01  # cudaHostRegisterPortable
_ALLOC_MAPPED: Final = 0x02  # cudaHostAllocMapped
_ALLOC_PORTABLE: Final = 0x01  # cudaHostAllocPortable
_THREADS: Final = 128


def _import_cupy() -> Any:
    try:
        import cupy
    except ImportError as exc:
        msg = "GpuFormatter needs CuPy and an NVIDIA GPU: pip install 'flowplex[cuda]'"
        raise UsageError(msg) from exc
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except cupy.cuda.runtime.CUDARuntimeError as exc:
        msg = f"GpuFormatter: CuPy found no usable CUDA device ({exc})"
        raise UsageError(msg) from exc
    if count < 1:
        msg = "GpuFormatter: CuPy found no CUDA device"
        raise UsageError(msg)
    return cupy


def _scratch_bound(length: int) -> int:
    """Most bytes ``format_ansi`` can make of ``length`` bytes (every 5 bytes an ERROR: +9)."""
    return 21 + 4 + length + 9 * (length // 5 + 1)


@final
class GpuFormatter:
    """Formats batches of messages on the GPU into the slots of its own producer lane.

    Args:
        ring: The ring to write into (a lane is registered for the formatter).
        device: The CUDA device number.
        enable_ansi: False copies the texts unformatted (Perdix's ``enable_ansi``).

    Raises:
        UsageError: CuPy or a GPU is missing (the message says how to install the extra).

    The formatter is a producer: close it (or use ``with``) when done, before closing the ring
    (it unregisters the ring's memory from CUDA).
    """

    __slots__ = (
        "_ansi",
        "_cp",
        "_dev_slots",
        "_device",
        "_format",
        "_module",
        "_producer",
        "_publish",
        "_registered",
        "_ring",
        "_staging",
        "_staging_dev",
    )

    def __init__(self, ring: Ring, *, device: int = 0, enable_ansi: bool = True) -> None:
        cp = _import_cupy()
        self._cp = cp
        self._device = cp.cuda.Device(device)
        self._ansi = enable_ansi
        self._ring = ring
        self._registered = 0
        self._staging: Any = None
        self._staging_dev = 0
        with self._device:
            self._module = cp.RawModule(code=SOURCE, options=("--std=c++14",))
            self._format = self._module.get_function("fpx_format")
            self._publish = self._module.get_function("fpx_publish")
            self._producer: Producer = ring.producer()
            self._dev_slots = self._map_lane()

    def _map_lane(self) -> int:
        """A device pointer to this lane's slot 0 (registering the ring mapping, or staging)."""
        cp = self._cp
        mm, lane_base, _mask = self._producer.slot_memory
        anchor = ctypes.c_char.from_buffer(mm)
        host = ctypes.addressof(anchor)
        del anchor  # the address stays valid while the ring is mapped
        assert (host + lane_base) % 256 == 0, "slots must be 256-byte aligned (Perdix G1)"
        try:
            cp.cuda.runtime.hostRegister(host, len(mm), _REGISTER_MAPPED | _REGISTER_PORTABLE)
            self._registered = host
            dev = int(cp.cuda.runtime.hostGetDevicePointer(host, 0))
            log.debug("gpu.map.registered ring=%s", self._ring.name)
            return dev + lane_base
        except cp.cuda.runtime.CUDARuntimeError as exc:
            log.warning("gpu.map.staging ring=%s reason=%s", self._ring.name, exc)
        size = self._ring.capacity * lay.SLOT_SIZE
        ptr = cp.cuda.runtime.hostAlloc(size, _ALLOC_MAPPED | _ALLOC_PORTABLE)
        self._staging = (ptr, size)
        self._staging_dev = int(cp.cuda.runtime.hostGetDevicePointer(ptr, 0))
        return self._staging_dev

    def _prepare(self, texts: Sequence[str | bytes], agent_types: int | Sequence[int]) -> tuple[Any, ...]:
        cp = self._cp
        blobs = [t.encode() if isinstance(t, str) else bytes(t) for t in texts]
        n = len(blobs)
        lengths = np.fromiter((len(b) for b in blobs), dtype=np.uint32, count=n)
        offsets = np.zeros(n, dtype=np.uint64)
        np.cumsum(lengths[:-1], out=offsets[1:])
        agents = np.broadcast_to(np.asarray(agent_types, dtype=np.int64), (n,))
        if n and (agents.min() < 0 or agents.max() > 7):
            msg = "GpuFormatter: agent_types must be AgentType values (0..7)"
            raise UsageError(msg)
        bounds = np.fromiter((_scratch_bound(len(b)) for b in blobs), dtype=np.uint64, count=n)
        scratch_off = np.zeros(n, dtype=np.uint64)
        np.cumsum(bounds[:-1], out=scratch_off[1:])
        text = cp.asarray(np.frombuffer(b"".join(blobs) or b"\0", dtype=np.uint8))
        d_off = cp.asarray(offsets)
        d_len = cp.asarray(lengths)
        d_agent = cp.asarray(agents.astype(np.uint8))
        d_scratch = cp.empty(max(1, int(bounds.sum())), dtype=cp.uint8)
        d_soff = cp.asarray(scratch_off)
        d_out_len = cp.empty(n, dtype=cp.uint32)
        d_slots = cp.empty(n, dtype=cp.uint32)
        blocks = (max(1, (n + _THREADS - 1) // _THREADS),)
        self._format(
            blocks,
            (_THREADS,),
            (text, d_off, d_len, d_agent, np.uint32(n), np.int32(self._ansi), d_scratch, d_soff, d_out_len, d_slots),
        )
        return d_scratch, d_soff, d_out_len, d_slots, d_agent

    def format_batch(
        self, texts: Sequence[str | bytes], agent_types: int | Sequence[int] = AgentType.ASSISTANT
    ) -> list[bytes]:
        """Format on the GPU and copy the results back (for checks against ``format_ansi``)."""
        with self._device:
            scratch, soff, out_len, _slots, _agents = self._prepare(texts, agent_types)
            flat = scratch.get()
            offs = soff.get()
            lens = out_len.get()
        return [flat[int(o) : int(o) + int(n)].tobytes() for o, n in zip(offs, lens, strict=True)]

    def send_batch(
        self,
        texts: Sequence[str | bytes],
        *,
        agent_types: int | Sequence[int] = AgentType.ASSISTANT,
        stream_ids: int | Sequence[int] = 0,
        timestamps_ns: int | Sequence[int] | None = None,
        timeout: float | None = None,
    ) -> int:
        """Format ``texts`` on the GPU into the ring; every message is published whole.

        Blocks until the lane has room for the whole batch, up to ``timeout``, whatever the
        ring's full policy: the GPU never overwrites unread slots (a ``drop_oldest`` reader's
        seqlock check relies on the CPU protocol).

        Returns:
            The number of messages published (``len(texts)``).

        Raises:
            UsageError: bad agent types, or a batch larger than the lane.
            Timeout: the lane did not have room in time.
            BrokenError: the consumer went away while waiting for room.
        """
        cp = self._cp
        p = self._producer
        n = len(texts)
        if n == 0:
            return 0
        with self._device:
            scratch, soff, out_len, d_slots, d_agent = self._prepare(texts, agent_types)
            counts = d_slots.get().astype(np.uint64)
            total = int(counts.sum())
            capacity = self._ring.capacity
            if total > capacity:
                msg = f"GpuFormatter.send_batch: the batch needs {total} slots; the lane has {capacity}"
                raise UsageError(msg)
            tail, msg_id = p.reserve_batch(total, timeout)
            starts = np.zeros(n, dtype=np.uint64)
            np.cumsum(counts[:-1], out=starts[1:])
            ts = time.time_ns() if timestamps_ns is None else timestamps_ns
            stamps = cp.asarray(np.broadcast_to(np.asarray(ts, dtype=np.uint64), (n,)).copy())
            sids = cp.asarray(np.broadcast_to(np.asarray(stream_ids, dtype=np.uint32), (n,)).copy())
            blocks = (max(1, (n + _THREADS - 1) // _THREADS),)
            self._publish(
                blocks,
                (_THREADS,),
                (
                    scratch,
                    soff,
                    out_len,
                    cp.asarray(starts),
                    d_agent,
                    sids,
                    stamps,
                    np.uint32(n),
                    np.uint64(self._dev_slots),  # u8* into the registered ring mapping
                    np.uint64(p.slot_memory[2]),
                    np.uint64(tail),
                    np.uint32(msg_id),
                    np.uint32(p.lane),
                    np.uint32(0),
                ),
            )
            cp.cuda.get_current_stream().synchronize()
        if self._staging is not None:
            self._copy_staging(tail, total)
        p.publish_batch(total, n, int(np.count_nonzero(counts > 1)) if total > n else 0)
        return n

    def _copy_staging(self, tail: int, total: int) -> None:
        ptr, size = self._staging
        mm, lane_base, mask = self._producer.slot_memory
        staging = np.ctypeslib.as_array((ctypes.c_uint8 * size).from_address(ptr))
        ring = np.ndarray((size,), dtype=np.uint8, buffer=mm, offset=lane_base)
        for k in range(total):
            at = ((tail + k) & mask) * lay.SLOT_SIZE
            ring[at : at + lay.SLOT_SIZE] = staging[at : at + lay.SLOT_SIZE]

    def close(self) -> None:
        """Close the formatter's producer and undo the GPU mapping; idempotent."""
        cp = self._cp
        self._producer.close()
        with self._device:
            cp.cuda.get_current_stream().synchronize()
            if self._registered:
                try:
                    cp.cuda.runtime.hostUnregister(self._registered)
                except cp.cuda.runtime.CUDARuntimeError as exc:  # the ring was unmapped first
                    log.warning("gpu.unmap.failed reason=%s", exc)
                self._registered = 0
            if self._staging is not None:
                cp.cuda.runtime.freeHost(self._staging[0])
                self._staging = None

    def __enter__(self) -> GpuFormatter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
