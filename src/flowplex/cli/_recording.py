"""The commands that read recordings (``flowplex.recording``): ``inspect``, ``replay`` and ``diff``.

They only read: ``inspect`` tells what a file holds, ``replay`` prints its packets as ``flowplex
echo`` prints a live stream's (each line led by the stream's name), ``diff`` says whether two
recordings hold the same packets and, when not, where they first differ. A file that cannot be
read is one line and exit 2; a file cut short (``kill -9``, a full disk) is read up to its cut,
with one warning line on stderr that says so (``Recording.truncation``; the exit code stays).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import zlib
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from flowplex.terminal._sanitize import visible_controls as shown

from ._app import IMPORT_HELP, SET_HELP, app, fail, stream_list, usage
from ._live import echo_line
from ._run import CompressionOption, ControlOption, NameOption

if TYPE_CHECKING:
    from flowplex.recording import Record, Recording, RecordingSummary

FILE_HELP = "A recording (flowplex run --record FILE.mcap writes one)."
STREAMS_HELP = "Only these streams: names separated by commas."
_INCOMPLETE = "incomplete: it ends without its summary and footer"
INSPECT_HEADER = ["STREAM", "KIND", "PACKETS", "BOUNDS", "FIRST TS", "LAST TS", "SPAN", "RATE/S", "DROPPED"]


def _open(path: Path) -> Recording:
    """Open a recording; a file that cannot be read is one line, exit 2."""
    from flowplex.recording import RecordingError
    from flowplex.recording import open as open_recording

    try:
        return open_recording(path)
    except RecordingError as exc:
        raise fail(exc, 2) from None


def _stream_names(option: str | None, have: list[str], where: str, they: str = "it has") -> list[str] | None:
    """``--streams a,b`` as a list (None without it); a name not in ``have`` is a usage error."""
    from flowplex._suggest import did_you_mean

    names = stream_list(option)
    if names is None:
        return None
    for name in names:
        if name not in have:
            msg = (f"--streams: no stream {name!r} in {where} ({they} {', '.join(map(repr, have)) or 'none'})"
                   f"{did_you_mean(name, have)}")
            raise usage(msg)
    return names


def warn_if_truncated(truncation: str | None) -> None:
    """The one warning line on stderr for a recording cut short: its ``Recording.truncation``
    (None, a whole recording: nothing)."""
    if truncation is not None:
        typer.echo(shown(f"flowplex: warning: {truncation}"), err=True)


# --- inspect ----------------------------------------------------------------------------------------


def _rate(hz: float | None) -> str:
    from flowplex.control._text import rate

    if hz is None:
        return "-"
    return f"{hz:.2f}" if hz < 10 else rate(hz)


def _inspect_json(summary: RecordingSummary, size: int) -> dict[str, Any]:
    streams = [{
        "name": s.name, "kind": s.kind, "kinds": list(s.kinds), "packets": s.count, "bounds": s.bounds,
        "first_ts": s.first_ts, "last_ts": s.last_ts,
        "ts_span": None if s.first_ts is None or s.last_ts is None else s.last_ts - s.first_ts,
        "first_wall_ns": s.first_wall_ns, "last_wall_ns": s.last_wall_ns, "wall_span_s": s.wall_span_s,
        "rate_hz": s.rate_hz, "dropped": s.dropped,
    } for s in summary.streams.values()]
    return {
        "path": summary.path, "bytes": size, "complete": summary.complete, "problem": summary.problem,
        "streams": streams, "packets": sum(s.count for s in summary.streams.values()),
        "bounds": sum(s.bounds for s in summary.streams.values()),
        "dropped": sum(s.dropped for s in summary.streams.values()),
    }


def inspect_text(summary: RecordingSummary, size: int) -> str:
    """``inspect``'s table: a line about the file, one per stream, and where the file was cut short."""
    from flowplex._timestamps import ts_name
    from flowplex.control._text import table

    ss = list(summary.streams.values())
    head = (f"{summary.path}: {len(ss)} stream(s), {sum(s.count for s in ss)} packet(s), "
            f"{sum(s.bounds for s in ss)} bound(s), {sum(s.dropped for s in ss)} dropped, {size} bytes, "
            f"{'complete' if summary.complete else 'INCOMPLETE'}\n")
    rows = [[s.name, s.kind if s.kind != "any" else f"any({','.join(s.kinds)})", str(s.count), str(s.bounds),
             "-" if s.first_ts is None else ts_name(s.first_ts), "-" if s.last_ts is None else ts_name(s.last_ts),
             f"{s.wall_span_s:.3f}s", _rate(s.rate_hz), str(s.dropped)] for s in ss]
    tail = "" if summary.complete else f"{summary.problem or _INCOMPLETE}\n"
    return head + (table(INSPECT_HEADER, rows) if rows else "no streams\n") + tail


