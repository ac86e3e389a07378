"""Helpers for the agent kernel tests: run a graph and collect the chunks it emits."""

from __future__ import annotations

import os
import time

import flowplex
import flowplex.agents  # registers the kernels
from flowplex.agents import AgentChunk, read_chunk


def source_graph(kernel: str, options: dict[str, object]) -> flowplex.Graph:
    """A graph with one agent source node ``src`` whose output is the graph output ``out``."""
    import json

    spec = {"nodes": [{"name": "src", "kernel": kernel, "output_ports": ["out"], "options": options}],
            "output_ports": ["out"]}
    return flowplex.Graph.from_yaml(json.dumps(spec))


def run_source(kernel: str, options: dict[str, object], timeout: float = 20.0) -> list[tuple[float, AgentChunk]]:
    """Run the source to its end; ``(arrival time, chunk)`` for everything it emitted."""
    got: list[tuple[float, AgentChunk]] = []
    with source_graph(kernel, options) as g:
        g.observe("out", lambda p: got.append((time.monotonic(), read_chunk(p))))
        g.start()
        g.wait_done(timeout=timeout)
    return got


def text_of(chunks: list[tuple[float, AgentChunk]]) -> str:
    return "".join(c.text for _, c in chunks if not c.is_end)


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie waiting to be reaped counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
