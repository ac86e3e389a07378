"""Buffer packets: dtypes, dimensions, zero-copy adoption with any strides, writeability, new_buffer."""

from __future__ import annotations

import gc
import threading

import numpy as np
import numpy.typing as npt
import pytest
from numpy.lib.stride_tricks import as_strided

from flowplex._timestamps import TS_UNSET
from flowplex.packets import DType, Packet, TypeId, _buffers, dtype_size, new_buffer, to_packet

SUPPORTED = [
    (np.uint8, DType.U8, 1),
    (np.int8, DType.I8, 1),
    (np.uint16, DType.U16, 2),
    (np.int16, DType.I16, 2),
    (np.int32, DType.I32, 4),
    (np.int64, DType.I64, 8),
    (np.float16, DType.F16, 2),
    (np.float32, DType.F32, 4),
    (np.float64, DType.F64, 8),
]


def address(arr: npt.NDArray[np.generic]) -> int:
    return int(arr.__array_interface__["data"][0])


def test_dtype_codes_and_sizes() -> None:
    assert [int(m) for m in DType] == list(range(9))
    assert [dtype_size(m) for m in DType] == [1, 1, 2, 2, 4, 8, 2, 4, 8]
    assert dtype_size(9) == 0
    assert dtype_size(-1) == 0


@pytest.mark.parametrize(("np_type", "code", "size"), SUPPORTED)
def test_all_nine_dtypes_round_trip_without_copy(np_type: type[np.generic], code: DType, size: int) -> None:
    a = np.arange(12).astype(np_type).reshape(3, 4)
    p = Packet.from_numpy(a, ts=1)
    assert p.type_id == TypeId.BUFFER
    assert p.type_name == "Buffer"
    assert p.device == "cpu"
    assert f"dtype={code.name}" in repr(p)
    view = p.as_numpy()
    assert view.dtype == a.dtype
    assert view.dtype.itemsize == size
    assert address(view) == address(a)
    assert view.strides == a.strides
    np.testing.assert_array_equal(view, a)


@pytest.mark.parametrize(
    ("dtype", "hint"),
    [
        (np.bool_, r"arr\.astype\(np\.uint8\)"),
        (np.uint32, r"arr\.astype\(np\.int64\)"),
        (np.uint64, r"arr\.astype\(np\.int64\)"),
        (np.complex64, r"arr\.astype\(np\.float32\)"),
        (np.longdouble, r"convert first"),
        ("U3", r"convert first"),
        ("S3", r"convert first"),
        (object, r"convert first"),
        ("datetime64[s]", r"convert first"),
        ([("x", np.int32)], r"convert first"),
        (">i4", r"byte-swap first"),
    ],
)
def test_unsupported_dtypes_are_rejected_with_the_supported_list(dtype: object, hint: str) -> None:
    a = np.zeros(3, dtype=dtype)  # type: ignore[call-overload]
    pattern = (
        r"unsupported dtype .*: buffers hold uint8, int8, uint16, int16, int32, int64, float16, "
        r"float32 or float64 \(lm-flow codes u8 i8 u16 i16 i32 i64 f16 f32 f64\); .*" + hint
    )
    with pytest.raises(ValueError, match=pattern):
        Packet.from_numpy(a)
    with pytest.raises(ValueError, match=pattern):
        to_packet(a)
    assert a.flags.writeable  # a rejected array is left as it was


def test_eight_dims_ok_nine_rejected() -> None:
    eight = np.zeros((1, 2, 1, 2, 1, 2, 1, 2), np.uint8)
    assert Packet.from_numpy(eight).as_numpy().shape == eight.shape
    with pytest.raises(
        ValueError, match=r"unsupported ndim 9: buffers have 1 to 8 dimensions; reshape it first"
    ):
        Packet.from_numpy(np.zeros((1,) * 9, np.uint8))
    with pytest.raises(ValueError, match=r"unsupported ndim 0: .*use arr\.reshape\(1\), or \.item\(\)"):
        Packet.from_numpy(np.array(5.0))


