"""The ``flowplex`` command line (typer): thin — parse, call the library, format results."""

from __future__ import annotations

import json
import sys
import threading
import traceback
from pathlib import Path
from typing import Annotated, Any

import typer

app = typer.Typer(
    name="flowplex",
    help="flowplex: run and inspect dataflow graphs written in YAML.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

_state: dict[str, bool] = {"debug": False}


@app.callback()
def _root(
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks for errors.")] = False,
) -> None:
    _state["debug"] = debug


def _fail(exc: BaseException, code: int) -> typer.Exit:
    """One readable line on stderr (the traceback only with --debug)."""
    if _state["debug"]:
        traceback.print_exception(exc)
    else:
        typer.echo(f"flowplex: error: {exc}", err=True)
    return typer.Exit(code)


def packet_value(packet: Any) -> object:
    """A JSON-friendly value for a packet (arrays summarised, bytes as hex)."""
    if packet.is_empty:
        return None
    for reader in ("as_bool", "as_int", "as_float", "as_str"):
        value = getattr(packet, reader)()
        if value is not None:
            return value
    raw = packet.as_bytes()
    if raw is not None:
        return raw.hex()
    try:
        arr = packet.as_numpy()
    except ValueError:
        return repr(packet)
    return {"shape": list(arr.shape), "dtype": str(arr.dtype)}


@app.command()
def run(
    graph: Annotated[Path, typer.Argument(help="The graph's YAML file.", exists=True, dir_okay=False)],
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write outputs as JSON lines to this file.")
    ] = None,
    timeout: Annotated[float | None, typer.Option(help="Give up after this many seconds.")] = None,
) -> None:
    """Run a graph whose data comes from source kernels and print what reaches its outputs."""
    import flowplex
    from flowplex._timestamps import ts_name
    from flowplex.errors import ConfigError, FlowplexError

    try:
        g = flowplex.Graph.from_yaml_file(graph)
    except (ConfigError, KeyError) as exc:
        raise _fail(exc, 2) from None
    lock = threading.Lock()
    sink = output.open("w", encoding="utf-8") if output is not None else None
    count = 0

    def show(port: str) -> Any:
        def on_packet(packet: Any) -> None:
            nonlocal count
            record = {"port": port, "ts": packet.timestamp, "value": packet_value(packet)}
            with lock:
                count += 1
                if sink is not None:
                    sink.write(json.dumps(record) + "\n")
                else:
                    typer.echo(f"{port}\tts={ts_name(packet.timestamp)}\t{record['value']}")

        return on_packet

    try:
        with g:
            for port in g.plan.graph_outputs:
                g.observe(port, show(port))
            g.start()
            g.close_all_inputs()
            g.wait_done(timeout=timeout)
    except KeyboardInterrupt:
        typer.echo("flowplex: cancelled", err=True)
        raise typer.Exit(130) from None
    except FlowplexError as exc:
        raise _fail(exc, 1) from None
    finally:
        if sink is not None:
            sink.close()
    typer.echo(f"flowplex: {count} packet(s) from {len(g.plan.graph_outputs)} output(s)", err=True)


def _check(graph: Path, as_json: bool) -> None:
    from flowplex.diagnostics import check_config

    if not graph.is_file():
        typer.echo(f"flowplex: error: no such graph file: {graph}", err=True)
        raise typer.Exit(2)
    report = check_config(graph)
    if as_json:
        typer.echo(json.dumps(report.to_json(), indent=2))
    elif report.ok:
        typer.echo(report.to_text())
    else:
        typer.echo(report.to_text(), err=True)
    raise typer.Exit(report.exit_code)


@app.command()
def check(
    graph: Annotated[Path, typer.Argument(help="The graph's YAML file.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print lm-flow's check-config JSON report.")] = False,
) -> None:
    """Validate a graph without running kernels. Exit 0 ok, 1 findings, 2 usage error."""
    _check(graph, as_json)


@app.command("check-config", hidden=True)
def check_config_alias(
    graph: Annotated[Path, typer.Argument(help="The graph's YAML file.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the JSON report.")] = False,
) -> None:
    """lm-flow's name for ``check``."""
    _check(graph, as_json)


@app.command()
def schema() -> None:
    """Print the JSON Schema of the YAML graph format (for editors)."""
    from flowplex.config import json_schema

    typer.echo(json.dumps(json_schema(), indent=2))


@app.command()
def demo(
    duration: Annotated[float, typer.Option(help="Seconds to run before stopping by itself.")] = 20.0,
    mode: Annotated[str, typer.Option(help="panes, log, or auto (panes on a terminal).")] = "auto",
) -> None:
    """Several agents stream into one terminal at once, without tearing (the main demo)."""
    from flowplex.terminal._commands import demo as run_demo

    raise typer.Exit(run_demo(duration=duration, mode=mode))


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def agents(
    ctx: typer.Context,
    mode: Annotated[str, typer.Option(help="panes, log, or auto (panes on a terminal).")] = "auto",
) -> None:
    """Run commands side by side: flowplex agents -- CMD1 ARGS -- CMD2 ARGS ..."""
    from flowplex.terminal._commands import agents as run_agents

    raise typer.Exit(run_agents(list(ctx.args), mode=mode))


def main() -> None:
    """Console-script entry point."""
    try:
        app()
    except BrokenPipeError:  # `flowplex run g.yaml | head` exits quietly
        sys.stderr.close()
        sys.exit(0)
