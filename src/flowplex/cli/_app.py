"""The typer app every command registers on, and what the commands share: the ``--debug``
switch, the one-line error forms, the log handler and the help of the common options."""

from __future__ import annotations

import logging
import sys
import traceback
from pathlib import Path
from typing import Annotated

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
