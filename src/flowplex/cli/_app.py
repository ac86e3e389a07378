"""The typer app every command registers on, and what the commands share: the ``--debug``
switch, the one-line error forms, the log handler and the help of the common options."""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import signal
import sys
import threading
import traceback
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Annotated, Any, BinaryIO, TextIO, final

import typer

from flowplex.terminal._sanitize import visible_controls as shown

app = typer.Typer(
    name="flowplex",
    help="flowplex: run and inspect dataflow graphs written in YAML.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

state: dict[str, bool] = {"debug": False, "timed_out": False}
"""``debug``: ``--debug`` was given; ``timed_out``: ``--timeout`` was reported (see ``StderrLog``)."""

SET_HELP = "Override a node option: NODE.OPTION=VALUE (VALUE is YAML: 3, 2.5, true, [1, 2]); repeatable."
IMPORT_HELP = (
    "Import your kernels first: a module name (found in the current directory or on PYTHONPATH) "
    "or a path to a .py file; repeatable."
)


@app.callback()
def _root(
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks for errors.")] = False,
) -> None:
    state["debug"] = debug


def fail(exc: BaseException, code: int) -> typer.Exit:
    """One readable line on stderr (the traceback only with --debug)."""
    if state["debug"]:
        traceback.print_exception(exc)
    else:
        typer.echo(shown(f"flowplex: error: {exc}"), err=True)
    return typer.Exit(code)


def where(graph: Path, exc: BaseException) -> str:
    """``exc``'s message, prefixed with the graph file unless it already names it."""
    text = str(exc)
    return text if text.startswith(str(graph)) else f"{graph}: {text}"


def fail_at(graph: Path, exc: BaseException, code: int) -> typer.Exit:
    """``fail``, with the message prefixed by the graph file (see ``where``)."""
    if state["debug"]:
        traceback.print_exception(exc)
        return typer.Exit(code)
    typer.echo(shown(f"flowplex: error: {where(graph, exc)}"), err=True)
    return typer.Exit(code)


def usage(message: str) -> typer.Exit:
    """A usage error: one line, exit 2."""
    typer.echo(shown(f"flowplex: error: {message}"), err=True)
    return typer.Exit(2)


def stream_list(option: str | None) -> list[str] | None:
    """``--streams a,b`` as names, each once, in order (None without the option); a list that
    names no stream is a usage error."""
    if option is None:
        return None
    names = list(dict.fromkeys(s.strip() for s in option.split(",") if s.strip()))
    if not names:
        msg = f"--streams {option!r} names no stream"
        raise usage(msg)
    return names


def check_view(option: str, view: str) -> None:
    """A DOT view option (``--view``, ``--dot-view``) must name a view (exit 2 otherwise)."""
    from flowplex.diagnostics._dot import parse_view

    try:
        parse_view(view)
    except ValueError as exc:
        msg = f"{option}: {exc}"
        raise usage(msg) from None


class StderrLog(logging.Handler):
    """flowplex's log records as ``flowplex: warning: ...`` lines on the current ``sys.stderr``.

    ``sys.stderr`` is looked up per record so lines go above the live display while it runs.
    The engine's ``kernel failed: ...`` ERROR record is dropped: the command reports that error
    itself, as its one line; so is ``graph.close.abandoned`` once ``--timeout`` was reported
    (that line named what was still running). Messages carry foreign text (a server's error, a node name), so
    their control characters are shown, never sent to the terminal.
    """

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if record.levelno >= logging.ERROR and message.startswith("kernel failed: "):
            return
        if state["timed_out"] and message.startswith("graph.close.abandoned"):
            return
        try:
            sys.stderr.write(shown(f"flowplex: {record.levelname.lower()}: {message}") + "\n")
        except Exception:  # logging must never break the run
            self.handleError(record)


def setup_logging() -> None:
    """Show flowplex's warnings (and INFO with --debug) on stderr; idempotent."""
    root = logging.getLogger("flowplex")
    if not any(isinstance(h, StderrLog) for h in root.handlers):
        root.addHandler(StderrLog())
    root.setLevel(logging.INFO if state["debug"] else logging.WARNING)


# --- stdout's reader leaving ------------------------------------------------------------------------
#
# `flowplex run g.yaml | head -1`, `flowplex replay f.mcap | head`: once the reader has what it wants
# it closes the pipe, and the next write fails with EPIPE. Whatever command was writing, on whatever
# thread, this is where that is noticed (every write to stdout goes through `_Stdout`) and the
# command ends as `git log | head` ends: no message, no traceback. git and cat die of SIGPIPE (status
# 141 under `set -o pipefail`); we exit 0 instead, for the reader had all it wanted, and a pipeline
# should not fail because its reader stopped early. SIGPIPE keeps away from its default action: it
# would kill the process for any socket or worker pipe whose peer went away, too.


class ReaderLeft(KeyboardInterrupt):
    """Stdout's reader has gone: raised on the main thread when a write on another thread met EPIPE.

    A ``KeyboardInterrupt``, because it arrives as a signal, anywhere the main thread is: the
    engine lets it through a kernel call as it lets Ctrl-C through, and the commands stop as they
    do for Ctrl-C (a graph cancelled in order, a recording finished). ``except OSError`` (the
    import system has several) must not swallow it, as it would a ``BrokenPipeError``.
    """


@final
class _Stdout:
    """``sys.stdout`` while a command runs: the one place that sees stdout's reader leave.

    The first write (or flush) that finds the pipe closed points file descriptor 1 at
    ``/dev/null``, so that what is still buffered, and the interpreter's last flush, go nowhere
    and fail no more. Then the command stops: on the main thread the ``BrokenPipeError`` goes on
    up (and every later write raises it again, as the pipe would); on another thread (a graph's
    observer printing what reaches an output) the write is dropped, as every later one is, and the
    main thread is sent SIGPIPE, whose handler raises :class:`ReaderLeft` there, wherever it
    waits. Everything else is the wrapped stream's.
    """

    def __init__(self, inner: TextIO) -> None:
        self.inner = inner
        self.gone = False
        """Whether the reader has left (the command is ending)."""
        self.told = False
        """Whether the main thread knows (it met the error, or was sent SIGPIPE): once, for it is unwinding."""
        self.asked = False
        """Whether the SIGPIPE sent to the main thread is to raise :class:`ReaderLeft` there."""
        self._lock = threading.Lock()

    @property
    def buffer(self) -> _BinaryStdout:
        """The binary side (``flowplex logs`` writes bytes), watched the same way."""
        return _BinaryStdout(self, self.inner.buffer)

    def write(self, text: str) -> int:
        if not self.gone:
            try:
                return self.inner.write(text)
            except BrokenPipeError:
                pass
        self.reader_left()
        return len(text)

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        if not self.gone:
            try:
                self.inner.flush()
                return
            except BrokenPipeError:
                pass
        self.reader_left()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def reader_left(self) -> None:
        """A write met EPIPE (or came after one): quiet the descriptor, then stop the command."""
        with self._lock:
            first = not self.gone
            self.gone = True
            if first:
                with contextlib.suppress(OSError, ValueError):
                    devnull = os.open(os.devnull, os.O_WRONLY)
                    os.dup2(devnull, self.inner.fileno())
                    os.close(devnull)
            on_main = threading.current_thread() is threading.main_thread()
            tell = not on_main and not self.told
            self.told = True  # the main thread knows: it raised the error itself, or gets the signal
            self.asked = self.asked or tell
        if on_main:
            raise BrokenPipeError(errno.EPIPE, "stdout's reader has gone")
        if tell:
            signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGPIPE)


