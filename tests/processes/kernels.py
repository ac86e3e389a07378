"""Kernels for the process-pool tests: in a module, because workers import them by reference."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import numpy as np

import flowplex


@flowplex.kernel("PDouble")
class PDouble(flowplex.Kernel):
    """Emits twice its input."""

    def process(self, cc: flowplex.Context) -> None:
        cc.emit(0, cc.input(0).as_int() * 2)


@flowplex.kernel("PPid")
class PPid(flowplex.Kernel):
    """Emits ``input * 1_000_000 + pid`` of the process that runs it."""

    def process(self, cc: flowplex.Context) -> None:
        cc.emit(0, cc.input(0).as_int() * 1_000_000 + os.getpid())


@flowplex.kernel("PScale")
class PScale(flowplex.Kernel):
    """Emits a new array: the input array times option ``factor``."""

    def process(self, cc: flowplex.Context) -> None:
        cc.emit(0, cc.input(0).as_numpy() * cc.option_int("factor", 2))


@flowplex.kernel("PReport")
class PReport(flowplex.Kernel):
    """Emits ``"<tag>:<base + x>"``; counts and logs each packet; counts ``open`` and ``close`` too."""

    def open(self, cc: flowplex.Context) -> None:
        cc.counter_add("opened")

    def process(self, cc: flowplex.Context) -> None:
        x = cc.input(0).as_int()
        cc.emit(0, f"{cc.option_str('tag')}:{cc.side_packet('base').as_int() + x}")
        cc.counter_add("seen")
        cc.counter_add("sum", x)
        cc.log(flowplex.LogLevel.WARN, f"saw {x} in {os.getpid()}")

    def close(self, cc: flowplex.Context) -> None:
        cc.counter_add("closed")


@flowplex.kernel("PFail")
class PFail(flowplex.Kernel):
    """Forwards, but raises ``ValueError`` on the value of option ``bad``."""

    def process(self, cc: flowplex.Context) -> None:
        x = cc.input(0).as_int()
        if x == cc.option_int("bad", -1):
            explode(x)
        cc.forward(0, 0)


def explode(x: int) -> None:
    """A frame of its own, so that the traceback shows it."""
    raise ValueError(f"cannot take {x}")


@flowplex.kernel("PSetError")
class PSetError(flowplex.Kernel):
    """Sets an error text, then raises an exception without a message."""

    def process(self, cc: flowplex.Context) -> None:
        cc.set_error("the frame was empty")
        raise RuntimeError


class OddError(Exception):
    """An exception that does not unpickle (its ``__init__`` takes two arguments)."""

    def __init__(self, a: int, b: int) -> None:
        super().__init__(f"odd {a}/{b}")


@flowplex.kernel("POdd")
class POdd(flowplex.Kernel):
    def process(self, cc: flowplex.Context) -> None:
        raise OddError(1, 2)


@flowplex.kernel("PCount")
class PCount(flowplex.Kernel):
    """Stateful: emits how many packets this instance has seen, and its pid."""

    def __init__(self) -> None:
        self.seen = 0

    def process(self, cc: flowplex.Context) -> None:
        self.seen += 1
        cc.emit(0, self.seen * 1_000_000 + os.getpid())


@flowplex.kernel("PSource")
class PSource(flowplex.Kernel):
    """A source: emits ``0 .. count-1`` (ts = value), calling ``source_yield(yield_s)`` after each."""

    def open(self, cc: flowplex.Context) -> None:
        self.next = 0

    def process(self, cc: flowplex.Context) -> None:
        cc.emit(0, self.next, self.next)
        self.next += 1
        if self.next >= cc.option_int("count", 3):
            cc.source_done()
        elif cc.option_float("yield_s"):
            cc.source_yield(cc.option_float("yield_s"))


@flowplex.kernel("PHang")
class PHang(flowplex.Kernel):
    """Writes its pid to option ``pid_file`` at open; each ``process`` sleeps ``sleep_s``."""

    def open(self, cc: flowplex.Context) -> None:
        Path(cc.option_str("pid_file")).write_text(str(os.getpid()))

    def process(self, cc: flowplex.Context) -> None:
        time.sleep(cc.option_float("sleep_s", 30.0))
        cc.forward(0, 0)


@flowplex.kernel("PExit")
class PExit(flowplex.Kernel):
    """Ends its worker process with ``os._exit(code)`` on the first packet."""

    def process(self, cc: flowplex.Context) -> None:
        os._exit(cc.option_int("code", 3))


@flowplex.kernel("PSegfault")
class PSegfault(flowplex.Kernel):
    """Crashes its worker process with a segmentation fault, as a broken C extension would."""

    def process(self, cc: flowplex.Context) -> None:
        import ctypes

        ctypes.string_at(0)


@flowplex.kernel("PReplica")
class PReplica(flowplex.Kernel):
    """Stateful: sleeps ``slow_s`` on even inputs (``fast_s`` on odd ones), then emits the int64
    array ``[x, pid, packets this instance has seen, start ns, end ns]`` (``time.monotonic_ns``,
    one clock for every process of the machine). Counts ``opened`` and ``closed``; ``close``
    emits ``[-1, pid, seen, 0, 0]``."""

    def __init__(self) -> None:
        self.seen = 0

    def open(self, cc: flowplex.Context) -> None:
        cc.counter_add("opened")

    def process(self, cc: flowplex.Context) -> None:
        x = cc.input(0).as_int()
        started = time.monotonic_ns()
        time.sleep(cc.option_float("fast_s" if x % 2 else "slow_s", 0.0))
        self.seen += 1
        cc.emit(0, np.array([x, os.getpid(), self.seen, started, time.monotonic_ns()], dtype=np.int64))

    def close(self, cc: flowplex.Context) -> None:
        cc.counter_add("closed")
        cc.emit(0, np.array([-1, os.getpid(), self.seen, 0, 0], dtype=np.int64))


@flowplex.kernel("PKillOn")
class PKillOn(flowplex.Kernel):
    """Emits ``x * 1_000_000 + pid``, but SIGKILLs its own worker on the value of option ``kill``
    (on every value when ``kill`` is -1). With option ``mark``, it first creates that file, and
    ``open`` raises when the file exists (a kernel that cannot be opened again)."""

    def open(self, cc: flowplex.Context) -> None:
        mark = cc.option_str("mark")
        if mark and Path(mark).exists():
            raise RuntimeError("the device is still locked")

    def process(self, cc: flowplex.Context) -> None:
        x = cc.input(0).as_int()
        if cc.option_int("kill", -2) in (x, -1):
            mark = cc.option_str("mark")
            if mark:
                Path(mark).touch()
            os.kill(os.getpid(), signal.SIGKILL)
        cc.emit(0, x * 1_000_000 + os.getpid())


@flowplex.kernel("PForward")
class PForward(flowplex.Kernel):
    """Forwards its input (a reference: no copy)."""

    def process(self, cc: flowplex.Context) -> None:
        cc.forward(0, 0)


@flowplex.kernel("PInPlace")
class PInPlace(flowplex.Kernel):
    """Takes its buffer input, adds option ``add`` to its first element in place, emits it."""

    def process(self, cc: flowplex.Context) -> None:
        p = cc.take_input(0)
        arr = p.make_mutable()
        arr.reshape(-1)[0] += cc.option_int("add", 1)
        cc.emit(0, p)


@flowplex.kernel("PMake")
class PMake(flowplex.Kernel):
    """Emits a new uint8 buffer of option ``size`` bytes (``new_buffer``), filled with its input."""

    def process(self, cc: flowplex.Context) -> None:
        p, view = cc.new_buffer((cc.option_int("size", 1 << 20),), "u8")
        view[:] = cc.input(0).as_int() % 256
        cc.emit(0, p)


@flowplex.kernel("PFull")
class PFull(flowplex.Kernel):
    """Emits a plain numpy array (not ``new_buffer``) of option ``size`` bytes, filled with its input."""

    def process(self, cc: flowplex.Context) -> None:
        cc.emit(0, np.full(cc.option_int("size", 1 << 20), cc.input(0).as_int() % 256, np.uint8))


@flowplex.kernel("PKeep")
class PKeep(flowplex.Kernel):
    """Keeps its last buffer input in its state; emits the first byte of the one it kept before
    (-1 the first time)."""

    def __init__(self) -> None:
        self.kept: flowplex.Packet | None = None

    def process(self, cc: flowplex.Context) -> None:
        previous = -1 if self.kept is None else int(self.kept.as_numpy().reshape(-1)[0])
        self.kept = cc.take_input(0)
        cc.emit(0, previous)


@flowplex.kernel("PFlood")
class PFlood(flowplex.Kernel):
    """On each input packet, emits option ``count`` ints in one call: ``base + i`` at ts
    ``base + i`` (``base``: the input's ts times ``count``). With a second output, every
    ``every``-th of them also goes there: as a 64 KiB buffer (``new_buffer``, a frame in the
    pool's arena) filled with ``i % 256`` when option ``frames`` is true, else as a str.
    Writes its pid to option ``pid_file`` at open, when given."""

    def open(self, cc: flowplex.Context) -> None:
        if cc.has_option("pid_file"):
            Path(cc.option_str("pid_file")).write_text(str(os.getpid()))

    def process(self, cc: flowplex.Context) -> None:
        count = cc.option_int("count", 1000)
        every = cc.option_int("every", 7)
        frames = cc.option_bool("frames")
        base = cc.input_timestamp * count
        two = cc.num_outputs > 1
        for i in range(count):
            cc.emit(0, base + i, base + i)
            if two and i % every == 0:
                if frames:
                    p, view = cc.new_buffer((1 << 16,), "u8")
                    view[:] = i % 256
                    cc.emit(1, p, base + i)
                else:
                    cc.emit(1, f"s{base + i}", base + i)


@flowplex.kernel("PSlow")
class PSlow(flowplex.Kernel):
    """Sleeps option ``sleep_s`` per input (a slow consumer), then forwards it if it has an output."""

    def process(self, cc: flowplex.Context) -> None:
        time.sleep(cc.option_float("sleep_s", 0.001))
        if cc.num_outputs:
            cc.forward(0, 0)
