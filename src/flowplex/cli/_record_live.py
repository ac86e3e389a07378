"""``flowplex record NAME -o FILE.mcap``: record a live graph's streams (``flowplex.control._record``).

The command asks the graph's process to record (the ``record`` op, with the file's absolute
path: that process writes the file), waits for ``--duration``, Ctrl-C (or SIGTERM) or the
graph's end, asks it to stop and prints what was recorded. If this command is killed, its
connection closes and the graph finishes the file all the same.
"""

from __future__ import annotations

import json
import os
import select
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Final

import typer

from flowplex.terminal._sanitize import visible_controls as shown

from ._app import app, stream_list, usage
from ._live import _connect, _fail, _sigterm_ends_the_stream

if TYPE_CHECKING:
    import socket

ANSWER_S: Final = 30.0
"""How long the graph may take to start recording (create the file, put the taps on)."""
FINISH_S: Final = 120.0
"""How long the graph may take to finish the file once asked to stop (a lossless queue to write)."""
HEADER: Final = ["STREAM", "PACKETS", "DROPPED"]
REASONS: Final = {"duration": "--duration passed", "interrupted": "interrupted", "closed": "the streams ended",
                  "graph closed": "the graph closed", "stopped": "stopped"}


@app.command("record")
def record(
    name: Annotated[str, typer.Argument(help="The live graph (flowplex ps lists them).")],
    output: Annotated[Path, typer.Option(
        "--output", "-o", metavar="FILE.mcap", help="The recording to write (the graph's process writes it).")],
    streams: Annotated[str | None, typer.Option(
        "--streams", metavar="A,B,...", help="The streams to record (default: every edge and graph port).")] = None,
    duration: Annotated[float | None, typer.Option(
        "--duration", metavar="S", help="Stop after S seconds (default: at Ctrl-C or the graph's end).")] = None,
    compression: Annotated[str, typer.Option(
        "--compression", metavar="zstd|lz4|none", help="How the file's chunks are compressed.")] = "zstd",
    lossy: Annotated[bool, typer.Option(
        "--lossy", help="Drop (and count) what the recorder cannot keep up with, instead of holding the graph "
                        "back.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print what was recorded as one JSON object.")] = False,
) -> None:
    """Record a live graph's streams into an MCAP file while it runs, as run --record does from the
    start: lossless by default (the graph waits for the recorder), bounded memory. Each stream's
    first message is whatever flowed after the recording began (it may be mid-stream).

    Exit codes: 0 recorded, 1 no live graph of that name (as for every live command), or the graph
    failed or went away while recording, 2 bad input (an unknown stream, a bad path or option).
    """
    from flowplex.control._record import COMPRESSIONS
    from flowplex.errors import ControlError

    if duration is not None and not duration > 0:
        msg = f"--duration must be a positive number of seconds, not {duration:g}"
        raise usage(msg)
    if compression not in COMPRESSIONS:
        msg = f"--compression: {compression!r} is not one of {', '.join(COMPRESSIONS)}"
        raise usage(msg)
    names = stream_list(streams)
    path = _target(output)
    client = _connect(name, timeout=None)
    _sigterm_ends_the_stream()
    try:
        result = _record(client, name, path, names, compression, lossy, duration, as_json)
    except ControlError as exc:
        msg = f"{name}: {exc}"
        raise _fail(msg) from None
    finally:
        client.close()
    _print(name, result, as_json)
    if result.get("error"):
        raise typer.Exit(1)


def _target(output: Path) -> Path:
    """The file as an absolute path (the graph's process has a working directory of its own);
    a directory, or a file in a folder that does not exist, is a usage error."""
    path = Path(os.path.abspath(output.expanduser()))
    if path.is_dir():
        msg = f"-o {output}: is a directory (give a file, e.g. {output / 'recording.mcap'})"
        raise usage(msg)
    if not path.parent.is_dir():
        msg = f"-o {output}: no such directory {path.parent}"
        raise usage(msg)
    if not os.access(path.parent, os.W_OK | os.X_OK) or (path.exists() and not os.access(path, os.W_OK)):
        msg = f"-o {output}: not writable"
        raise usage(msg)
    return path


