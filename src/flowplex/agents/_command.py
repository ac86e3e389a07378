"""``CommandSource``: a real command in a pseudo-terminal, streamed as an agent."""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import select
import shlex
import signal
import sys
import threading
import time
from typing import TYPE_CHECKING, Any, Final, final

from .._log import LogLevel
from ..errors import UsageError
from ..kernels import Context, Contract, Kernel, kernel
from ..terminal._control import ACTIONS, signal_name
from ..transport import AgentType
from ._common import Identity, Stamper, draining, option_error, read_identity
from ._lifetime import command_group, descendants, end_processes, session_orphans, spawn, supervised_hook
from ._packets import chunk_packet, end_packet, start_packet
from ._restart import DEFAULT_RESTART_DELAY_S, DEFAULT_RESTART_LIMIT, MIN_RESTART_DELAY_S, RESTART_MODES, RestartPolicy
from ._waiting import foreground_waiting

if TYPE_CHECKING:
    import codecs

    from ..terminal._control import InputTap

log = logging.getLogger(__name__)

__all__ = ["CommandSource", "describe_exit"]

PYTHON_PLACEHOLDER: Final = "{python}"
"""``argv[0]`` placeholder for the Python interpreter running flowplex (``sys.executable``)."""
_READ_BYTES_PER_CALL: Final = 64 * 1024
"""The most a ``process`` call takes from the PTY, emitted as one chunk. Nothing else is read
ahead: while the engine holds the source back (its consumer's queue is full), the PTY's buffer
fills and the command's writes block, as a pipe would block them, so no memory grows here."""
_READS_PER_CALL: Final = 32
"""A PTY read returns about 4 KiB; this many fill the byte budget without spinning."""
_HELD_PTY_GRACE_S: Final = 0.1
"""How long an exited command's PTY, held open by what it left running, must stay quiet before
the command counts as finished."""
_KEEP_POLL_S: Final = 0.05
"""How often an exited command's source looks for a restart request (interactive display)."""


def describe_exit(exit_code: int) -> str:
    """``"exit 0"``, ``"exit 3"`` or ``"killed by SIGTERM"`` for an exit code (``-N``: signal N).

    >>> describe_exit(-9)
    'killed by SIGKILL'
    """
    return f"exit {exit_code}" if exit_code >= 0 else f"killed by {signal_name(-exit_code)}"


