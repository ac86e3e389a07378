"""The agent-stream packet convention: text, plus who said it, in packet metadata.

Every agent source emits ``Str`` packets (``Packet.from_str``) stamped with a timestamp in
microseconds and carrying this metadata:

==============  ======  =================================================================
key             type    meaning
==============  ======  =================================================================
``stream_id``   int     which agent (u32); optional: a ``TerminalSink`` without it uses the
                        index of the input port the packet arrived on
``agent_type``  int     :class:`~flowplex.transport.AgentType` value (0..7)
``agent``       str     the agent's label (``"planner"``)
``kind``        str     ``"text"`` (a chunk of output, escape sequences included),
                        ``"end"`` (the stream finished; the text is a note such as
                        ``"exit 0"``) or ``"start"`` (a finished stream runs again: a
                        command restarted; the text is a note)
``ok``          bool    on ``end`` packets: whether the agent succeeded
``exit_code``   int     on ``end`` packets of commands: the exit status (``-N``: killed by
                        signal N)
``pty``         bool    the text is a program's output through a pseudo-terminal (set by
                        ``CommandSource``): its newlines are already ``\r\n`` where the
                        program wanted them; without it ``\n`` starts a new line
==============  ======  =================================================================

The same fields travel through the shared-memory ring (``flowplex.transport``): ``to_ring``
sends a chunk with its stream id, agent type and timestamp, and ``from_message`` turns a
received message back into a chunk, so a renderer can run in another process. The ring has no
field for the label or the end marker: the receiving side names streams itself
(``Display.add_agent``) and sees the end when the producer closes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from ..packets import Packet
from ..transport import AgentType

if TYPE_CHECKING:
    from ..transport import Message, Producer

__all__ = [
    "KIND_END",
    "KIND_START",
    "KIND_TEXT",
    "AgentChunk",
    "chunk_packet",
    "end_packet",
    "from_message",
    "read_chunk",
    "to_ring",
]

KIND_TEXT: Final = "text"
"""``kind`` of a chunk of the agent's output (escape sequences included)."""
KIND_END: Final = "end"
"""``kind`` of the packet that ends a stream; its text is a note such as ``"exit 0"``."""
KIND_START: Final = "start"
"""``kind`` of the packet that starts a finished stream again (a command restarted)."""
META_STREAM_ID: Final = "stream_id"
META_AGENT_TYPE: Final = "agent_type"
META_AGENT: Final = "agent"
META_KIND: Final = "kind"
META_OK: Final = "ok"
META_EXIT_CODE: Final = "exit_code"
META_PTY: Final = "pty"
_U32: Final = 0xFFFFFFFF


@dataclass(frozen=True, slots=True)
class AgentChunk:
    """One piece of an agent's stream, as read from a packet or a ring message."""

    text: str
    """The output (or, for ``kind == "end"``, the closing note)."""
    stream_id: int | None
    """The agent's stream id; None when the packet did not say."""
    agent_type: AgentType
    name: str
    """The label; ``""`` when the packet did not say."""
    kind: str = KIND_TEXT
    pty: bool = False
    """The text comes from a pseudo-terminal (see the table above)."""
    ok: bool = True
    exit_code: int | None = None
    ts: int = 0
    """The packet timestamp (microseconds) or the ring message's ``timestamp_ns // 1000``."""

    @property
    def is_end(self) -> bool:
        """Whether this chunk closes the stream."""
        return self.kind == KIND_END


def _stamp(p: Packet, stream_id: int | None, agent_type: AgentType, name: str, kind: str) -> Packet:
    if stream_id is not None:
        p.set_metadata(META_STREAM_ID, int(stream_id))
    p.set_metadata(META_AGENT_TYPE, int(agent_type))
    if name:
        p.set_metadata(META_AGENT, name)
    p.set_metadata(META_KIND, kind)
    return p


