"""Processes we start, we end: commands die with flowplex, and what they leave behind is reaped.

Killing a command's process group (what :class:`~flowplex.agents.CommandSource` does when it
stops one) misses two kinds of process: descendants that called ``setsid`` (they left the
group), and everything, when flowplex itself dies by SIGKILL (nobody is left to send a signal).
On Linux each command therefore runs under a *supervisor* (:func:`supervised_hook`): the
PTY's child, forked by ptyprocess, forks once more before ``exec``. The grandchild becomes the
command, in a process group of its own that it makes the terminal's foreground group (Ctrl-C,
Ctrl-Z and ``SIGWINCH`` reach it as before, and the waiting detector sees it); the child stays
behind as the session leader and:

* is a child subreaper (``PR_SET_CHILD_SUBREAPER``): orphans of the command (a double fork, a
  ``setsid`` daemon) are re-parented to it, so the whole tree stays below it;
* is told of flowplex's death (``PR_SET_PDEATHSIG``, a signal it waits for, and ``getppid``
  checked every ``_PARENT_CHECK_S`` as a second line): it then SIGKILLs every descendant
  (:func:`flowplex._reap.kill_tree`) and exits, so nothing survives ``kill -9`` of flowplex;
* passes the command's exit status on as its own (the same code, or death by the same signal),
  and reaps the orphans it adopts, so ptyprocess sees what it saw without a supervisor;
* forwards SIGHUP, SIGINT, SIGTERM, SIGQUIT, SIGUSR1 and SIGUSR2 sent to it alone (``kill PID``)
  to the command. flowplex signals the command's group itself, never the supervisor.

The command is started with ``PR_SET_PDEATHSIG`` = SIGKILL relative to its supervisor: should
the supervisor be SIGKILLed, the command goes with it (its own children then do not: that is one
of the limits listed in docs/agent-terminal.md). The supervisor costs one more ``fork`` per
start (one to two milliseconds on a 2-core machine: docs/agent-terminal.md); it runs no ``exec``.

``flowplex agents`` is a subreaper too (:func:`become_subreaper`): what a command left behind
after it exited comes back to flowplex, which sweeps it at the end (:func:`sweep_orphans`).
Elsewhere than Linux none of this exists: commands are process group leaders, as before.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import os
import queue
import resource
import signal
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Final, TypeVar

from .._reap import (
    HAVE_PRCTL,
    Proc,
    become_subreaper,
    children,
    descendants,
    end_processes,
    kill_processes,
    kill_tree,
    proc_stat,
    set_death_signal,
    set_name,
)

log = logging.getLogger(__name__)
_hard_exit: Final = os._exit
"""How the forked supervisor ends: at once, with no clean-up of the state it inherited."""

__all__ = [
    "Proc", "become_subreaper", "command_group", "death_signal_hook", "descendants", "end_processes",
    "kill_processes", "session_orphans", "spawn", "supervised_hook", "sweep_orphans",
]

T = TypeVar("T")
_PARENT_CHECK_S: Final = 0.5
"""How often a supervisor checks ``getppid`` between signals (the death signal is the fast path)."""
_DEATH_SIGNAL: Final = signal.SIGUSR2
"""What the kernel sends a supervisor when flowplex's spawner thread (or flowplex) ends; a user's
``kill -USR2`` is told apart by ``getppid`` and forwarded to the command."""
_FORWARDED: Final = frozenset({signal.SIGHUP, signal.SIGINT, signal.SIGTERM, signal.SIGQUIT, signal.SIGUSR1,
                               signal.SIGUSR2})
_WAITED: Final = frozenset({signal.SIGCHLD, signal.SIGALRM, signal.SIGPIPE, *_FORWARDED})
"""Blocked in the supervisor and taken with ``sigtimedwait``: none of them may end it."""
_SI_USER: Final = 0
"""``si_code`` of a signal sent by ``kill``: the terminal's SIGINT or SIGHUP is the kernel's."""
EXIT_ORPHANED: Final = 70
"""The supervisor's exit code after flowplex died (nobody reads it: flowplex is gone)."""
EXIT_SUPERVISOR_FAILED: Final = 71
"""The supervisor's exit code when it failed itself (a flowplex bug): the command's tree is killed."""


def death_signal_hook() -> Callable[[], None] | None:
    """A ``preexec_fn`` that makes the child die (SIGKILL) with the thread that forks it.

    The parent's pid is taken now, before the fork: a parent that died before the child could
    ask for the signal would never send it, so such a child exits at once instead.
    """
    if not HAVE_PRCTL:
        return None
    parent = os.getpid()

    def hook() -> None:  # runs in the child, between fork and exec
        set_death_signal(signal.SIGKILL)
        if os.getppid() != parent:
            _hard_exit(1)

    return hook


