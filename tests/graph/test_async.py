"""asyncio: run_async and events() drive the graph without polling threads."""

from __future__ import annotations

import asyncio

import pytest

import flowplex

from .conftest import CHAIN


def test_events_yield_packets_bounds_and_done() -> None:
    async def main() -> list[flowplex.OutputEvent]:
        with flowplex.Graph.from_yaml(CHAIN) as g:
            events = g.events("z")
            g.start()
            g.send("x", 3, ts=4)
            g.close_all_inputs()
            return [e async for e in events]

    got = asyncio.run(main())
    assert isinstance(got[0], flowplex.PacketEvent) and got[0].packet.as_int() == 12 and got[0].timestamp == 4
    assert got[1] == flowplex.TimestampBoundEvent(5)
    assert got[-1] == flowplex.DoneEvent() and got[-1].timestamp == flowplex.TS_DONE


def test_run_async_drives_a_delegating_graph() -> None:
    async def main() -> list[int]:
        with flowplex.Graph.from_yaml("""
executors: [{ name: host, type: DelegatingExecutor }]
nodes:
  - { name: d, executor: host, kernel: TDouble, input_ports: [x], output_ports: [y] }
input_ports: [x]
output_ports: [y]
""") as g:
            seen: list[int] = []
            g.observe("y", lambda p: seen.append(p.as_int()))
            g.start()
            for i in range(5):
                g.send("x", i, ts=i)
            g.close_all_inputs()
            await g.run_async(timeout=10)
            return seen

    assert asyncio.run(main()) == [0, 2, 4, 6, 8]


def test_run_async_timeout_cancels_and_raises() -> None:
    async def main() -> None:
        with flowplex.Graph.from_yaml(CHAIN) as g:
            g.start()
            with pytest.raises(flowplex.Timeout, match="run_async timed out"):
                await g.run_async(timeout=0.05)
            with pytest.raises(ValueError):
                await g.run_async(timeout=-1)

    asyncio.run(main())
