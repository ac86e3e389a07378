"""``flowplex dot``: a graph as Graphviz DOT, without running it, or rendered to SVG."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from flowplex.terminal._sanitize import visible_controls as shown

from ._app import IMPORT_HELP, SET_HELP, app, check_view, fail_at, setup_logging
from ._loading import import_kernels, load_graph


@app.command("dot")
def dot_command(
    graph: Annotated[Path, typer.Argument(help="The graph's YAML file.", exists=True, dir_okay=False)],
    view: Annotated[str, typer.Option("--view", help="topology, compact or diagnostics.")] = "topology",
    svg: Annotated[Path | None, typer.Option("--svg", metavar="FILE",
                                             help="Render to SVG with Graphviz instead of printing DOT.")] = None,
    overrides: Annotated[list[str] | None, typer.Option("--set", "-s", metavar="NODE.OPTION=VALUE",
                                                        help=SET_HELP)] = None,
    imports: Annotated[list[str] | None, typer.Option("--import", metavar="MODULE|FILE.py",
                                                      help=IMPORT_HELP)] = None,
) -> None:
    """Print a graph as Graphviz DOT (without running it), or render it to SVG."""
    from flowplex.diagnostics import render_svg
    from flowplex.errors import FlowplexError

    check_view("--view", view)
    setup_logging()
    import_kernels(imports or [])
    g = load_graph(graph, overrides or [])
    with g:
        text = g.to_dot(view)
    if svg is None:
        sys.stdout.write(shown(text))
        return
    try:
        svg.write_bytes(render_svg(text))
    except (OSError, FlowplexError) as exc:
        raise fail_at(graph, exc, 1) from None
