"""TerminalSink in graphs: a registered display, its own display, ids from ports."""

from __future__ import annotations

import io
import json

import pytest

import flowplex
import flowplex.agents  # registers the agent kernels
from flowplex.terminal import LogRenderer, TermCaps, Writer, register_display


def test_sources_into_a_registered_display(tmp_path: object) -> None:
    out = io.BytesIO()
    display = LogRenderer(Writer(out), TermCaps(is_tty=False))
    spec = {
        "nodes": [
            {"name": "a", "kernel": "ReplaySource", "output_ports": ["a"],
             "options": {"path": "bundled:reviewer.jsonl", "speed": 500}},
            {"name": "n", "kernel": "RangeSourceKernel", "output_ports": ["nums"], "options": {"count": 3}},
            {"name": "s", "kernel": "StringifyKernel", "input_ports": ["nums"], "output_ports": ["plain"]},
            {"name": "c", "kernel": "CommandSource", "output_ports": ["c"],
             "options": {"argv": ["sh", "-c", "echo from sh"], "name": "shell", "stream_id": 7}},
            {"name": "screen", "kernel": "TerminalSink", "input_ports": ["a", "plain", "c"],
             "input_policy": {"type": "immediate"}, "options": {"display": "t"}},
        ],
    }
    with register_display("t", display), display, flowplex.Graph.from_yaml(json.dumps(spec)) as g:
        g.start()
        g.wait_done(timeout=30)
    lines = [" ".join(line.split()) for line in out.getvalue().decode().splitlines()]  # padding varies
    assert "reviewer | Review of `diff_row` and the pane compositor:" in lines
    assert [line for line in lines if line.startswith("plain")] == ["plain | 012"]  # the port's name
    assert "shell | from sh" in lines and "shell | ── exit 0" in lines
    assert {a.stream_id for a in display.agents()} == {0, 1, 7}


def test_sink_owns_a_display_on_stdout(capfd: pytest.CaptureFixture[str]) -> None:
    spec = {"nodes": [
        {"name": "c", "kernel": "CommandSource", "output_ports": ["c"], "options": {"argv": ["echo", "owned"]}},
        {"name": "screen", "kernel": "TerminalSink", "input_ports": ["c"], "options": {"mode": "auto"}},
    ]}
    with flowplex.Graph.from_yaml(json.dumps(spec)) as g:
        g.start()
        g.wait_done(timeout=30)
    assert capfd.readouterr().out.splitlines() == ["echo | owned", "echo | ── exit 0"]


def test_bad_mode_fails_at_start() -> None:
    spec = {"nodes": [
        {"name": "c", "kernel": "CommandSource", "output_ports": ["c"], "options": {"argv": ["true"]}},
        {"name": "screen", "kernel": "TerminalSink", "input_ports": ["c"], "options": {"mode": "tabs"}},
    ]}
    with flowplex.Graph.from_yaml(json.dumps(spec)) as g, pytest.raises(flowplex.KernelError,
                                                                        match=r"options\.mode: .*'tabs'"):
        g.start()


def test_demo_graph_builds() -> None:
    from importlib.resources import files

    g = flowplex.Graph.from_yaml(files("flowplex._data").joinpath("demo.yaml").read_text(encoding="utf-8"))
    names = [n.name for n in g.plan.spec.nodes]
    assert names[-1] == "screen" and len(names) == 8
    g.close()
