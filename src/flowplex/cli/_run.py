"""``flowplex run``: run a graph fed by its source kernels and print what reaches its outputs.

The command is a few named steps: check the options, import and load (``_loading``), open
``--output``, then drive the graph under the deadline (``_drive``) and write the artifacts.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Annotated, Any, final

import typer

from flowplex.packets._values import packet_value
from flowplex.terminal._sanitize import visible_controls as shown

from ._app import IMPORT_HELP, SET_HELP, app, check_view, fail_at, setup_logging, state, stream_list, usage
from ._loading import import_kernels, load_graph
from ._watch import Deadline, check_timeout, in_flight, watch_ctrl_c

NameOption = Annotated[str | None, typer.Option(
    "--name", metavar="NAME",
    help="The name flowplex ps/top/echo/stop reach the running graph by (default: the YAML's `control:` "
         "name, else the file's stem, made unique with -2, -3...).")]
ControlOption = Annotated[bool, typer.Option("--control/--no-control",
                                             help="Serve the graph live to flowplex ps/top/echo/stop.")]
DetachOption = Annotated[bool, typer.Option(
    "--detach", "-d", help="Run in the background, detached from the terminal; print the graph's name "
                           "(flowplex logs NAME shows its output and log).")]
RecordOption = Annotated[Path | None, typer.Option(
    "--record", metavar="FILE.mcap", help="Record the graph's streams (every edge and graph port, or --streams) "
                                          "to an MCAP file as they flow, timestamps and bounds included.")]
StreamsOption = Annotated[str | None, typer.Option(
    "--streams", metavar="A,B,...", help="With --record: the streams to record (default: all).")]
CompressionOption = Annotated[str, typer.Option(
    "--compression", metavar="zstd|lz4|none", help="With --record: how chunks are compressed.")]
LossyOption = Annotated[bool, typer.Option(
    "--lossy", help="With --record: drop (and count) what the recorder cannot keep up with, instead of "
                    "holding the graph back.")]


@app.command()
def run(
    graph: Annotated[Path, typer.Argument(help="The graph's YAML file.", exists=True, dir_okay=False)],
    overrides: Annotated[list[str] | None, typer.Option("--set", "-s", metavar="NODE.OPTION=VALUE",
                                                        help=SET_HELP)] = None,
    imports: Annotated[list[str] | None, typer.Option("--import", metavar="MODULE|FILE.py",
                                                      help=IMPORT_HELP)] = None,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write outputs as JSON lines to this file.")
    ] = None,
    show_stats: Annotated[bool, typer.Option("--stats", help="Print per-node stats on stderr at the end.")] = False,
    dot: Annotated[Path | None, typer.Option("--dot", metavar="FILE",
                                             help="Write a DOT snapshot at the end (FILE.svg: render it).")] = None,
    dot_view: Annotated[str, typer.Option("--dot-view", help="topology, compact or diagnostics.")] = "diagnostics",
    trace: Annotated[Path | None, typer.Option("--trace", metavar="FILE",
                                               help="Write a Chrome/Perfetto trace of every kernel call.")] = None,
    metrics_port: Annotated[int | None, typer.Option("--metrics-port", metavar="N",
                                                     help="Serve Prometheus metrics on this port (0: any).")] = None,
    metrics_host: Annotated[str, typer.Option("--metrics-host", help="Address the metrics server binds.")] = (
        "127.0.0.1"),
    live: Annotated[bool | None, typer.Option("--live/--no-live",
                                              help="Live per-node table (default: when stderr is a terminal).")] = None,
    timeout: Annotated[float | None, typer.Option(
        help="Give up after this many seconds, whatever is going on: imports, building, opening, "
             "running or closing (exit 1, one line saying what).")] = None,
    default_executor: Annotated[str | None, typer.Option(
        "--default-executor", metavar="NAME",
        help="Run every node that names no executor on executor NAME (the YAML's `default_executor`).")] = None,
    ray_address: Annotated[str | None, typer.Option(
        "--ray-address", metavar="ADDRESS",
        help="Connect every RayExecutor to this Ray cluster: auto, ray://host:10001 or IP:port "
             "(overrides the YAML's `address:`).")] = None,
    name: NameOption = None,
    control: ControlOption = True,
    detach: DetachOption = False,
    record: RecordOption = None,
    streams: StreamsOption = None,
    compression: CompressionOption = "zstd",
    lossy: LossyOption = False,
) -> None:
    """Run a graph whose data comes from source kernels and print what reaches its outputs.

    Exit codes: 0 done, 1 runtime error (``--timeout`` too), 2 configuration or usage error
    (a failing import too), 130 Ctrl-C.
    """
    check_view("--dot-view", dot_view)
    _check_control(graph, name, control, detach)
    setup_logging()
    watch_ctrl_c()
    deadline = Deadline(check_timeout(timeout), graph)
    if ray_address is not None:
        _use_ray_address(ray_address)
    import_kernels(imports or [], deadline)
    deadline.step = "loading the graph (running its imports, creating its kernels)"
    g = load_graph(graph, overrides or [], default_executor)
    execute(g, graph, deadline, RunOutputs(output, show_stats, dot, dot_view, trace, metrics_port, metrics_host, live,
                                           name, control, record, streams, compression, lossy))


@dataclass(frozen=True, slots=True)
class RunOutputs:
    """What a run writes besides its outputs, and how it is served: the options ``run`` and
    ``replay --graph`` share."""

    output: Path | None = None
    show_stats: bool = False
    dot: Path | None = None
    dot_view: str = "diagnostics"
    trace: Path | None = None
    metrics_port: int | None = None
    metrics_host: str = "127.0.0.1"
    live: bool | None = None
    name: str | None = None
    control: bool = True
    record: Path | None = None
    streams: str | None = None
    compression: str = "zstd"
    lossy: bool = False


def execute(g: Any, graph: Path, deadline: Deadline, o: RunOutputs) -> None:
    """Run a built graph to its end as ``flowplex run`` does: print or write what reaches its
    outputs, record it, serve it, and write the artifacts; exits with the run's code."""
    deadline.graph_obj = g
    deadline.step = "preparing the run"
    printer = _Printer(_open_output(o.output))
    sink = printer.sink
    _flush_at_deadline(deadline, printer)
    if o.trace is not None:
        g.enable_tracing()
    with contextlib.ExitStack() as stack:
        stack.callback(g.close)
        if sink is not None:
            stack.callback(sink.close)
        for port in g.plan.graph_outputs:
            g.observe(port, printer.observer(port))
        if o.metrics_port is not None:
            server = _serve_metrics(g, o.metrics_port, o.metrics_host)
            stack.callback(server.close)
            typer.echo(f"flowplex: metrics on {server.url}", err=True)
        _record(g, graph, stack, o.record, o.streams, o.compression, o.lossy)
        code = _run_live(g, graph, deadline, printer, stack, o.live, _control_arg(g, o.name, o.control))
        code = _write_artifacts(g, graph, o.dot, o.dot_view, o.trace, o.show_stats) or code
    if code:
        raise typer.Exit(code)
    typer.echo(f"flowplex: {printer.count} packet(s) from {len(g.plan.graph_outputs)} output(s)", err=True)


