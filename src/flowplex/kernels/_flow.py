"""Built-in plumbing kernels: PassThrough, Split, Mux, Sink, RangeSource, Stringify.

These move packets around without looking into them (except Mux's selector and Stringify's
integer): forwarding is by reference, so a payload is never copied on its way through.
"""

from __future__ import annotations

from typing import final

from .._log import LogLevel
from ..packets import TypeId
from ._context import Context
from ._contract import Contract
from ._math import int_input
from ._registry import Kernel, kernel

__all__ = [
    "MuxKernel",
    "PassThroughKernel",
    "RangeSourceKernel",
    "SinkKernel",
    "SplitKernel",
    "StringifyKernel",
]


def _any_ports(c: Contract, *, inputs: int, outputs: int) -> None:
    """Declare the first ports *any*, so that a node lacking them fails at build, as in lm-flow."""
    for i in range(inputs):
        c.input_set_any(i)
    for o in range(outputs):
        c.output_set_any(o)


@final
@kernel("PassThroughKernel")
class PassThroughKernel(Kernel):
    """Forwards its input unchanged.

    Ports: input 0 (any type) → output 0 (any type); further ports are ignored.
    Options: none.
    Behaviour: ``forward(0, 0)``: the same payload, by reference, with its own timestamp. An
    invocation without a packet on input 0 emits nothing.
    """

    @staticmethod
    def get_contract(c: Contract) -> None:
        _any_ports(c, inputs=1, outputs=1)

    def process(self, cc: Context) -> None:
        if not cc.input_is_empty(0):
            cc.forward(0, 0)


@final
@kernel("SplitKernel")
class SplitKernel(Kernel):
    """Fans one input out to every output.

    Ports: input 0 (any type) → outputs 0..N-1 (any type).
    Options: none.
    Behaviour: forwards the input to each output; all outputs share the one payload (a consumer
    that mutates it gets its own copy through ``make_mutable``).
    """

    @staticmethod
    def get_contract(c: Contract) -> None:
        _any_ports(c, inputs=1, outputs=0)

    def process(self, cc: Context) -> None:
        if cc.input_is_empty(0):
            return
        for o in range(cc.num_outputs):
            cc.forward(0, o)


@final
@kernel("MuxKernel")
class MuxKernel(Kernel):
    """Picks one of several data inputs by a selector.

    Ports: input 0 I64 (the selector k), inputs 1..N (data, any type) → output 0 (any type).
    Options: none.
    Behaviour: forwards data input ``1 + k``; emits nothing when that input has no packet at
    this timestamp. A missing or non-integer selector, or ``k`` outside ``0..N-1``, fails the
    invocation. Keep the default ``sync`` policy so that the unselected inputs at each
    timestamp are consumed too and do not pile up.
    """

    @staticmethod
    def get_contract(c: Contract) -> None:
        c.input_set_type(0, TypeId.I64)
        c.output_set_any(0)

    def process(self, cc: Context) -> None:
        k = cc.input(0).as_int()
        if k is None:
            msg = "mux control port (input 0) must be an I64 selector"
            raise ValueError(msg)
        data_ports = cc.num_inputs - 1
        if not 0 <= k < data_ports:
            msg = (f"mux selector out of range (not enough data ports): selector {k}, "
                   f"data inputs 0..{data_ports - 1}")
            raise ValueError(msg)
        if not cc.input_is_empty(1 + k):
            cc.forward(1 + k, 0)


@final
@kernel("SinkKernel")
class SinkKernel(Kernel):
    """Consumes packets and reports how many it saw.

    Ports: input 0 (any type); no outputs.
    Options: none.
    Behaviour: per invocation, logs ``received packet @ ts=<ts>`` at DEBUG and adds 1 to the
    graph counter ``sink.packets``. ``close`` logs ``processed <N> packets in total`` at INFO
    and adds 1 to ``sink.closed``. ``open`` resets the count.
    """

    @staticmethod
    def get_contract(c: Contract) -> None:
        _any_ports(c, inputs=1, outputs=0)

    def __init__(self) -> None:
        self._count = 0

    def open(self, cc: Context) -> None:
        self._count = 0

    def process(self, cc: Context) -> None:
        self._count += 1
        cc.log(LogLevel.DEBUG, f"received packet @ ts={cc.input_timestamp}")
        cc.counter_add("sink.packets", 1)

    def close(self, cc: Context) -> None:
        cc.log(LogLevel.INFO, f"processed {self._count} packets in total")
        cc.counter_add("sink.closed", 1)


@final
@kernel("RangeSourceKernel")
class RangeSourceKernel(Kernel):
    """A source that counts: emits 0, 1, ..., count-1, then finishes.

    Ports: no inputs → output 0 I64.
    Options: ``count`` (int, default 10; 0 or less emits nothing).
    Behaviour: one integer per invocation, stamped with the invocation timestamp (the source's
    sequence number: 0, 1, 2...); calls ``source_done`` with the last one, so the graph can
    terminate. ``open`` restarts the count.
    """

    @staticmethod
    def get_contract(c: Contract) -> None:
        c.output_set_type(0, TypeId.I64)

    def __init__(self) -> None:
        self._next = 0
        self._count = 10

    def open(self, cc: Context) -> None:
        self._next = 0
        self._count = cc.option_int("count", 10)

    def process(self, cc: Context) -> None:
        if self._next >= self._count:
            cc.source_done()
            return
        cc.emit(0, self._next)
        self._next += 1
        if self._next >= self._count:
            cc.source_done()


@final
@kernel("StringifyKernel")
class StringifyKernel(Kernel):
    """Turns integers into their decimal text.

    Ports: input 0 I64 → output 0 Str.
    Options: none.
    Behaviour: emits ``str(v)`` (``-42`` → ``"-42"``) at the input timestamp; an empty or
    non-integer input fails the invocation with "input is not an integer packet".
    """

    @staticmethod
    def get_contract(c: Contract) -> None:
        c.input_set_type(0, TypeId.I64)
        c.output_set_type(0, TypeId.STR)

    def process(self, cc: Context) -> None:
        cc.emit(0, str(int_input(cc, 0)))
