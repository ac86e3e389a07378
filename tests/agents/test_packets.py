"""The agent-stream packet convention, through a graph and through the shared-memory ring."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import textwrap

import pyte

from flowplex.agents import AgentChunk, chunk_packet, end_packet, from_message, read_chunk
from flowplex.errors import EndOfStream
from flowplex.packets import Packet
from flowplex.terminal import PaneRenderer, TermCaps, Writer
from flowplex.transport import AgentType, Ring


def test_round_trip_through_packet_metadata() -> None:
    p = chunk_packet("hi\x1b[1m", ts=7, stream_id=3, agent_type=AgentType.DEBUG, name="dbg", pty=True)
    assert read_chunk(p) == AgentChunk("hi\x1b[1m", 3, AgentType.DEBUG, "dbg", "text", True, True, None, 7)
    e = end_packet("exit 1", ts=8, stream_id=None, agent_type=AgentType.INFO, name="", ok=False, exit_code=1)
    c = read_chunk(e, default_stream_id=2, default_name="port")
    assert (c.is_end, c.ok, c.exit_code, c.stream_id, c.name) == (True, False, 1, 2, "port")


def test_any_text_packet_is_a_chunk() -> None:
    c = read_chunk(Packet.from_bytes(b"\xffraw", 3), default_stream_id=1, default_name="in")
    assert (c.text, c.agent_type, c.stream_id, c.name, c.kind) == ("\ufffdraw", AgentType.ASSISTANT, 1, "in", "text")


def test_chunks_cross_processes_through_the_ring_to_a_renderer() -> None:
    ring = Ring.create(capacity=64, full_policy="block")  # the producer waits for the renderer
    try:
        producer_code = textwrap.dedent(f"""
            from flowplex.agents import AgentChunk, to_ring
            from flowplex.transport import AgentType, Ring
            with Ring.attach({ring.name!r}) as ring, ring.producer() as p:
                for i in range(30):
                    assert to_ring(p, AgentChunk(f"planner line {{i}}\\n", 1, AgentType.ASSISTANT, "", ts=i),
                                   timeout=10)
                    assert to_ring(p, AgentChunk(f"\\x1b[31mfail {{i}}\\x1b[0m\\n" + "x" * 300, 2, AgentType.ERROR,
                                                 "", ts=i), timeout=10)
        """)
        child = subprocess.Popen([sys.executable, "-c", producer_code], env={**os.environ})
        out = io.BytesIO()
        caps = TermCaps(is_tty=True, columns=120, rows=30, colour=True)
        display = PaneRenderer(Writer(out), caps, keys=False)
        display.add_agent(1, "planner", AgentType.ASSISTANT)  # the ring carries no names
        display.add_agent(2, "tests", AgentType.ERROR)
        received = 0
        with display, ring.consumer() as consumer:
            while True:
                try:
                    msg = consumer.recv(timeout=20)
                except EndOfStream:
                    break
                chunk = from_message(msg)
                display.feed(chunk.stream_id or 0, chunk.text, agent_type=chunk.agent_type)
                received += 1
        assert child.wait(timeout=20) == 0
    finally:
        ring.close()
        ring.unlink()
    assert received == 60
    screen = pyte.Screen(120, 30)
    screen.set_mode(pyte.modes.LNM)
    pyte.ByteStream(screen).feed(out.getvalue()[: out.getvalue().rfind(b"\x1b[?1049l")])
    text = "\n".join(screen.display)
    assert "planner line 29" in text and "fail 29" in text
    assert "1 planner · assistant" in text and "2 tests · error" in text
