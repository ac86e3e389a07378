"""``DotView``: the three Graphviz views of a graph (lm-flow's constants)."""

from __future__ import annotations

from enum import StrEnum

__all__ = ["DotView"]


class DotView(StrEnum):
    """Which DOT export ``Graph.to_dot(view)`` produces."""

    TOPOLOGY = "topology"
    COMPACT = "compact"
    DIAGNOSTICS = "diagnostics"
