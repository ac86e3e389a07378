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
import time
from typing import TYPE_CHECKING, Any, Final, final

from .._log import LogLevel
from ..kernels import Context, Contract, Kernel, kernel
from ..transport import AgentType
from ._common import Identity, Stamper, draining, option_error, read_identity
from ._packets import chunk_packet, end_packet

if TYPE_CHECKING:
    import codecs

log = logging.getLogger(__name__)

__all__ = ["CommandSource", "describe_exit"]

PYTHON_PLACEHOLDER: Final = "{python}"
"""``argv[0]`` placeholder for the Python interpreter running flowplex (``sys.executable``)."""
_READS_PER_CALL: Final = 8


def describe_exit(exit_code: int) -> str:
    """``"exit 0"``, ``"exit 3"`` or ``"killed by SIGTERM"`` for an exit code (``-N``: signal N).

    >>> describe_exit(-9)
    'killed by SIGKILL'
    """
    if exit_code >= 0:
        return f"exit {exit_code}"
    try:
        name = signal.Signals(-exit_code).name
    except ValueError:
        name = f"signal {-exit_code}"
    return f"killed by {name}"


@final
@kernel("CommandSource")
class CommandSource(Kernel):
    """Runs a command in a pseudo-terminal and streams its output as an agent.

    The command sees a real terminal (colours, progress bars and full-screen programs work) of
    ``columns x rows`` cells; with ``display`` set, the PTY follows the size of the agent's
    pane. Output is emitted as text chunks (UTF-8, escape sequences included) of the
    agent-stream convention (:mod:`flowplex.agents`); when the command exits, an ``end`` packet
    carries its exit status. When the graph stops first, the command's whole process group is
    sent SIGTERM, then SIGKILL after ``kill_timeout_s``, and reaped.

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
        self._fd = -1
        self._decoder: codecs.IncrementalDecoder | None = None
        self._who = Identity("", None, AgentType.INFO)
        self._stamp = Stamper()
        self._eof = False
        self._done = False
        self._poll_s = 0.02
        self._kill_timeout_s = 1.0
        self._fail = False
        self._display = ""
        self._size = (80, 24)
        self._argv: list[str] = []
        self._start_error = ""

    def open(self, cc: Context) -> None:
        import codecs

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
        cwd = cc.option_str("cwd", "") or None
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._stamp = Stamper()
        self._eof = self._done = False
        self._start_error = ""
        self._follow_display_size()
        env = dict(os.environ)
        env["TERM"] = "xterm-256color"  # what the pane emulates
        for stale in ("COLUMNS", "LINES"):  # the PTY has the size; stale values would hide resizes
            env.pop(stale, None)
        from ptyprocess import PtyProcess

        try:
            self._proc = PtyProcess.spawn(argv, cwd=cwd, env=env, dimensions=(self._size[1], self._size[0]))
        except OSError as exc:
            reason = f"cannot start {shlex.join(argv)}: {exc.strerror or exc}"
            if self._fail:
                raise
            log.warning("command.start.failed node=%r argv=%r error=%s", cc.node_name, argv, reason)
            self._start_error = reason  # reported by the first process(): open cannot emit
            return
        self._fd = self._proc.fd
        log.debug("command.start.ok node=%r pid=%d argv=%r", cc.node_name, self._proc.pid, argv)

    @property
    def pid(self) -> int | None:
        """The command's process id while it runs (tests use it)."""
        return None if self._proc is None else int(self._proc.pid)

    def process(self, cc: Context) -> None:
        if self._start_error:
            cc.emit(0, self._end(self._start_error, ok=False, exit_code=127))
            self._start_error = ""
            self._done = True
        if self._done:
            cc.source_done()
            return
        if draining(self._display):
            self._kill()
            self._pump(cc)
            status = self._exit_status()
            self._finish(cc, status if status is not None else -int(signal.SIGKILL))
            cc.source_done()
            return
        self._follow_display_size()
        got = self._pump(cc) if not self._eof else False
        if self._eof:
            status = self._exit_status()
            if status is None:
                cc.source_yield(self._poll_s)  # the PTY closed but the process still runs
                return
            self._finish(cc, status)
            cc.source_done()
            return
        cc.source_yield(0.0 if got else self._poll_s)

    def _pump(self, cc: Context) -> bool:
        """Emit what the PTY has, without blocking; True when something was read."""
        assert self._decoder is not None
        got = False
        for _ in range(_READS_PER_CALL):
            try:
                ready, _, _ = select.select([self._fd], [], [], 0)
            except (OSError, ValueError):
                self._eof = True
                break
            if not ready:
                break
            try:
                data = os.read(self._fd, 65536)
            except OSError as exc:
                if exc.errno in (errno.EIO, errno.EBADF):  # Linux: the child side closed
                    self._eof = True
                    break
                raise
            if not data:
                self._eof = True
                break
            text = self._decoder.decode(data)
            if text:
                cc.emit(0, chunk_packet(text, ts=self._stamp.next(), stream_id=self._who.stream_id,
                                        agent_type=self._who.agent_type, name=self._who.name, pty=True))
                got = True
        if self._eof:
            tail = self._decoder.decode(b"", final=True)
            if tail:
                cc.emit(0, chunk_packet(tail, ts=self._stamp.next(), stream_id=self._who.stream_id,
                                        agent_type=self._who.agent_type, name=self._who.name, pty=True))
        return got

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
        self._done = True
        self._close_fd()
        if draining(self._display):
            cc.emit(0, self._end(f"stopped ({describe_exit(exit_code)})", ok=True, exit_code=exit_code))
            return
        ok = exit_code == 0
        note = describe_exit(exit_code)
        if not ok:
            # The stream reports it (the end packet); the log only keeps a trace.
            cc.log(LogLevel.INFO, f"command {shlex.join(self._argv)} ended: {note}")
            if self._fail:
                msg = f"command {shlex.join(self._argv)} ended: {note}"
                raise RuntimeError(msg)
        cc.emit(0, self._end(note, ok=ok, exit_code=exit_code))

    def _end(self, note: str, *, ok: bool, exit_code: int) -> object:
        return end_packet(note, ts=self._stamp.next(), stream_id=self._who.stream_id,
                          agent_type=self._who.agent_type, name=self._who.name, ok=ok, exit_code=exit_code)

    def close(self, cc: Context) -> None:
        self._kill()
        self._close_fd()

    def _kill(self) -> None:
        """SIGTERM the command's process group, SIGKILL it after the grace period, reap it."""
        proc = self._proc
        if proc is None:
            return
        try:
            alive = proc.isalive()
        except Exception:
            alive = False
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

    def _signal_group(self, sig: signal.Signals) -> None:
        pid = self._proc.pid
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, sig)

    def _close_fd(self) -> None:
        proc = self._proc
        if proc is None or self._fd < 0:
            return
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


def _still_alive(proc: Any) -> bool:
    try:
        return bool(proc.isalive())
    except Exception:
        return False
