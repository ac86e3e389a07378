"""``flowplex agents``: run commands side by side, in panes or as a log (``flowplex.terminal``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ._app import app


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def agents(
    ctx: typer.Context,
    mode: Annotated[str, typer.Option(help="panes, log, or auto (panes on a terminal).")] = "auto",
    file: Annotated[Path | None, typer.Option(
        "--file", "-f", metavar="AGENTS.yaml",
        help="Agents to run, from a file (name, cmd, cwd, env, autostart, agent_type, restart).")] = None,
    ring: Annotated[str | None, typer.Option(
        "--ring", metavar="NAME",
        help="Also show what other processes send to the shared-memory ring NAME, one pane per stream.")] = None,
    ring_producers: Annotated[int, typer.Option(
        "--ring-producers", metavar="N", min=1,
        help="With --ring: the stream ends after N producers came and went.")] = 1,
    typing_key: Annotated[str, typer.Option(
        "--typing-key", metavar="KEY", help="The key that enters and leaves typing mode (panes).")] = "ctrl-a",
    bell: Annotated[bool, typer.Option(
        "--bell/--no-bell", help="Ring the bell when an agent starts waiting for input (panes).")] = True,
) -> None:
    """Run commands side by side: flowplex agents -- CMD1 ARGS -- CMD2 ARGS ...

    Panes mode keys: Ctrl-a typing mode (keys go to the focused agent), Tab/1-9 focus, z zoom,
    t ticker, PgUp/PgDn scroll, / search, s stop/start, r restart, k kill, x close, q quit.
    """
    from flowplex.terminal._commands import agents as run_agents

    raise typer.Exit(run_agents(list(ctx.args), mode=mode, file=str(file) if file is not None else None,
                                ring=ring, ring_producers=ring_producers, typing_key=typing_key, bell=bell))
