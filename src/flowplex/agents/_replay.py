"""``ReplaySource``: the one replay kernel. It plays an MCAP recording (or a JSONL agent
transcript) into a graph with its timestamps, its timestamp bounds and its pacing.

Both kinds of file become the same records (``flowplex.recording.Record``) and go through the
same ``Player`` (``flowplex.recording._replay``); a transcript only differs in that its records
are made from the JSONL lines (``_transcripts``). What is agent-specific here is small: the
identity options rewrite the agent-stream metadata, and a stream of agent chunks ends with an
``end`` packet (the recorded one, or one of the replay's own when it loops, stops or the file
has none).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterable
from typing import Any, Final, final

from .._timestamps import TS_MIN
from ..errors import ConfigError, UsageError
from ..kernels import Context, Contract, Kernel, kernel
from ..packets import Packet
from ..recording import Record, Recording, RecordingError
from ..recording import open as open_recording
from ..recording._replay import Player, parse_rate
from ..transport import AgentType
from ._common import BOUND_POLL_S, draining, option_error, read_identity
from ._packets import KIND_END, KIND_START, META_AGENT, META_AGENT_TYPE, META_KIND, META_STREAM_ID, end_packet
from ._transcripts import Transcript, load_transcript, resolve_path, transcript_records

__all__ = ["ReplaySource"]

TRANSCRIPT_LOOP_GAP_S: Final = 1.5
"""Transcript seconds between the end of a loop and the start of the next (a recording loops at once)."""
_MAX_BURST: Final = 512
"""Messages one invocation emits at most, so that the engine's backpressure gets a say."""
_MAX_BURST_BYTES: Final = 8 * 1024 * 1024
"""Buffer bytes one invocation emits at most (a burst of 1080p frames is one or two)."""
_IDENTITY: Final = ("name", "stream_id", "agent_type")


