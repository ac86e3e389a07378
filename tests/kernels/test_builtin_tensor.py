"""The buffer built-ins: Invert, Normalize, Cast, Affine, Clamp, Reduce."""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import pytest

import flowplex
from flowplex import KernelError, Packet

from .conftest import NO_GRAPH, GraphFactory, run_graph, run_once

inf, nan = math.inf, math.nan
TENSOR_KERNELS = ["CastKernel", "AffineKernel", "ClampKernel", "ReduceKernel"]
NUMPY_NAMES = {"u8": "uint8", "i8": "int8", "u16": "uint16", "i16": "int16", "i32": "int32",
               "i64": "int64", "f16": "float16", "f32": "float32", "f64": "float64"}
CODES = list(NUMPY_NAMES)


def one_buffer(kernel: str, value: object, options: object = None, ts: int = 5) -> npt.NDArray[np.generic]:
    """Run ``kernel`` once and return its single output buffer (checked to be a fresh engine buffer)."""
    (out,) = run_once(kernel, {0: value}, options=options, ts=ts)
    assert len(out) == 1
    p = out[0]
    assert p.timestamp == ts
    assert p.type_name == "Buffer"
    assert "external" not in repr(p)          # engine memory, not an adopted host array
    arr: npt.NDArray[np.generic] = p.as_numpy()
    assert arr.flags.c_contiguous
    return arr


def same(actual: npt.NDArray[np.generic], expected: Sequence[float], dtype: str) -> None:
    """Equal dtype and values, NaN matching NaN and the sign of zeros included."""
    want = np.array(expected, dtype=np.float64)
    assert actual.dtype == np.dtype(dtype)
    got = actual.astype(np.float64)
    np.testing.assert_array_equal(got, want)
    numbers = ~np.isnan(want)
    assert np.array_equal(np.signbit(got[numbers]), np.signbit(want[numbers]))


# --- shared input checks -----------------------------------------------------------------------


@NO_GRAPH
@pytest.mark.parametrize("kernel", TENSOR_KERNELS)
@pytest.mark.parametrize(
    "view",
    [lambda a: a.T, lambda a: a[:, ::2], lambda a: a[::-1]],
    ids=["transposed", "strided", "reversed"],
)
def test_non_contiguous_input_fails(kernel: str, view: object) -> None:
    arr = np.arange(12, dtype=np.float32).reshape(3, 4)
    with pytest.raises(KernelError, match=r"ValueError: input buffer must be contiguous \(shape .*strides"):
        run_once(kernel, {0: view(arr)})  # type: ignore[operator]


@NO_GRAPH
@pytest.mark.parametrize("kernel", [*TENSOR_KERNELS, "InvertKernel"])
def test_an_empty_input_is_not_a_buffer(kernel: str) -> None:
    with pytest.raises(KernelError, match=r"input is not a buffer \(input 0 holds nothing\)"):
        run_once(kernel, {})


@NO_GRAPH
@pytest.mark.parametrize("kernel", TENSOR_KERNELS)
def test_tensor_kernels_declare_buffer_inputs(kernel: str) -> None:
    with pytest.raises(ValueError, match=r"input port 0 type mismatch: contract declares Buffer, actual I64"):
        run_once(kernel, {0: 3})


@NO_GRAPH
@pytest.mark.parametrize(("kernel", "declared"), [("CastKernel", "Buffer"), ("ReduceKernel", "F64")])
def test_tensor_outputs_are_declared(make_graph: GraphFactory, kernel: str, declared: str) -> None:
    with pytest.raises(ValueError, match=rf"type mismatch on edge `y`.*declares {declared}.*declares I64"):
        make_graph(f"""
input_ports: [x]
nodes:
  - {{ name: t, kernel: {kernel}, input_ports: [x], output_ports: [y] }}
  - {{ name: s, kernel: ScaleKernel, input_ports: [y], output_ports: [z] }}
output_ports: [z]
""")


# --- CastKernel --------------------------------------------------------------------------------

