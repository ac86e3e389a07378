"""The public surface of flowplex.terminal is pinned."""

from __future__ import annotations

import flowplex.terminal as terminal


def test_all_is_pinned() -> None:
    assert sorted(terminal.__all__) == [
        "AgentInfo", "Display", "LogRenderer", "PaneRenderer", "RenderStats", "TermCaps", "View", "Writer",
        "agent_type_of", "create_display", "get_display", "redirect_std_streams", "register_display", "resolve_mode",
    ]
    for name in terminal.__all__:
        assert getattr(terminal, name) is not None


def test_stats_are_frozen() -> None:
    import dataclasses

    import pytest

    st = terminal.RenderStats("log", 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0.0, 0.0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        st.frames = 1  # type: ignore[misc]
    assert st.dropped == 0
