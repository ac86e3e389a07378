"""``flowplex agents --record FILE.mcap [--record-input]``: an agents session into one recording.

One channel per agent, named after the agent, holds its output stream as it flowed: the
agent-stream packets of :mod:`flowplex.agents._packets` (``Str`` chunks with ``stream_id``,
``agent``, ``kind``... in their metadata; the ``end`` and ``start`` packets too), through the same
``recording.Capture`` as ``run --record`` (lossless: a recorder that falls a whole queue behind
holds the agents back, as a slow terminal does). A ``--ring`` stream has its channel too
(``ring``). With ``--record-input`` a channel ``NAME.input`` per command holds what was typed
into it (typing mode, ``agents send``, an attached view), as ``Bytes`` packets with the same
metadata keys, stamped in the clock of the agent's output: replayed side by side, a key comes
before the echo it caused.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, final

from ._agentsfile import unique_names

if TYPE_CHECKING:
    from ..graph import Graph
    from ..packets import Packet
    from ..recording import Capture
    from ._display import Display

__all__ = ["AgentStream", "AgentsRecording", "record_session"]


@dataclass(frozen=True, slots=True)
class AgentStream:
    """One agent of the session: its name (the channel's), its output port, its stream id."""

    name: str
    port: str
    stream_id: int


@final
class _Input:
    """One agent's input channel: stamps strictly increase, writes go in the order typed."""

    __slots__ = ("count", "last", "lock", "name", "on_packet")

    def __init__(self, name: str, on_packet: Callable[[Packet], None]) -> None:
        self.name = name
        self.on_packet = on_packet
        self.lock = threading.Lock()
        self.last = -1
        self.count = 0


@final
class AgentsRecording:
    """The recording of one agents session; made before the graph starts, closed after it stopped.

    Raises (from the constructor):
        RecordingError: The file cannot be created.
    """

    def __init__(self, graph: Graph, path: str | Path, agents: list[AgentStream], *, ring: str | None = None,
                 inputs: bool = False) -> None:
        from ..recording import Capture, Recorder

        self.path = str(path)
        self._capture: Capture = Capture(Recorder(path))
        self._counts: dict[str, list[int]] = {}
        self._inputs: dict[int, _Input] = {}
        try:
            taken = [a.name for a in agents]
            outputs = [(a.name, a.port) for a in agents]
            if ring is not None:
                outputs += [(unique_names(["ring"], taken=taken)[0], ring)]
            for name, port in outputs:
                on_packet, on_bound = self._capture.stream(name)
                graph.tap(port, self._counted(name, on_packet), on_bound)
            if inputs:
                names = unique_names([f"{a.name}.input" for a in agents], taken=[n for n, _ in outputs])
                for agent, name in zip(agents, names, strict=True):
                    self._inputs[agent.stream_id] = _Input(name, self._capture.stream(name)[0])
        except BaseException:
            self._capture.close()
            raise
        self._agents = {a.stream_id: a.name for a in agents}

    def _counted(self, name: str, on_packet: Callable[[Packet], None]) -> Callable[[Packet], None]:
        count = self._counts[name] = [0]

        def tap(packet: Packet) -> None:
            on_packet(packet)
            count[0] += 1  # (one producer per stream: its thread alone counts)

        return tap

    def typed(self, stream_id: int, ts: int, data: bytes) -> None:
        """The display's ``input_tap``: ``data`` typed into agent ``stream_id`` at ``ts``."""
        from ..agents._packets import META_AGENT, META_STREAM_ID
        from ..packets import Packet

        channel = self._inputs.get(stream_id)
        if channel is None:
            return
        with channel.lock:
            ts = max(ts, channel.last + 1)
            channel.last = ts
            packet = Packet.from_bytes(data, ts)
            packet.set_metadata(META_STREAM_ID, stream_id)
            packet.set_metadata(META_AGENT, self._agents.get(stream_id, ""))
            channel.on_packet(packet)
            channel.count += 1

    def close(self) -> str:
        """Finish the file; one line saying what it holds."""
        self._capture.close()
        packets = sum(c[0] for c in self._counts.values())
        typed = sum(c.count for c in self._inputs.values())
        dropped = sum(self._capture.dropped.values())
        return (f"recorded {packets} packet(s) from {len(self._counts)} stream(s)"
                + (f" and {typed} input(s)" if self._inputs else "") + f" into {self.path}"
                + (f"; {dropped} could not be recorded" if dropped else ""))


def record_session(graph: Graph, display: Display, path: str, names: list[str], first_id: int, *,
                   ring: bool, inputs: bool) -> AgentsRecording:
    """The recording of the graph ``agent_nodes`` built (agent ``i`` on port ``out{i}``, stream
    id ``first_id + i``; the ring on port ``ring``), its input tapped from ``display``."""
    agents = [AgentStream(name, f"out{i}", first_id + i) for i, name in enumerate(names)]
    rec = AgentsRecording(graph, path, agents, ring="ring" if ring else None, inputs=inputs)
    if inputs:
        display.input_tap = rec.typed
    return rec
