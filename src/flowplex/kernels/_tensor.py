"""Built-in buffer kernels: Invert, Normalize, Cast, Affine, Clamp, Reduce, and their dtype rules.

Numeric rules shared by Cast, Affine, Clamp and Reduce (lm-flow's, so outputs match it):

* Input buffers must be C-contiguous ("input buffer must be contiguous"); anything but a buffer
  fails with "input is not a buffer".
* Every element goes through a float64 (so int64 values beyond 2**53 lose precision, as in
  lm-flow), is computed there, and is stored into the output dtype (a plain Cast uses numpy's
  direct cast wherever that provably gives the same values, which is several times faster):

  - float targets round to nearest even directly from the float64 (no double rounding through
    float32) and overflow to ±inf: for float16, 65519 → 65504 (the largest finite half) and
    65520 → inf; NaN and ±inf are kept;
  - integer targets round half to even, then saturate to the target's range (±inf and values
    beyond it go to its min/max). NaN becomes 0. lm-flow leaves NaN and int64 overflow to C++'s
    undefined float-to-int conversion (on x86: 0 for 8/16-bit targets, the minimum for i32/i64,
    and 2**63 and above become the int64 minimum); flowplex saturates instead.

NaN payload bits are numpy's (a signalling NaN stays signalling); lm-flow quiets them.

All of it is vectorised numpy; no Python loop touches elements.
"""

from __future__ import annotations

import math
from typing import Final, TypeAlias, cast, final

import numpy as np
import numpy.typing as npt

from .._log import LogLevel
from ..packets import Packet, TypeId
from ._context import CloseReason, Context
from ._contract import Contract
from ._registry import Kernel, kernel

__all__ = [
    "AffineKernel",
    "CastKernel",
    "ClampKernel",
    "DTYPE_CODES",
    "InvertKernel",
    "NormalizeKernel",
    "ReduceKernel",
    "parse_dtype_option",
    "store_f64",
]

F64Array: TypeAlias = npt.NDArray[np.float64]
Array: TypeAlias = npt.NDArray[np.generic]

DTYPE_CODES: Final[dict[str, np.dtype[np.generic]]] = {
    "u8": np.dtype(np.uint8),
    "i8": np.dtype(np.int8),
    "u16": np.dtype(np.uint16),
    "i16": np.dtype(np.int16),
    "i32": np.dtype(np.int32),
    "i64": np.dtype(np.int64),
    "f16": np.dtype(np.float16),
    "f32": np.dtype(np.float32),
    "f64": np.dtype(np.float64),
}
"""The ``dtype`` option values (lm-flow's codes, lower case only) and their numpy dtypes."""

_CODES_TEXT: Final = ", ".join(DTYPE_CODES)
_TWO_63: Final = 2.0**63
_LARGEST_BELOW_TWO_63: Final = math.nextafter(_TWO_63, 0.0)
_I64_MAX: Final = 2**63 - 1
_INT_RANGES: Final[dict[np.dtype[np.generic], tuple[float, float]]] = {
    np.dtype(t): (float(np.iinfo(t).min), float(np.iinfo(t).max))
    for t in (np.uint8, np.int8, np.uint16, np.int16, np.int32, np.int64)
}
"""Float64 bounds of each integer dtype (int64's upper bound rounds up to 2**63)."""


def parse_dtype_option(cc: Context, default: str) -> np.dtype[np.generic] | None:
    """The numpy dtype named by option ``dtype``; None when it resolves to ``""``.

    A missing or non-string option means ``default`` (lm-flow's getter rule).

    Raises:
        ValueError: The option names no supported dtype.
    """
    code = cc.option_str("dtype", default)
    if code == "":
        return None
    dt = DTYPE_CODES.get(code)
    if dt is None:
        msg = f"options.dtype {code!r} is unknown/unsupported; expected one of {_CODES_TEXT}"
        raise ValueError(msg)
    return dt


def _buffer(p: Packet) -> Array:
    """A read-only view of ``p``'s buffer; ``ValueError`` unless it is a buffer."""
    if p.type_id != TypeId.BUFFER:
        found = "nothing" if p.is_empty else p.type_name
        msg = f"input is not a buffer (input 0 holds {found})"
        raise ValueError(msg)
    return p.as_numpy()


