"""Processes we start, we end: commands die with flowplex, and what they leave behind is reaped.

Killing a command's process group (what :class:`~flowplex.agents.CommandSource` does when it
stops one) misses two kinds of process: descendants that called ``setsid`` (they left the
group), and everything, when flowplex itself dies by SIGKILL (nobody is left to send a signal).
Linux has a tool for each, used here where the platform offers it (elsewhere these are no-ops):

* ``PR_SET_PDEATHSIG``, set in each command's child before ``exec`` (:func:`spawn`): the kernel
  sends it SIGKILL when the *thread* that forked it ends. Commands are therefore forked by one
  long-lived thread of their own (the spawner, which ends only with the process), never by a
  graph worker that might retire. When the command dies its PTY hangs up, and the kernel sends
  SIGHUP to the terminal's foreground process group, its jobs. A set-user-ID program clears
  the setting at ``exec`` (a kernel rule), and processes that left the session are out of
  reach once flowplex is SIGKILLed: that needs a PID namespace or a cgroup, which we do not take.
* ``PR_SET_CHILD_SUBREAPER`` (:func:`become_subreaper`, done by ``flowplex agents``): orphans of
  the commands (a double fork, a ``setsid`` daemon) are re-parented to flowplex instead of
  ``init``, so that :func:`sweep_orphans` can find them at the end.
* The ``/proc/<pid>/task/<tid>/children`` lists: :func:`descendants` snapshots a command's tree
  before it is killed (its orphans would leave the tree once their parent died), and
  :func:`kill_processes` kills what the snapshot found, checking each process's start time so
  that a recycled pid is never hit.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import queue
import signal
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Final, TypeVar

log = logging.getLogger(__name__)

__all__ = [
    "Proc", "become_subreaper", "death_signal_hook", "descendants", "end_processes", "kill_processes",
    "session_orphans", "spawn", "sweep_orphans",
]

T = TypeVar("T")
Proc = tuple[int, int]
"""A process as ``(pid, start time in clock ticks since boot)``: a pid alone may be recycled."""

_PR_SET_PDEATHSIG: Final = 1
_PR_SET_CHILD_SUBREAPER: Final = 36
_REAP_WAIT_S: Final = 2.0
"""How long :func:`sweep_orphans` waits for killed orphans to be reapable."""


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
"""libc's ``prctl``, looked up once in the parent: the forked child only calls it."""


def become_subreaper() -> bool:
    """Make this process the reaper of its descendants' orphans (Linux); True when it is."""
    if _prctl is None:
        return False
    return _prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0


def death_signal_hook() -> Callable[[], None] | None:
    """A ``preexec_fn`` that makes the child die (SIGKILL) with the thread that forks it.

    The parent's pid is taken now, before the fork: a parent that died before the child could
    ask for the signal would never send it, so such a child exits at once instead.
    """
    prctl = _prctl
    if prctl is None:
        return None
    parent = os.getpid()

    def hook() -> None:  # runs in the child, between fork and exec
        prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        if os.getppid() != parent:
            os._exit(1)

    return hook


class _Spawner:
    """One daemon thread that runs the forks, so that each command's parent thread lives as long
    as the process (``PR_SET_PDEATHSIG`` fires when the forking thread ends)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._jobs: queue.SimpleQueue[tuple[Callable[[], object], Future[object]]] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None

    def call(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` on the spawner thread and return its result (or raise its error)."""
        with self._lock:
            if self._thread is None or not self._thread.is_alive():  # also after a fork of ours
                self._jobs = queue.SimpleQueue()
                self._thread = threading.Thread(target=self._serve, args=(self._jobs,),
                                                name="flowplex-spawner", daemon=True)
                self._thread.start()
            jobs = self._jobs
        done: Future[object] = Future()
        jobs.put((fn, done))
        return done.result()  # type: ignore[return-value]

    @staticmethod
    def _serve(jobs: queue.SimpleQueue[tuple[Callable[[], object], Future[object]]]) -> None:
        while True:
            fn, done = jobs.get()
            try:
                result = fn()
            except BaseException as exc:  # handed to the caller, who raises it
                done.set_exception(exc)
            else:
                done.set_result(result)


_SPAWNER: Final = _Spawner()


def spawn(fn: Callable[[], T]) -> T:
    """Run ``fn`` (which forks a command, passing :func:`death_signal_hook` as its
    ``preexec_fn``) on the spawner thread; blocks until it returned."""
    return _SPAWNER.call(fn)


# -- finding and ending processes --------------------------------------------------------------------


def _stat(pid: int) -> tuple[str, int, int, int] | None:
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


def _children(pid: int) -> list[int]:
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
    """Every live descendant of ``pid`` (children, their children...), parents first."""
    found: list[Proc] = []
    seen = {pid}
    todo = [pid]
    while todo:
        for child in _children(todo.pop()):
            st = _stat(child)
            if child in seen or st is None or st[0] == "Z":
                continue
            seen.add(child)
            found.append((child, st[3]))
            todo.append(child)
    return found


def kill_processes(procs: list[Proc], sig: signal.Signals = signal.SIGKILL) -> int:
    """Send ``sig`` to each process that still is the one found (same start time); returns how many."""
    sent = 0
    for pid, started in procs:
        st = _stat(pid)
        if st is None or st[3] != started or st[0] == "Z":
            continue  # gone, or the pid now belongs to someone else
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)
            sent += 1
    return sent


def end_processes(procs: list[Proc]) -> int:
    """SIGKILL ``procs`` (see :func:`kill_processes`) and reap those that are our children."""
    killed = kill_processes(procs)
    _reap([pid for pid, _ in procs])
    return killed


def session_orphans(session: int) -> list[Proc]:
    """Our children (orphans re-parented to us as subreaper) in ``session``, with their trees."""
    found: list[Proc] = []
    for child in _children(os.getpid()):
        st = _stat(child)
        if st is not None and st[0] != "Z" and st[2] == session:
            found.append((child, st[3]))
            found.extend(descendants(child))
    return found


def sweep_orphans() -> int:
    """Kill and reap what commands left behind: every child of ours in a session not ours.

    Commands run in sessions of their own (their PTY's), so anything of theirs that was
    re-parented to this process (a subreaper) lives in another session than flowplex, while
    helpers of flowplex's own (a ``multiprocessing`` resource tracker) share its session and are
    spared. Returns how many processes were killed. Call it when no command runs any more.
    """
    ours = os.getsid(0)
    targets: list[Proc] = []
    for child in _children(os.getpid()):
        st = _stat(child)
        if st is not None and st[2] != ours:
            targets.append((child, st[3]))
            targets.extend(descendants(child))
    killed = end_processes(targets)
    if killed:
        log.info("agents.sweep.done killed=%d", killed)
    return killed


def _reap(pids: list[int]) -> None:
    """Collect the exit status of those of ``pids`` that are our children (no zombies left)."""
    deadline = time.monotonic() + _REAP_WAIT_S
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