@final
@kernel("ReplaySource")
class ReplaySource(Kernel):
    """Replays a recording (``.mcap``) or an agent transcript (``.jsonl``) with its timing.

    Each output port replays one stream of the recording: the one named by ``channel`` (one name,
    or a list with one name per output port), else the stream named like the output port, else
    the recording's only stream. Packets keep their recorded timestamps, values and metadata;
    timestamp bounds recorded with no packet are replayed as bounds, so joins downstream align
    as they did. A message is emitted ``(its wall time - the first one's) / rate`` seconds after
    the source first runs; the source waits between messages without holding a thread.

    Ports: no inputs; any number of outputs, of any type.

    Options:
        path: The recording or transcript (``bundled:<file>`` for one shipped with flowplex). Required.
        channel: The stream(s) to replay: a name, or a list with one name per output port.
        rate: The speed factor (default 1; ``2`` plays twice as fast) or ``max`` (no pacing:
            as fast as the graph takes them). ``speed`` is its former name.
        loop: Play again after the end, forever, timestamps shifted by the recording's span so
            that they keep increasing (default false).
        start, end: The window to play, in seconds from the first replayed message (default:
            everything).
        display: Name of a registered display; when its host sets ``draining``, the replay
            ends (so a looping replay can finish).
        name, stream_id, agent_type: The agent's identity on agent chunks (defaults: as
            recorded; for a transcript, its ``meta``, then the node name and ``assistant``).

    Lifecycle: ``open`` reads the file's index and checks the channels (errors fail the graph
    start with the option's name); ``process`` emits what is due and yields until the next; at
    the end (without ``loop``) the source finishes, which closes its outputs.
    """

    @staticmethod
    def get_contract(c: Contract) -> None:
        for i in range(max(c.num_outputs, 1)):
            c.output_set_any(i)

    def __init__(self) -> None:
        self._player: Player | None = None
        self._recording: Recording | None = None
        self._identity: dict[str, str | int] = {}
        self._start: float | None = None
        self._display = ""
        self._last: list[int] = []
        self._agent: list[bool] = []
        self._ended: list[bool] = []
        self._who: list[Packet | None] = []  # each output's last agent chunk: who its end packet speaks as
        self._looping = False
        self._note = "end of recording"

    def open(self, cc: Context) -> None:
        options = _options(cc)
        path = options.get("path")
        if not isinstance(path, str) or not path:
            raise option_error(cc, "path", "missing; give a recording (.mcap) or a transcript (.jsonl, bundled:<name>)")
        rate = _rate(cc, options)
        loop = cc.option_bool("loop", False)
        start = _seconds(cc, options, "start", 0.0)
        end = _seconds(cc, options, "end", None)
        if end is not None and end <= start:
            raise option_error(cc, "end", f"expected a number of seconds after start ({start:g}), got {end:g}")
        file = resolve_path(path)
        if file.suffix == ".jsonl":
            records, outputs = self._transcript(cc, str(file)), {"transcript": 0}
            gap, self._note = TRANSCRIPT_LOOP_GAP_S, "end of transcript"
            if cc.num_outputs != 1:
                raise option_error(cc, "path", f"a transcript feeds one output port, the node has {cc.num_outputs}")

            def messages() -> Iterable[Record]:
                return records
        else:
            rec, outputs = self._open_recording(cc, str(file), options.get("channel"))
            self._identity = _identity_override(cc)
            wanted = list(outputs)
            gap = 0.0

            def messages() -> Iterable[Record]:
                return rec.messages(bounds=True, streams=wanted)
        try:
            self._player = Player(messages, outputs, rate=rate, loop=loop, start_s=start, end_s=end, loop_gap_s=gap)
        except UsageError as exc:
            key = str(exc).split(":", 1)[0]
            raise option_error(cc, key, str(exc).split(": ", 1)[-1]) from None
        n = max(cc.num_outputs, 1)
        self._last, self._agent, self._ended = [-(2**63)] * n, [False] * n, [False] * n
        self._who = [None] * n
        self._looping = loop
        self._display = cc.option_str("display", "")
        self._start = None

    def _transcript(self, cc: Context, path: str) -> list[Record]:
        try:
            t: Transcript = load_transcript(path)
        except ConfigError as exc:
            raise option_error(cc, "path", str(exc)) from None
        who = read_identity(cc, t.name, t.agent_type or AgentType.ASSISTANT)
        return transcript_records(t, who, "transcript")

    def _open_recording(self, cc: Context, path: str, channel: object) -> tuple[Recording, dict[str, int]]:
        try:
            rec = open_recording(path)
        except RecordingError as exc:
            raise option_error(cc, "path", str(exc)) from None
        self._recording = rec
        try:
            names = _channels(cc, rec.streams, channel)
        except ConfigError:
            rec.close()
            raise
        return rec, {name: i for i, name in enumerate(names)}

    def process(self, cc: Context) -> None:
        player = self._player
        assert player is not None, "process before open"
        now = time.monotonic()
        if self._start is None:
            self._start = now
        stop = draining(self._display)
        emitted = nbytes = 0
        packets: set[int] = set()
        bounds: set[int] = set()
        while emitted < _MAX_BURST and nbytes < _MAX_BURST_BYTES:
            due = None if stop else player.peek()
            if due is None:
                _hold_bounds(cc, packets, bounds)
                self._finish(cc, "stopped" if stop else self._note)
                return
            wait = self._start + due.at_s - now
            if wait > 0:
                _hold_bounds(cc, packets, bounds)
                cc.source_yield(min(wait, BOUND_POLL_S) if self._display else wait)
                return
            r = due.record
            # A bound holds only for an output that emits nothing in the invocation, and a packet or
            # a bound after it would hide it (the engine sees an invocation's last bound only): each
            # goes in an invocation of its own, so that a replay advances bounds as they were recorded.
            if due.output in bounds or (r.is_bound and due.output in packets):
                break
            player.pop()
            if r.is_bound:
                bounds.add(due.output)
                cc.set_next_timestamp_bound(due.output, due.ts)
                continue
            packet = self._packet(due.output, r, due.ts, due.round)
            if packet is None:
                continue
            packets.add(due.output)
            cc.emit(due.output, packet)
            emitted += 1
            nbytes += getattr(r.value, "nbytes", 0)  # frames: a burst holds a few at most
        _hold_bounds(cc, packets, bounds)
        cc.source_yield(0.0)

    def _packet(self, output: int, r: Record, ts: int, round_: int) -> Packet | None:
        """The packet of record ``r`` at ``ts``, with the identity options applied (None: not replayed)."""
        meta = r.metadata
        kind = meta.get(META_KIND) if meta else None
        if kind is not None:
            self._agent[output] = True
            if kind == KIND_END and self._looping:
                return None  # a loop goes on: the replay's own end packet closes the stream at the end
            if kind == KIND_START and round_ > 0:
                return None
        p = r.to_packet()
        p.timestamp = ts
        if kind is not None:
            for key, value in self._identity.items():
                p.set_metadata(key, value)
            self._who[output] = p
        self._last[output] = ts
        self._ended[output] = kind == KIND_END
        return p

    def _finish(self, cc: Context, note: str) -> None:
        """End the replay: agent streams get an end packet unless their last packet was one."""
        for out, agent in enumerate(self._agent):
            if agent and not self._ended[out]:
                self._emit_end(cc, out, note)
        if self._player is not None and self._player.overflowed:
            cc.log(30, "replay: looping stopped: the shifted timestamps would pass the largest timestamp")
        cc.source_done()

    def _emit_end(self, cc: Context, out: int, note: str) -> None:
        """An end packet on ``out``, spoken as the output's last agent chunk was."""
        last = self._who[out]
        sid = last.metadata(META_STREAM_ID) if last is not None else None
        kind = last.metadata(META_AGENT_TYPE) if last is not None else None
        name = last.metadata(META_AGENT) if last is not None else None
        cc.emit(out, end_packet(note, ts=self._last[out] + 1, stream_id=sid if isinstance(sid, int) else None,
                                agent_type=AgentType(kind) if isinstance(kind, int) else AgentType.ASSISTANT,
                                name=name if isinstance(name, str) else "", ok=True))

    def close(self, cc: Context) -> None:
        if self._recording is not None:
            self._recording.close()
            self._recording = None
        self._player = None


