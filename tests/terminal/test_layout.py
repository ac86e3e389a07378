"""Pane layout: pure functions, checked for coverage and fit."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from flowplex.terminal._layout import MIN_PANE_H, MIN_PANE_W, Rect, View, grid_rects, grid_shape, plan_layout


@given(st.integers(min_value=1, max_value=40), st.integers(min_value=20, max_value=300),
       st.integers(min_value=6, max_value=120))
def test_grid_panes_tile_the_area_without_overlap(n: int, width: int, height: int) -> None:
    cols, rows, visible = grid_shape(n, width, height)
    assert 1 <= visible <= n
    rects = grid_rects(visible, cols, rows, Rect(0, 0, width, height))
    assert len(rects) == visible
    covered: set[tuple[int, int]] = set()
    for r in rects:
        cells = {(x, y) for x in range(r.x, r.x + r.w) for y in range(r.y, r.y + r.h)}
        assert not covered & cells
        covered |= cells
        assert r.w >= min(MIN_PANE_W, width) and r.h >= min(MIN_PANE_H, height)
    assert len(covered) == width * height  # a short last row stretches: no hole


def test_shapes() -> None:
    assert grid_shape(1, 160, 49)[:2] == (1, 1)
    assert grid_shape(2, 160, 49)[:2] == (2, 1)
    assert grid_shape(7, 160, 49) == (3, 3, 7)
    assert grid_shape(100, 80, 23)[2] < 100  # not all fit: show as many as do


def test_focus_window_and_views() -> None:
    many = plan_layout(100, 80, 24, View.GRID, 99)
    assert many.rect_of(99) is not None and many.rect_of(0) is None
    zoom = plan_layout(5, 80, 24, View.ZOOM, 3)
    assert zoom.panes == ((3, Rect(0, 0, 80, 23)),)
    assert plan_layout(5, 80, 24, View.TICKER, 0).panes == ()
    assert plan_layout(5, 80, 24, View.GRID, 0).status_row == 23
