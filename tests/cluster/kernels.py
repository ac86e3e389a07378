"""Kernels for the Ray tests: importable by reference, so Ray's workers find them."""

from __future__ import annotations

import os
import time

import numpy as np

import flowplex


@flowplex.kernel("RCount")
class RCount(flowplex.Kernel):
    """Emits ``(its running count, the input)`` as ``count * 1000 + x``: state across calls."""

    def open(self, cc: flowplex.Context) -> None:
        self.count = 0

    def process(self, cc: flowplex.Context) -> None:
        self.count += 1
        x = cc.input(0).as_int()
        assert x is not None
        cc.emit(0, self.count * 1000 + x)


@flowplex.kernel("RPid")
class RPid(flowplex.Kernel):
    """Emits the pid of the process it runs in."""

    def process(self, cc: flowplex.Context) -> None:
        cc.emit(0, os.getpid())


@flowplex.kernel("RFailOn")
class RFailOn(flowplex.Kernel):
    """Forwards its input; raises on the value of option ``bad``."""

    def open(self, cc: flowplex.Context) -> None:
        self.bad = cc.option_int("bad", -1)

    def process(self, cc: flowplex.Context) -> None:
        if cc.input(0).as_int() == self.bad:
            msg = f"bad value {self.bad}"
            raise ValueError(msg)
        cc.forward(0, 0)


@flowplex.kernel("RDieOn")
class RDieOn(flowplex.Kernel):
    """Forwards its input; its process exits at once on the value of option ``die`` (a crash),
    only the first time that value is seen in this process's life (``os.environ`` marker)."""

    def open(self, cc: flowplex.Context) -> None:
        self.die = cc.option_int("die", -1)
        self.opened = int(os.environ.get("RDIE_OPENED", "0")) + 1
        os.environ["RDIE_OPENED"] = str(self.opened)

    def process(self, cc: flowplex.Context) -> None:
        if cc.input(0).as_int() == self.die:
            os._exit(3)
        cc.forward(0, 0)


@flowplex.kernel("ROpens")
class ROpens(flowplex.Kernel):
    """Emits ``pid * 100 + times open ran in this instance's process`` (reopen after restart)."""

    def open(self, cc: flowplex.Context) -> None:
        self.opens = getattr(type(self), "_opens", 0) + 1
        type(self)._opens = self.opens

    def process(self, cc: flowplex.Context) -> None:
        cc.emit(0, os.getpid() * 100 + self.opens)


@flowplex.kernel("RFrame")
class RFrame(flowplex.Kernel):
    """Emits a new frame (``shape`` option: rows) filled with its input value."""

    def open(self, cc: flowplex.Context) -> None:
        self.rows = cc.option_int("rows", 256)

    def process(self, cc: flowplex.Context) -> None:
        x = cc.input(0).as_int()
        assert x is not None
        cc.emit(0, np.full((self.rows, 1024), x % 251, dtype=np.uint8))


@flowplex.kernel("RStamp")
class RStamp(flowplex.Kernel):
    """Writes its frame's first byte (``take_input`` + ``make_mutable``), then emits it; emits
    on port 1 whether the input it got was read-only (Ray's object store) before the write."""

    def process(self, cc: flowplex.Context) -> None:
        packet = cc.take_input(0)
        read_only = not packet.as_numpy().flags.writeable
        frame = packet.make_mutable()
        frame[0, 0] = 255
        cc.emit(0, packet)
        cc.emit(1, read_only)


@flowplex.kernel("RSum")
class RSum(flowplex.Kernel):
    """Emits the sum of its frame's bytes."""

    def process(self, cc: flowplex.Context) -> None:
        cc.emit(0, int(cc.input(0).as_numpy().sum()))


@flowplex.kernel("RSource")
class RSource(flowplex.Kernel):
    """A source: emits 0..count-1 (option ``count``), then is done."""

    def open(self, cc: flowplex.Context) -> None:
        self.count = cc.option_int("count", 5)
        self.next = 0

    def process(self, cc: flowplex.Context) -> None:
        if self.next >= self.count:
            cc.source_done()
            return
        cc.emit(0, self.next)
        self.next += 1


@flowplex.kernel("RSlowFailOn")
class RSlowFailOn(flowplex.Kernel):
    """Takes 20 ms per call and counts it (counter ``ran``); raises on option ``bad``."""

    def open(self, cc: flowplex.Context) -> None:
        self.bad = cc.option_int("bad", -1)

    def process(self, cc: flowplex.Context) -> None:
        cc.counter_add("ran", 1)
        time.sleep(0.02)
        if cc.input(0).as_int() == self.bad:
            msg = f"bad value {self.bad}"
            raise ValueError(msg)
        cc.forward(0, 0)
