"""``flowplex shm``: flowplex's shared-memory segments under /dev/shm (``shm clean``)."""

from __future__ import annotations

from typing import Annotated

import typer

from ._app import app

shm_app = typer.Typer(help="Shared-memory segments of flowplex under /dev/shm.", no_args_is_help=True)
app.add_typer(shm_app, name="shm")


@shm_app.command("clean")
def shm_clean(
    dry_run: Annotated[bool, typer.Option("--dry-run", help="List what would be removed; remove nothing.")] = False,
) -> None:
    """Remove the rings and process-pool arenas of flowplex processes that died (yours only).

    Only generated names (flowplex-ring-PID-HEX, flowplex-arena-PID-HEX) whose creator PID no
    longer runs; processes that still map one keep working. Named rings are never touched.
    """
    from flowplex._shm import reclaim_dead

    names = reclaim_dead(dry_run=dry_run)
    for name in names:
        typer.echo(f"{'would remove' if dry_run else 'removed'} /dev/shm/{name}")
    typer.echo(f"flowplex: {len(names)} segment(s) of dead processes {'found' if dry_run else 'removed'}", err=True)