@final
@kernel("CommandSource")
class CommandSource(Kernel):
    """Runs a command in a pseudo-terminal and streams its output as an agent.

    The command sees a real terminal (colours, progress bars and full-screen programs work) of
    ``columns x rows`` cells; with ``display`` set, the PTY follows the size of the agent's
    pane. Output is emitted as text chunks (UTF-8, escape sequences included) of the
    agent-stream convention (:mod:`flowplex.agents`); when the command exits, an ``end`` packet
    carries its exit status (even when children it left behind still hold its PTY: they are
    killed then). When the graph stops first, the command's whole process group is
    sent SIGTERM, then SIGKILL after ``kill_timeout_s``, and reaped; its descendants that left
    the group (``setsid``) are killed too. On Linux the command runs under a forked supervisor
    that passes its exit status on and, when flowplex dies (even by SIGKILL), kills every process
    of the command's tree (see :mod:`flowplex.agents._lifetime`). When it exits by itself, what
    it left running in its process group is killed then.

    Back-pressure: each ``process`` call reads at most 64 KiB from the PTY and emits it as one
    chunk; a source held back by the engine reads nothing, so a command that writes faster than
    the terminal shows blocks on its own writes instead of filling memory.

    Ports: no inputs → output 0 (Str chunks).

    Options:
        argv: The command as a list (``["ls", "-l"]``); ``"{python}"`` as the first item means
            the interpreter running flowplex. Not run through a shell.
        command: Alternatively, one string split like a shell would (``"ls -l"``).
        name: The agent's label (default: the program's name).
        stream_id: The agent's stream id (default: none; the sink uses its input port).
        agent_type: Default ``info``.
        cwd: Working directory (default: the current one).
        columns, rows: The PTY size (default 80x24).
        display: Name of a registered display: the PTY follows the size of the agent's pane,
            and when the display's host sets ``draining`` the command is stopped (SIGTERM...)
            and the source finishes.
        poll_s: How often to look for output when there was none (default 0.02 s).
        kill_timeout_s: Grace between SIGTERM and SIGKILL (default 1 s).
        fail_on_error: Raise (fail the graph) when the command cannot start or exits non-zero,
            instead of reporting it in the stream (default false).
        autostart: Start the command at ``open`` (default true); false waits for a start
            request from the display (its ``s`` key), or ends the stream at once without one.
        restart: ``never`` (default), ``on_failure`` (a non-zero exit or a signal not sent
            from the display) or ``always``: start the command again after it exits.
        restart_limit: The most automatic restarts in a row (default 10; negative: no limit); a
            run that lasted 30 s starts the count again.
        restart_delay_s: Wait before the first automatic restart (default 1 s, at least 0.1 s);
            it doubles with each one in a row, up to 60 s, so a command that crashes at once
            cannot spin (see :class:`~flowplex.agents._restart.RestartPolicy`).
        env: Extra environment variables (a mapping; a null value unsets the variable).

    Interaction: with ``display`` set, the source attaches an
    :class:`~flowplex.terminal._control.AgentControl` to the agent's pane: typing mode writes
    keys to the PTY (whose line discipline turns Ctrl-C into SIGINT for the foreground process
    group), the display's stop/restart/kill keys are carried out on the source's thread, and
    the display polls whether the command waits for input. On an interactive display a command
    that exits keeps its source (and pane) until the display drains, so it can be restarted.

    Lifecycle: ``open`` (the thread calling ``Graph.start``) starts the command (a failure to
    start is reported by the first ``process``); ``process`` (the source's background thread)
    never blocks: it emits what the PTY has and yields; ``close`` stops the command if it still
    runs. Only ``process`` emits.
    """

    @staticmethod
    def get_contract(c: Contract) -> None:
        c.output_set_any(0)

    def __init__(self) -> None:
        self._proc: Any = None
        """ptyprocess's handle on the command's supervisor (the command itself without one)."""
        self._group = 0
        """The command's process group (its pid): what stop, kill and Ctrl-C reach."""
        self._fd = -1
        self._decoder: codecs.IncrementalDecoder | None = None
        self._who = Identity("", None, AgentType.INFO)
        self._stamp = Stamper()
        self._eof = False
        self._quiet_since: float | None = None
        """When an exited command's PTY, still held open, was first seen quiet."""
        self._done = False
        self._poll_s = 0.02
        self._kill_timeout_s = 1.0
        self._fail = False
        self._display = ""
        self._size = (80, 24)
        self._argv: list[str] = []
        self._cwd: str | None = None
        self._env: dict[str, str] = {}
        self._start_error = ""
        self._policy = RestartPolicy()
        self._restarts_in_row = 0
        self._restart_at: float | None = None
        self._started_at = 0.0
        self._user_stopped = False
        """The display stopped or killed this run: it is not a failure to restart from."""
        self._keep = False
        self._control: _Control | None = None
        self._fd_lock = threading.Lock()
        """Held while the display's threads use the PTY descriptor, and to retire it."""

    def open(self, cc: Context) -> None:
        import codecs
        import json

        argv = cc.option_str_array("argv")
        command = cc.option_str("command", "")
        if not argv and command:
            try:
                argv = shlex.split(command)
            except ValueError as exc:
                raise option_error(cc, "command", f"cannot split {command!r}: {exc}") from None
        if not argv:
            raise option_error(cc, "argv", "missing; give the command as a list, e.g. argv: [ls, -l]")
        if argv[0] == PYTHON_PLACEHOLDER:
            argv = [sys.executable, *argv[1:]]
        self._argv = argv
        self._who = read_identity(cc, os.path.basename(argv[0]), AgentType.INFO)
        columns = cc.option_int("columns", 80)
        rows = cc.option_int("rows", 24)
        if columns < 1 or rows < 1:
            raise option_error(cc, "columns", f"PTY size must be positive, got {columns}x{rows}")
        self._size = (columns, rows)
        self._poll_s = max(0.001, cc.option_float("poll_s", 0.02))
        self._kill_timeout_s = max(0.0, cc.option_float("kill_timeout_s", 1.0))
        self._fail = cc.option_bool("fail_on_error", False)
        self._display = cc.option_str("display", "")
        self._cwd = cc.option_str("cwd", "") or None
        mode = cc.option_str("restart", "never")
        if mode not in RESTART_MODES:
            raise option_error(cc, "restart", f"{mode!r}: expected one of {', '.join(RESTART_MODES)}")
        limit = cc.option_int("restart_limit", DEFAULT_RESTART_LIMIT)
        delay = max(MIN_RESTART_DELAY_S, cc.option_float("restart_delay_s", DEFAULT_RESTART_DELAY_S))
        self._policy = RestartPolicy(mode, None if limit < 0 else limit, delay)
        env = json.loads(cc.options_json()).get("env") or {}
        if not isinstance(env, dict) or not all(isinstance(v, str) or v is None for v in env.values()):
            raise option_error(cc, "env", "expected a mapping of names to strings (or null to unset one)")
        self._env = self._environment(env)
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._stamp = Stamper()
        self._done = False
        self._restarts_in_row = 0
        self._restart_at = None
        autostart = cc.option_bool("autostart", True)
        self._attach(started=autostart)
        self._follow_display_size()
        if autostart:
            self._spawn(cc.node_name)

    @staticmethod
    def _environment(extra: dict[str, str | None]) -> dict[str, str]:
        env = dict(os.environ)
        env["TERM"] = "xterm-256color"  # what the pane emulates
        for stale in ("COLUMNS", "LINES"):  # the PTY has the size; stale values would hide resizes
            env.pop(stale, None)
        for key, value in extra.items():
            if value is None:
                env.pop(key, None)
            else:
                env[key] = value
        return env

    def _attach(self, *, started: bool) -> None:
        """Give the display a control for this agent (keys, stop/restart/kill, waiting)."""
        from ..terminal import get_display

        display = get_display(self._display) if self._display else None
        if display is None or self._who.stream_id is None:
            return
        self._control = _Control(self, display.input_tap)
        self._keep = display.attach_control(self._who.stream_id, self._control, started=started)

    def _spawn(self, node: str) -> None:
        """Start the command in a new PTY (a failure to start is reported by ``process``)."""
        import codecs

        from ptyprocess import PtyProcess

        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._eof = False
        self._quiet_since = None
        self._start_error = ""
        self._user_stopped = False
        self._started_at = time.monotonic()
        argv, cwd, env, dims = self._argv, self._cwd, self._env, (self._size[1], self._size[0])
        hook = supervised_hook()
        try:
            # Forked by the spawner thread, which lives as long as the process: the death signal
            # fires when the forking thread ends, and a graph worker may end before the command.
            # The PTY's child is the command's supervisor (``_lifetime``), the command its child.
            proc = spawn(lambda: PtyProcess.spawn(argv, cwd=cwd, env=env, dimensions=dims, preexec_fn=hook))
        except OSError as exc:
            reason = f"cannot start {shlex.join(self._argv)}: {exc.strerror or exc}"
            if self._fail:
                raise
            log.warning("command.start.failed node=%r argv=%r error=%s", node, self._argv, reason)
            self._start_error = reason  # reported by the next process(): open cannot emit
            return
        os.set_blocking(proc.fd, False)  # keys typed into a busy program must not block the key reader
        self._proc = proc
        self._fd = proc.fd
        # The command has exec'ed when spawn returns (ptyprocess waits for that): its group is set.
        self._group = command_group(proc.pid) if hook is not None else proc.pid
        log.debug("command.start.ok node=%r pid=%d supervisor=%d argv=%r", node, self._group, proc.pid, self._argv)

    @property
    def pid(self) -> int | None:
        """The command's process id while it runs (tests use it); it leads its process group."""
        return None if self._proc is None else self._group

    @property
    def running(self) -> bool:
        """Whether the command's PTY is open (it runs, or has not been reaped yet)."""
        return self._fd >= 0

    def process(self, cc: Context) -> None:
        if self._start_error:
            cc.emit(0, self._end(self._start_error, ok=False, exit_code=127))
            self._start_error = ""
            self._after_exit(cc, exit_code=127)
        if self._done:
            cc.source_done()
            return
        if draining(self._display):
            if self.running:
                self._stop_now(cc)
            elif self._proc is None:  # never started (autostart: false): say so, it did not fail
                cc.emit(0, self._end("not started (autostart: false)", ok=True, exit_code=None))
            self._done = True
            cc.source_done()
            return
        control = self._control
        if control is not None:
            for action in control.take_requests():
                self._carry_out(cc, action)
        if not self.running:
            self._idle(cc)
            return
        if control is not None:
            control.flush_input()
        self._follow_display_size()
        got = self._pump(cc) if not self._eof else False
        if got:
            self._quiet_since = None
        elif not self._eof and self._exit_status() is not None:
            # The command exited and its output is read, but its PTY is still open: children
            # it left running hold it (`sh -c 'daemon &'`). The agent is the command: it ended
            # (after a short grace, for its last bytes still on their way through the PTY).
            now = time.monotonic()
            if self._quiet_since is None:
                self._quiet_since = now
            elif now - self._quiet_since >= _HELD_PTY_GRACE_S:
                self._eof = True
        if self._eof:
            status = self._exit_status()
            if status is None:
                cc.source_yield(self._poll_s)  # the PTY closed but the process still runs
                return
            self._finish(cc, status)
            self._after_exit(cc, exit_code=status)
            if self._done:
                cc.source_done()
            else:
                cc.source_yield(0.0)
            return
        cc.source_yield(0.0 if got else self._poll_s)

    def _idle(self, cc: Context) -> None:
        """No command runs: start one that is due, wait for a request, or end the stream."""
        if self._restart_at is not None:
            left = self._restart_at - time.monotonic()
            if left <= 0:
                self._restart_at = None
                self._start_again(cc, "restart")
                cc.source_yield(0.0)
            else:
                cc.source_yield(min(left, _KEEP_POLL_S))
            return
        if self._keep:
            cc.source_yield(_KEEP_POLL_S)
            return
        if self._proc is None and not self._start_error:  # autostart: false and nobody to start it
            cc.emit(0, self._end("not started (autostart: false)", ok=True, exit_code=None))
        self._done = True
        cc.source_done()

    def _after_exit(self, cc: Context, *, exit_code: int) -> None:
        """The command ended: schedule an automatic restart, keep the source, or end it."""
        decision = self._policy.decide(exit_code, self._restarts_in_row, uptime_s=time.monotonic() - self._started_at,
                                       stopped=self._user_stopped)
        self._restarts_in_row = decision.restarts
        if decision.restart:
            self._restart_at = time.monotonic() + decision.delay_s
            return
        if not self._keep:
            self._done = True

    def _carry_out(self, cc: Context, action: str) -> None:
        """A request from the display: start, stop (SIGTERM), restart, kill (SIGKILL)."""
        if action == "start":
            if not self.running:
                self._restart_at = None
                self._restarts_in_row = 0
                self._start_again(cc, "start")
        elif action in ("stop", "kill"):
            self._restart_at = None
            if self.running:
                self._user_stopped = True
                self._signal_group(signal.SIGTERM if action == "stop" else signal.SIGKILL)
        elif action == "restart":
            self._restart_at = None
            self._restarts_in_row = 0
            if self.running:
                self._user_stopped = True
                self._stop_now(cc)
            self._start_again(cc, "restart")

    def _stop_now(self, cc: Context) -> None:
        """Stop the running command (SIGTERM, then SIGKILL), emit what it still wrote and its end."""
        self._kill()
        self._pump(cc)
        status = self._exit_status()
        self._finish(cc, status if status is not None else -int(signal.SIGKILL))

    def _start_again(self, cc: Context, note: str) -> None:
        cc.emit(0, start_packet(note, ts=self._stamp.next(), stream_id=self._who.stream_id,
                                agent_type=self._who.agent_type, name=self._who.name))
        self._done = False
        self._spawn(cc.node_name)

    def _pump(self, cc: Context) -> bool:
        """Emit what the PTY has (at most ``_READ_BYTES_PER_CALL``, as one chunk), without
        blocking; True when something was read."""
        assert self._decoder is not None
        data = bytearray()
        for _ in range(_READS_PER_CALL):
            want = _READ_BYTES_PER_CALL - len(data)
            if want <= 0:
                break
            try:
                ready, _, _ = select.select([self._fd], [], [], 0)
            except (OSError, ValueError):
                self._eof = True
                break
            if not ready:
                break
            try:
                got = os.read(self._fd, want)
            except BlockingIOError:
                break
            except OSError as exc:
                if exc.errno in (errno.EIO, errno.EBADF):  # Linux: the child side closed
                    self._eof = True
                    break
                raise
            if not got:
                self._eof = True
                break
            data += got
        text = self._decoder.decode(bytes(data), final=self._eof)
        if text:
            cc.emit(0, chunk_packet(text, ts=self._stamp.next(), stream_id=self._who.stream_id,
                                    agent_type=self._who.agent_type, name=self._who.name, pty=True))
        return bool(data)

    def _exit_status(self) -> int | None:
        proc = self._proc
        try:
            if proc.isalive():
                return None
        except Exception:  # ptyprocess raises if waitpid finds nothing more to reap
            log.debug("command.wait.failed pid=%s", proc.pid, exc_info=True)
        if proc.signalstatus is not None:
            return -int(proc.signalstatus)
        return int(proc.exitstatus or 0)

    def _finish(self, cc: Context, exit_code: int) -> None:
        self._close_fd()
        self._end_leftovers()
        if draining(self._display):
            cc.emit(0, self._end(f"stopped ({describe_exit(exit_code)})", ok=True, exit_code=exit_code))
            return
        ok = exit_code == 0 or self._user_stopped
        note = describe_exit(exit_code)
        if exit_code != 0 and not self._user_stopped:
            # The stream reports it (the end packet); the log only keeps a trace.
            cc.log(LogLevel.INFO, f"command {shlex.join(self._argv)} ended: {note}")
            if self._fail:
                msg = f"command {shlex.join(self._argv)} ended: {note}"
                raise RuntimeError(msg)
        cc.emit(0, self._end(note, ok=ok, exit_code=exit_code))

    def _end(self, note: str, *, ok: bool, exit_code: int | None) -> object:
        return end_packet(note, ts=self._stamp.next(), stream_id=self._who.stream_id,
                          agent_type=self._who.agent_type, name=self._who.name, ok=ok, exit_code=exit_code)

    def write_input(self, data: bytes) -> int:
        """Write keys to the PTY without blocking; returns how many bytes it took."""
        with self._fd_lock:
            if self._fd < 0:
                return len(data)  # nobody to read them: dropped, as on a terminal whose program exited
            try:
                return os.write(self._fd, data)
            except BlockingIOError:
                return 0
            except OSError:
                return len(data)

    def waiting_for_input(self) -> str:
        """How the command's foreground process waits for its terminal (``"read"``, ``"poll"``, ``""``)."""
        with self._fd_lock:
            return foreground_waiting(self._fd) if self._fd >= 0 else ""

    def close(self, cc: Context) -> None:
        self._kill()
        self._close_fd()
        control, self._control = self._control, None
        if control is not None and self._display and self._who.stream_id is not None:
            from ..terminal import get_display

            display = get_display(self._display)
            if display is not None:
                display.detach_control(self._who.stream_id, control)

    def _kill(self) -> None:
        """SIGTERM the command's process group, SIGKILL it after the grace period, reap it."""
        proc = self._proc
        if proc is None:
            return
        try:
            alive = proc.isalive()
        except Exception:
            alive = False
        # Taken before the kill: once their parent is dead, orphans are no longer in its tree.
        tree = descendants(proc.pid) if alive else []
        if alive:
            self._signal_group(signal.SIGTERM)
            deadline = time.monotonic() + self._kill_timeout_s
            while time.monotonic() < deadline:
                if not _still_alive(proc):
                    break
                time.sleep(0.01)
            else:
                self._signal_group(signal.SIGKILL)
                deadline = time.monotonic() + 5.0
                while time.monotonic() < deadline and _still_alive(proc):
                    time.sleep(0.01)
            log.debug("command.kill.done pid=%d", proc.pid)
        # The session's other members (children the command left behind) go too.
        self._signal_group(signal.SIGKILL)
        end_processes(tree)  # and those that left the group (setsid) but were in the tree
        self._end_leftovers()
        if _still_alive(proc):  # a supervisor that did not follow its command (never seen)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(proc.pid, signal.SIGKILL)

    def _end_leftovers(self) -> None:
        """The command ended: kill what it left running in its group, and its orphans that were
        re-parented to us (``flowplex agents`` is a subreaper) without leaving its session."""
        if self._proc is None:
            return
        self._signal_group(signal.SIGKILL)
        end_processes(session_orphans(int(self._proc.pid)))

    def _signal_group(self, sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self._group, sig)

    def _close_fd(self) -> None:
        proc = self._proc
        if proc is None or self._fd < 0:
            return
        with self._fd_lock:  # no key may be written to the number once it is closed (and reused)
            self._fd = -1
        proc.delayafterclose = 0.0  # ptyprocess sleeps 0.1 s in close() by default
        proc.delayafterterminate = 0.0
        with contextlib.suppress(Exception):
            proc.close(force=True)

    def _follow_display_size(self) -> None:
        if not self._display:
            return
        from ..terminal import get_display

        display = get_display(self._display)
        if display is None:
            return
        size = display.pane_size(self._who.stream_id) if self._who.stream_id is not None else None
        if size is None or size == self._size:
            return
        self._size = size
        if self._proc is not None and self._fd >= 0:
            with contextlib.suppress(OSError):
                self._proc.setwinsize(size[1], size[0])  # the command gets SIGWINCH


