"""``flowplex demo``: several agents streaming into one terminal (the main demo)."""

from __future__ import annotations

from typing import Annotated

import typer

from ._app import app


@app.command()
def demo(
    duration: Annotated[float, typer.Option(help="Seconds to run before stopping by itself.")] = 20.0,
    mode: Annotated[str, typer.Option(help="panes, log, or auto (panes on a terminal).")] = "auto",
) -> None:
    """Several agents stream into one terminal at once, without tearing (the main demo)."""
    from flowplex.terminal._commands import demo as run_demo

    raise typer.Exit(run_demo(duration=duration, mode=mode))
