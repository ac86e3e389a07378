"""``ReplaySource``: replays a recorded agent transcript (JSONL) with its token timing."""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Final, final

from ..errors import ConfigError
from ..kernels import Context, Contract, Kernel, kernel
from ..terminal._display import agent_type_of
from ..transport import AgentType
from ._common import BOUND_POLL_S, Identity, Stamper, draining, option_error, read_identity
from ._packets import chunk_packet, end_packet

__all__ = ["ReplaySource", "Transcript", "load_transcript"]

BUNDLED_PREFIX: Final = "bundled:"
LOOP_GAP_S: Final = 1.5
"""Transcript seconds between the end of a loop and the start of the next."""
_MAX_BURST: Final = 512


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
    """Path of a transcript shipped with flowplex (``flowplex/_data/transcripts/<name>``)."""
    from importlib.resources import files

    return Path(str(files("flowplex._data").joinpath("transcripts", name)))


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
    text_path = str(path)
    file = bundled_path(text_path[len(BUNDLED_PREFIX) :]) if text_path.startswith(BUNDLED_PREFIX) else Path(path)
    try:
        lines = file.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        msg = f"{file}: cannot read transcript: {exc.strerror or exc}"
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


@final
@kernel("ReplaySource")
class ReplaySource(Kernel):
    """Replays a JSONL transcript as an agent, keeping its token timing.

    Record ``i`` is emitted ``t_i / speed`` seconds after the source first runs (so ``speed:
    2`` plays twice as fast); the packet timestamp is the transcript time in microseconds. The
    source waits between records without holding a thread.

    Ports: no inputs → output 0 (Str chunks of the agent-stream convention).

    Options:
        path: The transcript (``bundled:<file>`` for one shipped with flowplex). Required.
        speed: Playback speed factor (default 1; must be > 0).
        loop: Start again after the end, forever (default false).
        display: Name of a registered display; when its host sets ``draining``, the replay
            ends (so a looping replay can finish).
        name, stream_id, agent_type: The agent's identity (defaults: the transcript's ``meta``,
            then the node name and ``assistant``).

    Lifecycle: ``open`` parses the transcript (errors fail the graph start with a
    ``file:line`` message); ``process`` emits every record that is due and yields until the
    next; at the end (without ``loop``) it emits an ``end`` packet and finishes.
    """

    @staticmethod
    def get_contract(c: Contract) -> None:
        c.output_set_any(0)

    def __init__(self) -> None:
        self._transcript = Transcript("", None, ())
        self._who = Identity("", None, AgentType.ASSISTANT)
        self._speed = 1.0
        self._loop = False
        self._start: float | None = None
        self._next = 0
        self._round = 0
        self._stamp = Stamper()
        self._display = ""

    def open(self, cc: Context) -> None:
        path = cc.option_str("path", "")
        if not path:
            raise option_error(cc, "path", "missing; give a JSONL transcript (or bundled:<name>)")
        speed = cc.option_float("speed", 1.0)
        if not (math.isfinite(speed) and speed > 0):
            raise option_error(cc, "speed", f"must be a positive number, got {speed!r}")
        try:
            self._transcript = load_transcript(path)
        except ConfigError as exc:
            raise option_error(cc, "path", str(exc)) from None
        t = self._transcript
        self._who = read_identity(cc, t.name, t.agent_type or AgentType.ASSISTANT)
        self._speed = speed
        self._loop = cc.option_bool("loop", False)
        self._display = cc.option_str("display", "")
        self._start = None
        self._next = 0
        self._round = 0
        self._stamp = Stamper()

    def process(self, cc: Context) -> None:
        records = self._transcript.records
        now = time.monotonic()
        if self._start is None:
            self._start = now
        period = self._transcript.duration_s + LOOP_GAP_S
        emitted = 0
        stop = draining(self._display)
        while emitted < _MAX_BURST:
            if stop or self._next >= len(records):
                if stop or not self._loop or not records:
                    note = "stopped" if stop else "end of transcript"
                    cc.emit(0, end_packet(note, ts=self._stamp.next(), stream_id=self._who.stream_id,
                                          agent_type=self._who.agent_type, name=self._who.name, ok=True))
                    cc.source_done()
                    return
                self._next = 0
                self._round += 1
            t, text = records[self._next]
            at = self._round * period + t
            due = self._start + at / self._speed
            if due > now:
                wait = due - now
                cc.source_yield(min(wait, BOUND_POLL_S) if self._display else wait)
                return
            cc.emit(0, chunk_packet(text, ts=self._stamp.next(int(at * 1e6)), stream_id=self._who.stream_id,
                                    agent_type=self._who.agent_type, name=self._who.name))
            self._next += 1
            emitted += 1
        cc.source_yield(0.0)
