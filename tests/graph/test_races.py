"""Work claimed under the lock is submitted exactly once, by the thread that claimed it.

A regression test: the hop shortcut once handed out the live (empty) outbox after releasing the
lock, so a pool worker could submit another thread's claims a second time, or lose them, and a
diamond stalled with packets queued (about one run in twelve on two workers).
"""

from __future__ import annotations

import flowplex


@flowplex.kernel("RaceEven")
class RaceEven(flowplex.Kernel):
    """Forwards even values only (the bound still advances)."""

    def process(self, cc: flowplex.Context) -> None:
        if cc.input(0).as_int() % 2 == 0:
            cc.forward(0, 0)


@flowplex.kernel("RaceJoin")
class RaceJoin(flowplex.Kernel):
    """Emits a * 1000 + b (b 0 when the even side has no packet at this timestamp)."""

    def process(self, cc: flowplex.Context) -> None:
        b = 0 if cc.input_is_empty(1) else cc.input(1).as_int()
        cc.emit(0, cc.input(0).as_int() * 1000 + b)


DIAMOND = """
nodes:
  - { name: l, kernel: PassThroughKernel, input_ports: [e0], output_ports: [a] }
  - { name: r, kernel: RaceEven, input_ports: [e0], output_ports: [b] }
  - { name: j, kernel: RaceJoin, input_ports: [a, b], output_ports: [y] }
  - { name: sink, kernel: PassThroughKernel, input_ports: [y], output_ports: [z] }
input_ports: [e0]
output_ports: [z]
"""


def test_a_diamond_delivers_everything_once_run_after_run(executor_kind: str) -> None:
    # A graph on a process pool starts workers (half a second): a few runs there, not a minute.
    for _ in range(5 if executor_kind == "processes" else 100):
        with flowplex.Graph.from_yaml(DIAMOND) as g:
            out = g.add_poller("z")
            g.start()
            for v in range(6):
                g.send("e0", v, ts=v * 10)
            g.close_all_inputs()
            g.wait_done(timeout=10)
            want = [(v * 10, v * 1000 + (v if v % 2 == 0 else 0)) for v in range(6)]
            assert [(p.timestamp, p.as_int()) for p in out] == want