CAST_IN = [0.5, 1.5, 2.5, -0.5, -1.5, 255.5, 300.0, -3.0, inf, -inf, nan]
CAST_OUT: dict[str, list[float]] = {
    "u8": [0, 2, 2, 0, 0, 255, 255, 0, 255, 0, 0],
    "i8": [0, 2, 2, 0, -2, 127, 127, -3, 127, -128, 0],
    "u16": [0, 2, 2, 0, 0, 256, 300, 0, 65535, 0, 0],
    "i16": [0, 2, 2, 0, -2, 256, 300, -3, 32767, -32768, 0],
    "i32": [0, 2, 2, 0, -2, 256, 300, -3, 2**31 - 1, -(2**31), 0],
    "i64": [0, 2, 2, 0, -2, 256, 300, -3, 2**63 - 1, -(2**63), 0],
    "f16": CAST_IN,
    "f32": CAST_IN,
    "f64": CAST_IN,
}


@NO_GRAPH
@pytest.mark.parametrize("code", CODES)
def test_cast_rounds_half_to_even_and_saturates(code: str) -> None:
    out = one_buffer("CastKernel", np.array(CAST_IN), {"dtype": code})
    if code == "i64":  # float64 cannot hold 2**63 - 1: compare as ints
        assert out.tolist() == CAST_OUT[code]
    else:
        same(out, CAST_OUT[code], NUMPY_NAMES[code])


@NO_GRAPH
@pytest.mark.parametrize("src", ["uint8", "int16", "int64", "float16", "float32"])
@pytest.mark.parametrize("code", CODES)
def test_cast_between_every_pair_of_dtypes_keeps_shape(src: str, code: str) -> None:
    arr = np.arange(24).reshape(2, 3, 4).astype(src)
    out = one_buffer("CastKernel", arr, {"dtype": code})
    assert out.shape == (2, 3, 4)
    np.testing.assert_array_equal(out.astype(np.float64), np.arange(24).reshape(2, 3, 4))


@NO_GRAPH
def test_cast_to_f16_boundaries() -> None:
    x = [65504.0, 65519.0, 65519.99, 65520.0, -65520.0, 1e6, 2049.0, 2051.0]
    out = one_buffer("CastKernel", np.array(x), {"dtype": "f16"})
    # 65519 is below the midpoint to 2**16 and rounds to the largest half; 65520 is the midpoint
    # and rounds to even, which overflows to inf. 2049/2051 are ties between representable halves.
    same(out, [65504.0, 65504.0, 65504.0, inf, -inf, inf, 2048.0, 2052.0], "float16")


@NO_GRAPH
def test_cast_to_f16_underflows_to_subnormals_and_signed_zeros() -> None:
    tiny = 2.0**-24  # the smallest positive half (a subnormal)
    x = [tiny, tiny / 2, -tiny / 2, tiny * 1.5, tiny * 0.4, 6.1e-5]
    out = one_buffer("CastKernel", np.array(x), {"dtype": "f16"})
    same(out, [tiny, 0.0, -0.0, 2 * tiny, 0.0, float(np.float16(6.1e-5))], "float16")


@NO_GRAPH
def test_cast_to_f16_rounds_once_from_the_double() -> None:
    # Just above the midpoint between 1 and the next half: a float32 step would round it to the
    # midpoint first and then to even (1.0). Converting straight from the double gives 1 + 2**-10.
    x = 1.0 + 2.0**-11 + 2.0**-30
    out = one_buffer("CastKernel", np.array([x]), {"dtype": "f16"})
    same(out, [1.0 + 2.0**-10], "float16")


@NO_GRAPH
def test_cast_from_f16_is_exact() -> None:
    halves = np.array([65504, 2.0**-24, -0.0, inf, nan], dtype=np.float16)
    out = one_buffer("CastKernel", halves, {"dtype": "f64"})
    same(out, [65504.0, 2.0**-24, -0.0, inf, nan], "float64")


@NO_GRAPH
def test_cast_integers_to_f16_overflow_to_inf() -> None:
    ints = np.array([70000, -70000, 65519, 65520, 2049], dtype=np.int32)
    out = one_buffer("CastKernel", ints, {"dtype": "f16"})
    same(out, [inf, -inf, 65504.0, inf, 2048.0], "float16")


