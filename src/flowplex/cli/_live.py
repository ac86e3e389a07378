"""The commands that reach into live graphs through their control sockets (``flowplex.control``):
``ps``, ``top``, ``echo``, ``hz``, ``stop``, ``kill``, ``logs``, ``condition`` and ``notify``
(``dot NAME`` is ``_dot``'s).

Each connects by name, asks, and renders the answer; ``--json`` prints the answer itself for
scripts. A name that is not live is one line and exit 1 (it names the live ones).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, Any

import typer

from flowplex.terminal._sanitize import visible_controls as shown

from ._app import app, usage

JSON_HELP = "Print JSON for scripts instead of a table."


def _sigterm_ends_the_stream() -> None:
    """SIGTERM (``timeout 5 flowplex echo ...``) ends a stream as Ctrl-C does: with its summary line."""

    def stop(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)


def _fail(text: object, code: int = 1) -> typer.Exit:
    typer.echo(shown(f"flowplex: error: {text}"), err=True)
    return typer.Exit(code)


def _connect(name: str, timeout: float | None = 5.0) -> Any:
    from flowplex.errors import ControlError

    try:
        from flowplex.control import connect

        return connect(name, timeout)
    except ControlError as exc:
        raise _fail(exc) from None


def ask_live(name: str, op: str, **args: Any) -> dict[str, Any]:
    """One request to live graph ``name``; its error is one line and exit 1."""
    from flowplex.errors import ControlError

    try:
        with _connect(name) as client:
            answer: dict[str, Any] = client.request(op, **args)
            return answer
    except ControlError as exc:
        msg = f"{name}: {exc}"
        raise _fail(msg) from None


@app.command()
def ps(as_json: Annotated[bool, typer.Option("--json", help=JSON_HELP)] = False) -> None:
    """List this user's live graphs: name, pid, state, uptime, nodes, packets/s in and out, errors."""
    from flowplex.control import live_graphs
    from flowplex.control._text import ps_text
    from flowplex.errors import ControlError

    try:
        infos = live_graphs()
    except ControlError as exc:
        raise _fail(exc) from None
    if as_json:
        typer.echo(json.dumps([{k: v for k, v in i.items() if k != "ok"} for i in infos]))
        return
    typer.echo(shown(ps_text(infos)), nl=False)


@app.command()
def top(
    name: Annotated[str, typer.Argument(help="The live graph (flowplex ps lists them).")],
    once: Annotated[bool, typer.Option("--once", help="Print one snapshot and exit.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print each snapshot as one JSON line.")] = False,
    interval: Annotated[float, typer.Option("--interval", metavar="S", help="Seconds between refreshes.")] = 1.0,
) -> None:
    """A live table of a graph's nodes: rate, queue against its bound, p50/p99 process() time,
    share of a core, executor and worker, state, drops (refreshed every second; q or Ctrl-C quits)."""
    from flowplex.control._text import top_text
    from flowplex.errors import ControlError

    if not 0.1 <= interval <= 3600:
        msg = f"--interval must be between 0.1 and 3600 seconds, not {interval}"
        raise usage(msg)
    client = _connect(name)
    try:
        if once or as_json:
            while True:
                answer = client.request("top")
                typer.echo(json.dumps({k: v for k, v in answer.items() if k != "ok"}) if as_json
                           else shown(top_text(name, answer)), nl=as_json)
                if once:
                    return
                time.sleep(interval)
        _top_live(client, name, interval)
    except ControlError as exc:
        if once:
            msg = f"{name}: {exc}"
            raise _fail(msg) from None
        typer.echo(f"flowplex: {name} ended", err=True)
    except KeyboardInterrupt:
        pass
    finally:
        client.close()


def _top_live(client: Any, name: str, interval: float) -> None:
    """The refreshing table until ``q`` (on a terminal), Ctrl-C, or the graph's end."""
    from rich.console import Console
    from rich.live import Live
    from rich.text import Text

    from flowplex.control._text import top_text

    console = Console()
    with _keys() as quit_pressed, Live(Text(top_text(name, client.request("top"))), console=console,
                                       auto_refresh=False, screen=console.is_terminal) as live:
        while not quit_pressed(interval):
            live.update(Text(top_text(name, client.request("top"))), refresh=True)