def _record(g: Any, graph: Path, stack: contextlib.ExitStack, path: Path | None, streams: str | None,
            compression: str, lossy: bool) -> None:
    """``--record``: capture the streams from the start; the file is finished when the run closes."""
    if path is None:
        if streams is not None or lossy or compression != "zstd":
            msg = "--streams, --compression and --lossy go with --record FILE.mcap"
            raise usage(msg)
        return
    from flowplex.errors import FlowplexError
    from flowplex.recording import COMPRESSIONS, record

    if compression not in COMPRESSIONS:
        msg = f"--compression: {compression!r} is not one of {', '.join(COMPRESSIONS)}"
        raise usage(msg)
    names = stream_list(streams)
    try:
        capture = record(g, path, streams=names, compression=compression, lossy=lossy)
    except FlowplexError as exc:
        raise fail_at(graph, exc, 2) from None
    stack.callback(_finish_recording, capture)


def _finish_recording(capture: Any) -> None:
    """Close the recording after the run; a lossy one says what it dropped."""
    capture.close()
    dropped = {k: v for k, v in capture.dropped.items() if v}
    if dropped:
        shown_drops = ", ".join(f"{k} {v}" for k, v in sorted(dropped.items()))
        typer.echo(f"flowplex: {capture.path}: dropped {shown_drops} (counted in the file)", err=True)


