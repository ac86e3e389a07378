"""Time as one part (issue 29): the clock, conditions, ``call_after`` and input timeouts.

Every timing rule runs here on virtual time (``FakeClock``): no test sleeps to wait for a
timer, and each gives the same outputs on every run and on every executor.
"""

from __future__ import annotations

import pytest

import flowplex
from flowplex.testing import FakeClock, run_graph

from . import time_kernels as time_kernels  # registers the kernels (workers import them by reference)

EXECUTORS = ("inline", "threads", "processes")


def hour_yaml() -> str:
    """A 1 Hz source over one simulated hour, a periodic node (every 60 s, batching) and a
    join with a timeout on a slower source that stops after 10 minutes."""
    return """
nodes:
  - { name: fast, kernel: TimeTicker, output_ports: [f], options: { count: 3600, period: 1.0 } }
  - { name: slow, kernel: TimeTicker, output_ports: [s], options: { count: 60, period: 10.0, step: 10 } }
  - name: sampler
    kernel: PassThroughKernel
    input_ports: [f]
    output_ports: [sampled]
    input_policy: { type: fixed_size, capacity: 1 }
    conditions: [ { periodic: { period_ms: 60000 } } ]
  - name: fuse
    kernel: TimePair
    input_ports: [f, { name: s, timeout_ms: 1500 }]
    output_ports: [fused]
output_ports: [sampled, fused]
"""


def test_an_hour_of_timers_runs_on_virtual_time_with_the_same_outputs_every_run() -> None:
    runs = []
    for _ in range(2):
        clock = FakeClock(autojump=True)
        out = run_graph(hour_yaml(), clock=clock, timeout=60)
        runs.append((out["sampled"], out["fused"]))
        # The last fast tick is at 3599 s; the sampler's last period ends at 3600 s.
        assert clock() == pytest.approx(3600.0)
    assert runs[0] == runs[1]
    sampled, fused = runs[0]
    # One sample per minute, each the newest fast tick when its period ended (fixed_size keeps
    # it): the timer of a period that ends with a tick fires first, as it was armed first.
    assert sampled[:3] == [(0, 0), (59, 59), (119, 119)]
    assert sampled[-1] == (3599, 3599)
    assert len(sampled) == 61
    assert len(fused) == 3600
    # Before the slow source ends (600 s), every 10th second pairs up; the others time out.
    assert fused[10] == (10, "10/10")
    assert fused[11] == (11, "11/-")


def test_periodic_node_with_inputs_runs_at_most_once_per_period() -> None:
    yaml = """
nodes:
  - name: p
    kernel: PassThroughKernel
    input_ports: [x]
    output_ports: [y]
    conditions: [ { periodic: { period_ms: 100 } } ]
input_ports: [x]
output_ports: [y]
"""
    clock = FakeClock(autojump=True)
    out = run_graph(yaml, {"x": list(range(20))}, clock=clock)
    assert out["y"] == [(i, i) for i in range(20)]
    assert clock() == pytest.approx(1.9)  # 19 periods between 20 calls


def test_periodic_node_without_inputs_is_a_timer_source_and_count_ends_it() -> None:
    yaml = """
nodes:
  - name: tick
    kernel: TimeCounter
    output_ports: [t]
    conditions: [ { periodic: { period_ms: 250 } }, { count: 8 } ]
output_ports: [t]
"""
    clock = FakeClock(autojump=True)
    out = run_graph(yaml, clock=clock)
    assert out["t"] == [(i, i) for i in range(8)]
    assert clock() == pytest.approx(7 * 0.25)


def test_manual_clock_moves_only_when_the_test_advances_it() -> None:
    yaml = """
nodes:
  - { name: tick, kernel: TimeCounter, output_ports: [t], conditions: [ { periodic: { period_ms: 1000 } } ] }
output_ports: [t]
"""
    clock = FakeClock()
    with flowplex.Graph.from_yaml(yaml, clock=clock) as g:
        out = g.add_poller("t")
        g.start()
        assert out.next(timeout=5).as_int() == 0  # the first call runs at once
        g.wait_until_idle(timeout=5)
        assert out.try_next() is None  # no virtual time has passed: no second call
        clock.advance(1.0)
        assert out.next(timeout=5).as_int() == 1
        clock.advance(0.5)
        g.wait_until_idle(timeout=5)
        assert out.try_next() is None
        clock.advance(0.5)
        assert out.next(timeout=5).as_int() == 2
        g.cancel()