@app.command()
def inspect(
    file: Annotated[Path, typer.Argument(metavar="FILE.mcap", help=FILE_HELP, show_default=False)],
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object for scripts.")] = False,
) -> None:
    """What a recording holds: its streams, their value kinds, packet and bound counts, first and
    last timestamps, wall-time span and rate, drops, and whether the file is complete (a file cut
    short is read up to its cut, with a warning). Exit 0 read, 2 when the file cannot be read."""
    from flowplex.recording import RecordingError

    with _open(file) as rec:
        try:
            summary = rec.summary()
            warn_if_truncated(rec.truncation)
        except RecordingError as exc:
            raise fail(exc, 2) from None
        except KeyboardInterrupt:
            typer.echo("flowplex: interrupted", err=True)
            raise typer.Exit(130) from None
        size = os.path.getsize(file)
    if as_json:
        typer.echo(json.dumps(_inspect_json(summary, size)))
    else:
        typer.echo(shown(inspect_text(summary, size)), nl=False)


# --- replay -----------------------------------------------------------------------------------------


def record_event(r: Record) -> dict[str, Any]:
    """A record as ``echo``'s packet event (``ts``, ``ts_name``, ``type``, ``value``, ``metadata``):
    bytes as hex, a frame as dtype, shape, size and CRC-32 of its bytes."""
    import numpy as np

    from flowplex._timestamps import ts_name
    from flowplex.packets import type_name
    from flowplex.recording._codec import KINDS

    if r.is_bound:
        return {"ts": r.ts, "ts_name": ts_name(r.ts), "type": "bound"}
    value = r.value
    if isinstance(value, np.ndarray):
        flat: Any = value.reshape(-1).view(np.uint8) if value.size else b""
        value = {"shape": list(value.shape), "dtype": str(value.dtype), "nbytes": value.nbytes,
                 "crc32": f"{zlib.crc32(flat):08x}"}
    elif isinstance(value, bytes):
        value = value.hex()
    event: dict[str, Any] = {"ts": r.ts, "ts_name": ts_name(r.ts), "type": type_name(KINDS[r.kind]), "value": value}
    if r.metadata:
        event["metadata"] = r.metadata
    return event


GraphOption = Annotated[Path | None, typer.Option(
    "--graph", metavar="GRAPH.yaml", help="Run this graph with the recording in place of its sources (or of the "
                                          "--replace nodes) instead of printing it.")]
ReplaceOption = Annotated[list[str] | None, typer.Option(
    "--replace", metavar="NODE[=CHANNEL]", help="With --graph: replay into node NODE's output ports the streams of "
                                                "their names (or CHANNEL, one per port, separated by commas). "
                                                "Default: every source node.")]
RateOption = Annotated[str | None, typer.Option(
    "--rate", metavar="1.0|2|max", help="Speed: 1 as recorded, 2 twice as fast, max as fast as it goes "
                                        "(default: 1 with --graph, max when printing).")]