class _Control:
    """The display's handle on one command (see ``AgentControl``): thread-safe, never blocks.

    Keys are queued and written by whichever thread comes first (the key reader at once, the
    source's thread when the PTY was full), so a program that does not read cannot stall the
    keyboard. Requests are carried out by the source's own thread at its next turn. A recording
    of the input (``tap``) is told of each write first; it waits only when the recorder is a
    whole queue behind (lossless, as for the output).
    """

    def __init__(self, source: CommandSource, tap: InputTap | None = None) -> None:
        self._source = source
        self._tap = tap
        """Told of every key written (``Display.input_tap``: a recording of what was typed)."""
        self._lock = threading.Lock()
        self._input = bytearray()
        self._requests: list[str] = []

    def write(self, data: bytes) -> None:
        tap = self._tap
        sid = self._source._who.stream_id
        with self._lock:
            if tap is not None and data and sid is not None:  # (in the lock: recorded in the order written)
                tap(sid, self._source._stamp.now(), bytes(data))  # before the PTY has it: input precedes its echo
            self._input += data
            self._flush_locked()

    def flush_input(self) -> None:
        if self._input:
            with self._lock:
                self._flush_locked()

    def _flush_locked(self) -> None:
        while self._input:
            taken = self._source.write_input(bytes(self._input[:4096]))
            if taken <= 0:
                return
            del self._input[:taken]

    def request(self, action: str) -> None:
        if action not in ACTIONS:
            msg = f"unknown agent action {action!r}; expected one of {', '.join(ACTIONS)}"
            raise UsageError(msg)
        with self._lock:
            self._requests.append(action)

    def take_requests(self) -> list[str]:
        with self._lock:
            taken, self._requests = self._requests, []
            return taken

    def waiting(self) -> str:
        return self._source.waiting_for_input()


def _still_alive(proc: Any) -> bool:
    try:
        return bool(proc.isalive())
    except Exception:
        return False