@NO_GRAPH
@pytest.mark.parametrize(
    ("kernel", "options"),
    [("CastKernel", {"dtype": "f32"}), ("CastKernel", {"dtype": "i16"}), ("CastKernel", {"dtype": "f16"}),
     ("AffineKernel", {"scale": 2.0}), ("ClampKernel", {"max": 1.0})],
)
def test_signalling_nans_stay_nan_without_warnings(kernel: str, options: object) -> None:
    # 0x7c01 is a signalling NaN in half precision; converting it must not warn (warnings are
    # errors in this test suite).
    halves = np.array([0x7C01, 0x3C00], dtype=np.uint16).view(np.float16)
    out = one_buffer(kernel, halves, options)
    assert out[1] == 1 or out[1] == 2
    if out.dtype.kind == "f":
        assert np.isnan(out[0])
    else:
        assert out[0] == 0


@NO_GRAPH
def test_cast_to_i64_saturates_and_goes_through_double() -> None:
    out = one_buffer("CastKernel", np.array([1e19, -1e19, 2.0**63, -(2.0**63)]), {"dtype": "i64"})
    assert out.tolist() == [2**63 - 1, -(2**63), 2**63 - 1, -(2**63)]
    # every element passes through a double (lm-flow's rule), so 2**53 + 1 is not kept
    out = one_buffer("CastKernel", np.array([2**53 + 1, -7], dtype=np.int64), {"dtype": "i64"})
    assert out.tolist() == [2**53, -7]


@NO_GRAPH
def test_cast_float32_overflows_to_inf() -> None:
    same(one_buffer("CastKernel", np.array([1e39, -1e39, 3.4e38])), [inf, -inf, float(np.float32(3.4e38))],
         "float32")


@NO_GRAPH
@pytest.mark.parametrize("options", [None, {"dtype": 3}, {"dtype": ["u8"]}])
def test_cast_defaults_to_f32(options: object) -> None:
    # A non-string dtype reads as missing (lm-flow's option getter rule).
    out = one_buffer("CastKernel", np.array([1, 2], dtype=np.uint8), options)
    same(out, [1.0, 2.0], "float32")


@NO_GRAPH
def test_cast_keeps_an_empty_buffer() -> None:
    out = one_buffer("CastKernel", np.zeros((0, 3), dtype=np.uint8), {"dtype": "f64"})
    assert out.shape == (0, 3)
    assert out.dtype == np.float64


@NO_GRAPH
@pytest.mark.parametrize("dtype", ["float32", "F32", "", "u32", "bool"])
def test_cast_unknown_dtype_fails_at_open(dtype: str) -> None:
    r = flowplex.KernelRunner("CastKernel", options={"dtype": dtype})
    with pytest.raises(
        KernelError,
        match=rf"options\.dtype '{dtype}' is unknown/unsupported; expected one of u8, i8, u16, i16, i32, "
              r"i64, f16, f32, f64",
    ):
        r.start()


# --- AffineKernel ------------------------------------------------------------------------------

U8 = np.array([0, 1, 100, 200, 255], dtype=np.uint8)


@NO_GRAPH
@pytest.mark.parametrize(
    ("options", "expected", "dtype"),
    [
        (None, [0, 1, 100, 200, 255], "uint8"),
        ({"scale": 0.5}, [0, 0, 50, 100, 128], "uint8"),           # 0.5 and 127.5: half to even
        ({"scale": 0.5, "dtype": "f32"}, [0, 0.5, 50, 100, 127.5], "float32"),
        ({"scale": 2, "shift": 0.5}, [0, 2, 200, 255, 255], "uint8"),  # int scale reads as 2.0
        ({"scale": -1.0}, [0, 0, 0, 0, 0], "uint8"),
        ({"scale": 1.0, "shift": -128, "dtype": "i8"}, [-128, -127, -28, 72, 127], "int8"),
        ({"scale": 1 / 255, "dtype": "f64"}, [0, 1 / 255, 100 / 255, 200 / 255, 1.0], "float64"),
        ({"dtype": ""}, [0, 1, 100, 200, 255], "uint8"),          # "" = keep the input dtype
        ({"dtype": 5}, [0, 1, 100, 200, 255], "uint8"),           # not a string: default
    ],
)
def test_affine(options: object, expected: list[float], dtype: str) -> None:
    same(one_buffer("AffineKernel", U8, options), expected, dtype)


