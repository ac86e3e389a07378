"""Kernels for the process-lifetime tests, importable by reference (a process pool's workers load them)."""

from __future__ import annotations

import os
import signal
import time

import flowplex


@flowplex.kernel("HostileDaemon")
class Daemon(flowplex.Kernel):
    """Per input, starts a daemon the careless way and emits its pid: a double fork (the
    intermediate exits, so the daemon is an orphan), ``setsid`` (out of the worker's group and
    session), SIGHUP and SIGTERM ignored, every inherited descriptor closed. A negative input
    sleeps for a minute instead (the worker's one callback thread is then busy)."""

    def process(self, cc: flowplex.Context) -> None:
        if cc.input(0).as_int() < 0:
            time.sleep(60)
            return
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - runs in the forked children
            try:
                os.close(r)
                os.setsid()
                if os.fork():
                    os._exit(0)
                signal.signal(signal.SIGHUP, signal.SIG_IGN)
                signal.signal(signal.SIGTERM, signal.SIG_IGN)
                os.write(w, str(os.getpid()).encode())
                os.closerange(3, 4096)
                time.sleep(120)
            finally:
                os._exit(0)
        os.close(w)
        os.waitpid(pid, 0)
        with os.fdopen(r, "rb") as f:
            daemon = int(f.read())
        cc.emit(0, daemon)

