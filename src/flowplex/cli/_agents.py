"""``flowplex agents``: run commands side by side, in panes or as a log (``flowplex.terminal``);
``-d`` runs them in a background server, and ``agents ls NAME`` / ``agents send NAME AGENT TEXT``
script such a server (``flowplex attach NAME`` shows it)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Final, NoReturn

import typer
import typer.core

from ._app import app, usage

SUBCOMMANDS: Final = ("send", "ls")
"""Words that, first on the command line and before any ``--``, name a subcommand: the agents'
own commands always come after ``--``."""
_RAW_ARGS: Final = "flowplex.agents.raw_args"
SERVER_HELP: Final = "The agents session (flowplex agents -d printed its name; flowplex ps lists them)."


class _AgentsCommand(typer.core.TyperCommand):
    """``agents`` with its subcommands: ``agents send ...`` and ``agents ls ...`` go to their own
    parser at once (their options and ``--help`` are theirs); otherwise the arguments are kept
    as typed, since click drops the first ``--`` and only the words before it may name a
    subcommand (``agents -- ls -l`` runs ``ls``)."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if args and args[0] in SUBCOMMANDS:
            _run_subcommand(args)
        ctx.meta[_RAW_ARGS] = list(args)
        return super().parse_args(ctx, args)


@app.command(cls=_AgentsCommand, context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
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
    detach: Annotated[bool, typer.Option(
        "--detach", "-d",
        help="Run the agents in a background server and print its name; see them with flowplex attach NAME.")] = False,
    name: Annotated[str | None, typer.Option(
        "--name", metavar="NAME",
        help="The session's name for flowplex ps/attach/agents ls/send/stop (default: agents, then agents-2, "
             "agents-3... when taken).")] = None,
    control: Annotated[bool, typer.Option(
        "--control/--no-control", help="Serve the session live (flowplex agents ls/send, stop).")] = True,
    record: Annotated[Path | None, typer.Option(
        "--record", metavar="FILE.mcap",
        help="Record each agent's output stream into an MCAP file (one channel per agent, named after it).")] = None,
    record_input: Annotated[bool, typer.Option(
        "--record-input", help="With --record: also what is typed into each command (channel NAME.input).")] = False,
) -> None:
    """Run commands side by side: flowplex agents -- CMD1 ARGS -- CMD2 ARGS ...

    Panes mode keys: Ctrl-a typing mode (keys go to the focused agent), Tab/1-9 focus, z zoom,
    t ticker, PgUp/PgDn scroll, / search, s stop/start, r restart, k kill, x close, q quit.

    In the background: flowplex agents -d -- CMD1 ARGS -- CMD2 ARGS prints the server's NAME;
    flowplex attach NAME shows it (d or Ctrl-\\ detaches), flowplex agents ls NAME [--json]
    lists its agents and flowplex agents send NAME AGENT TEXT [--json] types TEXT into an
    agent (AGENT: its number or name; \\n in TEXT is Enter). The agents run until stopped
    (flowplex stop NAME, or kill the server's pid from flowplex ps).
    """
    args = list(ctx.args)
    before = _before_separator(ctx.meta.get(_RAW_ARGS, []), args)
    if before and before[0] in SUBCOMMANDS:
        _subcommand(ctx, args)
        return
    if name is not None and not control:
        msg = "agents: --name names the session's control socket, which --no-control turns off: give one of them"
        raise usage(msg)
    if detach and not control:
        msg = "agents: -d needs the control socket: a background server is reached by its name (drop --no-control)"
        raise usage(msg)
    if record_input and record is None:
        msg = "agents: --record-input goes with --record FILE.mcap"
        raise usage(msg)
    from flowplex.terminal._commands import agents as run_agents

    raise typer.Exit(run_agents(args, mode=mode, file=str(file) if file is not None else None,
                                ring=ring, ring_producers=ring_producers, typing_key=typing_key, bell=bell,
                                detach=detach, name=name, control=control,
                                record=_record_path(record) if record is not None else None,
                                record_input=record_input))


def _record_path(record: Path) -> str:
    """``--record``'s file, absolute (a detached server has a working directory of its own); a
    directory, or a folder that does not exist, is a usage error."""
    import os

    path = os.path.abspath(record.expanduser())
    if os.path.isdir(path):
        msg = f"agents: --record {record}: is a directory (give a file, e.g. {record / 'agents.mcap'})"
        raise usage(msg)
    if not os.path.isdir(os.path.dirname(path)):
        msg = f"agents: --record {record}: no such directory {os.path.dirname(path)}"
        raise usage(msg)
    return path


def _before_separator(raw: list[str], args: list[str]) -> list[str]:
    """The extra arguments that came before the first ``--`` (click passes those after it on too)."""
    if "--" not in raw:
        return args
    after = len(raw) - raw.index("--") - 1
    return args[:len(args) - after]


def _subcommand(ctx: typer.Context, args: list[str]) -> None:
    """``agents send ...`` / ``agents ls ...``: the agents' own options do not belong there."""
    given = [p.opts[0] for p in ctx.command.params if p.name and _given(ctx, p.name)]
    if given:
        what = "is an option" if len(given) == 1 else "are options"
        msg = (f"agents {args[0]}: {', '.join(given)} {what} of flowplex agents itself, not of {args[0]} "
               f"(to type text that starts with '-', put it after --: agents send NAME AGENT -- TEXT)")
        raise usage(msg)
    raw = ctx.meta.get(_RAW_ARGS, [])
    before = _before_separator(raw, args)
    rest = args[len(before):]
    _run_subcommand([args[0], *before[1:], *(["--", *rest] if rest or "--" in raw else [])])


def _run_subcommand(args: list[str]) -> NoReturn:
    """Run ``agents send`` / ``agents ls`` with ``args`` (the subcommand first); it exits."""
    typer.main.get_command(_sub).main(args=args, prog_name="flowplex agents", standalone_mode=True)
    raise typer.Exit(0)  # (main exits by itself in standalone mode)


def _given(ctx: typer.Context, param: str) -> bool:
    """Whether option ``param`` was on the command line (or in the environment), not defaulted."""
    source = ctx.get_parameter_source(param)
    return source is not None and source.name not in ("DEFAULT", "DEFAULT_MAP")


_sub = typer.Typer(add_completion=False, pretty_exceptions_enable=False)


@_sub.command("send")
def _send(
    name: Annotated[str, typer.Argument(metavar="NAME", help=SERVER_HELP)],
    agent: Annotated[str, typer.Argument(
        metavar="AGENT", help="The agent: its number (1-based, as in the view) or its name.")],
    text: Annotated[str, typer.Argument(
        metavar="TEXT", help="What to type; \\n is Enter, \\\\ a backslash (after -- when it starts with -).")],
    as_json: Annotated[bool, typer.Option("--json", help="Print what was sent as JSON.")] = False,
) -> None:
    """Type TEXT into AGENT of the agents session NAME (exit 2 when there is no such agent)."""
    from flowplex.terminal._remote import agents_send

    raise typer.Exit(agents_send(name, agent, text, as_json=as_json))


@_sub.command("ls")
def _ls(
    name: Annotated[str, typer.Argument(metavar="NAME", help=SERVER_HELP)],
    as_json: Annotated[bool, typer.Option("--json", help="Print the agents as JSON.")] = False,
) -> None:
    """List the agents of the agents session NAME: number, name, state, pid, exit code."""
    from flowplex.terminal._remote import agents_ls

    raise typer.Exit(agents_ls(name, as_json=as_json))
