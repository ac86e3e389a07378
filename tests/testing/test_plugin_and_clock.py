"""The pytest plugin's fixtures (run by pytester in a fresh session) and ``FakeClock``."""

from __future__ import annotations

from importlib.metadata import entry_points

import pytest

from flowplex.errors import UsageError
from flowplex.testing import FakeClock

pytest_plugins = ["pytester"]

PLUGIN = "flowplex.testing.pytest_plugin"


def test_the_fixtures_build_graphs_and_runners_and_close_them(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_user="""
        import flowplex
        from flowplex.testing import run_graph, scripted

        CLOSED = []

        def test_graph(flowplex_graph):
            g = flowplex_graph({"nodes": [scripted("src", [1, 2])], "output_ports": ["out"]})
            assert run_graph(g)["out"] == [(0, 1), (1, 2)]
            CLOSED.append(g)

        def test_graph_was_closed():
            assert CLOSED[0].state == flowplex.GraphState.TERMINATED

        def test_runner(kernel_runner):
            r = kernel_runner("ScaleKernel", options={"factor": 3})
            r.add_input(0, 5)
            r.process(7)
            p = r.try_next()
            assert (p.timestamp, p.as_int()) == (7, 15)

        def test_bad_script_named(flowplex_graph):
            import pytest
            with pytest.raises(flowplex.ConfigError, match=r"^nodes\\[0\\]\\.options\\.script\\[0\\]\\.gap"):
                flowplex_graph({"nodes": [{"name": "s", "kernel": "ScriptedSource", "output_ports": ["o"],
                                            "options": {"script": [{"gap": -1}]}}], "output_ports": ["o"]})
    """)
    # Loaded by name, with entry-point autoloading off (so it is this -p that loads it)...
    pytester._monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    result = pytester.runpytest_subprocess("-p", PLUGIN, "-p", "no:cacheprovider")
    result.assert_outcomes(passed=4)
    # ...and by its pytest11 entry point, as a user who installed flowplex gets it.
    pytester._monkeypatch.delenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD")
    installed = [e for e in entry_points(group="pytest11") if e.value == PLUGIN]
    if not installed:
        pytest.skip("this install of flowplex has no pytest11 entry point yet (reinstall: pip install -e .)")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=4)


def test_without_the_plugin_the_fixtures_are_missing(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_user="def test_graph(flowplex_graph):\n    pass\n")
    result = pytester.runpytest_subprocess("-p", "no:flowplex", "-p", "no:cacheprovider")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*fixture 'flowplex_graph' not found*"])


def test_fake_clock_moves_only_when_told() -> None:
    clock = FakeClock(5.0)
    assert clock() == clock.now == 5.0
    assert clock.advance(0.5) == 5.5
    assert clock() == 5.5
    assert clock.advance(0) == 5.5
    with pytest.raises(UsageError, match="never goes back"):
        clock.advance(-1)
    with pytest.raises(UsageError, match="finite number of seconds"):
        clock.advance(float("nan"))
    assert repr(clock) == "FakeClock(5.5)"