def _flush_at_deadline(deadline: Deadline, printer: _Printer) -> None:
    """With ``--output``: what was printed reaches the file even when the deadline ends the process."""
    if printer.sink is not None:
        from flowplex._deadline import locked_flush

        deadline.flush = locked_flush(printer.line_lock, printer.sink)


def _run_live(g: Any, graph: Path, deadline: Deadline, printer: _Printer, stack: contextlib.ExitStack,
              live: bool | None, control: str | bool | None) -> int:
    """Drive the graph under the live table (when shown); the exit code, outputs flushed."""
    display = _live_display(g, live, printer.sink)
    if display is not None:
        stack.enter_context(display)
    code = _drive(g, graph, deadline, display, printer, control)
    deadline.step = "closing"
    if display is not None:
        display.stop()
    if printer.sink is not None:
        printer.sink.flush()
    return code


def _use_ray_address(address: str) -> None:
    """``--ray-address``: every RayExecutor of this process connects there (exit 2 when blank)."""
    from flowplex.cluster import ADDRESS_ENV

    if not address.strip():
        msg = "--ray-address: give an address (auto, ray://host:10001 or IP:port)"
        raise usage(msg)
    os.environ[ADDRESS_ENV] = address.strip()


def _open_output(output: Path | None) -> IO[str] | None:
    """The ``--output`` file, opened for writing (None without it; exit 2 when it cannot be)."""
    try:
        return output.open("w", encoding="utf-8") if output is not None else None
    except OSError as exc:
        msg = f"cannot write --output {output}: {exc.strerror or exc}"
        raise usage(msg) from None


@final
class _Printer:
    """What reaches the graph's outputs: a line per packet on stdout, or a JSON line in ``sink``.

    The observers run on the graph's threads; ``line_lock`` keeps each line whole and ``count`` exact.
    """

    def __init__(self, sink: IO[str] | None) -> None:
        self.sink = sink
        self.line_lock = threading.Lock()
        self.count = 0

    def observer(self, port: str) -> Callable[[Any], None]:
        """The callback that prints the packets of graph output ``port``."""
        from flowplex._timestamps import ts_name

        lock, sink = self.line_lock, self.sink

        def on_packet(packet: Any) -> None:
            record = {"port": port, "ts": packet.timestamp, "value": packet_value(packet)}
            with lock:
                self.count += 1
                if sink is not None:
                    sink.write(json.dumps(record) + "\n")
                else:
                    # The value is the graph's data, not ours: its escapes are shown, not obeyed.
                    sys.stdout.write(shown(f"{port}\tts={ts_name(packet.timestamp)}\t{record['value']}") + "\n")

        return on_packet


def _serve_metrics(g: Any, port: int, host: str) -> Any:
    """``--metrics-port``: the Prometheus server over ``g`` (exit 2 when it cannot bind)."""
    from flowplex.diagnostics import serve_metrics

    try:
        return serve_metrics(g, port, host)
    except OSError as exc:
        msg = f"cannot serve metrics on {host}:{port}: {exc.strerror or exc}"
        raise usage(msg) from None


def _live_display(g: Any, live: bool | None, sink: IO[str] | None) -> Any:
    """The live per-node table on stderr, when ``--live`` asks or stderr is a terminal; else None."""
    if not (live if live is not None else sys.stderr.isatty()):
        return None
    from rich.console import Console

    from flowplex.diagnostics._live import LiveDisplay

    return LiveDisplay(g, Console(stderr=True), redirect_stdout=sink is None and sys.stdout.isatty())


def _check_control(graph: Path, name: str | None, control: bool, detach: bool) -> None:
    """Check ``--name`` and ``--no-control``; with ``--detach``, run in the background and exit."""
    if name is not None:
        check_control_name(name, control)
    if detach:
        if not control:
            msg = "--detach needs the control socket: a detached graph is reached by its name (drop --no-control)"
            raise usage(msg)
        from ._detach import detach_run

        raise typer.Exit(detach_run(graph, name))