@contextlib.contextmanager
def _keys() -> Iterator[Callable[[float], bool]]:
    """``wait(seconds) -> True`` once ``q`` was typed; stdin in cbreak mode meanwhile when it is a terminal."""
    import select
    import termios
    import tty

    fd = sys.stdin.fileno() if sys.stdin is not None and sys.stdin.isatty() else -1
    if fd < 0:
        def sleep(seconds: float) -> bool:
            time.sleep(seconds)
            return False

        yield sleep
        return
    saved = termios.tcgetattr(fd)
    tty.setcbreak(fd)

    def wait(seconds: float) -> bool:
        ready, _, _ = select.select([fd], [], [], seconds)
        return bool(ready) and os.read(fd, 64).lower().startswith(b"q")

    try:
        yield wait
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)


def echo_line(event: dict[str, Any]) -> str:
    """One tapped packet as a line: timestamp, type, value (a frame as dtype, shape, CRC-32), metadata."""
    value = event.get("value")
    if isinstance(value, dict) and "shape" in value:
        shape = "x".join(map(str, value["shape"]))
        text = f"{value['dtype']}[{shape}] {value['nbytes']} B crc32={value['crc32']}"
    else:
        text = json.dumps(value) if not isinstance(value, str) else repr(value)
    meta = f"\t{json.dumps(event['metadata'])}" if event.get("metadata") else ""
    return f"ts={event['ts_name']}\t{event['type']}\t{text}{meta}"


@app.command()
def echo(
    name: Annotated[str, typer.Argument(help="The live graph.")],
    stream: Annotated[str, typer.Argument(help="An edge (a producer's output port) or a graph port.")],
    count: Annotated[int | None, typer.Option("-n", "--count", metavar="N", min=1,
                                              help="Exit after N packets.")] = None,
    raw: Annotated[Path | None, typer.Option("--raw", metavar="DIR",
                                             help="Write each packet's buffer bytes to DIR/SEQ-TS.bin.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per packet.")] = False,
) -> None:
    """Print the packets flowing on a stream of a live graph. It never slows the graph: what this
    client cannot keep up with is dropped, and the count is printed at the end."""
    from flowplex.errors import ControlError

    if raw is not None:
        try:
            raw.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            msg = f"--raw {raw}: {exc.strerror or exc}"
            raise usage(msg) from None
    client = _connect(name, timeout=None)
    _sigterm_ends_the_stream()
    seen, dropped, ended = 0, 0, "the graph went away"
    try:
        client.request("echo", stream=stream, n=count, raw=raw is not None)
        pending: dict[str, Any] | None = None
        chunks: list[bytes] = []
        for frame in client.events():
            if isinstance(frame, bytes):
                chunks.append(frame)
                if pending is not None and raw is not None and sum(map(len, chunks)) >= pending["raw"]:
                    (raw / f"{seen:06d}-{pending['ts']}.bin").write_bytes(b"".join(chunks))
                    chunks, pending = [], None
                continue
            if frame.get("ev") == "end":
                dropped = int(frame.get("dropped", 0))
                ended = "the stream closed" if frame.get("reason") == "closed" else ""
                break
            if frame.get("ev") != "packet":
                continue
            seen += 1
            if frame.get("raw"):
                pending, chunks = frame, []
            line = json.dumps({k: v for k, v in frame.items() if k != "ev"}) if as_json else echo_line(frame)
            sys.stdout.write(shown(line) + "\n")
            sys.stdout.flush()
    except ControlError as exc:
        msg = f"{name}: {exc}"
        raise _fail(msg) from None
    except KeyboardInterrupt:
        ended = ""
    finally:
        client.close()
    tail = f" ({ended})" if ended else ""
    typer.echo(f"flowplex: {seen} packet(s) from {stream}; {dropped} dropped by this client{tail}", err=True)