@NO_GRAPH
def test_affine_keeps_shape_and_float_specials_without_warnings() -> None:
    arr = np.array([[inf, -inf], [nan, 1.0]])
    same(one_buffer("AffineKernel", arr, {"scale": 0.0}).reshape(-1), [nan, nan, nan, 0.0], "float64")
    out = one_buffer("AffineKernel", arr, {"shift": 1.0})
    assert out.shape == (2, 2)
    same(out.reshape(-1), [inf, -inf, nan, 2.0], "float64")


@NO_GRAPH
def test_affine_to_f16_uses_the_cast_rules() -> None:
    out = one_buffer("AffineKernel", np.array([30000.0, 32759.5, 32760.0]), {"scale": 2.0, "dtype": "f16"})
    same(out, [60000.0, 65504.0, inf], "float16")


@NO_GRAPH
def test_affine_unknown_dtype_fails_at_open() -> None:
    r = flowplex.KernelRunner("AffineKernel", options={"dtype": "float64"})
    with pytest.raises(KernelError, match=r"options\.dtype 'float64' is unknown/unsupported"):
        r.start()


# --- ClampKernel -------------------------------------------------------------------------------


@NO_GRAPH
@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({"min": 10, "max": 200}, [10, 10, 100, 200, 200]),
        ({"min": 10.5, "max": 199.5}, [10, 10, 100, 200, 200]),   # bounds are stored half to even
        ({"min": -10.5, "max": 1000}, [0, 1, 100, 200, 255]),
        ({"min": 300, "max": 100}, [100, 100, 100, 100, 100]),    # min > max: max wins
        (None, [0, 1, 100, 200, 255]),
    ],
)
def test_clamp_keeps_the_dtype(options: object, expected: list[float]) -> None:
    same(one_buffer("ClampKernel", U8, options), expected, "uint8")


@NO_GRAPH
def test_clamp_floats() -> None:
    arr = np.array([1.0, nan, -inf, inf, 5.0])
    same(one_buffer("ClampKernel", arr, {"min": 0, "max": 2}), [1.0, nan, 0.0, 2.0, 2.0], "float64")
    same(one_buffer("ClampKernel", arr, None), [1.0, nan, -inf, inf, 5.0], "float64")
    halves = np.array([0.1, 1.0], dtype=np.float16)
    same(one_buffer("ClampKernel", halves, {"min": 0.3}), [float(np.float16(0.3)), 1.0], "float16")
    same(one_buffer("ClampKernel", np.array([5.0], dtype=np.float32), {"min": 1e300}), [inf], "float32")


@NO_GRAPH
def test_clamp_int64_goes_through_double() -> None:
    arr = np.array([2**62 + 1, -5, 2**63 - 1], dtype=np.int64)
    assert one_buffer("ClampKernel", arr, {"min": 0.5}).tolist() == [2**62, 0, 2**63 - 1]


# --- ReduceKernel ------------------------------------------------------------------------------

MATRIX = np.array([[1, 2], [3, -4]], dtype=np.int32)


@NO_GRAPH
@pytest.mark.parametrize(
    ("op", "expected"), [("sum", 2.0), ("mean", 0.5), ("min", -4.0), ("max", 3.0), (None, 0.5)]
)
def test_reduce(op: str | None, expected: float) -> None:
    (out,) = run_once("ReduceKernel", {0: MATRIX}, options=None if op is None else {"op": op}, ts=11)
    assert [(p.timestamp, p.type_name, p.as_float()) for p in out] == [(11, "F64", expected)]


@NO_GRAPH
@pytest.mark.parametrize("op", ["sum", "mean", "min", "max"])
@pytest.mark.parametrize("shape", [(0,), (0, 3), (4, 0, 2)])
def test_reduce_of_an_empty_buffer_is_zero(op: str, shape: tuple[int, ...]) -> None:
    (out,) = run_once("ReduceKernel", {0: np.zeros(shape, dtype=np.float32)}, options={"op": op})
    assert [p.as_float() for p in out] == [0.0]


