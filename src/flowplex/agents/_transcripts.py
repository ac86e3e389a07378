"""Agent transcripts: the JSONL form people write by hand, and the MCAP recordings it becomes.

A transcript is what one agent said and when. ``ReplaySource`` replays it through the same
code as any recording: ``transcript_records`` turns it into recording records (``Str`` chunks of
the agent-stream convention, timestamps in microseconds of transcript time), and
``transcript_to_recording`` writes them into an MCAP file (the bundled demo transcripts are such
files).
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from ..errors import ConfigError
from ..recording import Record, Recorder
from ..terminal._display import agent_type_of
from ..transport import AgentType
from ._common import Identity
from ._packets import KIND_TEXT, META_AGENT, META_AGENT_TYPE, META_KIND, META_STREAM_ID

__all__ = ["Transcript", "bundled_path", "load_transcript", "transcript_records", "transcript_to_recording"]

BUNDLED_PREFIX: Final = "bundled:"


@dataclass(frozen=True, slots=True)
class Transcript:
    """A parsed transcript: who speaks, and ``(t, text)`` records with ``t`` in seconds."""

    name: str
    agent_type: AgentType | None
    records: tuple[tuple[float, str], ...]

    @property
    def duration_s(self) -> float:
        """Time of the last record."""
        return self.records[-1][0] if self.records else 0.0


def bundled_path(name: str) -> Path:
    """Path of a transcript shipped with flowplex (``flowplex/_data/transcripts/<name>``).

    The bundled transcripts are MCAP recordings; ``<name>.jsonl``, their former name, finds the
    recording of the same stem.
    """
    from importlib.resources import files

    path = Path(str(files("flowplex._data").joinpath("transcripts", name)))
    if path.suffix == ".jsonl" and not path.exists():
        return path.with_suffix(".mcap")
    return path


def resolve_path(path: str | os.PathLike[str]) -> Path:
    """``bundled:<name>`` as the bundled file's path; any other path as it is."""
    text = os.fspath(path)
    return bundled_path(text[len(BUNDLED_PREFIX):]) if text.startswith(BUNDLED_PREFIX) else Path(text)


def load_transcript(path: str | Path) -> Transcript:
    """Parse a JSONL transcript.

    One JSON object per line. An optional first line ``{"meta": {"name": ..., "agent_type":
    ...}}`` names the agent. Every other line is ``{"t": seconds, "text": "..."}`` (time since
    the start, non-decreasing) or ``{"dt": seconds, "text": "..."}`` (delay after the previous
    record). Blank lines are skipped. ``"bundled:planner.jsonl"`` names a transcript shipped
    with flowplex.

    Raises:
        ConfigError: The file is missing or a line is malformed (the message gives
            ``file:line``).
    """
    file = resolve_path(path)
    try:
        lines = file.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        msg = f"{file}: cannot read transcript: {exc.strerror or exc}"
        raise ConfigError(msg) from None
    except UnicodeDecodeError:
        msg = f"{file}: not a JSONL transcript (not UTF-8 text; a recording is replayed by ReplaySource as it is)"
        raise ConfigError(msg) from None
    name = ""
    kind: AgentType | None = None
    records: list[tuple[float, str]] = []
    now = 0.0
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{file}:{number}"
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            msg = f"{where}: not JSON ({exc.msg}); expected {{\"t\": seconds, \"text\": \"...\"}}"
            raise ConfigError(msg) from None
        if not isinstance(item, dict):
            msg = f"{where}: expected a JSON object, found {type(item).__name__}"
            raise ConfigError(msg)
        if "meta" in item:
            meta = item["meta"]
            if not isinstance(meta, dict):
                msg = f"{where}: meta must be an object"
                raise ConfigError(msg)
            name = str(meta.get("name", name))
            if "agent_type" in meta:
                try:
                    kind = agent_type_of(meta["agent_type"], where=f"{where}: meta.agent_type")
                except ValueError as exc:
                    raise ConfigError(str(exc)) from None
            continue
        text = item.get("text")
        if not isinstance(text, str):
            msg = f"{where}: \"text\" must be a string"
            raise ConfigError(msg)
        if "t" in item:
            t = item["t"]
        elif "dt" in item:
            t = now + item["dt"] if isinstance(item["dt"], int | float) else item["dt"]
        else:
            msg = f"{where}: a record needs \"t\" (seconds since start) or \"dt\" (seconds after the previous)"
            raise ConfigError(msg)
        if not isinstance(t, int | float) or isinstance(t, bool) or not math.isfinite(t) or t < now:
            msg = f"{where}: time {t!r} must be a number >= the previous record's ({now:g} s)"
            raise ConfigError(msg)
        now = float(t)
        records.append((now, text))
    return Transcript(name, kind, tuple(records))




def transcript_records(t: Transcript, who: Identity, stream: str) -> list[Record]:
    """The transcript as recording records on ``stream``: one ``Str`` chunk per record, spoken as
    ``who``, at strictly increasing timestamps (microseconds of transcript time), with the
    transcript time as their wall time."""
    meta: dict[str, str | int] = {META_AGENT_TYPE: int(who.agent_type), META_KIND: KIND_TEXT}
    if who.stream_id is not None:
        meta[META_STREAM_ID] = who.stream_id
    if who.name:
        meta[META_AGENT] = who.name
    records: list[Record] = []
    last = -1
    for at, text in t.records:
        ts = max(round(at * 1e6), last + 1)
        last = ts
        records.append(Record(stream, "str", ts, text, round(at * 1e9), dict(meta)))
    return records


def transcript_to_recording(src: str | os.PathLike[str], dst: str | os.PathLike[str], *,
                            stream: str | None = None, compression: str = "zstd") -> str:
    """Write the JSONL transcript ``src`` as an MCAP recording ``dst`` with one stream (default:
    the transcript's name, else the file's stem); returns the stream's name.

    Raises:
        ConfigError: ``src`` cannot be read or is malformed.
    """
    t = load_transcript(os.fspath(src))
    name = stream or t.name or Path(os.fspath(src)).stem
    who = Identity(t.name or name, None, t.agent_type or AgentType.ASSISTANT)
    with Recorder(dst, compression=compression) as rec:
        rec.add_stream(name, kind="str")
        for r in transcript_records(t, who, name):
            rec.write_value(name, r.ts, r.value, wall_ns=r.wall_ns, metadata=r.metadata)
    return name