@app.command()
def hz(
    name: Annotated[str, typer.Argument(help="The live graph.")],
    stream: Annotated[str, typer.Argument(help="An edge (a producer's output port) or a graph port.")],
    reports: Annotated[int | None, typer.Option("-n", "--count", metavar="N", min=1,
                                                help="Exit after N reports.")] = None,
    period: Annotated[float, typer.Option("--period", metavar="S", help="Seconds between reports.")] = 1.0,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per report.")] = False,
) -> None:
    """A stream's rate and inter-arrival jitter, measured inside the graph on every packet (nothing
    is copied or sent per packet, so large and bursty streams read true), over the latest 10,000."""
    from flowplex.errors import ControlError

    if not 0.05 <= period <= 60:
        msg = f"--period must be between 0.05 and 60 seconds, not {period}"
        raise usage(msg)
    client = _connect(name, timeout=None)
    _sigterm_ends_the_stream()
    n = 0
    try:
        client.request("hz", stream=stream, period_s=period)
        for frame in client.events():
            if not isinstance(frame, dict) or frame.get("ev") != "hz":
                if isinstance(frame, dict) and frame.get("ev") == "end":
                    typer.echo(f"flowplex: {stream} closed after {frame.get('count', 0)} packet(s)", err=True)
                    break
                continue
            n += 1
            report = {k: v for k, v in frame.items() if k != "ev"}
            typer.echo(json.dumps(report) if as_json else hz_line(report))
            if reports is not None and n >= reports:
                break
    except ControlError as exc:
        msg = f"{name}: {exc}"
        raise _fail(msg) from None
    except KeyboardInterrupt:
        pass
    finally:
        client.close()


def hz_line(r: dict[str, Any]) -> str:
    """One ``hz`` report as a line."""
    if r["rate_hz"] is None:
        return f"no rate yet: {r['count']} packet(s) so far"
    ms = {k: 1e3 * r[k] for k in ("mean_s", "min_s", "max_s", "std_s")}
    return (f"rate {r['rate_hz']:.3f} Hz  period mean {ms['mean_s']:.3f} ms  min {ms['min_s']:.3f} ms  "
            f"max {ms['max_s']:.3f} ms  std dev {ms['std_s']:.3f} ms  window {r['window']}  total {r['count']}")


@app.command()
def stop(
    name: Annotated[str, typer.Argument(help="The live graph.")],
    now: Annotated[bool, typer.Option("--now", help="Cancel instead of draining.")] = False,
    wait: Annotated[float, typer.Option(
        "--wait", metavar="S", help="Seconds to wait for the graph's process to end (0: do not wait).")] = 30.0,
    as_json: Annotated[bool, typer.Option("--json", help="Print what happened as JSON.")] = False,
) -> None:
    """Close a live graph's inputs, end its sources and let it drain (its process then exits 0);
    ``--now`` cancels it instead."""
    info = ask_live(name, "info")
    ask_live(name, "stop", now=now)
    ended = _wait_gone(name, info, wait) if wait > 0 else None
    if as_json:
        typer.echo(json.dumps({"name": name, "pid": info["pid"], "stopping": "cancel" if now else "drain",
                               "ended": ended}))
    if ended is False:
        msg = f"{name} (pid {info['pid']}) still runs after {wait:g} s (flowplex kill {name} ends it)"
        raise _fail(msg)
    if not as_json:
        typer.echo(f"flowplex: {name} {'cancelled' if now else 'stopped'}", err=True)


@app.command()
def kill(
    name: Annotated[str, typer.Argument(help="The live graph.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print what happened as JSON.")] = False,
) -> None:
    """Kill a live graph's process (SIGKILL): nothing drains; its worker processes go with it."""
    from flowplex.control._paths import socket_path

    info = ask_live(name, "info")
    pid = int(info["pid"])
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    except PermissionError:
        msg = f"{name}: not allowed to kill pid {pid}"
        raise _fail(msg) from None
    ended = _wait_gone(name, info, 5.0)
    with contextlib.suppress(OSError):
        socket_path(name).unlink()
    if as_json:
        typer.echo(json.dumps({"name": name, "pid": pid, "killed": True, "ended": ended}))
    else:
        typer.echo(f"flowplex: killed {name} (pid {pid})", err=True)


_TRUTH = {"on": True, "true": True, "1": True, "yes": True, "off": False, "false": False, "0": False, "no": False}