@app.command()
def replay(
    file: Annotated[Path, typer.Argument(metavar="FILE.mcap", help=FILE_HELP, show_default=False)],
    streams: Annotated[str | None, typer.Option(
        "--streams", metavar="A,B", help=STREAMS_HELP + " With --graph: the streams --record records.")] = None,
    count: Annotated[int | None, typer.Option("-n", "--count", metavar="N", help="Stop after N lines.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per line.")] = False,
    bounds: Annotated[bool, typer.Option("--bounds", help="Print the bounds too (STREAM ts=T bound).")] = False,
    graph: GraphOption = None,
    replace: ReplaceOption = None,
    rate: RateOption = None,
    loop: Annotated[bool, typer.Option("--loop", help="Play again after the end, timestamps shifted on.")] = False,
    start: Annotated[float | None, typer.Option(
        "--start", metavar="S", help="Begin S seconds after the recording's first message.")] = None,
    end: Annotated[float | None, typer.Option(
        "--end", metavar="S", help="Stop S seconds after the recording's first message.")] = None,
    record: Annotated[Path | None, typer.Option(
        "--record", metavar="OUT.mcap", help="With --graph: record the replayed run, as run --record does.")] = None,
    compression: CompressionOption = "zstd",
    overrides: Annotated[list[str] | None, typer.Option(
        "--set", "-s", metavar="NODE.OPTION=VALUE", help="With --graph: " + SET_HELP)] = None,
    imports: Annotated[list[str] | None, typer.Option(
        "--import", metavar="MODULE|FILE.py", help="With --graph: " + IMPORT_HELP)] = None,
    output: Annotated[Path | None, typer.Option(
        "--output", "-o", help="With --graph: write the graph's outputs as JSON lines to this file.")] = None,
    timeout: Annotated[float | None, typer.Option(help="With --graph: give up after this many seconds.")] = None,
    name: NameOption = None,
    control: ControlOption = True,
) -> None:
    """Print a recording's packets in file order, one line each as flowplex echo prints them,
    led by the stream: STREAM, ts=TS, TYPE, VALUE (a frame as dtype[shape], bytes, CRC-32), metadata.
    With --graph, run that graph with the recorded streams in place of its sources instead.
    A file cut short is replayed up to its cut, with a warning. Exit codes: 0 done, 1 a runtime
    error with --graph (as flowplex run), 2 bad input (a file that cannot be read), 130 Ctrl-C."""
    from flowplex.errors import UsageError
    from flowplex.recording._replay import parse_rate

    try:
        speed = parse_rate(rate if rate is not None else ("1" if graph is not None else "max"), "--rate")
    except UsageError as exc:
        raise usage(str(exc)) from None
    window = {"start": start, "end": end}
    for key, value in window.items():
        if value is not None and not value >= 0:
            msg = f"--{key} must be a number of seconds >= 0, not {value}"
            raise usage(msg)
    if start is not None and end is not None and end <= start:
        msg = f"--end ({end:g}) must come after --start ({start:g})"
        raise usage(msg)
    if graph is None:
        given = [flag for flag, v in (("--replace", replace), ("--record", record), ("--set", overrides),
                                      ("--import", imports), ("--output", output), ("--timeout", timeout),
                                      ("--name", name)) if v]
        if given:
            msg = f"{given[0]} goes with --graph GRAPH.yaml (without it, replay prints the recording)"
            raise usage(msg)
        _print_replay(file, streams, count, as_json, bounds, speed, loop, start or 0.0, end)
        return
    given = [flag for flag, v in (("-n", count), ("--json", as_json), ("--bounds", bounds)) if v]
    if given:
        msg = f"{given[0]} is for printing a recording; with --graph the graph's outputs are printed"
        raise usage(msg)
    from ._replay_graph import run_replay

    run_replay(file, graph, replace or [], speed, loop, start, end, record, streams, compression,
               overrides or [], imports or [], output, timeout, name, control)


