"""Kernels for the time tests (issue 29), in a module of their own so that process-pool workers
import them by reference."""

from __future__ import annotations

import flowplex


@flowplex.kernel("TimeTicker")
class TimeTicker(flowplex.Kernel):
    """Source: emits ``n * step`` at timestamp ``n * step`` every ``period`` s (``source_yield``), ``count`` times."""

    def open(self, cc: flowplex.Context) -> None:
        self.n = 0
        self.count = cc.option_int("count", 10)
        self.step = cc.option_int("step", 1)
        self.period = cc.option_float("period", 1.0)

    def process(self, cc: flowplex.Context) -> None:
        ts = self.n * self.step
        cc.emit(0, ts, ts)
        self.n += 1
        if self.n >= self.count:
            cc.source_done()
        else:
            cc.source_yield(self.period)


@flowplex.kernel("TimeCounter")
class TimeCounter(flowplex.Kernel):
    """Source: emits 0, 1, 2... at timestamps 0, 1, 2... once per call; never finishes by itself."""

    def open(self, cc: flowplex.Context) -> None:
        self.n = 0

    def process(self, cc: flowplex.Context) -> None:
        cc.emit(0, self.n, self.n)
        self.n += 1


@flowplex.kernel("TimePair")
class TimePair(flowplex.Kernel):
    """Join: emits ``"a/b"`` (``-`` for an empty input) at the join's timestamp; a string
    input (another join's) shows in brackets."""

    def process(self, cc: flowplex.Context) -> None:
        parts = ["-" if cc.input_is_empty(i) else _shown(cc.input(i)) for i in range(cc.num_inputs)]
        cc.emit(0, "/".join(parts))


def _shown(p: flowplex.Packet) -> str:
    text = p.as_str()
    return f"({text})" if text is not None else str(p.as_int())


@flowplex.kernel("TimeBatcher")
class TimeBatcher(flowplex.Kernel):
    """Flush on idle: buffers ints and emits their list ``idle`` s after the last one came
    (``call_after``), and what is left at close."""

    def open(self, cc: flowplex.Context) -> None:
        self.buf: list[int] = []
        self.last = 0
        self.idle = cc.option_float("idle", 0.5)

    def process(self, cc: flowplex.Context) -> None:
        if cc.input_is_empty(0):  # the call_after call
            self._flush(cc)
            return
        p = cc.input(0)
        self.buf.append(p.as_int())
        self.last = p.timestamp
        cc.call_after(self.idle)

    def close(self, cc: flowplex.Context) -> None:
        self._flush(cc)

    def _flush(self, cc: flowplex.Context) -> None:
        if self.buf:
            cc.emit(0, ",".join(map(str, self.buf)), self.last)
            self.buf = []


@flowplex.kernel("TimeSwitch")
class TimeSwitch(flowplex.Kernel):
    """Forwards its input; at the packet with value ``at`` it disables condition ``name``."""

    def open(self, cc: flowplex.Context) -> None:
        self.at = cc.option_int("at", 3)
        self.name = cc.option_str("name", "armed")

    def process(self, cc: flowplex.Context) -> None:
        cc.forward(0, 0)
        if cc.input(0).as_int() == self.at:
            cc.set_condition(self.name, False)


@flowplex.kernel("TimeNotifier")
class TimeNotifier(flowplex.Kernel):
    """Forwards its input and signals event ``name`` for each packet (``cc.notify``)."""

    def open(self, cc: flowplex.Context) -> None:
        self.name = cc.option_str("name", "go")

    def process(self, cc: flowplex.Context) -> None:
        cc.forward(0, 0)
        cc.notify(self.name)