def _strided_cases() -> list[npt.NDArray[np.generic]]:
    base = np.arange(60, dtype=np.float32).reshape(3, 4, 5)
    flat = np.arange(10, dtype=np.int16)
    return [
        base.T,  # 3-d transpose
        base.transpose(1, 0, 2),
        base[:, ::2, 1:4],  # step slices
        base[::-1, :, ::-2],  # negative strides
        flat[::-1],
        flat[::3],
        np.asfortranarray(base),
        as_strided(flat, shape=(4, 3), strides=(0, 2)),  # zero stride, writeable
        np.broadcast_to(flat[:5], (3, 5)),  # zero stride, read-only
    ]


@pytest.mark.parametrize("arr", _strided_cases())
def test_any_strides_round_trip_with_the_same_address(arr: npt.NDArray[np.generic]) -> None:
    expected = arr.copy()
    p = to_packet(arr, 0)
    view = p.as_numpy()
    assert address(view) == address(arr)
    assert view.strides == arr.strides
    assert view.shape == arr.shape
    np.testing.assert_array_equal(view, expected)


def test_views_are_read_only() -> None:
    p = Packet.from_numpy(np.zeros(3))
    view = p.as_numpy()
    assert not view.flags.writeable
    with pytest.raises(ValueError, match="read-only"):
        view[0] = 1
    with pytest.raises(ValueError, match="WRITEABLE"):
        view.flags.writeable = True
    engine_packet, writable = new_buffer(3, "u8")
    assert writable.flags.writeable
    assert not engine_packet.as_numpy().flags.writeable
    assert not engine_packet.payload.flags.writeable  # type: ignore[attr-defined]


def test_as_numpy_on_other_kinds_names_the_type() -> None:
    with pytest.raises(
        ValueError,
        match=r"as_numpy works on buffer packets; this packet holds I64 \(read it with as_int\(\)\)",
    ):
        Packet.from_int(1).as_numpy()
    with pytest.raises(ValueError, match=r"as_numpy works on buffer packets; this packet is empty"):
        Packet().as_numpy()


# --- writeability while adopted -------------------------------------------------------------------------


def test_adopted_array_is_read_only_until_the_last_packet_goes() -> None:
    a = np.zeros(4)
    p = Packet.from_numpy(a)
    assert not a.flags.writeable
    q = to_packet(p, 5)  # same handle
    assert q is p
    del p, q
    assert a.flags.writeable
    a[0] = 1  # really writeable again


def test_same_array_adopted_twice_stays_read_only_until_both_are_released() -> None:
    a = np.zeros(4)
    p1 = Packet.from_numpy(a)
    p2 = to_packet(a)
    assert _buffers.adoption_count(a) == 2
    del p1
    assert not a.flags.writeable
    del p2
    assert a.flags.writeable
    assert _buffers.adoption_count(a) == 0


def test_views_of_one_array_released_in_any_order() -> None:
    a = np.zeros(6)
    whole, part = Packet.from_numpy(a), Packet.from_numpy(a[2:])
    del whole  # the part's view of a still adopted
    assert a.flags.writeable
    del part
    assert a.flags.writeable


def test_read_only_array_stays_read_only() -> None:
    a = np.zeros(4)
    a.flags.writeable = False
    p = Packet.from_numpy(a)
    del p
    assert not a.flags.writeable


def test_release_on_another_thread() -> None:
    a = np.zeros(4)
    box = [Packet.from_numpy(a)]
    worker = threading.Thread(target=box.clear)
    worker.start()
    worker.join(timeout=10)
    assert not worker.is_alive()
    assert a.flags.writeable


def test_release_never_blocks_while_another_thread_holds_the_registry() -> None:
    a = np.zeros(4)
    box = [Packet.from_numpy(a)]
    with _buffers._lock:  # as if another thread were adopting right now
        worker = threading.Thread(target=box.clear)
        worker.start()
        worker.join(timeout=10)
        assert not worker.is_alive(), "a finalizer blocked on the registry lock"
        assert not a.flags.writeable  # queued for the lock holder
    # Whoever holds the lock drains the queue on leaving; here the next adoption does.
    b = np.zeros(1)
    del b, box
    Packet.from_numpy(np.zeros(1))
    assert a.flags.writeable


