"""flowplex.agents: the public surface is pinned, the kernels are registered, the import is light."""

from __future__ import annotations

import subprocess
import sys

import flowplex
import flowplex.agents as agents


def test_all_is_pinned_and_kernels_are_registered() -> None:
    assert sorted(agents.__all__) == sorted([
        "KIND_END", "KIND_START", "KIND_TEXT", "AgentChunk", "CommandSource", "OpenAIStreamSource", "ReplaySource",
        "TerminalSink", "Transcript", "chunk_packet", "describe_exit", "end_packet", "from_message",
        "load_transcript", "read_chunk", "start_packet", "to_ring", "transcript_to_recording",
    ])
    assert {"CommandSource", "OpenAIStreamSource", "ReplaySource", "TerminalSink"} <= set(flowplex.registered_kernels())


def test_importing_the_kernels_does_not_import_optional_machinery() -> None:
    code = ("import sys, flowplex.agents; "
            "print(sorted(m for m in ('pyte', 'httpx', 'ptyprocess', 'rich') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]"
