"""A kernel, a worker thread or the timer thread that dies fails the graph, naming the node.

Before: a kernel raising ``SystemExit`` on the inline executor escaped ``send`` and left its
node RUNNING (``wait_done()`` never returned); an ``affinity`` the OS cannot represent killed
a pool's only worker, and a ``rate`` too slow for a timed wait killed the shared timer thread
(every paced source stalled). Every wait here has a deadline: a regression fails, it does not
hang; the one case that needs ``wait_done()`` without a timeout runs in a subprocess.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import flowplex
from flowplex.engine import _timers
from flowplex.executors import ThreadPoolExecutor
from flowplex.executors.processes import _transfer
from flowplex.testing import default_executor

from . import engine_kernels as engine_kernels  # registers the kernels (a pool's workers import them)

ROOT = Path(__file__).resolve().parents[2]
ENV = dict(os.environ)
"""The environment as pytest started (the suite's autouse fixture strips ``FLOWPLEX_*`` later)."""
IMPORTS = "imports: [tests.hostile.engine_kernels]\n"


def _raising(what: str, phase: str) -> str:
    return f"""{IMPORTS}nodes:
  - {{ name: boom, kernel: HostileRaise, input_ports: [x], output_ports: [y],
      options: {{ what: {what}, phase: {phase} }} }}
input_ports: [x]
output_ports: [y]
"""


@pytest.mark.parametrize("kind", ["inline", "threads", "processes"])
@pytest.mark.parametrize("what", ["exit", "escape"])
def test_a_kernel_raising_systemexit_or_a_baseexception_fails_its_node(kind: str, what: str) -> None:
    with default_executor(kind), flowplex.Graph.from_yaml(_raising(what, "process")) as g:
        g.start()
        g.send("x", 1, ts=0)  # on inline this runs the kernel here: nothing may escape
        g.close_all_inputs()
        with pytest.raises(flowplex.KernelError) as info:
            g.wait_done(timeout=20)
    err = info.value
    assert (err.node, err.ts) == ("boom", 0)
    text = "SystemExit: 3" if what == "exit" else "Escape: out of the kernel"
    assert str(err) == f"kernel failed: [boom] {text}"


@pytest.mark.parametrize("kind", ["inline", "threads"])
@pytest.mark.parametrize("phase", ["open", "close"])
def test_systemexit_in_open_or_close_fails_the_node(kind: str, phase: str) -> None:
    failed = pytest.raises(flowplex.KernelError, match=r"^kernel failed: \[boom\] .*SystemExit: 3$")
    with default_executor(kind), flowplex.Graph.from_yaml(_raising("exit", phase)) as g, failed:
        g.start()
        g.close_all_inputs()
        g.wait_done(timeout=20)


def test_a_keyboardinterrupt_raised_on_a_worker_thread_is_a_kernel_failure() -> None:
    # A signal's KeyboardInterrupt arrives on the main thread only: on a worker, code raised it.
    with default_executor("threads"), flowplex.Graph.from_yaml(_raising("interrupt", "process")) as g:
        g.start()
        g.send("x", 1, ts=0)
        g.close_all_inputs()
        with pytest.raises(flowplex.KernelError, match=r"^kernel failed: \[boom\] KeyboardInterrupt$"):
            g.wait_done(timeout=20)


def test_a_keyboardinterrupt_on_the_main_thread_stays_the_users_ctrl_c() -> None:
    with default_executor("inline"), flowplex.Graph.from_yaml(_raising("interrupt", "process")) as g:
        g.start()
        with pytest.raises(KeyboardInterrupt):
            g.send("x", 1, ts=0)  # runs the kernel on this (the main) thread
        with pytest.raises(flowplex.GraphCancelled):
            g.wait_done(timeout=20)


def test_systemexit_on_inline_returns_from_wait_done_without_a_timeout() -> None:
    # The reported hang: wait_done() with no timeout never returned. In a subprocess, so that a
    # regression fails this test instead of hanging the suite.
    script = textwrap.dedent("""
        import flowplex
        from tests.hostile.test_engine_threads import _raising
        g = flowplex.Graph.from_yaml(_raising("exit", "process"))
        g.start()
        g.send("x", 1, ts=0)
        g.close_all_inputs()
        try:
            g.wait_done()
        except flowplex.KernelError as exc:
            print("raised:", exc)
        g.close()
    """)
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=ENV, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "raised: kernel failed: [boom] SystemExit: 3"


def _pool(**kwargs: object) -> object:
    return lambda name: ThreadPoolExecutor(name, 1, **kwargs)


def test_an_affinity_the_os_cannot_represent_fails_the_graph_instead_of_killing_the_only_worker() -> None:
    # (Config validation rejects such an affinity at build time; this is the runtime defence.)
    with default_executor(_pool(affinity=(10**20,))), flowplex.Graph.from_yaml(_raising("none", "none")) as g:
        g.start()  # the worker fails as it starts, before it runs any task
        g.close_all_inputs()
        with pytest.raises(flowplex.KernelError, match=(
                r"^kernel failed: \[boom\] worker thread `default-0` of executor `default`, setting its "
                r"affinity/priority caught OverflowError: ")) as info:
            g.wait_done(timeout=20)
    assert info.value.node == "boom"


def _source_graph(extra_node: str = "") -> str:
    return f"""{IMPORTS}nodes:
  - {{ name: src, kernel: HostileCount, output_ports: [a], options: {{ calls: 1000000, yield_ms: 1 }} }}
  - {{ name: sink, kernel: HostileSlow, input_ports: [a], output_ports: [n], options: {{ sleep_us: 0 }} }}
{extra_node}"""


@pytest.mark.parametrize("kind", ["inline", "threads"])
def test_a_task_raising_past_the_engine_on_a_worker_fails_the_graph_naming_the_node(kind: str) -> None:
    # Fault injection: engine tasks never raise; make the real task of one node raise on a
    # real worker (the pool's, or the inline executor's background thread), as an engine bug would.
    with default_executor(kind), flowplex.Graph.from_yaml(_source_graph()) as g:
        engine = g._engine
        real = engine.claims.task

        def task(arg: object) -> None:
            if getattr(arg, "owner", None) is engine.nodes[1] and threading.current_thread().name != "MainThread":
                raise MemoryError("injected")
            real(arg)

        engine.claims.task = task
        g.start()
        began = time.monotonic()
        with pytest.raises(flowplex.KernelError, match=r"^kernel failed: \[sink\] .*thread .* caught MemoryError: "
                                                       r"injected$") as info:
            g.wait_done(timeout=20)
        assert time.monotonic() - began < 5
    assert info.value.node == "sink"


def test_a_rate_too_slow_for_the_timer_fails_the_graph_instead_of_killing_the_timer_thread() -> None:
    # `rate: 1.0e-300` (config validation rejects it; set on the built node to reach the
    # runtime): its wait overflows the timer thread's timed wait. The other paced source must
    # not stall silently: the graph fails, naming the node.
    with flowplex.Graph.from_yaml(_source_graph(
            "  - { name: slowest, kernel: HostileCount, output_ports: [b], options: { calls: 5 } }\n")) as g:
        slowest = next(n for n in g._engine.nodes if n.name == "slowest")
        slowest.rate_period = 1e300
        g.start()
        with pytest.raises(flowplex.KernelError, match=(
                r"^kernel failed: \[slowest\] the timer thread \(source wakes, at node `slowest`\) caught "
                r"OverflowError: ")):
            g.wait_done(timeout=20)


def test_a_failure_inside_a_timer_wake_fails_the_graph(monkeypatch: pytest.MonkeyPatch) -> None:
    # Fault injection into a real wake of the real timer thread (at the timer's side of the
    # seam: the engine's own classes may be compiled, and cannot be patched).
    real_init = _timers.Timers.__init__

    def init(self: _timers.Timers, clock: Any, wake: Callable[..., None], failed: Callable[..., None]) -> None:
        def poisoned(node: object, gen: int) -> None:
            raise RecursionError("injected")

        real_init(self, clock, poisoned, failed)

    monkeypatch.setattr(_timers.Timers, "__init__", init)
    with flowplex.Graph.from_yaml(_source_graph()) as g:
        g.start()
        with pytest.raises(flowplex.KernelError, match=(
                r"^kernel failed: \[src\] the timer thread \(source wakes, at node `src`\) caught RecursionError: "
                r"injected$")):
            g.wait_done(timeout=20)


def test_a_failure_on_a_process_pools_completion_thread_fails_the_graph(monkeypatch: pytest.MonkeyPatch) -> None:
    # Fault injection: an answer of a real worker process that makes the engine's completion
    # raise on the pool's receiver thread (as an engine bug would).
    real = _transfer.decode_outcome

    def decode(*args: object) -> object:
        outcome = real(*args)  # type: ignore[arg-type]
        if outcome.seq >= 0:  # a process() call (open's seq is -1)
            outcome.counters = [None]  # unpacking it raises inside the engine
        return outcome

    monkeypatch.setattr(_transfer, "decode_outcome", decode)
    with default_executor("processes"), flowplex.Graph.from_yaml(_raising("none", "none")) as g:
        g.start()
        g.send("x", 1, ts=0)
        with pytest.raises(flowplex.KernelError, match=(
                r"^kernel failed: \[boom\] completing a call of node `boom` on thread `.+` caught TypeError: ")):
            g.wait_done(timeout=20)
