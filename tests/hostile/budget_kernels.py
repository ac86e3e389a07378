"""Kernels for the budget's hostile tests, importable by reference (a process pool's workers load them)."""

from __future__ import annotations

import flowplex


@flowplex.kernel("BudgetBurst")
class Burst(flowplex.Kernel):
    """Source: emits ``per_call`` fresh payloads of ``size`` bytes per call, of kind ``kind``
    (``bytes``, ``str``, ``numpy``), for ``calls`` calls; each payload is a new object, as a
    reader's chunks are."""

    def process(self, cc: flowplex.Context) -> None:
        if cc.input_timestamp >= cc.option_int("calls", 100):
            cc.source_done()
            return
        kind = cc.option_str("kind", "bytes")
        size = cc.option_int("size", 1 << 20)
        for _ in range(cc.option_int("per_call", 8)):
            if kind == "bytes":
                cc.emit(0, bytes(size))
            elif kind == "str":
                cc.emit(0, "x" * size)
            else:
                import numpy as np

                cc.emit(0, np.zeros(size, np.uint8))


@flowplex.kernel("BudgetFlood")
class Flood(flowplex.Kernel):
    """Source: emits ``count`` small ints (0, 1, 2, ...) in one ``process`` call, then is done."""

    def process(self, cc: flowplex.Context) -> None:
        for i in range(cc.option_int("count", 1000)):
            cc.emit(0, i, i)
        cc.source_done()


@flowplex.kernel("BudgetFloodOnInput")
class FloodOnInput(flowplex.Kernel):
    """Emits ``count`` small ints in the one ``process`` call its input packet triggers."""

    def process(self, cc: flowplex.Context) -> None:
        base = cc.input_timestamp * 10_000_000
        for i in range(cc.option_int("count", 1000)):
            cc.emit(0, i, base + i)


@flowplex.kernel("BudgetCheck")
class Check(flowplex.Kernel):
    """Sink: counts packets and checks that their ints arrive as 0, 1, 2, ... (per input call
    block of ``10_000_000``); at close it adds the count to the graph counter ``seen`` and the
    breaks of order to ``disorder`` (per packet, a counter would cost more than the graph)."""

    def open(self, cc: flowplex.Context) -> None:
        self.next = 0
        self.seen = 0
        self.disorder = 0

    def process(self, cc: flowplex.Context) -> None:
        value = cc.input(0).as_int() or 0
        if value != self.next and value % 10_000_000 != 0:
            self.disorder += 1
        self.next = value + 1
        self.seen += 1

    def close(self, cc: flowplex.Context) -> None:
        cc.counter_add("seen", self.seen)
        cc.counter_add("disorder", self.disorder)