@final
class _BinaryStdout:
    """``sys.stdout.buffer`` seen through :class:`_Stdout`."""

    def __init__(self, text: _Stdout, inner: BinaryIO) -> None:
        self._text = text
        self.inner = inner

    def write(self, data: bytes) -> int:
        if not self._text.gone:
            try:
                return self.inner.write(data)
            except BrokenPipeError:
                pass
        self._text.reader_left()
        return len(data)

    def flush(self) -> None:
        if not self._text.gone:
            try:
                self.inner.flush()
                return
            except BrokenPipeError:
                pass
        self._text.reader_left()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


@final
class _Stderr:
    """``sys.stderr`` while a command runs: silent once stdout's reader has gone.

    The command then ends on the reader's behalf, and says nothing of it (a run stopped that way
    would otherwise report a Ctrl-C nobody pressed).
    """

    def __init__(self, inner: TextIO, stdout: _Stdout) -> None:
        self.inner = inner
        self._stdout = stdout

    def write(self, text: str) -> int:
        return len(text) if self._stdout.gone else self.inner.write(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


@contextlib.contextmanager
def stdout_reader_may_leave() -> Iterator[None]:
    """Run a command (inside) so that stdout's reader leaving ends it quietly, exit 0.

    Installs :class:`_Stdout` and :class:`_Stderr`, and a SIGPIPE handler that raises
    :class:`ReaderLeft` on the main thread when :class:`_Stdout` asks (the kernel's own SIGPIPEs,
    for a socket whose peer left, change nothing: the handler ignores them, as Python's default
    does). On the way out stdout is flushed, and once the reader has gone every way the command
    ended (the ``BrokenPipeError``, the exit code click made of it, the exit 130 of a command
    stopped by :class:`ReaderLeft`...) becomes ``SystemExit(0)``.
    """
    if sys.stdout is None or sys.stderr is None:  # started with stdout or stderr closed: nothing to watch
        yield
        return
    out = _Stdout(sys.stdout)
    err = _Stderr(sys.stderr, out)
    on_main = threading.current_thread() is threading.main_thread()
    previous: Any = None
    signalled = False

    def on_sigpipe(signum: int, frame: object) -> None:
        nonlocal signalled
        if out.asked and not signalled:
            signalled = True  # once: the main thread is unwinding
            raise ReaderLeft

    if on_main:
        previous = signal.signal(signal.SIGPIPE, on_sigpipe)
    sys.stdout, sys.stderr = out, err
    try:
        try:
            yield
        finally:
            with contextlib.suppress(BrokenPipeError):
                out.flush()
    except BaseException:  # a BrokenPipeError, click's exit 1 for it, ReaderLeft's 130, or anything
        if not out.gone:
            raise
        raise SystemExit(0) from None
    finally:
        sys.stdout, sys.stderr = out.inner, err.inner  # click may have wrapped them meanwhile: unwrapped too
        if on_main and previous is not None:  # (None: a handler not set from Python, which cannot be put back)
            signal.signal(signal.SIGPIPE, previous)
    if out.gone:
        raise SystemExit(0)
