"""``flowplex attach NAME``: the panes view of a background agents server (``flowplex agents -d``)."""

from __future__ import annotations

from typing import Annotated

import typer

from ._app import app


@app.command()
def attach(
    name: Annotated[str, typer.Argument(
        metavar="NAME", help="The background server (flowplex agents -d printed it; see flowplex ps).")],
    typing_key: Annotated[str | None, typer.Option(
        "--typing-key", metavar="KEY",
        help="The key that enters and leaves typing mode (default: the one flowplex agents -d was given).")] = None,
    bell: Annotated[bool | None, typer.Option(
        "--bell/--no-bell", help="Ring the bell when an agent starts waiting for input (default: as the server).",
        show_default=False)] = None,
) -> None:
    """Show the agents of a background server in panes; detach with d (or Ctrl-\\ in any mode).

    The keys are those of flowplex agents (Ctrl-a typing mode, Tab/1-9 focus, z zoom, s r k
    stop restart kill...). Detaching (d outside typing mode, Ctrl-\\ in any mode, or q) leaves
    the agents running; so does closing the terminal. Attach again to see everything they
    wrote meanwhile. Several terminals may attach at once, each at its own size.
    """
    from flowplex.terminal._attach import attach as run_attach

    raise typer.Exit(run_attach(name, typing_key=typing_key, bell=bell))
