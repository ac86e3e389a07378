"""Kernels for the random DAGs of ``test_same_outputs``: in a module, so that workers can import them.

Each is deterministic given its input streams (and, for ``DagRunningSum``, their order), so
that a graph must give the same outputs wherever its nodes run.
"""

from __future__ import annotations

import numpy as np

import flowplex
from flowplex.kernels._math import int_input, wrap_i64


@flowplex.kernel("DagRunningSum")
class DagRunningSum(flowplex.Kernel):
    """Stateful: emits the running total of its integer input (wrapping at 64 bits)."""

    def __init__(self) -> None:
        self.total = 0

    def open(self, cc: flowplex.Context) -> None:
        self.total = 0

    def process(self, cc: flowplex.Context) -> None:
        self.total = wrap_i64(self.total + int_input(cc, 0))
        cc.emit(0, self.total)


@flowplex.kernel("DagToBuffer")
class DagToBuffer(flowplex.Kernel):
    """Emits a new int64 buffer of option ``size`` elements (``new_buffer``): ``arange(size) + v % 1000``.

    A ``size`` of 8192 or more makes 64 KiB or more, which crosses a process pool by reference.
    """

    def process(self, cc: flowplex.Context) -> None:
        p, view = cc.new_buffer((cc.option_int("size", 4),), np.int64)
        view[:] = np.arange(view.size, dtype=np.int64)
        view += int_input(cc, 0) % 1000
        cc.emit(0, p)


@flowplex.kernel("DagAddInPlace")
class DagAddInPlace(flowplex.Kernel):
    """Takes its buffer input, adds option ``add`` to every element in place and emits it.

    In place only when nobody else holds the payload (``make_mutable`` copies otherwise): a
    fan-out sibling must still see the original values.
    """

    def process(self, cc: flowplex.Context) -> None:
        p = cc.take_input(0)
        arr = p.make_mutable()
        arr += cc.option_int("add", 1)
        cc.emit(0, p)


@flowplex.kernel("DagAddScalar")
class DagAddScalar(flowplex.Kernel):
    """A join: emits a new buffer, input 0 (a buffer) plus input 1 (an integer, ``% 1000``).

    Emits nothing at a timestamp where either input has no packet.
    """

    def process(self, cc: flowplex.Context) -> None:
        if cc.input_is_empty(0) or cc.input_is_empty(1):
            return
        cc.emit(0, cc.input(0).as_numpy() + int_input(cc, 1) % 1000)
