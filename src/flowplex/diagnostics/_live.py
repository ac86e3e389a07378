"""The live per-node throughput display of ``flowplex run`` (rich), for terminals only.

``render_table`` is pure: two snapshots in, a rich ``Table`` out. ``LiveDisplay`` owns a rich
``Live`` that re-renders from a fresh snapshot a few times per second (the latest state wins;
nothing queues up) and is transient: when it stops, the table is erased and the terminal holds
only what the run printed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from ._dot_format import fmt_duration_us
from ._stats import GraphStats

if TYPE_CHECKING:
    from types import TracebackType

    from rich.console import Console, Group
    from rich.live import Live

    from ..graph import Graph

__all__ = ["LiveDisplay", "render_table"]

REFRESH_PER_SECOND: Final = 4.0
MAX_ROWS: Final = 30
"""Nodes shown at most; the busiest first when a graph has more."""

_STATE_STYLES: Final = {
    "RUNNING": "green",
    "WAITING_SOURCE": "yellow",
    "IDLE": "blue",
    "ERROR": "bold red",
    "CLOSED": "dim",
    "CREATED": "dim",
}


def render_table(stats: GraphStats, previous: GraphStats | None, elapsed_s: float) -> Group:
    """A title line and a table of every node: state, processed, rate since ``previous``, queue, errors."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    window_s = (stats.taken_ns - previous.taken_ns) / 1e9 if previous is not None else 0.0
    before = {n.node_name: n.processed for n in previous.nodes} if previous is not None else {}
    title = (f"flowplex · {stats.state.lower()} · {elapsed_s:.1f}s · queued {stats.queued} · "
             f"errors {stats.errors} · dropped {stats.dropped}")
    table = Table(expand=False, box=None, pad_edge=False)
    for header, justify in (("node", "left"), ("state", "left"), ("processed", "right"), ("rate/s", "right"),
                            ("queued", "right"), ("errors", "right"), ("avg", "right")):
        table.add_column(header, justify=justify)  # type: ignore[arg-type]
    nodes = list(stats.nodes)
    if len(nodes) > MAX_ROWS:
        nodes = sorted(nodes, key=lambda n: (-n.queued, -n.processed))[:MAX_ROWS]
    for n in nodes:
        rate = ""
        if window_s > 0 and stats.stats_level != "off":
            rate = f"{(n.processed - before.get(n.node_name, 0)) / window_s:,.1f}"
        avg = n.avg_process_us
        state = n.state
        if n.blocked:
            state += " (blocked)"
        table.add_row(
            n.node_name, f"[{_STATE_STYLES.get(n.state, '')}]{state}[/]",
            f"{n.processed:,}" if stats.stats_level != "off" else "-", rate, str(n.queued),
            f"[red]{n.errors}[/]" if n.errors else "0", fmt_duration_us(avg) if avg is not None else "-",
        )
    return Group(Text(title, style="bold", no_wrap=True, overflow="ellipsis"), table)


class LiveDisplay:
    """A transient rich ``Live`` table of ``graph`` on ``console``; use as a context manager.

    The render runs on rich's refresh thread and only takes snapshots (no engine calls
    beyond ``Graph.stats``). Lines written to ``sys.stderr`` meanwhile (and to ``sys.stdout`` when
    ``redirect_stdout`` is set) appear above the table.
    """

    def __init__(self, graph: Graph, console: Console, *, redirect_stdout: bool) -> None:
        from time import monotonic

        self._graph = graph
        self._console = console
        self._monotonic = monotonic
        self._started = monotonic()
        self._previous: GraphStats | None = None
        self._redirect_stdout = redirect_stdout
        self._live: Live | None = None

    def _render(self) -> Group:
        stats = self._graph.stats()
        table = render_table(stats, self._previous, self._monotonic() - self._started)
        self._previous = stats
        return table

    def __enter__(self) -> LiveDisplay:
        from rich.live import Live

        self._started = self._monotonic()
        self._live = Live(
            console=self._console, refresh_per_second=REFRESH_PER_SECOND, transient=True,
            redirect_stdout=self._redirect_stdout, redirect_stderr=True, get_renderable=self._render,
        )
        self._live.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def stop(self) -> None:
        """Erase the table and restore the streams (idempotent)."""
        live, self._live = self._live, None
        if live is not None:
            live.stop()
