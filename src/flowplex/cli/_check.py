"""``flowplex check`` (and lm-flow's ``check-config``): validate a graph without running kernels."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from flowplex.terminal._sanitize import visible_controls as shown

from ._app import IMPORT_HELP, app
from ._loading import import_kernels
from ._watch import CHECK_TIMEOUT_S, Deadline, cancelled_import, check_timeout, interrupted_import, watch_ctrl_c

_CHECK_TIMEOUT_HELP = (f"Give up after this many seconds (default {CHECK_TIMEOUT_S:g}): an import that never "
                       "finishes is reported, exit 1.")


@app.command()
def check(
    graph: Annotated[Path, typer.Argument(help="The graph's YAML file.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print lm-flow's check-config JSON report.")] = False,
    imports: Annotated[list[str] | None, typer.Option("--import", metavar="MODULE|FILE.py",
                                                      help=IMPORT_HELP)] = None,
    timeout: Annotated[float, typer.Option(help=_CHECK_TIMEOUT_HELP)] = CHECK_TIMEOUT_S,
) -> None:
    """Validate a graph without running kernels. Exit 0 ok, 1 findings, 2 usage error.

    The graph's ``imports:`` and ``--import`` run (a failing one is reported); no kernel is created.
    """
    _check(graph, as_json, imports or [], timeout)


@app.command("check-config", hidden=True)
def check_config_alias(
    graph: Annotated[Path, typer.Argument(help="The graph's YAML file.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the JSON report.")] = False,
    imports: Annotated[list[str] | None, typer.Option("--import", metavar="MODULE|FILE.py",
                                                      help=IMPORT_HELP)] = None,
    timeout: Annotated[float, typer.Option(help=_CHECK_TIMEOUT_HELP)] = CHECK_TIMEOUT_S,
) -> None:
    """lm-flow's name for ``check``."""
    _check(graph, as_json, imports or [], timeout)


def _check(graph: Path, as_json: bool, imports: list[str], timeout: float) -> None:
    from flowplex.diagnostics import check_config
    from flowplex.diagnostics._check import CheckReport

    if not graph.is_file():
        typer.echo(shown(f"flowplex: error: no such graph file: {graph}"), err=True)
        raise typer.Exit(2)
    watch_ctrl_c()
    deadline = Deadline(check_timeout(timeout), graph)
    import_kernels(imports, deadline)
    deadline.step = "loading the graph (running its imports)"
    try:
        report = check_config(graph)
    except KeyboardInterrupt as exc:
        text = interrupted_import(exc)
        if text is None:
            raise cancelled_import(exc) from None
        report = CheckReport(path=str(graph), error=text)  # a failing import, as any other
    if as_json:
        typer.echo(json.dumps(report.to_json(), indent=2))
    elif report.ok:
        typer.echo(shown(report.to_text()))
    else:
        typer.echo(shown(report.to_text()), err=True)
    raise typer.Exit(report.exit_code)
