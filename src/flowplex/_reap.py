"""Find and kill every descendant of a process: what the process pool and the agents share.

A process that a run started must not outlive it, even one that left its process group and
session (``setsid``) and ignores SIGHUP and SIGTERM. Three Linux tools make that reachable, and
this module wraps them (elsewhere each is a no-op that says so by its return value):

* ``PR_SET_CHILD_SUBREAPER`` (:func:`become_subreaper`): orphans of this process's descendants
  (a double fork, a daemon) are re-parented to it instead of ``init``, so they stay in its tree.
* The ``/proc/<pid>/task/<tid>/children`` lists: :func:`descendants` walks the tree, parents
  first, and records each process with its start time (a :data:`Proc`), so that
  :func:`kill_processes` never hits a pid that was recycled since.
* ``PR_SET_PDEATHSIG`` (:func:`set_death_signal`): the kernel signals a process when the thread
  that forked it ends, which is how a watcher learns that its parent was SIGKILLed.

:func:`kill_tree` combines them: SIGKILL every descendant, again until none is left (a process
may fork while the first round runs), and reap those that are this process's children.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import time
from collections.abc import Callable
from typing import Final, TypeAlias

__all__ = [
    "HAVE_PRCTL", "Proc", "become_subreaper", "children", "descendants", "end_processes", "kill_processes", "kill_tree",
    "proc_stat", "reap", "set_death_signal", "set_name",
]

Proc: TypeAlias = tuple[int, int]
"""A process as ``(pid, start time in clock ticks since boot)``: a pid alone may be recycled."""

_PR_SET_PDEATHSIG: Final = 1
_PR_SET_NAME: Final = 15
_PR_SET_CHILD_SUBREAPER: Final = 36
REAP_WAIT_S: Final = 2.0
"""How long :func:`reap` waits for killed children to become reapable."""
KILL_ROUNDS: Final = 20
"""The most rounds :func:`kill_tree` makes: each kills what the last one missed (new forks)."""


def _load_prctl() -> Callable[..., int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        prctl = libc.prctl
    except (OSError, AttributeError):
        return None
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    prctl.restype = ctypes.c_int
    return prctl


_prctl: Final = _load_prctl()
"""libc's ``prctl``, looked up once at import: a forked child only calls it (no loading there)."""
HAVE_PRCTL: Final = _prctl is not None
"""Whether the ``prctl`` settings above exist here (Linux)."""


def become_subreaper() -> bool:
    """Make this process the reaper of its descendants' orphans (Linux); True when it is.

    Its own children are unaffected; orphans it adopts must be reaped by it (:func:`reap`,
    :func:`kill_tree`) or they stay zombies until it exits.
    """
    if _prctl is None:
        return False
    return _prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0


def set_death_signal(sig: int) -> bool:
    """Ask the kernel to send ``sig`` to this process when the thread that forked it ends
    (Linux); True when set. Call ``os.getppid()`` afterwards: a parent already gone sends nothing."""
    if _prctl is None:
        return False
    return _prctl(_PR_SET_PDEATHSIG, sig, 0, 0, 0) == 0


def set_name(name: bytes) -> None:
    """Set this thread's name as ``ps -o comm`` and ``top`` show it (Linux; at most 15 bytes)."""
    if _prctl is not None:
        buf = ctypes.create_string_buffer(name[:15])
        _prctl(_PR_SET_NAME, ctypes.cast(buf, ctypes.c_void_p).value or 0, 0, 0, 0)


def proc_stat(pid: int) -> tuple[str, int, int, int] | None:
    """``(state, ppid, session id, start time)`` of ``pid`` from ``/proc``; None when gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    fields = raw[raw.rfind(b")") + 2 :].split()  # the name, in parentheses, may hold anything
    try:
        return fields[0].decode(), int(fields[1]), int(fields[3]), int(fields[19])
    except (IndexError, ValueError):
        return None


def children(pid: int) -> list[int]:
    """The pids of ``pid``'s children, from each of its threads' ``children`` list."""
    found: list[int] = []
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                found.extend(int(c) for c in f.read().split())
        except (OSError, ValueError):
            continue
    return found


def descendants(pid: int) -> list[Proc]:
    """Every live descendant of ``pid`` (children, their children...), parents first.

    A snapshot: a process forked after its parent was read is missed (call again), and orphans
    leave the tree once their parent died unless an ancestor is a subreaper.
    """
    found: list[Proc] = []
    seen = {pid}
    todo = [pid]
    while todo:
        for child in children(todo.pop()):
            st = proc_stat(child)
            if child in seen or st is None or st[0] == "Z":
                continue
            seen.add(child)
            found.append((child, st[3]))
            todo.append(child)
    return found


def kill_processes(procs: list[Proc], sig: int = signal.SIGKILL) -> int:
    """Send ``sig`` to each process that still is the one found (same start time); returns how many.

    Processes of another user (a set-user-ID program) are skipped: we may not signal them.
    """
    sent = 0
    for pid, started in procs:
        st = proc_stat(pid)
        if st is None or st[3] != started or st[0] == "Z":
            continue  # gone, or the pid now belongs to someone else
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)
            sent += 1
    return sent


def reap(pids: list[int], timeout_s: float = REAP_WAIT_S) -> None:
    """Collect the exit status of those of ``pids`` that are our children (no zombies left),
    waiting up to ``timeout_s`` for killed ones; others' children are left to their parents."""
    deadline = time.monotonic() + timeout_s
    left = set(pids)
    while left:
        for pid in list(left):
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:  # not ours (its parent reaps it) or reaped already
                left.discard(pid)
                continue
            if done:
                left.discard(pid)
        if not left or time.monotonic() >= deadline:
            return
        time.sleep(0.01)


def end_processes(procs: list[Proc]) -> int:
    """SIGKILL ``procs`` (see :func:`kill_processes`) and reap those that are our children."""
    killed = kill_processes(procs)
    reap([pid for pid, _ in procs])
    return killed


def kill_tree(pid: int | None = None) -> int:
    """SIGKILL every descendant of ``pid`` (default: this process) and reap our children among
    them; returns how many were killed.

    Rounds repeat until a walk finds nothing (a process may fork between the walk and its
    kill; as a subreaper the orphans of the killed stay in the tree), at most ``KILL_ROUNDS``.
    """
    root = os.getpid() if pid is None else pid
    killed = 0
    for _ in range(KILL_ROUNDS):
        found = descendants(root)
        if not found:
            break
        killed += end_processes(found)
    return killed