def _contiguous_input(cc: Context) -> Array:
    """Input 0 as a C-contiguous array; ``ValueError`` otherwise."""
    arr = _buffer(cc.input(0))
    if not arr.flags.c_contiguous:
        msg = (f"input buffer must be contiguous (shape {arr.shape}, strides {arr.strides}); "
               "send np.ascontiguousarray(a)")
        raise ValueError(msg)
    return arr


def _ieee() -> np.errstate:
    """Silence numpy's floating-point warnings for one computation.

    Overflow to ±inf, ``inf * 0 = NaN`` and signalling NaNs turning quiet are the IEEE results
    these kernels are meant to produce (as lm-flow's C++ does), not events to warn about.
    A fresh object each time: ``np.errstate`` instances must not be shared between threads.
    """
    return np.errstate(over="ignore", invalid="ignore")


def store_f64(x: F64Array, out: Array) -> None:
    """Store float64 values into ``out`` with lm-flow's conversion rules (see the module doc).

    ``x`` is scratch: it may be modified. ``out`` has ``x``'s shape and any of the nine dtypes.
    """
    with _ieee():
        _store_f64(x, out)


def _store_f64(x: F64Array, out: Array) -> None:
    if out.dtype.kind == "f":
        # numpy's float64 -> float16/32 cast is IEEE round-to-nearest-even from the double itself.
        np.copyto(out, x, casting="unsafe")
        return
    np.rint(x, out=x)
    np.copyto(x, 0.0, where=np.isnan(x))
    lo, hi = _INT_RANGES[out.dtype]
    if hi == _TWO_63:
        # 2**63 - 1 is not a double: clip below 2**63 and patch the saturated elements after.
        top = x >= _TWO_63
        np.clip(x, lo, _LARGEST_BELOW_TWO_63, out=x)
        np.copyto(out, x, casting="unsafe")
        np.copyto(out, _I64_MAX, where=top)
    else:
        np.clip(x, lo, hi, out=x)
        np.copyto(out, x, casting="unsafe")


def _exact_direct(src: np.dtype[np.generic], dst: np.dtype[np.generic]) -> bool:
    """Whether numpy's direct ``src`` → ``dst`` cast gives what the route through float64 gives.

    True for float targets (every source but int64 is exact in a double, so both round once,
    to nearest even) and for integer targets that hold every ``src`` value. int64 sources keep
    lm-flow's route through a double, which rounds beyond 2**53.
    """
    return src != np.int64 and (dst.kind == "f" or np.can_cast(src, dst, "safe"))


def _emit_converted(cc: Context, x: Array, dtype: np.dtype[np.generic], *, scratch: bool = False) -> None:
    """Emit ``x`` converted to ``dtype`` in a new engine buffer, at the input timestamp.

    ``x`` is only read, unless ``scratch`` says it is the caller's float64 temporary.
    """
    packet, out = cc.new_buffer(x.shape, dtype)
    with _ieee():
        if _exact_direct(x.dtype, out.dtype):
            np.copyto(out, x, casting="unsafe")
        else:
            _store_f64(cast("F64Array", x) if scratch else x.astype(np.float64), out)
    del out  # the emitted packet must be the only holder of its memory
    cc.emit(0, packet)


def _buffer_ports(c: Contract, output: int = TypeId.BUFFER) -> None:
    c.input_set_type(0, TypeId.BUFFER)
    c.output_set_type(0, output)


