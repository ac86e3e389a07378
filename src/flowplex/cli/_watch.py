"""Deadlines and Ctrl-C: ``--timeout``'s watch over a whole command, and telling the user's
Ctrl-C from a ``KeyboardInterrupt`` that imported code raised itself."""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from pathlib import Path
from typing import Any, Final, final

import typer

from flowplex.terminal._sanitize import visible_controls as shown

from ._app import usage, where

DEADLINE_SLACK_S: Final = 0.25
"""How long after ``--timeout`` the deadline thread lets the command's own timeout take over."""
DEADLINE_CLOSE_S: Final = 3.0
"""How long a command that timed out by itself may take to close (a hung close(), a worker
to kill) before the deadline thread ends it."""
CHECK_TIMEOUT_S: Final = 60.0
"""``flowplex check``'s default ``--timeout``: it runs only imports, which should take seconds."""

_ctrl_c: dict[str, bool] = {"seen": False}


def _on_sigint(signum: int, frame: object) -> None:
    """The SIGINT handler while a command runs: Python's, noting that the user pressed Ctrl-C
    (a ``KeyboardInterrupt`` without it was raised by code: an imported module's)."""
    _ctrl_c["seen"] = True
    raise KeyboardInterrupt


def watch_ctrl_c() -> None:
    """Note the user's Ctrl-C from now on (on the main thread, under Python's default handler)."""
    import signal

    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGINT) is \
            signal.default_int_handler:
        signal.signal(signal.SIGINT, _on_sigint)


def check_timeout(seconds: float | None) -> float | None:
    """``--timeout`` must be a finite number of seconds > 0 (exit 2 otherwise)."""
    import math

    if seconds is not None and not (math.isfinite(seconds) and seconds > 0):
        msg = f"--timeout {seconds:g}: give a number of seconds > 0"
        raise usage(msg)
    return seconds


def in_flight(stats: Any) -> str:
    """``a (RUNNING 1.2s), b (3 queued)`` for nodes with work claimed, queued or blocked."""
    from flowplex.diagnostics._dot_format import fmt_duration_us

    parts = []
    for n in stats.nodes:
        notes = []
        if n.running:
            notes.append(f"RUNNING {fmt_duration_us(n.running_for_us)}" if n.running_for_us else "RUNNING")
        if n.blocked:
            notes.append("blocked on a full queue")
        if n.queued:
            notes.append(f"{n.queued} queued")
        if n.state == "WAITING_SOURCE":
            notes.append("source waiting for its next turn")
        if notes:
            parts.append(f"{n.node_name} ({', '.join(notes)})")
    return ", ".join(parts) or "nothing"


@final
class Deadline:
    """``--timeout``: one deadline for a whole command, kept by a thread of its own.

    The command's blocking calls get the time left (``start``, ``wait_done``), so that a
    deadline met there ends the command in order: one line, the graph closed, outputs flushed.
    What no timeout can interrupt (an import or a kernel constructor that never returns, a
    ``close()`` that hangs, a C call) is ended by this thread: ``DEADLINE_SLACK_S`` after the
    deadline (``DEADLINE_CLOSE_S`` more when the command is closing after its own timeout) it
    prints one line naming what was still going on, flushes ``--output``, removes the process
    pools' shared memory, kills their workers, and exits with ``os._exit(1)``. A signal or an
    exception could be swallowed by the code that hangs, or never reach it (a C call); an exit
    from another thread cannot.
    """

    def __init__(self, seconds: float | None, graph: Path) -> None:
        self.seconds = seconds
        self.graph = graph
        self.step = "starting"
        """What the command does now, for the message (set by the main thread)."""
        self.graph_obj: Any = None
        self.flush: Any = None
        """Called (best effort) before a hard exit: flushes ``--output``."""
        self._main = threading.get_ident()
        self._lock = threading.Lock()
        self._claimed = False
        self._fired = False
        self.at = None if seconds is None else time.monotonic() + seconds
        if seconds is not None:
            self._start_watch()

    def _start_watch(self) -> None:
        # The watch only sleeps and formats one line: a small stack lets it start under a tight
        # address-space limit (RLIMIT_AS), where a default 8 MiB thread stack cannot be mapped.
        # Without it the blocking calls still get the time left; only a hung import goes unwatched.
        old = threading.stack_size(256 * 1024)
        try:
            threading.Thread(target=self._run, name="flowplex-deadline", daemon=True).start()
        except RuntimeError:
            pass  # the blocking calls still honour the deadline (see above)
        finally:
            threading.stack_size(old)

    def left(self) -> float | None:
        """Seconds left (None without ``--timeout``)."""
        return None if self.at is None else max(0.0, self.at - time.monotonic())

    def claim(self) -> None:
        """The command met the deadline itself and closes in order (``DEADLINE_CLOSE_S`` more)."""
        with self._lock:
            fired = self._fired
            self._claimed = True
        if fired:  # the thread is ending the process; say nothing twice
            time.sleep(DEADLINE_CLOSE_S)

    def expired(self, what: str) -> str:
        return f"--timeout {self.seconds:g} s expired {what}"

    def _run(self) -> None:
        assert self.at is not None
        time.sleep(max(0.0, self.at + DEADLINE_SLACK_S - time.monotonic()))
        with self._lock:
            claimed = self._claimed
        if claimed:
            time.sleep(DEADLINE_CLOSE_S)
            what = f"and the command was still {self._doing()} {DEADLINE_CLOSE_S:g} s later"
        else:
            what = f"while {self._doing()}"
        with self._lock:
            self._fired = True
        self._exit(self.expired(what))

    def _doing(self) -> str:
        """What the main thread is doing now, as precisely as the library can say."""
        from flowplex._deadline import doing_now

        doing = doing_now(self._main)
        if doing is not None:
            return doing
        if self.step == "closing" and self.graph_obj is not None:
            return f"closing the graph ({in_flight(self.graph_obj.stats())} in flight)"
        return self.step

    def _exit(self, message: str) -> None:
        with contextlib.suppress(Exception):
            sys.stderr.write(shown(f"flowplex: error: {where(self.graph, Exception(message))}") + "\n")
            sys.stderr.flush()
        if self.flush is not None:
            with contextlib.suppress(Exception):
                self.flush()
        pool = sys.modules.get("flowplex.executors.processes._pool")
        if pool is not None:
            with contextlib.suppress(Exception):
                pool.abandon_all()
        with contextlib.suppress(Exception):
            sys.stdout.flush()
        from flowplex._deadline import exit_now

        exit_now(1)


def interrupted_import(exc: KeyboardInterrupt) -> str | None:
    """The one-line error for a ``KeyboardInterrupt`` that an imported module raised itself (no
    Ctrl-C came), from the note ``import_target`` adds; None for the user's own Ctrl-C."""
    if _ctrl_c["seen"]:
        return None
    notes = getattr(exc, "__notes__", None) or ["an import"]
    return f"{notes[-1]}: KeyboardInterrupt (raised by the imported code, not by Ctrl-C)"


def cancelled_import(exc: KeyboardInterrupt) -> typer.Exit:
    """The user's Ctrl-C during the imports: one line saying what it interrupted, exit 130."""
    notes = getattr(exc, "__notes__", None)
    during = f" while importing: {notes[-1].replace(': cannot import ', ': ')}" if notes else ""
    typer.echo(shown(f"flowplex: cancelled (Ctrl-C){during}"), err=True)
    return typer.Exit(130)
