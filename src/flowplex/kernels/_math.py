"""Built-in integer-stream kernels: Scale, Sum, Filter, Zip, FeedbackAdd, BatchSum.

Every kernel here reads and writes I64 packets and declares so in ``get_contract``, so a wrongly
typed edge fails at graph build and a wrongly typed graph input fails before ``process``.
Arithmetic wraps around at 64 bits, as lm-flow's C++ kernels do, so that every result fits an
I64 packet.
"""

from __future__ import annotations

from typing import Final, final

from .._timestamps import TS_POST_STREAM, next_allowed
from ..packets import TypeId
from ._context import CloseReason, Context
from ._contract import Contract
from ._registry import Kernel, kernel

__all__ = [
    "BatchSumKernel",
    "FeedbackAddKernel",
    "FilterKernel",
    "ScaleKernel",
    "SumKernel",
    "ZipKernel",
    "int_input",
    "wrap_i64",
]

_I64_BIAS: Final = 2**63
_U64_MOD: Final = 2**64
_INVALID_ID: Final = 2**64 - 1


def wrap_i64(value: int) -> int:
    """``value`` wrapped into the signed 64-bit range (two's complement, like C++ arithmetic).

    >>> wrap_i64(2**63), wrap_i64(-(2**63) - 1), wrap_i64(5)
    (-9223372036854775808, 9223372036854775807, 5)
    """
    return (value + _I64_BIAS) % _U64_MOD - _I64_BIAS


def int_input(cc: Context, index: int) -> int:
    """The value of the I64 packet on input ``index``.

    Raises:
        ValueError: The input is empty or holds another type ("input is not an integer packet",
            lm-flow's text, followed by what was found).
    """
    p = cc.input(index)
    value = p.as_int()
    if value is None:
        found = "nothing" if p.is_empty else p.type_name
        msg = f"input is not an integer packet (input {index} holds {found})"
        raise ValueError(msg)
    return value


def _i64_ports(c: Contract, inputs: int) -> None:
    """Declare inputs ``0..inputs-1`` and output 0 as I64 (out-of-range ports fail the build)."""
    for i in range(inputs):
        c.input_set_type(i, TypeId.I64)
    c.output_set_type(0, TypeId.I64)


@final
@kernel("ScaleKernel")
class ScaleKernel(Kernel):
    """Multiplies each integer by a constant factor.

    Ports: input 0 I64 → output 0 I64.
    Options: ``factor`` (int, default 1; a float is ignored, as with every int option).
    Behaviour: emits ``v * factor`` (wrapping at 64 bits) at the input timestamp; an empty or
    non-integer input fails the invocation with "input is not an integer packet".
    """

    @staticmethod
    def get_contract(c: Contract) -> None:
        _i64_ports(c, 1)

    def __init__(self) -> None:
        self._factor = 1

    def open(self, cc: Context) -> None:
        self._factor = cc.option_int("factor", 1)

    def process(self, cc: Context) -> None:
        cc.emit(0, wrap_i64(int_input(cc, 0) * self._factor))


@final
@kernel("SumKernel")
class SumKernel(Kernel):
    """Adds up every integer of the stream and emits the total once, at the end.

    Ports: input 0 I64 → output 0 I64.
    Options: none.
    Behaviour: ``process`` only accumulates (wrapping at 64 bits); ``open`` resets the total to 0.
    ``close`` emits the total at ``TS_POST_STREAM``, and only when the stream ended normally
    (``close_reason == NORMAL``): a failed or cancelled run has no meaningful total.
    """

    @staticmethod
    def get_contract(c: Contract) -> None:
        _i64_ports(c, 1)

    def __init__(self) -> None:
        self._total = 0

    def open(self, cc: Context) -> None:
        self._total = 0

    def process(self, cc: Context) -> None:
        if not cc.input_is_empty(0):  # lm-flow skips an invocation without a packet
            self._total = wrap_i64(self._total + int_input(cc, 0))

    def close(self, cc: Context) -> None:
        if cc.close_reason == CloseReason.NORMAL:
            cc.emit(0, self._total, ts=TS_POST_STREAM)