def chunk_packet(
    text: str, *, ts: int, stream_id: int | None, agent_type: AgentType, name: str, pty: bool = False
) -> Packet:
    """A ``text`` packet of the convention.

    >>> p = chunk_packet("hi", ts=5, stream_id=2, agent_type=AgentType.USER, name="me")
    >>> read_chunk(p)
    AgentChunk(text='hi', stream_id=2, agent_type=<AgentType.USER: 1>, name='me', kind='text', pty=False, \
ok=True, exit_code=None, ts=5)
    """
    p = _stamp(Packet.from_str(text, ts), stream_id, agent_type, name, KIND_TEXT)
    if pty:
        p.set_metadata(META_PTY, True)
    return p


def end_packet(
    note: str, *, ts: int, stream_id: int | None, agent_type: AgentType, name: str, ok: bool,
    exit_code: int | None = None,
) -> Packet:
    """An ``end`` packet: the stream finished; ``note`` says how (``"exit 0"``)."""
    p = _stamp(Packet.from_str(note, ts), stream_id, agent_type, name, KIND_END)
    p.set_metadata(META_OK, bool(ok))
    if exit_code is not None:
        p.set_metadata(META_EXIT_CODE, int(exit_code))
    return p


def start_packet(note: str, *, ts: int, stream_id: int | None, agent_type: AgentType, name: str) -> Packet:
    """A ``start`` packet: the stream (a command) runs again; ``note`` says why (``"restart"``)."""
    return _stamp(Packet.from_str(note, ts), stream_id, agent_type, name, KIND_START)


def read_chunk(packet: Packet, *, default_stream_id: int | None = None, default_name: str = "") -> AgentChunk:
    """The chunk a packet carries. Any ``Str`` or ``Bytes`` packet is accepted: metadata that
    is missing takes the defaults (agent type ``ASSISTANT``)."""
    text = packet.as_str()
    if text is None:
        raw = packet.as_bytes()
        text = raw.decode("utf-8", "replace") if raw is not None else ""
    sid = packet.metadata(META_STREAM_ID)
    kind_value = packet.metadata(META_AGENT_TYPE)
    kind = AgentType(kind_value) if isinstance(kind_value, int) and 0 <= kind_value < len(AgentType) else (
        AgentType.ASSISTANT)
    name = packet.metadata(META_AGENT)
    what = packet.metadata(META_KIND)
    ok = packet.metadata(META_OK)
    code = packet.metadata(META_EXIT_CODE)
    pty = packet.metadata(META_PTY)
    return AgentChunk(
        text=text,
        stream_id=sid if isinstance(sid, int) and not isinstance(sid, bool) else default_stream_id,
        agent_type=kind,
        name=name if isinstance(name, str) and name else default_name,
        kind=what if what in (KIND_END, KIND_START) else KIND_TEXT,
        pty=pty is True,
        ok=ok if isinstance(ok, bool) else True,
        exit_code=code if isinstance(code, int) and not isinstance(code, bool) else None,
        ts=packet.timestamp,
    )


def to_ring(producer: Producer, chunk: AgentChunk, *, timeout: float | None = None) -> bool:
    """Send a text chunk through a ring (``timestamp_ns`` = ``ts`` µs x 1000).

    Returns what ``Producer.send`` returns (False when the ring refused it under its full
    policy). End chunks are not sent: close the producer instead.
    """
    if chunk.is_end:
        return True
    sid = (chunk.stream_id or 0) & _U32
    ts_ns = max(0, chunk.ts) * 1000
    return bool(producer.send(chunk.text, stream_id=sid, agent_type=chunk.agent_type, timestamp_ns=ts_ns,
                              timeout=timeout))


def from_message(message: Message, *, name: str = "") -> AgentChunk:
    """The chunk a ring message carries."""
    return AgentChunk(
        text=message.data.decode("utf-8", "replace"),
        stream_id=message.stream_id,
        agent_type=AgentType(message.agent_type),
        name=name,
        ts=message.timestamp_ns // 1000,
    )
