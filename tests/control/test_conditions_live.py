"""A live graph's conditions from another terminal (issue 29): ``flowplex condition`` enables and
disables a ``boolean`` condition, ``flowplex notify`` signals an ``event``, both through the real
control socket and a real ``flowplex`` subprocess; ``top`` shows what holds a node."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import flowplex
from flowplex.control import connect
from flowplex.errors import ControlError

from ..engine import time_kernels as time_kernels  # registers TimeCounter (the event source)
from .conftest import flowplex as cli

GATED = """
input_ports: [x]
nodes:
  - name: gate
    kernel: PassThroughKernel
    input_ports: [x]
    output_ports: [y]
    conditions: [ { boolean: { name: armed, initial: false } } ]
  - { name: ev, kernel: TimeCounter, output_ports: [t], conditions: [ { event: { name: kick } } ] }
output_ports: [y, t]
"""


def test_condition_and_notify_commands_drive_a_live_graph(runtime: Path, tmp_path: Path) -> None:
    with flowplex.Graph.from_yaml(GATED) as g:
        y, t = g.add_poller("y"), g.add_poller("t")
        g.start(control="gated")
        for i in range(3):
            g.send("x", i, i)
        g.wait_until_idle(timeout=10)
        assert y.try_next() is None and t.try_next() is None  # disabled, and no event yet

        listed = cli("condition", "gated", "--json", cwd=tmp_path, check=True)
        assert json.loads(listed.stdout) == {"booleans": {"armed": False}, "events": ["kick"]}
        table = cli("condition", "gated", cwd=tmp_path, check=True)
        assert table.stdout.splitlines() == ["armed\toff", "kick\tevent"]
        with connect("gated") as client:
            rows = {r["node"]: r for r in client.request("top", timing=False)["rows"]}
        assert rows["gate"]["state"] == "disabled by condition 'armed'"
        assert rows["ev"]["state"] == "waits for event 'kick' (Graph.notify)"

        done = cli("condition", "gated", "armed", "on", cwd=tmp_path, check=True)
        assert done.stderr == "flowplex: gated: condition armed on\n"
        assert [y.next(timeout=10).as_int() for _ in range(3)] == [0, 1, 2]

        done = cli("notify", "gated", "kick", "-n", "2", cwd=tmp_path, check=True)
        assert done.stderr == "flowplex: gated: notified kick 2 times\n"
        assert [t.next(timeout=10).as_int() for _ in range(2)] == [0, 1]
        g.wait_until_idle(timeout=10)
        assert t.try_next() is None  # once per notification, no more

        cli("condition", "gated", "armed", "off", cwd=tmp_path, check=True)
        g.send("x", 3, 3)
        g.wait_until_idle(timeout=10)
        assert y.try_next() is None  # disabled again: the packet waits in its queue
        g.set_condition("armed", True)
        assert y.next(timeout=10).as_int() == 3


def test_condition_commands_name_what_is_wrong(runtime: Path, tmp_path: Path) -> None:
    with flowplex.Graph.from_yaml(GATED) as g:
        g.start(control="gated")
        typo = cli("condition", "gated", "armd", "on", cwd=tmp_path)
        assert typo.returncode == 1
        assert typo.stderr == ("flowplex: error: gated: no boolean condition named 'armd' in this graph "
                               "(its boolean conditions: armed); did you mean `armed`?\n")
        bad = cli("condition", "gated", "armed", "maybe", cwd=tmp_path)
        assert (bad.returncode, bad.stderr) == (2, "flowplex: error: condition armed: give on or off, not 'maybe'\n")
        missing = cli("condition", "gated", "armed", cwd=tmp_path)
        assert missing.returncode == 2 and "flowplex condition gated armed off" in missing.stderr
        wrong = cli("notify", "gated", "armed", cwd=tmp_path)
        assert wrong.returncode == 1
        assert "no event condition named 'armed' in this graph (its event conditions: kick)" in wrong.stderr
        with connect("gated") as client, pytest.raises(ControlError, match="value true or false"):
            client.request("condition", condition="armed", value="yes")


def test_top_and_dot_show_input_timeouts_and_what_holds_a_node(runtime: Path, tmp_path: Path) -> None:
    from flowplex.control._text import top_text
    from flowplex.testing import FakeClock

    yaml = """
input_ports: [a, b]
nodes:
  - { name: fuse, kernel: TimePair, input_ports: [a, { name: b, timeout_ms: 200 }], output_ports: [y] }
  - name: gate
    kernel: PassThroughKernel
    input_ports: [y]
    output_ports: [z]
    conditions: [ { boolean: { name: armed, initial: false } } ]
output_ports: [z]
"""
    clock = FakeClock(0.0)
    with flowplex.Graph.from_yaml(yaml, clock=clock) as g:
        g.start(control="fused")
        g.send("a", 0, 1)
        g.send("a", 1, 2)
        g.wait_until_idle(timeout=10)
        clock.advance(0.25)  # past b's timeout: the join goes on without b
        g.wait_until_idle(timeout=10)
        assert g.stats().nodes[0].ports[1].timeouts >= 1
        with connect("fused") as client:
            answer = client.request("top", timing=False)
        text = top_text("fused", answer)
        header, fuse, gate = text.splitlines()[1:4]
        assert header.split()[-1] == "TIMEOUTS"
        assert fuse.split()[-1] == str(g.stats().nodes[0].ports[1].timeouts) and gate.split()[-1] == "-"
        assert "disabled by condition 'armed'" in gate
        diagnostics = g.to_dot("diagnostics")
        assert "timeout 200ms" in diagnostics and "timed out" in diagnostics
        assert "disabled by condition 'armed'" in diagnostics
        assert "timeout 200ms" in g.to_dot("topology")
