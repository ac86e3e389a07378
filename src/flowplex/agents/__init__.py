"""Agent sources and sinks: kernels that stream commands, LLMs and transcripts to a terminal.

Importing this package registers the kernels ``CommandSource``, ``OpenAIStreamSource``,
``ReplaySource`` and ``TerminalSink``. The packets between them follow one convention
(:mod:`flowplex.agents._packets`): ``Str`` chunks with ``stream_id``, ``agent_type``, ``agent``
and ``kind`` metadata, usable by any kernel and able to cross the shared-memory ring.

Importing is cheap: ptyprocess, httpx and pyte are imported when a kernel first needs them.
"""

from __future__ import annotations

from ._command import CommandSource as CommandSource
from ._command import describe_exit as describe_exit
from ._openai import OpenAIStreamSource as OpenAIStreamSource
from ._packets import KIND_END as KIND_END
from ._packets import KIND_START as KIND_START
from ._packets import KIND_TEXT as KIND_TEXT
from ._packets import AgentChunk as AgentChunk
from ._packets import chunk_packet as chunk_packet
from ._packets import end_packet as end_packet
from ._packets import from_message as from_message
from ._packets import read_chunk as read_chunk
from ._packets import start_packet as start_packet
from ._packets import to_ring as to_ring
from ._replay import ReplaySource as ReplaySource
from ._sink import TerminalSink as TerminalSink
from ._transcripts import Transcript as Transcript
from ._transcripts import load_transcript as load_transcript
from ._transcripts import transcript_to_recording as transcript_to_recording

__all__ = [
    "KIND_END",
    "KIND_START",
    "KIND_TEXT",
    "AgentChunk",
    "CommandSource",
    "OpenAIStreamSource",
    "ReplaySource",
    "TerminalSink",
    "Transcript",
    "chunk_packet",
    "describe_exit",
    "end_packet",
    "from_message",
    "load_transcript",
    "read_chunk",
    "start_packet",
    "to_ring",
    "transcript_to_recording",
]
