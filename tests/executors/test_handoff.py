"""The engine hands a hosted node's calls to its executor's ``invoke`` itself (``engine._handoff``).

A process call of a node on a kernel-hosting executor is invoked on the thread that claimed it,
outside the lock, never through the executor's ``submit`` (one seam crossing per call); a
hand-off made inside another is queued behind it, so a long chain never recurses.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable

import flowplex
from flowplex.executors import Executor
from flowplex.executors._invocation import Invocation
from flowplex.executors.processes import ProcessPoolExecutor
from flowplex.kernels._context import PHASE_PROCESS
from flowplex.testing import LoopbackExecutor, default_executor, run_graph

CHAIN = """
nodes:
  - { name: a, kernel: ScaleKernel, input_ports: [x], output_ports: [y], options: { factor: 2 } }
  - { name: b, kernel: ScaleKernel, input_ports: [y], output_ports: [z], options: { factor: 3 } }
input_ports: [x]
output_ports: [z]
"""


def test_a_pool_nodes_calls_are_invoked_on_the_claiming_thread_and_never_submitted() -> None:
    pools: list[ProcessPoolExecutor] = []

    def pool(name: str) -> Executor:
        pools.append(ProcessPoolExecutor(name, 1, warm=True))
        return pools[0]

    with default_executor(pool):
        g = flowplex.Graph.from_yaml(CHAIN)
    host = pools[0]
    invoked: list[tuple[int, str]] = []
    submitted: list[object] = []
    real_invoke, real_submit = host.invoke, host.submit

    def invoke(invocation: Invocation, complete: Callable[..., None], spill: object = None) -> None:
        if invocation.phase == PHASE_PROCESS:
            invoked.append((invocation.node, threading.current_thread().name))
        real_invoke(invocation, complete, spill)  # type: ignore[arg-type]

    def submit(fn: Callable[[object], None], arg: object) -> None:
        submitted.append(arg)
        real_submit(fn, arg)

    # Instrumented, not replaced: the real pool runs every call.
    host.invoke = invoke  # type: ignore[method-assign]
    host.submit = submit  # type: ignore[method-assign]
    try:
        out = g.add_poller("z")
        g.start()
        for ts in range(20):
            g.send("x", ts, ts=ts)
        g.close_all_inputs()
        g.wait_done(timeout=60)
        assert [p.payload for p in out] == [6 * ts for ts in range(20)]
    finally:
        g.close()
    assert submitted == []
    assert len(invoked) == 40
    # A call is claimed by a send (on this thread) or by the completion of the one before it
    # (on the pool's receiver thread); the engine invokes it right there, never on a thread of
    # the executor's own that a task had to reach first (its dispatcher).
    here = threading.current_thread().name
    assert invoked[0] == (0, here)
    # (A warm worker another test left behind keeps its slot's number, hence any slot.)
    others = {thread for _, thread in invoked} - {here}
    assert all(re.fullmatch(r"default-\d+-recv", thread) for thread in others), others


def test_a_long_chain_of_hosted_nodes_hands_off_without_recursing() -> None:
    # Each loopback call completes inside ``invoke``: without the hand-off's queue every node of
    # the chain would nest a call frame in the one before it, past the recursion limit (in the
    # Python build; compiled frames do not count towards it, but a C stack is finite too).
    n = 400
    nodes = "\n".join(
        f"  - {{ name: n{i}, kernel: ScaleKernel, input_ports: [p{i}], output_ports: [p{i + 1}], "
        "options: { factor: 1 } }" for i in range(n))
    yaml = f"nodes:\n{nodes}\ninput_ports: [p0]\noutput_ports: [p{n}]\n"
    with default_executor(LoopbackExecutor):
        outputs = run_graph(yaml, {"p0": [1, 2, 3]})
    assert [v for _, v in outputs[f"p{n}"]] == [1, 2, 3]
