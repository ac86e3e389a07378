"""A kernel that hangs is reported while it hangs.

``watchdog_ms`` warned only once the long call had returned (a call that never returns was
never reported), and ``wait_done(timeout=...)`` said only "timed out". Now the watchdog's
thread warns while the call runs, and the timeout names the nodes still busy and how. The
hanging kernel waits on an event with a deadline of its own, so no regression can hang the suite.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Iterator

import pytest

import flowplex

from .engine_kernels import GATE  # (importing it registers the kernels)

IMPORTS = "imports: [tests.hostile.engine_kernels]\n"


def _hanging(extra: str = "") -> str:
    return f"""{IMPORTS}{extra}executors: [{{ name: pool, type: ThreadPoolExecutor, num_threads: 2 }}]
nodes:
  - {{ name: slow, kernel: HostileHang, input_ports: [x], output_ports: [y], executor: pool, options: {{ max_s: 20 }} }}
  - {{ name: after, kernel: HostileHang, input_ports: [y], output_ports: [z], executor: pool }}
input_ports: [x]
output_ports: [z]
"""


@pytest.fixture
def gate() -> Iterator[threading.Event]:
    GATE.clear()
    yield GATE
    GATE.set()  # whatever happened, the hanging call returns


def _watchdog_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name == "flowplex-watchdog"]


def test_the_watchdog_warns_while_the_call_still_hangs(gate: threading.Event,
                                                        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="flowplex.graph")
    with flowplex.Graph.from_yaml(_hanging("watchdog_ms: 50\n")) as g:
        g.start()
        g.send("x", 1, ts=0)
        deadline = time.monotonic() + 5
        warned: list[str] = []
        while not warned and time.monotonic() < deadline:
            time.sleep(0.01)
            warned = [r.getMessage() for r in caplog.records if "still running" in r.getMessage()]
        hanging = not gate.is_set() and g.node_stats()[0].processed == 0
        gate.set()
        g.close_all_inputs()
        g.wait_done(timeout=10)
    assert hanging, "the warning must come while the call runs"
    assert len(warned) == 1, warned  # once per call, however long it runs
    assert warned[0].startswith("node `slow`: process() has been running for ")
    assert warned[0].endswith(" ms, exceeding watchdog 50 ms (still running)")
    assert not _watchdog_threads()  # stopped with the graph


def test_without_watchdog_ms_no_watchdog_thread_runs(gate: threading.Event) -> None:
    gate.set()
    with flowplex.Graph.from_yaml(_hanging()) as g:
        g.start()
        assert not _watchdog_threads()
        g.close_all_inputs()
        g.wait_done(timeout=10)


def test_wait_done_timeout_names_the_running_call_for_how_long_and_the_queue(gate: threading.Event) -> None:
    with flowplex.Graph.from_yaml(_hanging("watchdog_ms: 10000\n")) as g:
        g.start()
        for ts in range(4):
            g.send("x", ts, ts=ts)
        g.close_all_inputs()
        time.sleep(0.1)  # `slow` is inside process() for ts 0; 1..3 wait behind it
        with pytest.raises(flowplex.Timeout, match=(
                r"^wait_done timed out after [\d.]+ s; still running: "
                r"'slow' \(in process\(\) for [\d.]+ s, queued 3\)$")) as info:
            g.wait_done(timeout=0.25)
        gate.set()
        g.wait_done(timeout=10)
    found = re.search(r"after ([\d.]+) s; .* for ([\d.]+) s", str(info.value))
    assert found is not None
    waited, running = float(found[1]), float(found[2])
    assert waited >= 0.25
    assert running >= waited + 0.1  # the call began before the wait, with the sleep


def test_wait_done_timeout_without_timing_still_names_the_node(gate: threading.Event) -> None:
    with flowplex.Graph.from_yaml(_hanging()) as g:
        g.start()
        g.send("x", 0, ts=0)
        g.send("x", 1, ts=1)
        with pytest.raises(flowplex.Timeout, match=(
                r"^wait_done timed out after 0\.\d+ s; still running: 'slow' \(1 process\(\) call\(s\) in flight, "
                r"queued 1\) \(set watchdog_ms or stats: full to see for how long each call has run\)$")):
            g.wait_done(timeout=0.2)
        gate.set()
        g.close_all_inputs()
        g.wait_done(timeout=10)