@app.command()
def condition(
    name: Annotated[str, typer.Argument(help="The live graph.")],
    condition_name: Annotated[str | None, typer.Argument(
        metavar="[CONDITION]", help="A boolean condition of the graph (none: list them).")] = None,
    value: Annotated[str | None, typer.Argument(metavar="[on|off]", help="Enable (on) or disable (off) it.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help=JSON_HELP)] = False,
) -> None:
    """Enable or disable a live graph's ``boolean`` condition (``Graph.set_condition``); with no
    condition, list the graph's boolean conditions and events."""
    if condition_name is None:
        answer = ask_live(name, "condition")
        if as_json:
            typer.echo(json.dumps({"booleans": answer["booleans"], "events": answer["events"]}))
            return
        for flag, on in answer["booleans"].items():
            typer.echo(shown(f"{flag}\t{'on' if on else 'off'}"))
        for event in answer["events"]:
            typer.echo(shown(f"{event}\tevent"))
        if not answer["booleans"] and not answer["events"]:
            typer.echo(f"flowplex: {name} has no boolean or event condition", err=True)
        return
    if value is None or value.lower() not in _TRUTH:
        msg = f"condition {condition_name}: give on or off, not {value!r}" if value else (
            f"condition {condition_name}: give on or off (flowplex condition {name} {condition_name} off)")
        raise usage(msg)
    on = _TRUTH[value.lower()]
    ask_live(name, "condition", condition=condition_name, value=on)
    if as_json:
        typer.echo(json.dumps({"name": condition_name, "value": on}))
    else:
        typer.echo(shown(f"flowplex: {name}: condition {condition_name} {'on' if on else 'off'}"), err=True)


@app.command()
def notify(
    name: Annotated[str, typer.Argument(help="The live graph.")],
    event: Annotated[str, typer.Argument(help="An event condition of the graph.")],
    times: Annotated[int, typer.Option("--times", "-n", min=1, help="How many notifications to send.")] = 1,
) -> None:
    """Signal a live graph's ``event`` condition (``Graph.notify``): each node waiting on it may
    run once more per notification."""
    for _ in range(times):
        ask_live(name, "notify", event=event)
    typer.echo(shown(f"flowplex: {name}: notified {event}" + (f" {times} times" if times > 1 else "")), err=True)


def _wait_gone(name: str, info: dict[str, Any], seconds: float) -> bool:
    """Wait until the graph's process has exited; True when it did."""
    pid = int(info["pid"])
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.02)
    return False


def _alive(pid: int) -> bool:
    """Whether ``pid`` still runs: a zombie (exited, its parent has not reaped it yet) does not."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            return f.read().rpartition(")")[2].split()[0] != "Z"
    except (OSError, IndexError):
        return True


@app.command()
def logs(
    name: Annotated[str, typer.Argument(help="A graph started with flowplex run -d (live or ended).")],
    follow: Annotated[bool, typer.Option("--follow", "-f", help="Keep printing until the graph ends.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the log so far as one JSON object.")] = False,
) -> None:
    """Print the output and log of a graph started in the background (``flowplex run -d``)."""
    from flowplex.control._paths import check_name, log_path, socket_path
    from flowplex.control._server import is_live
    from flowplex.errors import ControlError

    try:
        path = log_path(check_name(name))
    except ControlError as exc:
        raise _fail(exc) from None
    if not path.exists():
        msg = f"no log for {name!r} (flowplex run -d writes one; flowplex ps lists the live graphs)"
        raise _fail(msg)
    if as_json:
        if follow:
            msg = "--json prints the log so far: it does not follow (drop -f)"
            raise usage(msg)
        typer.echo(json.dumps({"name": name, "path": str(path), "live": is_live(socket_path(name)),
                               "log": path.read_text(encoding="utf-8", errors="replace")}))
        return
    out = sys.stdout.buffer
    with path.open("rb") as f:
        while True:
            chunk = f.read(1 << 16)
            if chunk:
                out.write(chunk)
                out.flush()
                continue
            if not follow or not is_live(socket_path(name)):
                tail = f.read()
                if tail:
                    out.write(tail)
                    out.flush()
                return
            try:
                time.sleep(0.1)
            except KeyboardInterrupt:
                return
