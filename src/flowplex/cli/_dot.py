"""``flowplex dot``: a graph as Graphviz DOT, without running it, or rendered to SVG; given the name
of a live graph instead of a file, its live diagnostics graph."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from flowplex.terminal._sanitize import visible_controls as shown

from ._app import IMPORT_HELP, SET_HELP, app, check_view, fail_at, setup_logging, usage
from ._loading import import_kernels, load_graph


@app.command("dot")
def dot_command(
    graph: Annotated[Path, typer.Argument(metavar="GRAPH|NAME",
                                          help="The graph's YAML file, or the name of a live graph (flowplex ps).")],
    view: Annotated[str | None, typer.Option(
        "--view", help="topology, compact or diagnostics (default: topology for a file, diagnostics live).")] = None,
    svg: Annotated[Path | None, typer.Option("--svg", metavar="FILE",
                                             help="Render to SVG with Graphviz instead of printing DOT.")] = None,
    overrides: Annotated[list[str] | None, typer.Option("--set", "-s", metavar="NODE.OPTION=VALUE",
                                                        help=SET_HELP)] = None,
    imports: Annotated[list[str] | None, typer.Option("--import", metavar="MODULE|FILE.py",
                                                      help=IMPORT_HELP)] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print {\"dot\": TEXT} for scripts.")] = False,
) -> None:
    """Print a graph as Graphviz DOT (without running it), or render it to SVG. Given the name of a
    live graph, its live diagnostics graph: states, queues and rates now."""
    from flowplex.diagnostics import render_svg
    from flowplex.errors import FlowplexError

    if view is not None:
        check_view("--view", view)
    if graph.is_file():
        setup_logging()
        import_kernels(imports or [])
        g = load_graph(graph, overrides or [])
        with g:
            text = g.to_dot(view or "topology")
    else:
        text = _live_dot(graph, view or "diagnostics", bool(overrides or imports))
    if svg is None:
        sys.stdout.write(json.dumps({"dot": text}) + "\n" if as_json else shown(text))
        return
    try:
        svg.write_bytes(render_svg(text))
    except (OSError, FlowplexError) as exc:
        raise fail_at(graph, exc, 1) from None


def _live_dot(graph: Path, view: str, with_file_options: bool) -> str:
    """The DOT of the live graph named ``graph`` (exit 2 when it is neither a file nor a name)."""
    from flowplex.control._paths import NAME_RE

    from ._live import ask_live

    name = str(graph)
    if graph.exists() or not NAME_RE.fullmatch(name):
        kind = "a directory" if graph.is_dir() else "not a file"
        msg = f"{graph} is {kind}: give a graph's YAML file or the name of a live graph (flowplex ps)"
        raise usage(msg)
    if with_file_options:
        msg = "--set and --import apply to a YAML file, not to a live graph"
        raise usage(msg)
    return str(ask_live(name, "dot", view=view)["dot"])