def test_release_inside_a_critical_section_on_the_same_thread_is_deferred() -> None:
    # A GC pass inside adopt() may run a holder's finalizer on the thread that holds the lock.
    a = np.zeros(4)
    p = Packet.from_numpy(a)
    with _buffers._lock:
        _buffers._depth += 1
        try:
            del p  # must neither deadlock nor touch the registry mid-section
            assert not a.flags.writeable
        finally:
            _buffers._depth -= 1
    _buffers._drain()
    assert a.flags.writeable


def test_releases_from_cyclic_garbage_and_many_threads() -> None:
    arrays = [np.zeros(8) for _ in range(8)]
    old = gc.get_threshold()
    gc.set_threshold(5)  # collect often, so finalizers run in the middle of adoptions
    try:

        def churn(seed: int) -> None:
            for i in range(300):
                a = arrays[(seed + i) % len(arrays)]
                p = Packet.from_numpy(a)
                cycle: list[object] = [p]
                cycle.append(cycle)  # freed only by the cyclic GC, on whichever thread runs it
                if i % 3 == 0:
                    p.make_mutable()

        threads = [threading.Thread(target=churn, args=(s,)) for s in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        assert not any(t.is_alive() for t in threads)
    finally:
        gc.set_threshold(*old)
    gc.collect()
    _buffers._drain()
    assert all(a.flags.writeable for a in arrays)
    assert all(_buffers.adoption_count(a) == 0 for a in arrays)


# --- new_buffer -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("dtype", "expected"),
    [
        ("u8", np.uint8),
        ("U8", np.uint8),
        ("i8", np.int8),  # lm-flow's code wins over numpy's int64 spelling
        ("u16", np.uint16),
        ("i16", np.int16),
        ("i32", np.int32),
        ("i64", np.int64),
        ("f16", np.float16),
        ("f32", np.float32),
        ("f64", np.float64),
        (DType.F32, np.float32),
        (4, np.int32),
        (np.float64, np.float64),
        (np.dtype(np.int16), np.int16),
        ("float32", np.float32),
        ("<f4", np.float32),
        ("uint8", np.uint8),
    ],
)
def test_new_buffer_dtypes(dtype: object, expected: type[np.generic]) -> None:
    p, view = new_buffer((2, 3), dtype)  # type: ignore[arg-type]
    assert view.dtype == np.dtype(expected)
    assert p.as_numpy().dtype == np.dtype(expected)


def test_new_buffer_is_zeroed_contiguous_and_writable() -> None:
    p, view = new_buffer([2, 3, 4], "i32")
    assert view.shape == (2, 3, 4)
    assert view.flags.c_contiguous
    assert view.flags.writeable
    assert not view.any()
    view[1, 2, 3] = 7
    assert p.as_numpy()[1, 2, 3] == 7
    assert p.timestamp == TS_UNSET
    assert "external" not in repr(p)
    assert new_buffer(5, DType.U8)[1].shape == (5,)
    assert new_buffer((0, 3), "u8")[1].shape == (0, 3)


@pytest.mark.parametrize(
    ("shape", "dtype", "error", "pattern"),
    [
        ((), "u8", ValueError, r"new_buffer: unsupported ndim 0: buffers have 1 to 8 dimensions"),
        ((1,) * 9, "u8", ValueError, r"unsupported ndim 9"),
        ((2, -1), "u8", ValueError, r"new_buffer: dimensions must be >= 0, got \(2, -1\)"),
        ((2.5,), "u8", TypeError, r"new_buffer: shape must be an int or a sequence of ints, got \(2\.5,\)"),
        (
            (2,),
            "uint32",
            ValueError,
            r"unsupported dtype uint32: buffers hold uint8, .*arr\.astype\(np\.int64\)",
        ),
        (
            (2,),
            "u32",
            ValueError,
            r"dtype 'u32' is not a dtype; use one of uint8, int8, .* \(lm-flow codes u8 ",
        ),
        ((2,), object(), ValueError, r"dtype <object object at .*> is not a dtype"),
        ((2,), 9, ValueError, r"dtype code 9 is unknown; codes are 0 \(U8\) to 8 \(F64\)"),
        ((2,), np.bool_, ValueError, r"unsupported dtype bool"),
    ],
)
def test_new_buffer_errors(shape: object, dtype: object, error: type[Exception], pattern: str) -> None:
    with pytest.raises(error, match=pattern):
        new_buffer(shape, dtype)  # type: ignore[arg-type]