@NO_GRAPH
def test_reduce_of_an_empty_engine_buffer_is_zero() -> None:
    packet, _ = flowplex.packets.new_buffer((0,), "u8")
    (out,) = run_once("ReduceKernel", {0: packet}, options={"op": "max"})
    assert [p.as_float() for p in out] == [0.0]


@NO_GRAPH
@pytest.mark.parametrize(
    ("values", "op", "expected"),
    [
        ([1.0, nan, 3.0], "max", 3.0),       # min/max skip NaN
        ([nan, 1.0, 3.0], "min", 1.0),
        ([nan, nan], "max", -inf),
        ([nan, nan], "min", inf),
        ([1.0, nan], "sum", nan),
        ([inf, -inf], "sum", nan),           # no RuntimeWarning either
        ([1e308, 1e308], "sum", inf),
        ([65504, 65504], "sum", 131008.0),   # f16 input, summed in double
    ],
)
def test_reduce_special_values(values: list[float], op: str, expected: float) -> None:
    dtype = np.float16 if values[0] == 65504 else np.float64
    (out,) = run_once("ReduceKernel", {0: np.array(values, dtype=dtype)}, options={"op": op})
    result = out[0].as_float()
    assert result is not None
    assert result == expected or (math.isnan(result) and math.isnan(expected))


@NO_GRAPH
def test_reduce_of_a_signalling_nan_does_not_warn() -> None:
    halves = np.array([0x7C01, 0x3C00], dtype=np.uint16).view(np.float16)
    (out,) = run_once("ReduceKernel", {0: halves}, options={"op": "max"})
    assert out[0].as_float() == 1.0


@NO_GRAPH
def test_reduce_sums_left_to_right_like_lmflow() -> None:
    # A pairwise sum would keep the small terms (1.0000000000000988e16); lm-flow's running
    # double sum loses each of them against 1e16.
    values = np.array([1e16] + [1.0] * 1000)
    (out,) = run_once("ReduceKernel", {0: values}, options={"op": "sum"})
    assert out[0].as_float() == 1e16
    (out,) = run_once("ReduceKernel", {0: values}, options={"op": "mean"})
    assert out[0].as_float() == 1e16 / 1001


@NO_GRAPH
@pytest.mark.parametrize("op", ["prod", "MEAN", "", "average"])
def test_reduce_unknown_op_fails_at_open(op: str) -> None:
    r = flowplex.KernelRunner("ReduceKernel", options={"op": op})
    with pytest.raises(KernelError, match=rf"options\.op must be one of sum/mean/min/max, got '{op}'"):
        r.start()


# --- InvertKernel ------------------------------------------------------------------------------


@NO_GRAPH
@pytest.mark.parametrize("shape", [(2, 3), (2, 3, 2), (2, 2, 3, 2)])
def test_invert_writes_255_minus_x(shape: tuple[int, ...]) -> None:
    arr = np.arange(math.prod(shape), dtype=np.uint8).reshape(shape)
    (out,) = run_once("InvertKernel", {0: arr}, ts=4)
    assert out[0].timestamp == 4
    np.testing.assert_array_equal(out[0].as_numpy(), 255 - arr)


@NO_GRAPH
def test_invert_never_writes_to_a_host_array() -> None:
    arr = np.arange(12, dtype=np.uint8).reshape(3, 4)
    (out,) = run_once("InvertKernel", {0: arr[:, ::2]})  # a strided view is fine: CoW copies it
    np.testing.assert_array_equal(out[0].as_numpy(), 255 - arr[:, ::2])
    np.testing.assert_array_equal(arr, np.arange(12).reshape(3, 4))
    assert arr.flags.writeable


@NO_GRAPH
@pytest.mark.parametrize(
    ("value", "found"),
    [(np.zeros((2, 2), dtype=np.float32), "float32 with ndim 2"),
     (np.zeros((2, 2), dtype=np.int8), "int8 with ndim 2"),
     (np.zeros(4, dtype=np.uint8), "uint8 with ndim 1")],
)
def test_invert_needs_a_u8_image(value: object, found: str) -> None:
    with pytest.raises(KernelError, match=rf"InvertKernel needs a U8 buffer with ndim >= 2, got {found}"):
        run_once("InvertKernel", {0: value})