@final
@kernel("InvertKernel")
class InvertKernel(Kernel):
    """Inverts an 8-bit image in place: ``255 - x`` for every byte.

    Ports: input 0 (a U8 buffer with ndim >= 2; not declared, as in lm-flow) → output 0.
    Options: none.
    Behaviour: takes the input (``take_input``) and writes through ``make_mutable``, so the
    buffer is inverted in place, without a copy, when this node holds the only reference;
    when another consumer shares the packet (a fan-out) or the host still owns the numpy
    array, it works on a private contiguous copy and the others see the original. Emits the
    packet with its own timestamp. Other dtypes, 1-d buffers and non-buffers fail. Every
    byte is inverted whatever the ndim (lm-flow's loop covers only ``shape[1] * shape[2]``
    bytes per row, which leaves part of 4-d and larger buffers untouched).
    """

    @staticmethod
    def get_contract(c: Contract) -> None:
        c.input_set_any(0)
        c.output_set_any(0)

    def process(self, cc: Context) -> None:
        packet = cc.take_input(0)
        view = _buffer(packet)
        dtype, ndim = view.dtype, view.ndim
        # The check's view must be gone before make_mutable: it holds a reference to the
        # array, which would make the buffer look shared and force a copy.
        del view
        if dtype != np.uint8 or ndim < 2:
            msg = f"InvertKernel needs a U8 buffer with ndim >= 2, got {dtype} with ndim {ndim}"
            raise ValueError(msg)
        data = packet.make_mutable()
        np.invert(data, out=data)  # == 255 - x for uint8
        del data
        cc.emit(0, packet)


@final
@kernel("NormalizeKernel")
class NormalizeKernel(Kernel):
    """Demonstrates options and side packets; forwards its input unchanged.

    Ports: input 0 (any type) → output 0 (any type).
    Options: ``scale`` (float, **required**), ``mean`` and ``std`` (lists of floats),
    ``roi.x`` and ``roi.y`` (ints, read through a dot path).
    Side packets: ``calibration`` (required: the graph will not start without it).
    Behaviour: ``open`` logs at INFO ``scale=<s> mean=<len> std=<len> roi=(<x>,<y>)
    calib=yes`` (the lengths of the lists) and fails without ``scale``; ``process`` forwards
    input 0; ``close`` logs ``finished normally, result is valid`` (INFO) after a normal end,
    else ``abnormal termination, discarding result`` (WARN).
    """

    @staticmethod
    def get_contract(c: Contract) -> None:
        c.input_set_any(0)
        c.output_set_any(0)
        c.require_side_packet("calibration")

    def open(self, cc: Context) -> None:
        scale = cc.require_option_float("scale")
        mean = cc.option_float_array("mean")
        std = cc.option_float_array("std")
        x, y = cc.option_int("roi.x", 0), cc.option_int("roi.y", 0)
        calib = "yes" if cc.has_side_packet("calibration") else "no"
        cc.log(LogLevel.INFO, f"scale={scale:g} mean={len(mean)} std={len(std)} roi=({x},{y}) calib={calib}")

    def process(self, cc: Context) -> None:
        if not cc.input_is_empty(0):
            cc.forward(0, 0)

    def close(self, cc: Context) -> None:
        if cc.close_reason == CloseReason.NORMAL:
            cc.log(LogLevel.INFO, "finished normally, result is valid")
        else:
            cc.log(LogLevel.WARN, "abnormal termination, discarding result")


@final
@kernel("CastKernel")
class CastKernel(Kernel):
    """Converts a buffer to another element type.

    Ports: input 0 Buffer → output 0 Buffer.
    Options: ``dtype``, one of ``u8 i8 u16 i16 i32 i64 f16 f32 f64`` (default ``f32``); any
    other string fails ``open``.
    Behaviour: emits a new contiguous buffer of the same shape, converted element-wise through
    float64 with the module's rounding and saturation rules. Non-contiguous input fails.
    """

    @staticmethod
    def get_contract(c: Contract) -> None:
        _buffer_ports(c)

    def __init__(self) -> None:
        self._dtype: np.dtype[np.generic] = DTYPE_CODES["f32"]

    def open(self, cc: Context) -> None:
        dt = parse_dtype_option(cc, "f32")
        if dt is None:
            msg = f"options.dtype '' is unknown/unsupported; expected one of {_CODES_TEXT}"
            raise ValueError(msg)
        self._dtype = dt

    def process(self, cc: Context) -> None:
        arr = _contiguous_input(cc)
        _emit_converted(cc, arr, self._dtype)


