"""Pane layout: pure functions from (agents, terminal size, view, focus) to rectangles."""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from typing import Final

__all__ = ["Layout", "Rect", "View", "grid_rects", "grid_shape", "plan_layout"]

MIN_PANE_W: Final = 30
"""Narrowest pane, borders included: 28 columns of text keep a line of agent output readable
(at 80x24 the grid shows fewer, wider panes rather than many slivers)."""
MIN_PANE_H: Final = 7
"""Lowest pane, borders included (five lines of content)."""
TARGET_ASPECT: Final = 3.0
"""Preferred content width/height in cells (cells are about twice as tall as wide)."""


class View(enum.Enum):
    """What the panes renderer shows."""

    GRID = "grid"
    """Every agent in its own pane, as many as fit."""
    ZOOM = "zoom"
    """The focused agent alone, full size."""
    TICKER = "ticker"
    """One line per agent: its latest line of output."""


@dataclass(frozen=True, slots=True)
class Rect:
    """A rectangle of cells; ``x``/``y`` are 0-based."""

    x: int
    y: int
    w: int
    h: int

    @property
    def inner(self) -> Rect:
        """The content area inside a one-cell border."""
        return Rect(self.x + 1, self.y + 1, max(0, self.w - 2), max(0, self.h - 2))


@dataclass(frozen=True, slots=True)
class Layout:
    """Where everything goes for one terminal size."""

    columns: int
    rows: int
    view: View
    panes: tuple[tuple[int, Rect], ...]
    """``(agent index, rect)`` for each visible pane, in agent order."""
    status_row: int
    """The row of the status bar (the last row)."""

    def rect_of(self, index: int) -> Rect | None:
        """The rectangle of agent ``index``, or None when it is hidden."""
        for i, rect in self.panes:
            if i == index:
                return rect
        return None


def grid_shape(n: int, width: int, height: int) -> tuple[int, int, int]:
    """``(columns, rows, visible)`` of the grid that best shows ``n`` panes in ``width x height``.

    Prefers content areas near :data:`TARGET_ASPECT` and few empty cells; when not all panes
    fit at their minimum size, shows as many as fit.

    >>> grid_shape(6, 160, 49)
    (3, 2, 6)
    >>> grid_shape(16, 160, 49)
    (4, 4, 16)
    """
    if n <= 0:
        return 1, 1, 0
    for visible in range(n, 0, -1):
        best: tuple[float, int, int] | None = None
        for cols in range(1, visible + 1):
            rows = math.ceil(visible / cols)
            pw, ph = width // cols, height // rows
            if pw < MIN_PANE_W or ph < MIN_PANE_H:
                continue
            aspect = max(1, pw - 2) / max(1, ph - 2)
            score = abs(math.log(aspect / TARGET_ASPECT)) + 0.25 * (cols * rows - visible)
            if best is None or score < best[0]:
                best = (score, cols, rows)
        if best is not None:
            return best[1], best[2], visible
    return 1, 1, 1


def grid_rects(n: int, cols: int, rows: int, area: Rect) -> list[Rect]:
    """``n`` rectangles filling ``area`` row by row; a short last row stretches its panes.

    >>> grid_rects(3, 2, 2, Rect(0, 0, 10, 8))
    [Rect(x=0, y=0, w=5, h=4), Rect(x=5, y=0, w=5, h=4), Rect(x=0, y=4, w=10, h=4)]
    """
    rects: list[Rect] = []
    heights = _split(area.h, rows)
    y = area.y
    placed = 0
    for r in range(rows):
        count = min(cols, n - placed)
        if count <= 0:
            break
        x = area.x
        for w in _split(area.w, count):
            rects.append(Rect(x, y, w, heights[r]))
            x += w
        placed += count
        y += heights[r]
    return rects


def _split(total: int, parts: int) -> list[int]:
    base, extra = divmod(total, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


def plan_layout(n: int, columns: int, rows: int, view: View, focus: int) -> Layout:
    """The layout for ``n`` agents on a ``columns x rows`` terminal.

    The last row is the status bar. In the grid, when not every pane fits, the visible window
    of agents is the one that contains ``focus``.
    """
    area = Rect(0, 0, columns, max(1, rows - 1))
    status = rows - 1
    if n == 0 or view is View.TICKER:
        return Layout(columns, rows, view, (), status)
    focus = min(max(focus, 0), n - 1)
    if view is View.ZOOM:
        return Layout(columns, rows, view, ((focus, area),), status)
    cols, grid_rows, visible = grid_shape(n, area.w, area.h)
    first = 0 if focus < visible else focus - visible + 1
    rects = grid_rects(visible, cols, grid_rows, area)
    return Layout(columns, rows, view, tuple((first + i, r) for i, r in enumerate(rects)), status)
