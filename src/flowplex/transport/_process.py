"""Is the process that registered as a producer or consumer still alive?

A pid alone is not enough: pids are reused, and a killed child stays a zombie (``kill(pid, 0)``
succeeds) until its parent reaps it.  So a registration stores the pid *and* the process start
time from ``/proc/<pid>/stat``, and a process counts as alive while a non-zombie process with
that pid and that start time exists.  Where ``/proc`` is missing the check falls back to
``os.kill(pid, 0)``.
"""

from __future__ import annotations

import os
from typing import Final

_PID_MAX: Final = 1 << 22
"""Linux's upper bound for ``pid_max`` (``PID_MAX_LIMIT`` on 64-bit machines)."""


def _stat_fields(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    # "pid (comm) state ppid ..." -- comm may contain spaces and parentheses.
    return raw[raw.rfind(b")") + 2 :].decode("ascii", "replace").split()


def start_time(pid: int) -> int:
    """The start time of ``pid`` in clock ticks since boot, or 0 when unknown."""
    fields = _stat_fields(pid)
    if fields is None or len(fields) < 20 or not fields[19].isdigit():
        return 0
    return int(fields[19])


def is_alive(pid: int, started: int) -> tuple[bool, OSError | None]:
    """Whether the process ``pid`` that started at ``started`` still runs.

    Returns:
        ``(alive, cause)`` where ``cause`` is the ``OSError`` that proved the death, if any.
    """
    if not 0 < pid <= _PID_MAX:  # a pid no process can have: a corrupt or hostile registry word
        return False, None
    try:
        os.kill(pid, 0)
    except ProcessLookupError as exc:
        return False, exc
    except PermissionError:
        pass  # exists, owned by someone else
    fields = _stat_fields(pid)
    if fields is None:
        return True, None  # no /proc: trust kill()
    if fields[0] in ("Z", "X"):
        return False, None
    try:
        return not (started and int(fields[19]) != started), None
    except (IndexError, ValueError):  # a /proc line we cannot read: trust kill()
        return True, None