@NO_GRAPH
def test_invert_rejects_non_buffers() -> None:
    with pytest.raises(KernelError, match=r"input is not a buffer \(input 0 holds I64\)"):
        run_once("InvertKernel", {0: 5})


@NO_GRAPH
def test_invert_in_place_in_a_runner() -> None:
    packet, view = flowplex.packets.new_buffer((2, 3), "u8")
    view[:] = 7
    address = view.ctypes.data
    del view
    with flowplex.KernelRunner("InvertKernel") as r:
        r.add_input(0, packet)
        del packet
        r.process(0)
        out = r.try_next()
    assert out is not None
    assert out.as_numpy().ctypes.data == address


# The zero-copy tests run every node on a DelegatingExecutor, so that nothing runs before the
# test has dropped its own reference to the packet (it runs inside `Poller.next` / `wait_done`).
INVERT_CHAIN = """
executors: [{ name: host, type: DelegatingExecutor }]
input_ports: [x]
nodes:
  - { name: p, kernel: PassThroughKernel, executor: host, input_ports: [x], output_ports: [a] }
  - { name: i1, kernel: InvertKernel, executor: host, input_ports: [a], output_ports: [b] }
  - { name: i2, kernel: InvertKernel, executor: host, input_ports: [b], output_ports: [y] }
output_ports: [y]
"""


ON_HOST = pytest.mark.executors(
    "delegating",
    reason="pins every node to `host` so that nothing runs before the test drops its reference (see "
    "INVERT_CHAIN)",
)
"""INVERT_CHAIN-style graphs: every node pinned to a DelegatingExecutor."""


def send_last_reference(
    g: flowplex.Graph, box: list[Packet], outputs: tuple[str, ...] = ("y",)
) -> list[Packet]:
    """Send the packet in ``box`` (emptying it, so the test keeps no reference).

    Returns the single packet each of ``outputs`` delivers.
    """
    pollers = [g.add_poller(name) for name in outputs]
    g.start()
    g.send("x", box.pop(), ts=0)
    g.close_all_inputs()
    results = [list(p) for p in pollers]
    g.wait_done(timeout=10)
    assert [len(r) for r in results] == [1] * len(outputs)
    return [r[0] for r in results]


@ON_HOST
def test_invert_is_zero_copy_when_exclusive(make_graph: GraphFactory) -> None:
    g = make_graph(INVERT_CHAIN)
    packet, view = g.new_buffer((4, 5), "u8")
    view[:] = np.arange(20, dtype=np.uint8).reshape(4, 5)
    address = view.ctypes.data
    box = [packet]
    del packet, view
    copies = flowplex.packets.cow_stats().copies
    (result,) = send_last_reference(g, box)
    # Three nodes, two in-place inversions: the same memory all along, and no copy.
    assert result.as_numpy().ctypes.data == address
    np.testing.assert_array_equal(result.as_numpy(), np.arange(20).reshape(4, 5))
    assert flowplex.packets.cow_stats().copies == copies


@ON_HOST
def test_invert_adopts_a_host_array_the_host_let_go_of(make_graph: GraphFactory) -> None:
    g = make_graph(INVERT_CHAIN)
    arr = np.full((2, 2), 9, dtype=np.uint8)
    address = arr.ctypes.data
    box = [Packet.from_numpy(arr)]
    del arr  # now only the packet references the array
    (result,) = send_last_reference(g, box)
    assert result.as_numpy().ctypes.data == address
    np.testing.assert_array_equal(result.as_numpy(), np.full((2, 2), 9))