def supervised_hook() -> Callable[[], None] | None:
    """A ``preexec_fn`` for ptyprocess that puts a supervisor between flowplex and the command
    (see the module docstring); None where there is no ``prctl`` (not Linux).

    Runs in ptyprocess's child (the PTY's session leader, its standard streams the terminal,
    every other descriptor closed but ptyprocess's ``exec`` error pipe). It returns only in the
    grandchild, which goes on to ``exec`` the command; the child never returns.
    """
    if not HAVE_PRCTL:
        return None
    parent = os.getpid()

    def hook() -> None:
        set_death_signal(_DEATH_SIGNAL)
        if os.getppid() != parent:
            _hard_exit(1)  # flowplex died before the signal was set: it will never come
        become_subreaper()
        supervisor = os.getpid()
        command = os.fork()
        if command == 0:
            _become_command(supervisor)
            return
        try:
            _supervise(parent, command)
        except BaseException:  # never back into ptyprocess's child code: this process must end here
            with contextlib.suppress(BaseException):
                kill_tree()
            _hard_exit(EXIT_SUPERVISOR_FAILED)

    return hook


def _become_command(supervisor: int) -> None:
    """In the command, before ``exec``: die with the supervisor, lead a foreground group of its own."""
    set_death_signal(signal.SIGKILL)
    if os.getppid() != supervisor:
        _hard_exit(1)
    os.setpgid(0, 0)
    # A background group that sets the foreground group gets SIGTTOU unless it ignores it.
    old = signal.signal(signal.SIGTTOU, signal.SIG_IGN)
    try:
        os.tcsetpgrp(0, os.getpid())
    except OSError:
        pass  # no terminal on 0 (never with ptyprocess): the command still runs
    finally:
        signal.signal(signal.SIGTTOU, old)


def _supervise(parent: int, command: int) -> None:
    """The supervisor's life: wait for the command, or for flowplex's death; never returns.

    Only system calls run here, no import and no logging: this is a fork of a process with
    threads, whose locks may have been held by threads that do not exist here.
    """
    gc.disable()  # no finaliser of an object copied from flowplex may run here
    set_name(b"flowplex-super")
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)  # the terminal is the command's: its hang-up must not wait for us
    # ptyprocess's exec error pipe too, so that it sees the command's exec (its own bound on fds).
    os.closerange(3, min(1 << 20, resource.getrlimit(resource.RLIMIT_NOFILE)[0]))
    for sig in signal.valid_signals():
        if callable(signal.getsignal(sig)):  # flowplex's Python handlers: not to run in this copy
            signal.signal(sig, signal.SIG_DFL)
    for sig in (signal.SIGTSTP, signal.SIGTTIN, signal.SIGTTOU):
        signal.signal(sig, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_BLOCK, _WAITED)
    while True:
        status = _reap_children(command)
        if status is not None:
            _pass_on(status)
        if os.getppid() != parent:
            kill_tree()
            _hard_exit(EXIT_ORPHANED)
        info = signal.sigtimedwait(_WAITED, _PARENT_CHECK_S)
        if (info is not None and info.si_signo in _FORWARDED and info.si_code == _SI_USER
                and info.si_pid != parent and os.getppid() == parent):
            with contextlib.suppress(ProcessLookupError):
                os.kill(command, info.si_signo)


def _reap_children(command: int) -> int | None:
    """Reap every child that exited (the command, and orphans we adopted); the command's wait
    status once it exited, else None."""
    status: int | None = None
    while True:
        try:
            pid, st = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return status if status is not None else 255 << 8  # no child left, the command unseen
        if pid == 0:
            return status
        if pid == command:
            status = st


def _pass_on(status: int) -> None:
    """Exit as the command did: the same exit code, or killed by the same signal (no core)."""
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        with contextlib.suppress(OSError, ValueError):  # SIGKILL's action cannot change (nor needs to)
            signal.signal(sig, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {sig})
        os.kill(os.getpid(), sig)
        _hard_exit(128 + sig)  # a signal whose default is not to terminate (never a command's death)
    _hard_exit(os.waitstatus_to_exitcode(status))


def command_group(supervisor: int) -> int:
    """The process group to signal for the command started under ``supervisor``: the
    supervisor's one child (the command, which leads its group), or ``supervisor`` itself when it
    has none (not supervised, or the command exited already)."""
    kids = children(supervisor)
    return kids[0] if len(kids) == 1 else supervisor


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


# -- finding and ending processes ---------------------------------------------------------------------


def session_orphans(session: int) -> list[Proc]:
    """Our children (orphans re-parented to us as subreaper) in ``session``, with their trees."""
    found: list[Proc] = []
    for child in children(os.getpid()):
        st = proc_stat(child)
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
    for child in children(os.getpid()):
        st = proc_stat(child)
        if st is not None and st[2] != ours:
            targets.append((child, st[3]))
            targets.extend(descendants(child))
    killed = end_processes(targets)
    if killed:
        log.info("agents.sweep.done killed=%d", killed)
    return killed