@final
@kernel("FilterKernel")
class FilterKernel(Kernel):
    """Keeps the integers at or above a threshold.

    Ports: input 0 I64 → output 0 I64.
    Options: ``threshold`` (int, default 0).
    Behaviour: forwards the packet (zero-copy) when ``v >= threshold``; otherwise emits nothing
    and moves the output's timestamp bound past the input timestamp, so that downstream joins
    need not wait for it. An empty or non-integer input fails the invocation.
    """

    @staticmethod
    def get_contract(c: Contract) -> None:
        _i64_ports(c, 1)

    def __init__(self) -> None:
        self._threshold = 0

    def open(self, cc: Context) -> None:
        self._threshold = cc.option_int("threshold", 0)

    def process(self, cc: Context) -> None:
        if int_input(cc, 0) >= self._threshold:
            cc.forward(0, 0)
        else:
            cc.set_next_timestamp_bound(0, next_allowed(cc.input_timestamp))


def _tagged_or(cc: Context, tag: str, fallback: int) -> int:
    index = cc.input_id(tag)
    return fallback if index == _INVALID_ID else index


@final
@kernel("ZipKernel")
class ZipKernel(Kernel):
    """Adds two aligned integer streams.

    Ports: inputs tagged ``A`` and ``B`` (without tags: inputs 0 and 1), both I64 → output 0 I64.
    Further inputs are ignored.
    Options: none.
    Behaviour: emits ``a + b`` (wrapping at 64 bits) at the aligned timestamp when both inputs
    have a packet there; when either is missing, emits nothing.
    """

    @staticmethod
    def get_contract(c: Contract) -> None:
        for tag, fallback in (("A", 0), ("B", 1)):
            index = c.input_id(tag)
            c.input_set_type(fallback if index == _INVALID_ID else index, TypeId.I64)
        c.output_set_type(0, TypeId.I64)

    def process(self, cc: Context) -> None:
        a = _tagged_or(cc, "A", 0)
        b = _tagged_or(cc, "B", 1)
        if cc.input_is_empty(a) or cc.input_is_empty(b):
            return
        cc.emit(0, wrap_i64(int_input(cc, a) + int_input(cc, b)))


@final
@kernel("FeedbackAddKernel")
class FeedbackAddKernel(Kernel):
    """Adds a feedback value to each input: with a self-loop back edge, a running sum.

    Ports: input 0 I64 (forward), input 1 I64 (feedback; list it in ``back_edges``) → output 0
    I64.
    Options: none.
    Behaviour: emits ``in0 + in1`` (wrapping at 64 bits), with a missing feedback value read as
    0; emits nothing when input 0 is empty. Wiring output 0 back into input 1
    (``back_edges: [y]``) and sending 1 at ts 0..4 yields 1, 2, 3, 4, 5.
    """

    @staticmethod
    def get_contract(c: Contract) -> None:
        _i64_ports(c, 2)

    def process(self, cc: Context) -> None:
        if cc.input_is_empty(0):
            return
        value = int_input(cc, 0)
        if not cc.input_is_empty(1):
            value += int_input(cc, 1)
        cc.emit(0, wrap_i64(value))


@final
@kernel("BatchSumKernel")
class BatchSumKernel(Kernel):
    """Sums each batch of integers; meant for the ``batch`` input policy.

    Ports: input 0 I64 → output 0 I64.
    Options: none (set ``input_policy: {type: batch, capacity: N}`` on the node).
    Behaviour: emits the sum (wrapping at 64 bits) of the ``input_count(0)`` packets of the
    batch, once per invocation, at the invocation timestamp (the last timestamp of the batch).
    With capacity 3, inputs 1..7 give 6, 15 and, once the input closes, 7. Under a
    single-packet policy it passes each integer through (an empty input sums to 0, as in
    lm-flow).
    """

    @staticmethod
    def get_contract(c: Contract) -> None:
        _i64_ports(c, 1)

    def process(self, cc: Context) -> None:
        total = 0
        for k in range(cc.input_count(0)):
            value = cc.input_at(0, k).as_int()
            if value is None:
                msg = f"input is not an integer packet (input 0, batch item {k})"
                raise ValueError(msg)
            total += value
        cc.emit(0, wrap_i64(total))