@ON_HOST
def test_invert_copies_when_a_sibling_shares_the_packet(make_graph: GraphFactory) -> None:
    g = make_graph("""
executors: [{ name: host, type: DelegatingExecutor }]
input_ports: [x]
nodes:
  - { name: inv, kernel: InvertKernel, executor: host, input_ports: [x], output_ports: [y] }
  - { name: keep, kernel: PassThroughKernel, executor: host, input_ports: [x], output_ports: [z] }
output_ports: [y, z]
""")
    packet, view = g.new_buffer((2, 3), "u8")
    view[:] = 10
    address = view.ctypes.data
    box = [packet]
    del packet, view
    copies = flowplex.packets.cow_stats().copies
    inverted, original = send_last_reference(g, box, ("y", "z"))
    # `keep` still held the packet when `inv` ran: `inv` inverted its own copy.
    assert flowplex.packets.cow_stats().copies == copies + 1
    assert inverted.as_numpy().ctypes.data != address
    assert original.as_numpy().ctypes.data == address
    np.testing.assert_array_equal(inverted.as_numpy(), np.full((2, 3), 245))
    np.testing.assert_array_equal(original.as_numpy(), np.full((2, 3), 10))


def test_invert_copies_when_the_host_keeps_its_array(make_graph: GraphFactory) -> None:
    g = make_graph(INVERT_CHAIN.replace("i2, kernel: InvertKernel", "i2, kernel: PassThroughKernel"))
    arr = np.full((2, 2), 9, dtype=np.uint8)
    (result,) = run_graph(g, [("x", arr, 0)], ["y"])["y"]
    assert not np.shares_memory(result.as_numpy(), arr)
    np.testing.assert_array_equal(result.as_numpy(), np.full((2, 2), 246))
    np.testing.assert_array_equal(arr, np.full((2, 2), 9))


# --- NormalizeKernel ---------------------------------------------------------------------------

NORMALIZE = """
input_ports: [x]
nodes:
  - { name: n, kernel: NormalizeKernel, input_ports: [x], output_ports: [y],
      options: { scale: 1.5, mean: [1, 2, 3, 4, 5], std: [0.5], roi: { x: 3, y: 4 } } }
output_ports: [y]
"""


@pytest.mark.local_kernels(
    reason="checks that the output shares the sent array's memory: loopback hands its kernels decoded copies",
)
def test_normalize_forwards_and_logs(make_graph: GraphFactory, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="flowplex")
    g = make_graph(NORMALIZE)
    g.set_side_packet("calibration", "cam0.json")
    arr = np.ones((2, 2), dtype=np.float32)
    out = run_graph(g, [("x", arr, 3), ("x", "text", 4)], ["y"])
    assert [p.timestamp for p in out["y"]] == [3, 4]
    assert np.shares_memory(out["y"][0].as_numpy(), arr)
    assert out["y"][1].as_str() == "text"
    records = [(r.levelno, r.getMessage()) for r in caplog.records if r.getMessage().startswith("[n]")]
    assert records == [
        (logging.INFO, "[n] scale=1.5 mean=5 std=1 roi=(3,4) calib=yes"),
        (logging.INFO, "[n] finished normally, result is valid"),
    ]


def test_normalize_warns_on_an_abnormal_end(
    make_graph: GraphFactory, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="flowplex")
    g = make_graph(NORMALIZE)
    g.set_side_packet("calibration", 1)
    g.start()
    g.cancel()
    with pytest.raises(flowplex.GraphCancelled):
        g.wait_done(timeout=10)
    assert (logging.WARNING, "[n] abnormal termination, discarding result") in [
        (r.levelno, r.getMessage()) for r in caplog.records
    ]


def test_normalize_requires_the_calibration_side_packet(make_graph: GraphFactory) -> None:
    with pytest.raises(ValueError, match=r"kernel runner missing required side packet `calibration`"):
        run_once("NormalizeKernel", {0: 1}, options={"scale": 1.0})
    g = make_graph(NORMALIZE)
    with pytest.raises(ValueError, match=r"calibration"):
        g.start()


@NO_GRAPH
@pytest.mark.parametrize("options", [None, {}, {"scale": "2"}, {"scale": True}])
def test_normalize_requires_a_numeric_scale(options: object) -> None:
    r = flowplex.KernelRunner("NormalizeKernel", options=options, side_packets={"calibration": 1})
    with pytest.raises(KernelError, match=r"required parameter options\.scale is missing or type mismatch"):
        r.start()


@NO_GRAPH
def test_normalize_accepts_an_int_scale() -> None:
    (out,) = run_once("NormalizeKernel", {0: 7}, options={"scale": 2}, side_packets={"calibration": 1})
    assert [p.as_int() for p in out] == [7]