def _print_replay(file: Path, streams: str | None, count: int | None, as_json: bool, bounds: bool,
                  rate: float, loop: bool, start: float, end: float | None) -> None:
    """``replay FILE``: print the packets (and bounds) as echo does, paced by ``rate``."""
    import dataclasses
    import time

    from flowplex.errors import UsageError
    from flowplex.recording import RecordingError
    from flowplex.recording._replay import Player

    if count is not None and count < 1:
        msg = f"-n must be at least 1, not {count}"
        raise usage(msg)
    out = sys.stdout
    packets = n_bounds = 0
    ended = ""
    with _open(file) as rec:
        try:
            warn_if_truncated(rec.truncation)
            names = _stream_names(streams, rec.streams, str(file)) or rec.streams
            try:
                player = Player(lambda: rec.messages(bounds=bounds, streams=names), {n: i for i, n in enumerate(names)},
                                rate=rate, loop=loop, start_s=start, end_s=end)
            except UsageError as exc:
                raise usage(str(exc)) from None
            t0 = time.monotonic()
            while (due := player.pop()) is not None:
                if count is not None and packets + n_bounds >= count:
                    break
                wait = t0 + due.at_s - time.monotonic()
                if wait > 0:
                    out.flush()
                    time.sleep(wait)
                r = due.record if due.ts == due.record.ts else dataclasses.replace(due.record, ts=due.ts)
                event = record_event(r)
                if r.is_bound:
                    n_bounds += 1
                    line = f"{r.stream}\tts={event['ts_name']}\tbound"
                else:
                    packets += 1
                    line = f"{r.stream}\t{echo_line(event)}"
                out.write((json.dumps({"stream": r.stream, **event, "wall_ns": r.wall_ns}) if as_json
                           else shown(line)) + "\n")
            out.flush()
        except RecordingError as exc:
            with contextlib.suppress(OSError):
                out.flush()
            raise fail(exc, 2) from None
        except KeyboardInterrupt:
            ended = "; interrupted"
        told = f"{packets} packet(s)" + (f", {n_bounds} bound(s)" if bounds else "")
    typer.echo(shown(f"flowplex: {told} from {file}{ended}"), err=True)
    if ended:
        raise typer.Exit(130)


# --- diff -------------------------------------------------------------------------------------------


@app.command()
def diff(
    a: Annotated[Path, typer.Argument(metavar="A.mcap", help="A recording.", show_default=False)],
    b: Annotated[Path, typer.Argument(metavar="B.mcap", help="The recording to compare it with.",
                                      show_default=False)],
    streams: Annotated[str | None, typer.Option("--streams", metavar="A,B", help=STREAMS_HELP)] = None,
    atol: Annotated[float, typer.Option(
        "--atol", metavar="X", help="Absolute tolerance for floats and arrays (0: exact; NaN equals NaN).")
    ] = 0.0,
    bounds: Annotated[bool, typer.Option("--bounds/--no-bounds", help="Compare the bounds too.")] = True,
    metadata: Annotated[bool, typer.Option("--metadata/--no-metadata", help="Compare packet metadata too.")] = True,
) -> None:
    """Whether two recordings hold the same streams and, stream by stream, the same packets (same
    timestamps, kinds, values; bounds and metadata too unless told not to), however the streams
    interleave in the files. Exit 0 equal, 1 with the first difference, 2 when a file cannot be read."""
    from flowplex.errors import UsageError
    from flowplex.recording import RecordingError, compare

    if not atol >= 0:  # NaN too
        msg = f"--atol must be a number >= 0, not {atol}"
        raise usage(msg)
    with _open(a) as ra, _open(b) as rb:
        try:
            names = None
            if streams is not None:
                have = list(dict.fromkeys([*ra.streams, *rb.streams]))
                names = _stream_names(streams, have, f"{a} or {b}", they="they have")
            result = compare(ra, rb, streams=names, atol=atol, bounds=bounds, metadata=metadata)
            for rec in (ra, rb):
                warn_if_truncated(rec.truncation)
        except UsageError as exc:
            raise usage(str(exc)) from None
        except RecordingError as exc:
            raise fail(exc, 2) from None
        except KeyboardInterrupt:  # not exit 1, which says they differ
            typer.echo("flowplex: interrupted", err=True)
            raise typer.Exit(130) from None
    if result.divergence is None:
        typer.echo(shown(f"flowplex: {a} and {b} are equal: {len(result.streams)} stream(s), "
                         f"{result.packets} packet(s)"))
        return
    typer.echo(shown(f"flowplex: {a} and {b} differ: {result.divergence}"))
    raise typer.Exit(1)