@pytest.mark.parametrize("executor", EXECUTORS)
def test_boolean_condition_holds_a_node_until_enabled_and_a_kernel_can_disable_it(executor: str) -> None:
    # On processes the kernel's cc.set_condition comes back with its outcome and is applied here.
    yaml = """
nodes:
  - name: gate
    kernel: TimeSwitch
    input_ports: [x]
    output_ports: [y]
    options: { at: 3, name: armed }
    conditions: [ { boolean: { name: armed, initial: false } } ]
input_ports: [x]
output_ports: [y]
"""
    with flowplex.testing.default_executor(executor):
        g = flowplex.Graph.from_yaml(yaml)
    with g:
        out = g.add_poller("y")
        g.start()
        for i in range(6):
            g.send("x", i, i)
        g.close_all_inputs()
        g.wait_until_idle(timeout=5)
        assert out.try_next() is None  # disabled: the packets wait in its queue
        g.set_condition("armed", True)
        got = [out.next(timeout=5).as_int() for _ in range(4)]
        assert got == [0, 1, 2, 3]  # at 3 the kernel disabled its own condition
        g.wait_until_idle(timeout=5)
        assert out.try_next() is None
        assert "disabled by condition 'armed'" in g.stats().nodes[0].held
        g.set_condition("armed", True)
        g.wait_done(timeout=5)
        assert [p.as_int() for p in iter(out.try_next, None)] == [4, 5]


def test_event_condition_runs_a_source_once_per_notify_counted_not_lost() -> None:
    yaml = """
nodes:
  - { name: ev, kernel: TimeCounter, output_ports: [t], conditions: [ { event: { name: go } }, { count: 3 } ] }
output_ports: [t]
"""
    with flowplex.Graph.from_yaml(yaml) as g:
        out = g.add_poller("t")
        g.notify("go")  # before start: counted
        g.start()
        assert out.next(timeout=5).as_int() == 0
        g.wait_until_idle(timeout=5)
        assert out.try_next() is None
        g.notify("go")
        g.notify("go")
        g.wait_done(timeout=5)  # count: 3 ends it
        assert [p.as_int() for p in iter(out.try_next, None)] == [1, 2]


def test_unknown_condition_name_is_a_clear_error_with_a_suggestion() -> None:
    yaml = """
nodes:
  - { name: ev, kernel: TimeCounter, output_ports: [t], conditions: [ { event: { name: go } }, { count: 1 } ] }
  - { name: b, kernel: PassThroughKernel, input_ports: [t], output_ports: [u],
      conditions: [ { boolean: { name: armed } } ] }
output_ports: [u]
"""
    with flowplex.Graph.from_yaml(yaml) as g:
        with pytest.raises(flowplex.UsageError, match=r"no event condition named 'goo'.*did you mean `go`"):
            g.notify("goo")
        with pytest.raises(flowplex.UsageError, match=r"no boolean condition named 'armd'.*did you mean `armed`"):
            g.set_condition("armd", True)
        with pytest.raises(flowplex.UsageError, match="True or False"):
            g.set_condition("armed", 1)  # type: ignore[arg-type]


def test_timed_out_wait_names_the_condition_that_holds_a_node() -> None:
    yaml = """
nodes:
  - { name: tick, kernel: TimeCounter, output_ports: [t], conditions: [ { boolean: { name: armed, initial: false } } ] }
output_ports: [t]
"""
    with flowplex.Graph.from_yaml(yaml) as g:
        g.start()
        with pytest.raises(flowplex.Timeout, match=r"'tick'.*disabled by condition 'armed'"):
            g.wait_done(timeout=0.2)
        g.cancel()


def timeout_yaml(timeout: str) -> str:
    # a: ts n at t = n s; b: ts n at t = 2n s (b falls behind by one second per packet).
    return f"""
nodes:
  - {{ name: a, kernel: TimeTicker, output_ports: [a], options: {{ count: 6, period: 1.0 }} }}
  - {{ name: b, kernel: TimeTicker, output_ports: [b], options: {{ count: 6, period: 2.0 }} }}
  - name: fuse
    kernel: TimePair
    input_ports: [a, {timeout}]
    output_ports: [fused]
output_ports: [fused]
"""


@pytest.mark.parametrize("executor", EXECUTORS)
def test_input_timeout_lets_a_join_proceed_and_drops_what_comes_late(executor: str) -> None:
    clock = FakeClock(autojump=True)
    with flowplex.testing.default_executor(executor):
        g = flowplex.Graph.from_yaml(timeout_yaml("{ name: b, timeout_ms: 500 }"), clock=clock)
    with g:
        out = run_graph(g, timeout=60)
        port = g.stats().nodes[2].ports[1]
    # ts 0 pairs; from ts 1 on, b's packet at ts n comes at 2n s, after a's (n s) + 0.5 s.
    assert out["fused"] == [(0, "0/0"), (1, "1/-"), (2, "2/-"), (3, "3/-"), (4, "4/-"), (5, "5/-")]
    assert port.timeouts == 5
    assert port.late == 5  # b's ts 1..5 came after their joins had run: dropped and counted
    assert port.timeout_ms == 500