class _Frames:
    """The connection's frames, read with deadlines (the stream of a recording is one ``end``)."""

    def __init__(self, sock: socket.socket) -> None:
        from flowplex.control._wire import MAX_REPLY, FrameReader

        self.sock = sock
        self.reader = FrameReader(MAX_REPLY)
        self.frames: list[dict[str, Any] | bytes] = []

    def next(self, timeout: float | None) -> dict[str, Any] | None:
        """The next JSON frame, or None when ``timeout`` passed first; ``EOFError`` once the graph
        closed the connection."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            while self.frames:
                frame = self.frames.pop(0)
                if isinstance(frame, dict):
                    return frame
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return None
            ready, _, _ = select.select([self.sock], [], [], left)
            if not ready:
                continue
            try:
                data = self.sock.recv(1 << 16)
            except OSError:
                data = b""
            if not data:
                raise EOFError
            self.frames.extend(self.reader.feed(data))


def _record(client: Any, name: str, path: Path, streams: list[str] | None, compression: str, lossy: bool,
            duration: float | None, as_json: bool) -> dict[str, Any]:
    """Ask, wait, stop: the graph's ``end`` event (with ``name``), or an error line and exit."""
    frames = _Frames(client.sock)
    client.send("record", path=str(path), streams=streams, compression=compression, lossy=lossy)
    try:
        answer = frames.next(ANSWER_S)
    except EOFError:
        answer = {"ok": False, "error": "the graph closed the connection"}
    if answer is None:
        msg = f"{name}: the graph did not start recording within {ANSWER_S:g} s"
        raise _fail(msg)
    if answer.get("ok") is not True:
        msg = f"{name}: {answer.get('error', 'the graph refused to record')}"
        raise _fail(msg, 2 if answer.get("usage") else 1)
    recorded = answer.get("streams", [])
    if not as_json:
        typer.echo(shown(f"flowplex: recording {len(recorded)} stream(s) of {name} into {path}"
                         + (f" for {duration:g} s" if duration is not None else "") + " (Ctrl-C stops)"), err=True)
    try:
        end = _wait(frames, client, duration)
    except KeyboardInterrupt:
        typer.echo(shown(f"flowplex: interrupted again: {name} finishes {path} by itself"), err=True)
        raise typer.Exit(130) from None
    if end is None:
        msg = (f"{name}: the graph went away while recording; {path} is cut short "
               f"(readable up to its last complete chunk)")
        raise _fail(msg)
    return {"name": name, **{k: v for k, v in end.items() if k != "ev"}}


def _wait(frames: _Frames, client: Any, duration: float | None) -> dict[str, Any] | None:
    """The ``end`` event: the graph's own (its streams ended), or the answer to our stop after
    ``duration`` or Ctrl-C; None when the connection closed first."""
    deadline = None if duration is None else time.monotonic() + duration
    reason = "duration"
    try:
        while True:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                break
            frame = frames.next(left)
            if frame is not None and frame.get("ev") == "end":
                return frame
    except KeyboardInterrupt:
        reason = "interrupted"
    except EOFError:
        return None
    try:
        client.send("record", stop=True, reason=reason)
        while True:
            frame = frames.next(FINISH_S)
            if frame is None:
                return None
            if frame.get("ev") == "end":
                return frame
    except EOFError:
        return None
    # (a second Ctrl-C goes up: leaving closes the connection, and the graph finishes the file all the same)


def _print(name: str, result: dict[str, Any], as_json: bool) -> None:
    if as_json:
        typer.echo(json.dumps(result))
        return
    from flowplex.control._text import table

    streams: dict[str, dict[str, int]] = result.get("streams", {})
    rows = [[s, str(v["packets"]), str(v["dropped"])] for s, v in streams.items()]
    sys.stdout.write(shown(table(HEADER, rows)))
    sys.stdout.flush()
    why = REASONS.get(str(result.get("reason")), str(result.get("reason")))
    typer.echo(shown(f"flowplex: recorded {result['packets']} packet(s) of {len(streams)} stream(s) from {name} "
                     f"into {result['path']} in {result['duration_s']:.1f} s ({why}); {result['dropped']} dropped"),
               err=True)
    if result.get("error"):
        typer.echo(shown(f"flowplex: error: {result['error']}"), err=True)