def check_control_name(name: str, control: bool) -> None:
    """``--name`` must be a valid control name, and means nothing with ``--no-control`` (exit 2)."""
    from flowplex.control._paths import check_name
    from flowplex.errors import ControlError

    if not control:
        msg = "--name names the control socket, which --no-control turns off: give one of them"
        raise usage(msg)
    try:
        check_name(name)
    except ControlError as exc:
        msg = f"--name: {exc}"
        raise usage(msg) from None


def _control_arg(g: Any, name: str | None, control: bool) -> str | bool | None:
    """What ``Graph.start(control=)`` gets: off, the ``--name``, the YAML's name, or a default name."""
    if not control:
        return False
    if name is not None:
        return name
    yaml_says = g.plan.spec.control
    if yaml_says is False:
        from ._detach import READY_FD_ENV

        if os.environ.get(READY_FD_ENV) is None:
            return None  # the YAML's own choice
        typer.echo("flowplex: warning: run -d serves the control socket despite `control: false`: "
                   "a detached graph is reached by its name", err=True)
        return True
    return None if isinstance(yaml_says, str) else True


def _drive(g: Any, graph: Path, deadline: Deadline, display: Any, printer: _Printer,
           control: str | bool | None = None) -> int:
    """Start the graph, close its inputs and wait for it to finish; the exit code (0 when done).

    Every failure is reported here as its one line: ``--timeout`` (the graph then closes in
    order), the user's Ctrl-C (the graph is cancelled; the line says what was in flight), a
    cancelled graph and a runtime error.
    """
    from flowplex.errors import ControlError, FlowplexError, GraphCancelled, Timeout

    code = 0
    try:
        deadline.step = "starting the graph (opening its kernels)"
        g.start(timeout=deadline.left(), control=control)
        _report_ready(g)
        deadline.step = "running the graph"
        g.close_all_inputs()
        g.wait_done(timeout=deadline.left())
    except Timeout as exc:
        deadline.claim()
        state["timed_out"] = True
        if display is not None:
            display.stop()
        code = 1
        fail_at(graph, Exception(deadline.expired(f"({exc})")), code)
    except KeyboardInterrupt:  # the user's: a kernel's own is a failure of its node
        snapshot = g.stats()
        if display is not None:
            display.stop()
        g.cancel()
        with contextlib.suppress(FlowplexError, KeyboardInterrupt):
            g.wait_done(timeout=5.0)
        during = "" if deadline.step == "running the graph" else f" while {deadline.step}"
        typer.echo(shown(f"flowplex: cancelled (Ctrl-C){during}; in flight: {in_flight(snapshot)}; "
                         f"{printer.count} packet(s) so far"), err=True)
        code = 130
    except GraphCancelled as exc:
        code = 130
        fail_at(graph, exc, code)
    except ControlError as exc:  # the name is taken (or the runtime directory unusable): a usage error
        code = 2
        fail_at(graph, exc, code)
    except FlowplexError as exc:
        if display is not None:
            display.stop()
        code = 1
        fail_at(graph, exc, code)
    return code


def _report_ready(g: Any) -> None:
    """Under ``run -d``: tell the waiting parent the graph's name (it then exits 0, the graph runs on)."""
    from ._detach import report_ready

    report_ready(g.control_name)


def _write_artifacts(g: Any, graph: Path, dot: Path | None, dot_view: str, trace: Path | None,
                     show_stats: bool) -> int:
    """Write --dot / --trace and print --stats; returns 0 or the exit code of a failure."""
    from flowplex.diagnostics import render_svg
    from flowplex.errors import FlowplexError

    code = 0
    if show_stats:
        typer.echo(shown(g.dump()), err=True, nl=False)
    try:
        if dot is not None:
            text = g.to_dot(dot_view)
            if dot.suffix.lower() == ".svg":
                dot.write_bytes(render_svg(text))
            else:
                dot.write_text(text, encoding="utf-8")
        if trace is not None:
            trace.write_text(g.to_chrome_trace(), encoding="utf-8")
    except (OSError, FlowplexError) as exc:
        fail_at(graph, exc, 1)
        code = 1
    return code