@final
@kernel("AffineKernel")
class AffineKernel(Kernel):
    """Scales and shifts every element: ``x * scale + shift``.

    Ports: input 0 Buffer → output 0 Buffer.
    Options: ``scale`` (float, default 1.0), ``shift`` (float, default 0.0), ``dtype`` (output
    element type as for CastKernel; default: the input's dtype; an unknown string fails
    ``open``).
    Behaviour: computes in float64 and stores with CastKernel's rules (a uint8 image times 0.5
    rounds half to even and saturates). Emits a new contiguous buffer; non-contiguous input
    fails.
    """

    @staticmethod
    def get_contract(c: Contract) -> None:
        _buffer_ports(c)

    def __init__(self) -> None:
        self._scale = 1.0
        self._shift = 0.0
        self._dtype: np.dtype[np.generic] | None = None

    def open(self, cc: Context) -> None:
        self._scale = cc.option_float("scale", 1.0)
        self._shift = cc.option_float("shift", 0.0)
        self._dtype = parse_dtype_option(cc, "")

    def process(self, cc: Context) -> None:
        arr = _contiguous_input(cc)
        with _ieee():
            x = arr.astype(np.float64)
            x *= self._scale
            x += self._shift
        _emit_converted(cc, x, arr.dtype if self._dtype is None else self._dtype, scratch=True)


@final
@kernel("ClampKernel")
class ClampKernel(Kernel):
    """Limits every element to ``[min, max]``, keeping the dtype.

    Ports: input 0 Buffer → output 0 Buffer.
    Options: ``min`` (float, default -inf), ``max`` (float, default +inf).
    Behaviour: ``min(max(x, min), max)`` in float64, stored back into the input's dtype with
    CastKernel's rules (so ``min: 10.5`` on uint8 gives 10, and ``min > max`` gives ``max``
    everywhere); NaN stays NaN. Emits a new contiguous buffer; non-contiguous input fails.
    """

    @staticmethod
    def get_contract(c: Contract) -> None:
        _buffer_ports(c)

    def __init__(self) -> None:
        self._lo = -math.inf
        self._hi = math.inf

    def open(self, cc: Context) -> None:
        self._lo = cc.option_float("min", -math.inf)
        self._hi = cc.option_float("max", math.inf)

    def process(self, cc: Context) -> None:
        arr = _contiguous_input(cc)
        with _ieee():
            x = arr.astype(np.float64)
            np.maximum(x, self._lo, out=x)
            np.minimum(x, self._hi, out=x)
        _emit_converted(cc, x, arr.dtype, scratch=True)


_REDUCE_OPS: Final = ("sum", "mean", "min", "max")


@final
@kernel("ReduceKernel")
class ReduceKernel(Kernel):
    """Reduces a whole buffer to one float.

    Ports: input 0 Buffer → output 0 F64.
    Options: ``op``, one of ``sum mean min max`` (default ``mean``); anything else fails
    ``open``.
    Behaviour: emits the reduction over every element as an F64 at the input timestamp. Sums
    accumulate in float64 left to right, as lm-flow does (so results match it bit for bit);
    ``min``/``max`` skip NaN (all-NaN gives +inf/-inf). An empty buffer gives 0.0 for every op.
    Non-contiguous input fails.
    """

    @staticmethod
    def get_contract(c: Contract) -> None:
        _buffer_ports(c, output=TypeId.F64)

    def __init__(self) -> None:
        self._op = "mean"

    def open(self, cc: Context) -> None:
        op = cc.option_str("op", "mean")
        if op not in _REDUCE_OPS:
            msg = f"options.op must be one of sum/mean/min/max, got {op!r}"
            raise ValueError(msg)
        self._op = op

    def process(self, cc: Context) -> None:
        arr = _contiguous_input(cc)
        with _ieee():
            result = _reduce(arr, self._op)
        cc.emit(0, result)


def _reduce(arr: Array, op: str) -> float:
    if arr.size == 0:
        return 0.0
    x = arr.astype(np.float64).reshape(-1)
    if op == "max":
        return float(np.fmax.reduce(x, initial=-math.inf))
    if op == "min":
        return float(np.fmin.reduce(x, initial=math.inf))
    # accumulate is a strictly sequential sum (np.sum is pairwise and would differ in the last bits)
    total = float(np.add.accumulate(x, out=x)[-1])
    return total / x.size if op == "mean" else total
