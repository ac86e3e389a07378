"""Kernels for the engine's hostile tests, importable by reference (a process pool's workers load them)."""

from __future__ import annotations

import threading
import time

import flowplex


class Escape(BaseException):
    """A ``BaseException`` that is neither ``SystemExit`` nor a Ctrl-C: what a careless kernel may raise."""


@flowplex.kernel("HostileBurst")
class Burst(flowplex.Kernel):
    """Source: emits ``per_call`` strings of ``size`` bytes per call, for ``calls`` calls (as ``CommandSource``
    emits the chunks it read)."""

    def open(self, cc: flowplex.Context) -> None:
        self.chunk = "x" * cc.option_int("size", 65536)

    def process(self, cc: flowplex.Context) -> None:
        if cc.input_timestamp >= cc.option_int("calls", 100):
            cc.source_done()
            return
        for _ in range(cc.option_int("per_call", 8)):
            cc.emit(0, self.chunk)


@flowplex.kernel("HostileCount")
class Count(flowplex.Kernel):
    """Source: emits its call's timestamp once per call, ``calls`` calls, yielding ``yield_ms`` after
    each (0: none)."""

    def process(self, cc: flowplex.Context) -> None:
        i = cc.input_timestamp
        if i >= cc.option_int("calls", 100):
            cc.source_done()
            return
        cc.emit(0, i)
        delay = cc.option_int("yield_ms", 0)
        if delay:
            cc.source_yield(delay / 1000)


@flowplex.kernel("HostileSlow")
class Slow(flowplex.Kernel):
    """Sleeps ``sleep_us`` per packet; emits the length of a string packet (else nothing)."""

    def process(self, cc: flowplex.Context) -> None:
        time.sleep(cc.option_int("sleep_us", 500) / 1e6)
        text = cc.input(0).as_str()
        if text is not None:
            cc.emit(0, len(text))


@flowplex.kernel("HostilePair")
class Pair(flowplex.Kernel):
    """A join of two int inputs at one timestamp: emits ``1000 * a + b``."""

    def process(self, cc: flowplex.Context) -> None:
        a, b = cc.input(0).as_int(), cc.input(1).as_int()
        if a is not None and b is not None:
            cc.emit(0, 1000 * a + b)


@flowplex.kernel("HostileRaise")
class Raise(flowplex.Kernel):
    """Raises ``what`` (``exit``, ``escape``, ``interrupt``) in ``phase`` (``open``, ``process``, ``close``)."""

    def _maybe(self, cc: flowplex.Context, phase: str) -> None:
        if cc.option_str("phase", "process") != phase:
            return
        what = cc.option_str("what", "exit")
        if what == "exit":
            raise SystemExit(3)
        if what == "interrupt":
            raise KeyboardInterrupt
        raise Escape("out of the kernel")

    def open(self, cc: flowplex.Context) -> None:
        self._maybe(cc, "open")

    def process(self, cc: flowplex.Context) -> None:
        self._maybe(cc, "process")
        cc.emit(0, cc.input(0))

    def close(self, cc: flowplex.Context) -> None:
        self._maybe(cc, "close")


GATE = threading.Event()
"""Set by a test to let ``HostileHang`` return (in-process executors only)."""


@flowplex.kernel("HostileHang")
class Hang(flowplex.Kernel):
    """Waits for ``GATE`` (at most ``max_s``) in ``process`` for the packet at timestamp 0, then forwards."""

    def process(self, cc: flowplex.Context) -> None:
        if cc.input_timestamp == 0:
            GATE.wait(cc.option_float("max_s", 30.0))
        cc.emit(0, cc.input(0))


@flowplex.kernel("HostileOpenHang")
class OpenHang(flowplex.Kernel):
    """Source whose ``open`` sleeps ``open_s`` (a hang, bounded so that no test can hang), then ends;
    with ``say: 1`` it first prints ``opening`` (a subprocess's test waits for it)."""

    def open(self, cc: flowplex.Context) -> None:
        if cc.option_int("say", 0):
            print("opening", flush=True)
        time.sleep(cc.option_float("open_s", 30.0))

    def process(self, cc: flowplex.Context) -> None:
        cc.source_done()


@flowplex.kernel("HostileEmitThenHang")
class EmitThenHang(flowplex.Kernel):
    """Source: emits its call's timestamp for ``calls`` calls, then sleeps ``hang_s`` in the next one."""

    def process(self, cc: flowplex.Context) -> None:
        if cc.input_timestamp < cc.option_int("calls", 3):
            cc.emit(0, cc.input_timestamp)
            return
        time.sleep(cc.option_float("hang_s", 30.0))
        cc.source_done()


@flowplex.kernel("HostilePidFile")
class PidFile(flowplex.Kernel):
    """Writes the pid of the process it runs in to the file ``path`` in ``open``; forwards its input."""

    def open(self, cc: flowplex.Context) -> None:
        import os

        with open(cc.option_str("path", ""), "w") as f:
            f.write(str(os.getpid()))

    def process(self, cc: flowplex.Context) -> None:
        cc.emit(0, cc.input(0))
