"""The GPU formatter: byte-identical to the CPU path.

Without a GPU, the kernel source itself is still checked: it is compiled for the host with a
small CUDA shim (g++) and run thread by thread, and its slot bytes are compared with what
``producer.send(format_ansi(...))`` writes.  The real-GPU test runs where CuPy and a device are.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flowplex.errors import Timeout, UsageError
from flowplex.transport import AgentType, GpuFormatter, Ring, format_ansi
from flowplex.transport._gpu import _scratch_bound
from flowplex.transport._gpu_source import SOURCE

from .conftest import require_extra

SHIM = r"""
#include <cstring>
#define __device__
#define __forceinline__ inline
#define __constant__ static const
#define __global__
#define __align__(n) __attribute__((aligned(n)))
struct uint4 { unsigned int x, y, z, w; };
struct Dim { unsigned int x; };
static Dim blockIdx = {0}, blockDim = {1}, threadIdx = {0};
#define __threadfence_system() __sync_synchronize()
"""

DRIVER = r"""
extern "C" void host_format(const u8* text, const u64* text_off, const u32* text_len, const u8* agent,
    u32 n, int ansi, u8* scratch, const u64* scratch_off, u32* out_len, u32* out_slots) {
    for (u32 m = 0; m < n; ++m) {
        threadIdx.x = m;
        fpx_format(text, text_off, text_len, agent, n, ansi, scratch, scratch_off, out_len, out_slots);
    }
}
extern "C" void host_publish(const u8* scratch, const u64* scratch_off, const u32* out_len,
    const u64* slot_start, const u8* agent, const u32* stream_id, const u64* timestamp, u32 n,
    u8* slots, u64 mask, u64 base_seq, u32 base_msg, u32 lane, u32 text_flag) {
    for (u32 m = 0; m < n; ++m) {
        threadIdx.x = m;
        fpx_publish(scratch, scratch_off, out_len, slot_start, agent, stream_id, timestamp, n, slots,
                    mask, base_seq, base_msg, lane, text_flag);
    }
}
"""

CAPACITY = 64
KEYWORDS = ["ERROR", "WARNING", "SUCCESS", "ERRORS", "xERROR", "_SUCCESS", "WARNING1"]
ESCAPES = ["\x1b[31m", "\x1b[0m", "\x1b]0;t\x07"]
pieces = st.one_of(st.text(max_size=30), st.sampled_from(KEYWORDS + ESCAPES), st.sampled_from([" ", "é", "😀"]))
texts = st.lists(pieces, max_size=60).map("".join)
batches = st.lists(st.tuples(texts, st.integers(0, 7), st.integers(0, 2**32 - 1)), min_size=1, max_size=8)


@pytest.fixture(scope="module")
def host_kernels(tmp_path_factory: pytest.TempPathFactory) -> ctypes.CDLL:
    cxx = shutil.which("g++")
    if cxx is None:
        pytest.skip("compiling the CUDA source for the host needs g++")
    tmp: Path = tmp_path_factory.mktemp("gpu_host")
    (tmp / "k.cpp").write_text(SHIM + SOURCE + DRIVER)
    lib = tmp / "k.so"
    subprocess.run(
        [cxx, "-O1", "-fPIC", "-shared", "-fno-strict-aliasing", "-o", str(lib), str(tmp / "k.cpp")],
        check=True,
        capture_output=True,
    )
    return ctypes.CDLL(str(lib))


def ptr(a: np.ndarray) -> ctypes.c_void_p:
    return ctypes.c_void_p(a.ctypes.data)


def emulate(lib: ctypes.CDLL, batch: list[tuple[str, int, int]], ts: int) -> tuple[list[bytes], np.ndarray, int]:
    """Run both kernels on the CPU; return the formatted bytes, the slot bytes and slots used."""
    blobs = [t.encode() for t, _, _ in batch]
    n = len(blobs)
    lengths = np.array([len(b) for b in blobs], dtype=np.uint32)
    offsets = np.zeros(n, dtype=np.uint64)
    np.cumsum(lengths[:-1], out=offsets[1:])
    agents = np.array([a for _, a, _ in batch], dtype=np.uint8)
    bounds = np.array([_scratch_bound(len(b)) for b in blobs], dtype=np.uint64)
    soff = np.zeros(n, dtype=np.uint64)
    np.cumsum(bounds[:-1], out=soff[1:])
    text = np.frombuffer(b"".join(blobs) + b"\0", dtype=np.uint8).copy()
    scratch = np.zeros(int(bounds.sum()) + 1, dtype=np.uint8)
    out_len = np.zeros(n, dtype=np.uint32)
    out_slots = np.zeros(n, dtype=np.uint32)
    lib.host_format(
        ptr(text),
        ptr(offsets),
        ptr(lengths),
        ptr(agents),
        ctypes.c_uint32(n),
        ctypes.c_int(1),
        ptr(scratch),
        ptr(soff),
        ptr(out_len),
        ptr(out_slots),
    )
    formatted = [scratch[int(o) : int(o) + int(k)].tobytes() for o, k in zip(soff, out_len, strict=True)]
    counts = out_slots.astype(np.uint64)
    starts = np.zeros(n, dtype=np.uint64)
    np.cumsum(counts[:-1], out=starts[1:])
    slots = np.full(CAPACITY * 256, 0xAA, dtype=np.uint8)
    sids = np.array([s for _, _, s in batch], dtype=np.uint32)
    stamps = np.full(n, ts, dtype=np.uint64)
    lib.host_publish(
        ptr(scratch),
        ptr(soff),
        ptr(out_len),
        ptr(starts),
        ptr(agents),
        ptr(sids),
        ptr(stamps),
        ctypes.c_uint32(n),
        ptr(slots),
        ctypes.c_uint64(CAPACITY - 1),
        ctypes.c_uint64(0),
        ctypes.c_uint32(0),
        ctypes.c_uint32(0),
        ctypes.c_uint32(0),
    )
    return formatted, slots, int(counts.sum())


def cpu_slots(batch: list[tuple[str, int, int]], ts: int) -> tuple[np.ndarray, int]:
    """What the CPU path writes: producer.send(format_ansi(...)) into lane 0 of a fresh ring."""
    with Ring.create(capacity=CAPACITY, max_producers=1) as ring:
        p = ring.producer()
        for text, agent, sid in batch:
            assert p.send(format_ansi(text, agent_type=agent), stream_id=sid, agent_type=agent, timestamp_ns=ts)
        core = ring._core
        raw = np.frombuffer(core.mm, dtype=np.uint8, count=CAPACITY * 256, offset=core.slots_offset(0)).copy()
        used = p._hot.tail
        p.close()
        return raw, used


@settings(max_examples=60, deadline=None)
@given(batch=batches)
def test_kernel_source_writes_the_cpu_bytes_when_built_for_the_host(
    host_kernels: ctypes.CDLL, batch: list[tuple[str, int, int]]
) -> None:
    formatted, gpu, used = emulate(host_kernels, batch, ts=123456789)
    assert formatted == [format_ansi(t, agent_type=a) for t, a, _ in batch]
    cpu, cpu_used = cpu_slots(batch, ts=123456789)
    assert used == cpu_used
    assert gpu[: used * 256].tobytes() == cpu[: used * 256].tobytes()


@pytest.mark.parametrize("shift", range(8))
def test_kernel_source_fragments_long_output_like_the_cpu(host_kernels: ctypes.CDLL, shift: int) -> None:
    """Cuts land on every byte of 2-, 3- and 4-byte code points and inside escape sequences."""
    batch = [
        ("x" * 300 + " ERROR " * 40 + "é" * 200, AgentType.ERROR, 1),
        ("a" * shift + "😀" * 120, AgentType.USER, 2),
        ("b" * shift + "€" * 150, AgentType.TRACE, 3),
        ("c" * shift + "é" * 150, AgentType.INFO, 4),
        ("d" * (190 + 3 * shift) + "\x1b[38;5;196mred\x1b[0m" * 6, AgentType.DEBUG, 5),
        ("e" * (180 + 5 * shift) + "\x1b]0;a window title\x07" * 4, AgentType.SYSTEM, 6),
    ]
    _formatted, gpu, used = emulate(host_kernels, batch, ts=5)
    cpu, cpu_used = cpu_slots(batch, ts=5)
    assert used == cpu_used > 12
    assert gpu[: used * 256].tobytes() == cpu[: used * 256].tobytes()


def _counts(stats: object) -> tuple[int, ...]:
    return tuple(getattr(stats, f) for f in ("produced", "consumed", "fragmented", "reassembled", "in_flight_slots"))


def test_slots_the_kernel_writes_into_a_reserved_batch_read_like_the_cpu_path(host_kernels: ctypes.CDLL) -> None:
    """``send_batch``'s producer side without a GPU: reserve, write the kernel's slots, publish."""
    batch = [("short", AgentType.INFO, 1), ("x" * 300 + " ERROR " * 40, AgentType.ERROR, 2), ("é😀", AgentType.USER, 3)]
    _formatted, slots, used = emulate(host_kernels, batch, ts=5)
    with Ring.create(capacity=CAPACITY, max_producers=1) as ring:
        p = ring.producer()
        consumer = ring.consumer()
        assert p.reserve_batch(used, timeout=1.0) == (0, 0)
        mm, offset, mask = p.slot_memory
        assert mask == CAPACITY - 1
        mm[offset : offset + used * 256] = slots[: used * 256].tobytes()
        p.publish_batch(used, len(batch), fragmented=1)
        got = [consumer.recv(timeout=5) for _ in batch]
        assert [(m.data, m.stream_id, int(m.agent_type), m.timestamp_ns) for m in got] == [
            (format_ansi(t, agent_type=a), s, a, 5) for t, a, s in batch]
        assert p.reserve_batch(1, timeout=1.0) == (used, len(batch))  # the next batch continues both counts
        batch_counts = _counts(ring.stats())
        p.close()
    with Ring.create(capacity=CAPACITY, max_producers=1) as ring:
        p = ring.producer()
        consumer = ring.consumer()
        for text, agent, sid in batch:
            assert p.send(format_ansi(text, agent_type=agent), stream_id=sid, agent_type=agent, timestamp_ns=5)
        for _ in batch:
            consumer.recv(timeout=5)
        assert _counts(ring.stats()) == batch_counts
        p.close()


def test_reserving_more_room_than_the_consumer_frees_times_out() -> None:
    with Ring.create(capacity=8, max_producers=1) as ring:
        p = ring.producer()
        ring.consumer()
        assert p.reserve_batch(8, timeout=0.05) == (0, 0)
        p.publish_batch(8, 8, fragmented=0)
        with pytest.raises(Timeout, match="stayed full"):
            p.reserve_batch(1, timeout=0.05)
        p.close()


def test_gpu_formatter_matches_the_cpu_formatter_on_a_real_gpu() -> None:
    cupy = require_extra("cupy", reason="the GPU parity test needs CuPy and an NVIDIA GPU (extra 'cuda')")
    try:
        devices = cupy.cuda.runtime.getDeviceCount()  # type: ignore[attr-defined]
    except Exception as exc:  # CUDA driver missing: CuPy raises its own runtime error
        devices = 0
        reason = f"no CUDA device: {exc}"
    else:
        reason = "no CUDA device"
    if devices < 1:
        if os.environ.get("FLOWPLEX_REQUIRE_EXTRAS") == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    batch = [("build SUCCESS", 1, 7), ("an ERROR " * 60, 3, 8), ("é😀 WARNING", 4, 9)] * 50
    with Ring.create(capacity=1024, max_producers=2) as ring, GpuFormatter(ring) as gpu:
        assert gpu.format_batch([t for t, _, _ in batch], [a for _, a, _ in batch]) == [
            format_ansi(t, agent_type=a) for t, a, _ in batch
        ]
        consumer = ring.consumer()
        n = gpu.send_batch(
            [t for t, _, _ in batch],
            agent_types=[a for _, a, _ in batch],
            stream_ids=[s for _, _, s in batch],
            timestamps_ns=42,
        )
        assert n == len(batch)
        got = [consumer.recv(timeout=5) for _ in batch]
        assert [m.data for m in got] == [format_ansi(t, agent_type=a) for t, a, _ in batch]
        assert [(m.stream_id, int(m.agent_type), m.timestamp_ns) for m in got] == [(s, a, 42) for _, a, s in batch]
        lane = got[0].producer_id
        core = ring._core
        gpu_raw = np.frombuffer(core.mm, dtype=np.uint8, count=1024 * 256, offset=core.slots_offset(lane)).copy()
    small = batch[:20]
    with Ring.create(capacity=1024, max_producers=2) as ring, GpuFormatter(ring) as gpu:
        gpu.send_batch(
            [t for t, _, _ in small],
            agent_types=[a for _, a, _ in small],
            stream_ids=[s for _, _, s in small],
            timestamps_ns=42,
        )
        gpu_raw = np.frombuffer(
            ring._core.mm, dtype=np.uint8, count=1024 * 256, offset=ring._core.slots_offset(0)
        ).copy()
    with Ring.create(capacity=1024, max_producers=1) as ring:
        p = ring.producer()
        for t, a, s in small:
            p.send(format_ansi(t, agent_type=a), stream_id=s, agent_type=a, timestamp_ns=42)
        used = p._hot.tail
        cpu_raw = np.frombuffer(
            ring._core.mm, dtype=np.uint8, count=1024 * 256, offset=ring._core.slots_offset(0)
        ).copy()
        p.close()
    assert gpu_raw[: used * 256].tobytes() == cpu_raw[: used * 256].tobytes()


@pytest.mark.skipif(importlib.util.find_spec("cupy") is not None, reason="CuPy is installed here")
def test_gpu_formatter_without_cupy_says_how_to_install() -> None:
    with Ring.create(capacity=8) as ring:
        pattern = r"GpuFormatter needs CuPy and an NVIDIA GPU: pip install 'flowplex\[cuda\]'"
        with pytest.raises(UsageError, match=pattern):
            GpuFormatter(ring)
        assert ring.stats().producers == 0