def _hold_bounds(cc: Context, packets: set[int], bounds: set[int]) -> None:
    """Keep the bound of each output that got nothing in this invocation where it is.

    The engine would move it past the invocation's timestamp (a source's call count, nothing to
    do with the recorded timestamps): a stream would get bounds it never had, even past packets
    still to come. Its bounds are the recorded ones, replayed as records.
    """
    for out in range(cc.num_outputs):
        if out not in packets and out not in bounds:
            cc.set_next_timestamp_bound(out, TS_MIN)  # below any bound: advances nothing


def _options(cc: Context) -> dict[str, Any]:
    try:
        raw = json.loads(cc.options_json() or "{}")
    except (TypeError, ValueError):
        raw = {}
    return raw if isinstance(raw, dict) else {}


def _rate(cc: Context, options: dict[str, Any]) -> float:
    key = "rate" if "rate" in options else "speed"
    if key == "speed" and key not in options:
        return 1.0
    try:
        return parse_rate(options[key], key)
    except UsageError as exc:
        if key == "speed":  # the former name took numbers only
            raise option_error(cc, key, f"must be a positive number, got {options[key]!r}") from None
        raise option_error(cc, key, str(exc).split(": ", 1)[-1]) from None


def _seconds(cc: Context, options: dict[str, Any], key: str, default: float | None) -> Any:
    if key not in options:
        return default
    value = options[key]
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        raise option_error(cc, key, f"expected a number of seconds >= 0, got {value!r}")
    return float(value)


def _channels(cc: Context, have: list[str], channel: object) -> list[str]:
    """The stream each output replays (see the kernel's doc), checked against the file's."""
    from .._suggest import did_you_mean

    n = max(cc.num_outputs, 1)
    names: list[str]
    if channel is None:
        ports = [cc.output_name(i) for i in range(cc.num_outputs)]
        if ports and all(p in have for p in ports):
            names = ports
        elif n == 1 and len(have) == 1:
            names = list(have)
        else:
            missing = next((p for p in ports if p not in have), "")
            raise option_error(cc, "channel", f"the recording has no stream `{missing}` (it has "
                                              f"{', '.join(have) or 'none'}): say which one feeds each output port")
    elif isinstance(channel, str):
        names = [channel]
    elif isinstance(channel, list) and all(isinstance(c, str) for c in channel):
        names = list(channel)
    else:
        raise option_error(cc, "channel", f"expected a stream name or a list of them, got {channel!r}")
    if len(names) != n:
        raise option_error(cc, "channel", f"{len(names)} stream(s) for {n} output port(s): give one per output port")
    for name in names:
        if name not in have:
            raise option_error(cc, "channel", f"the recording has no stream `{name}`{did_you_mean(name, have)} "
                                              f"(it has {', '.join(have) or 'none'})")
    if len(set(names)) != len(names):
        raise option_error(cc, "channel", f"a stream replays into one output port only: {names}")
    return names


def _identity_override(cc: Context) -> dict[str, str | int]:
    """The agent metadata the identity options set: only those given (a recording keeps the rest)."""
    given = [k for k in _IDENTITY if cc.has_option(k)]
    if not given:
        return {}
    who = read_identity(cc, "", AgentType.ASSISTANT)
    meta: dict[str, str | int] = {}
    if "name" in given and who.name:
        meta[META_AGENT] = who.name
    if "stream_id" in given and who.stream_id is not None:
        meta[META_STREAM_ID] = who.stream_id
    if "agent_type" in given:
        meta[META_AGENT_TYPE] = int(who.agent_type)
    return meta