def test_without_a_timeout_the_join_waits_and_pairs_everything() -> None:
    out = run_graph(timeout_yaml("b"), clock=FakeClock(autojump=True), timeout=60)
    assert out["fused"] == [(i, f"{i}/{i}") for i in range(6)]


@pytest.mark.parametrize("executor", EXECUTORS)
def test_call_after_flushes_a_batch_once_the_input_goes_idle(executor: str) -> None:
    # Bursts of 3 packets one second apart, then a 5 s gap: the batcher flushes 0.5 s after each burst.
    yaml = """
nodes:
  - { name: src, kernel: TimeTicker, output_ports: [x], options: { count: 9, period: 0.1 } }
  - name: burst
    kernel: PassThroughKernel
    input_ports: [x]
    output_ports: [y]
  - { name: batch, kernel: TimeBatcher, input_ports: [y], output_ports: [z], options: { idle: 0.5 } }
output_ports: [z]
"""
    with flowplex.testing.default_executor(executor):
        g = flowplex.Graph.from_yaml(yaml, clock=FakeClock(autojump=True))
    with g:
        out = run_graph(g, timeout=60)
    # 9 packets 0.1 s apart never leave the batcher idle for 0.5 s: one flush, after the last.
    assert out["z"] == [(8, "0,1,2,3,4,5,6,7,8")]


def test_call_after_on_idle_input_emits_between_packets() -> None:
    yaml = """
nodes:
  - { name: src, kernel: TimeTicker, output_ports: [x], options: { count: 4, period: 2.0 } }
  - { name: batch, kernel: TimeBatcher, input_ports: [x], output_ports: [z], options: { idle: 0.5 } }
output_ports: [z]
"""
    out = run_graph(yaml, clock=FakeClock(autojump=True), timeout=60)
    assert out["z"] == [(0, "0"), (1, "1"), (2, "2"), (3, "3")]


def test_timed_out_wait_names_the_input_a_join_waits_on() -> None:
    yaml = """
nodes:
  - { name: lidar, kernel: TimeTicker, output_ports: [lidar], options: { count: 2, period: 1000.0 } }
  - { name: fuse, kernel: TimePair, input_ports: [cam, lidar], output_ports: [o] }
input_ports: [cam]
output_ports: [o]
"""
    with flowplex.Graph.from_yaml(yaml) as g:
        g.start()
        g.send("cam", 1, 0)
        g.send("cam", 2, 1)
        g.close_all_inputs()
        with pytest.raises(flowplex.Timeout, match=r"node 'fuse' waits on input 'lidar' \(no timeout set\)"):
            g.wait_done(timeout=0.3)
        g.cancel()


@pytest.mark.parametrize("executor", EXECUTORS)
def test_a_kernel_notify_runs_an_event_node_once_per_call_on_every_executor(executor: str) -> None:
    yaml = """
nodes:
  - { name: src, kernel: TimeTicker, output_ports: [x], options: { count: 4, period: 1.0 } }
  - { name: poke, kernel: TimeNotifier, input_ports: [x], output_ports: [y], options: { name: go } }
  - { name: ev, kernel: TimeCounter, output_ports: [t], conditions: [ { event: { name: go } }, { count: 4 } ] }
output_ports: [y, t]
"""
    with flowplex.testing.default_executor(executor):
        g = flowplex.Graph.from_yaml(yaml, clock=FakeClock(autojump=True))
    with g:
        out = run_graph(g, timeout=60)
    assert [ts for ts, _ in out["y"]] == [0, 1, 2, 3]
    assert [v for _, v in out["t"]] == [0, 1, 2, 3]  # one run per notify, count ends it


@pytest.mark.parametrize("executor", ["inline", "processes"])
def test_a_kernel_naming_an_unknown_condition_fails_its_node_on_every_executor(executor: str) -> None:
    yaml = """
input_ports: [x]
nodes:
  - { name: poke, kernel: TimeNotifier, input_ports: [x], output_ports: [y], options: { name: goo } }
  - { name: ev, kernel: TimeCounter, output_ports: [t], conditions: [ { event: { name: go } } ] }
output_ports: [y, t]
"""
    with flowplex.testing.default_executor(executor):
        g = flowplex.Graph.from_yaml(yaml)
    with g:
        g.start()
        g.send("x", 0, 1)
        with pytest.raises(flowplex.FlowplexError, match=r"poke.*no event condition named 'goo'.*did you mean `go`"):
            g.wait_done(timeout=30)
