"""The ``flowplex`` command line (typer): thin — parse, call the library, format results."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
import threading
import time
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, Final, final

import typer

from flowplex.errors import UsageError
from flowplex.packets._values import packet_value as packet_value  # moved; kept importable from here
from flowplex.terminal._sanitize import visible_controls as _shown

app = typer.Typer(
    name="flowplex",
    help="flowplex: run and inspect dataflow graphs written in YAML.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

_state: dict[str, bool] = {"debug": False, "timed_out": False}


@app.callback()
def _root(
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks for errors.")] = False,
) -> None:
    _state["debug"] = debug


def _fail(exc: BaseException, code: int) -> typer.Exit:
    """One readable line on stderr (the traceback only with --debug)."""
    if _state["debug"]:
        traceback.print_exception(exc)
    else:
        typer.echo(_shown(f"flowplex: error: {exc}"), err=True)
    return typer.Exit(code)


# -- run ------------------------------------------------------------------------------------------

_SET_HELP = "Override a node option: NODE.OPTION=VALUE (VALUE is YAML: 3, 2.5, true, [1, 2]); repeatable."
_IMPORT_HELP = (
    "Import your kernels first: a module name (found in the current directory or on PYTHONPATH) "
    "or a path to a .py file; repeatable."
)


class _StderrLog(logging.Handler):
    """flowplex's log records as ``flowplex: warning: ...`` lines on the current ``sys.stderr``.

    ``sys.stderr`` is looked up per record so lines go above the live display while it runs.
    The engine's ``kernel failed: ...`` ERROR record is dropped: the command reports that error
    itself, as its one line; so is ``graph.close.abandoned`` once ``--timeout`` was reported
    (that line named what was still running). Messages carry foreign text (a server's error, a node name), so
    their control characters are shown, never sent to the terminal.
    """

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if record.levelno >= logging.ERROR and message.startswith("kernel failed: "):
            return
        if _state["timed_out"] and message.startswith("graph.close.abandoned"):
            return
        try:
            sys.stderr.write(_shown(f"flowplex: {record.levelname.lower()}: {message}") + "\n")
        except Exception:  # logging must never break the run
            self.handleError(record)


def _setup_logging() -> None:
    """Show flowplex's warnings (and INFO with --debug) on stderr; idempotent."""
    root = logging.getLogger("flowplex")
    if not any(isinstance(h, _StderrLog) for h in root.handlers):
        root.addHandler(_StderrLog())
    root.setLevel(logging.INFO if _state["debug"] else logging.WARNING)


def _where(graph: Path, exc: BaseException) -> str:
    """``exc``'s message, prefixed with the graph file unless it already names it."""
    text = str(exc)
    return text if text.startswith(str(graph)) else f"{graph}: {text}"


def _fail_at(graph: Path, exc: BaseException, code: int) -> typer.Exit:
    if _state["debug"]:
        traceback.print_exception(exc)
        return typer.Exit(code)
    typer.echo(_shown(f"flowplex: error: {_where(graph, exc)}"), err=True)
    return typer.Exit(code)


def _usage(message: str) -> typer.Exit:
    typer.echo(_shown(f"flowplex: error: {message}"), err=True)
    return typer.Exit(2)


# -- deadlines and Ctrl-C -------------------------------------------------------------------------

DEADLINE_SLACK_S: Final = 0.25
"""How long after ``--timeout`` the deadline thread lets the command's own timeout take over."""
DEADLINE_CLOSE_S: Final = 3.0
"""How long a command that timed out by itself may take to close (a hung close(), a worker
to kill) before the deadline thread ends it."""
CHECK_TIMEOUT_S: Final = 60.0
"""``flowplex check``'s default ``--timeout``: it runs only imports, which should take seconds."""

_ctrl_c: dict[str, bool] = {"seen": False}


def _on_sigint(signum: int, frame: object) -> None:
    """The SIGINT handler while a command runs: Python's, noting that the user pressed Ctrl-C
    (a ``KeyboardInterrupt`` without it was raised by code: an imported module's)."""
    _ctrl_c["seen"] = True
    raise KeyboardInterrupt


def _watch_ctrl_c() -> None:
    import signal

    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGINT) is \
            signal.default_int_handler:
        signal.signal(signal.SIGINT, _on_sigint)


@final
class _Deadline:
    """``--timeout``: one deadline for a whole command, kept by a thread of its own.

    The command's blocking calls get the time left (``start``, ``wait_done``), so that a
    deadline met there ends the command in order: one line, the graph closed, outputs flushed.
    What no timeout can interrupt (an import or a kernel constructor that never returns, a
    ``close()`` that hangs, a C call) is ended by this thread: ``DEADLINE_SLACK_S`` after the
    deadline (``DEADLINE_CLOSE_S`` more when the command is closing after its own timeout) it
    prints one line naming what was still going on, flushes ``--output``, removes the process
    pools' shared memory, kills their workers, and exits with ``os._exit(1)``. A signal or an
    exception could be swallowed by the code that hangs, or never reach it (a C call); an exit
    from another thread cannot.
    """

    def __init__(self, seconds: float | None, graph: Path) -> None:
        self.seconds = seconds
        self.graph = graph
        self.step = "starting"
        """What the command does now, for the message (set by the main thread)."""
        self.graph_obj: Any = None
        self.flush: Any = None
        """Called (best effort) before a hard exit: flushes ``--output``."""
        self._main = threading.get_ident()
        self._lock = threading.Lock()
        self._claimed = False
        self._fired = False
        self.at = None if seconds is None else time.monotonic() + seconds
        if seconds is not None:
            self._start_watch()

    def _start_watch(self) -> None:
        # The watch only sleeps and formats one line: a small stack lets it start under a tight
        # address-space limit (RLIMIT_AS), where a default 8 MiB thread stack cannot be mapped.
        # Without it the blocking calls still get the time left; only a hung import goes unwatched.
        old = threading.stack_size(256 * 1024)
        try:
            threading.Thread(target=self._run, name="flowplex-deadline", daemon=True).start()
        except RuntimeError:
            pass  # the blocking calls still honour the deadline (see above)
        finally:
            threading.stack_size(old)

    def left(self) -> float | None:
        """Seconds left (None without ``--timeout``)."""
        return None if self.at is None else max(0.0, self.at - time.monotonic())

    def claim(self) -> None:
        """The command met the deadline itself and closes in order (``DEADLINE_CLOSE_S`` more)."""
        with self._lock:
            fired = self._fired
            self._claimed = True
        if fired:  # the thread is ending the process; say nothing twice
            time.sleep(DEADLINE_CLOSE_S)

    def expired(self, what: str) -> str:
        return f"--timeout {self.seconds:g} s expired {what}"

    def _run(self) -> None:
        assert self.at is not None
        time.sleep(max(0.0, self.at + DEADLINE_SLACK_S - time.monotonic()))
        with self._lock:
            claimed = self._claimed
        if claimed:
            time.sleep(DEADLINE_CLOSE_S)
            what = f"and the command was still {self._doing()} {DEADLINE_CLOSE_S:g} s later"
        else:
            what = f"while {self._doing()}"
        with self._lock:
            self._fired = True
        self._exit(self.expired(what))

    def _doing(self) -> str:
        """What the main thread is doing now, as precisely as the library can say."""
        from flowplex._deadline import doing_now

        doing = doing_now(self._main)
        if doing is not None:
            return doing
        if self.step == "closing" and self.graph_obj is not None:
            return f"closing the graph ({_in_flight(self.graph_obj.stats())} in flight)"
        return self.step

    def _exit(self, message: str) -> None:
        with contextlib.suppress(Exception):
            sys.stderr.write(_shown(f"flowplex: error: {_where(self.graph, Exception(message))}") + "\n")
            sys.stderr.flush()
        if self.flush is not None:
            with contextlib.suppress(Exception):
                self.flush()
        pool = sys.modules.get("flowplex.processes._pool")
        if pool is not None:
            with contextlib.suppress(Exception):
                pool.abandon_all()
        with contextlib.suppress(Exception):
            sys.stdout.flush()
        from flowplex._deadline import exit_now

        exit_now(1)


def _interrupted_import(exc: KeyboardInterrupt) -> str | None:
    """The one-line error for a ``KeyboardInterrupt`` that an imported module raised itself (no
    Ctrl-C came), from the note ``import_target`` adds; None for the user's own Ctrl-C."""
    if _ctrl_c["seen"]:
        return None
    notes = getattr(exc, "__notes__", None) or ["an import"]
    return f"{notes[-1]}: KeyboardInterrupt (raised by the imported code, not by Ctrl-C)"


def import_kernels(targets: list[str], deadline: _Deadline | None = None) -> None:
    """Put the current directory on ``sys.path`` (as ``python -m`` does), then run each ``--import``.

    The directory is added even without ``--import``, so that a graph's ``imports:`` finds
    modules next to where the command runs, as ``--import`` does. A failure exits 2 with one
    line (``SystemExit`` and a ``KeyboardInterrupt`` the module raised itself too).
    """
    from flowplex.errors import ConfigError
    from flowplex.kernels._loading import import_target

    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    for target in targets:
        if deadline is not None:
            deadline.step = f"importing `{target}` (--import {target})"
        try:
            with _imports_interrupted():
                import_target(target, base=Path(cwd), where=f"--import {target}")
        except ConfigError as exc:
            raise _fail(exc, 2) from None


@contextlib.contextmanager
def _imports_interrupted() -> Iterator[None]:
    """Turn a ``KeyboardInterrupt`` raised by imported code into one line, exit 2; the user's
    Ctrl-C exits 130 with one line saying what it interrupted."""
    try:
        yield
    except KeyboardInterrupt as exc:
        text = _interrupted_import(exc)
        if text is not None:
            raise _usage(text) from None
        raise _cancelled_import(exc) from None


def _cancelled_import(exc: KeyboardInterrupt) -> typer.Exit:
    """The user's Ctrl-C during the imports: one line saying what it interrupted, exit 130."""
    notes = getattr(exc, "__notes__", None)
    where = f" while importing: {notes[-1].replace(': cannot import ', ': ')}" if notes else ""
    typer.echo(_shown(f"flowplex: cancelled (Ctrl-C){where}"), err=True)
    return typer.Exit(130)


def parse_override(text: str, node_names: list[str]) -> tuple[str, tuple[str, ...], object]:
    """``NODE.OPTION[.SUB]=VALUE`` -> (node, option path, YAML-typed value).

    Node names may contain dots and slashes: the longest node name followed by ``.`` wins.
    Raises ``UsageError`` (a ``ValueError``) with a one-line message (did-you-mean for unknown nodes).
    """
    import yaml

    from flowplex._suggest import did_you_mean

    key, sep, raw = text.partition("=")
    if not sep or "." not in key:
        msg = f"--set {text!r}: expected NODE.OPTION=VALUE"
        raise UsageError(msg)
    node = max((n for n in node_names if key.startswith(n + ".")), key=len, default=None)
    if node is None:
        guess = key.rsplit(".", 1)[0]
        msg = f"--set {text!r}: no node named `{guess}`{did_you_mean(guess, node_names)}"
        raise UsageError(msg)
    path = tuple(key[len(node) + 1:].split("."))
    if not all(path):
        msg = f"--set {text!r}: empty option name"
        raise UsageError(msg)
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError as exc:
        problem = str(getattr(exc, "problem", None) or exc).splitlines()[0]
        msg = f"--set {text!r}: value is not valid YAML ({problem})"
        raise UsageError(msg) from None
    if not _is_option_value(value):
        msg = f"--set {text!r}: value must be a number, bool, string, list or mapping, got {type(value).__name__}"
        raise UsageError(msg)
    return node, path, value


def _is_option_value(value: object) -> bool:
    if value is None or isinstance(value, bool | int | float | str):
        return True
    if isinstance(value, list):
        return all(_is_option_value(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _is_option_value(v) for k, v in value.items())
    return False


def apply_overrides(spec: Any, overrides: list[str]) -> Any:
    """A copy of ``spec`` (a ``GraphSpec``) with ``--set`` overrides applied to node options."""
    import copy
    import dataclasses

    names = [n.name for n in spec.nodes]
    options: dict[str, Any] = {}
    for text in overrides:
        node, path, value = parse_override(text, names)
        current = options.get(node, copy.deepcopy(spec.nodes[names.index(node)].options))
        if current is None:
            current = {}
        if not isinstance(current, dict):
            msg = f"--set {text!r}: the options of node `{node}` are not a mapping"
            raise UsageError(msg)
        target = current
        for part in path[:-1]:
            inner = target.setdefault(part, {})
            if not isinstance(inner, dict):
                msg = f"--set {text!r}: option `{part}` of node `{node}` is not a mapping"
                raise UsageError(msg)
            target = inner
        target[path[-1]] = value
        options[node] = current
    nodes = tuple(dataclasses.replace(n, options=options[n.name]) if n.name in options else n for n in spec.nodes)
    return dataclasses.replace(spec, nodes=nodes)


def _load_graph(graph: Path, overrides: list[str], default_executor: str | None = None) -> Any:
    """Build the graph (exit 2 with one line on a configuration error or a failing import)."""
    with _imports_interrupted():
        return _build_graph(graph, overrides, default_executor)


def _build_graph(graph: Path, overrides: list[str], default_executor: str | None) -> Any:
    import flowplex
    from flowplex.config._load import load_plan_file
    from flowplex.errors import ConfigError

    try:
        if not overrides and default_executor is None:
            return flowplex.Graph.from_yaml_file(graph)
        if default_executor is not None:
            _check_default_executor(default_executor, [ex.name for ex in load_plan_file(graph).executors])
        spec = load_plan_file(graph, default_executor=default_executor).spec
        try:
            spec = apply_overrides(spec, overrides)
        except ValueError as exc:
            raise _usage(str(exc)) from None
        return flowplex.Graph.from_spec(spec)
    except (ConfigError, KeyError, OSError) as exc:
        raise _fail_at(graph, exc, 2) from None


def _check_default_executor(name: str, declared: list[str]) -> None:
    """``--default-executor NAME`` must name an executor of the graph (exit 2 otherwise)."""
    if name not in declared:
        from flowplex._suggest import did_you_mean

        msg = (f"--default-executor {name}: the graph has no executor `{name}`{did_you_mean(name, declared)} "
               f"(executors: {', '.join(f'`{n}`' for n in declared)})")
        raise _usage(msg)


def _in_flight(stats: Any) -> str:
    """``a (RUNNING 1.2s), b (3 queued)`` for nodes with work claimed, queued or blocked."""
    from flowplex.diagnostics._dot_format import fmt_duration_us

    parts = []
    for n in stats.nodes:
        notes = []
        if n.running:
            notes.append(f"RUNNING {fmt_duration_us(n.running_for_us)}" if n.running_for_us else "RUNNING")
        if n.blocked:
            notes.append("blocked on a full queue")
        if n.queued:
            notes.append(f"{n.queued} queued")
        if n.state == "WAITING_SOURCE":
            notes.append("source waiting for its next turn")
        if notes:
            parts.append(f"{n.node_name} ({', '.join(notes)})")
    return ", ".join(parts) or "nothing"


def _write_artifacts(g: Any, graph: Path, dot: Path | None, dot_view: str, trace: Path | None,
                     show_stats: bool) -> int:
    """Write --dot / --trace and print --stats; returns 0 or the exit code of a failure."""
    from flowplex.diagnostics import render_svg
    from flowplex.errors import FlowplexError

    code = 0
    if show_stats:
        typer.echo(_shown(g.dump()), err=True, nl=False)
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
        _fail_at(graph, exc, 1)
        code = 1
    return code


@app.command()
def run(
    graph: Annotated[Path, typer.Argument(help="The graph's YAML file.", exists=True, dir_okay=False)],
    overrides: Annotated[list[str] | None, typer.Option("--set", "-s", metavar="NODE.OPTION=VALUE",
                                                        help=_SET_HELP)] = None,
    imports: Annotated[list[str] | None, typer.Option("--import", metavar="MODULE|FILE.py",
                                                      help=_IMPORT_HELP)] = None,
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
) -> None:
    """Run a graph whose data comes from source kernels and print what reaches its outputs.

    Exit codes: 0 done, 1 runtime error (``--timeout`` too), 2 configuration or usage error
    (a failing import too), 130 Ctrl-C.
    """
    import contextlib

    from flowplex._timestamps import ts_name
    from flowplex.diagnostics._dot import parse_view
    from flowplex.errors import FlowplexError, GraphCancelled, Timeout

    try:
        parse_view(dot_view)
    except ValueError as exc:
        msg = f"--dot-view: {exc}"
        raise _usage(msg) from None
    _setup_logging()
    _watch_ctrl_c()
    deadline = _Deadline(_check_timeout(timeout), graph)
    if ray_address is not None:
        from flowplex.cluster import ADDRESS_ENV

        if not ray_address.strip():
            msg = "--ray-address: give an address (auto, ray://host:10001 or IP:port)"
            raise _usage(msg)
        os.environ[ADDRESS_ENV] = ray_address.strip()
    import_kernels(imports or [], deadline)
    deadline.step = "loading the graph (running its imports, creating its kernels)"
    g = _load_graph(graph, overrides or [], default_executor)
    deadline.graph_obj = g
    deadline.step = "preparing the run"
    lock = threading.Lock()
    count = 0
    try:
        sink = output.open("w", encoding="utf-8") if output is not None else None
    except OSError as exc:
        msg = f"cannot write --output {output}: {exc.strerror or exc}"
        raise _usage(msg) from None
    if sink is not None:
        from flowplex._deadline import locked_flush

        deadline.flush = locked_flush(lock, sink)

    def show(port: str) -> Any:
        def on_packet(packet: Any) -> None:
            nonlocal count
            record = {"port": port, "ts": packet.timestamp, "value": packet_value(packet)}
            with lock:
                count += 1
                if sink is not None:
                    sink.write(json.dumps(record) + "\n")
                else:
                    # The value is the graph's data, not ours: its escapes are shown, not obeyed.
                    sys.stdout.write(_shown(f"{port}\tts={ts_name(packet.timestamp)}\t{record['value']}") + "\n")

        return on_packet

    if trace is not None:
        g.enable_tracing()
    code = 0
    with contextlib.ExitStack() as stack:
        stack.callback(g.close)
        if sink is not None:
            stack.callback(sink.close)
        for port in g.plan.graph_outputs:
            g.observe(port, show(port))
        if metrics_port is not None:
            from flowplex.diagnostics import serve_metrics

            try:
                server = serve_metrics(g, metrics_port, metrics_host)
            except OSError as exc:
                msg = f"cannot serve metrics on {metrics_host}:{metrics_port}: {exc.strerror or exc}"
                raise _usage(msg) from None
            stack.callback(server.close)
            typer.echo(f"flowplex: metrics on {server.url}", err=True)
        display = None
        if live if live is not None else sys.stderr.isatty():
            from rich.console import Console

            from flowplex.diagnostics._live import LiveDisplay

            display = LiveDisplay(g, Console(stderr=True), redirect_stdout=sink is None and sys.stdout.isatty())
            stack.enter_context(display)
        try:
            deadline.step = "starting the graph (opening its kernels)"
            g.start(timeout=deadline.left())
            deadline.step = "running the graph"
            g.close_all_inputs()
            g.wait_done(timeout=deadline.left())
        except Timeout as exc:
            deadline.claim()
            _state["timed_out"] = True
            if display is not None:
                display.stop()
            code = 1
            _fail_at(graph, Exception(deadline.expired(f"({exc})")), code)
        except KeyboardInterrupt:  # the user's: a kernel's own is a failure of its node
            snapshot = g.stats()
            if display is not None:
                display.stop()
            g.cancel()
            with contextlib.suppress(FlowplexError, KeyboardInterrupt):
                g.wait_done(timeout=5.0)
            during = "" if deadline.step == "running the graph" else f" while {deadline.step}"
            typer.echo(_shown(f"flowplex: cancelled (Ctrl-C){during}; in flight: {_in_flight(snapshot)}; "
                              f"{count} packet(s) so far"), err=True)
            code = 130
        except GraphCancelled as exc:
            code = 130
            _fail_at(graph, exc, code)
        except FlowplexError as exc:
            if display is not None:
                display.stop()
            code = 1
            _fail_at(graph, exc, code)
        deadline.step = "closing"
        if display is not None:
            display.stop()
        if sink is not None:
            sink.flush()
        code = _write_artifacts(g, graph, dot, dot_view, trace, show_stats) or code
    if code:
        raise typer.Exit(code)
    typer.echo(f"flowplex: {count} packet(s) from {len(g.plan.graph_outputs)} output(s)", err=True)


@app.command("dot")
def dot_command(
    graph: Annotated[Path, typer.Argument(help="The graph's YAML file.", exists=True, dir_okay=False)],
    view: Annotated[str, typer.Option("--view", help="topology, compact or diagnostics.")] = "topology",
    svg: Annotated[Path | None, typer.Option("--svg", metavar="FILE",
                                             help="Render to SVG with Graphviz instead of printing DOT.")] = None,
    overrides: Annotated[list[str] | None, typer.Option("--set", "-s", metavar="NODE.OPTION=VALUE",
                                                        help=_SET_HELP)] = None,
    imports: Annotated[list[str] | None, typer.Option("--import", metavar="MODULE|FILE.py",
                                                      help=_IMPORT_HELP)] = None,
) -> None:
    """Print a graph as Graphviz DOT (without running it), or render it to SVG."""
    from flowplex.diagnostics import render_svg
    from flowplex.diagnostics._dot import parse_view
    from flowplex.errors import FlowplexError

    try:
        parse_view(view)
    except ValueError as exc:
        msg = f"--view: {exc}"
        raise _usage(msg) from None
    _setup_logging()
    import_kernels(imports or [])
    g = _load_graph(graph, overrides or [])
    with g:
        text = g.to_dot(view)
    if svg is None:
        sys.stdout.write(_shown(text))
        return
    try:
        svg.write_bytes(render_svg(text))
    except (OSError, FlowplexError) as exc:
        raise _fail_at(graph, exc, 1) from None


def _check(graph: Path, as_json: bool, imports: list[str], timeout: float) -> None:
    from flowplex.diagnostics import check_config
    from flowplex.diagnostics._check import CheckReport

    if not graph.is_file():
        typer.echo(_shown(f"flowplex: error: no such graph file: {graph}"), err=True)
        raise typer.Exit(2)
    _watch_ctrl_c()
    deadline = _Deadline(_check_timeout(timeout), graph)
    import_kernels(imports, deadline)
    deadline.step = "loading the graph (running its imports)"
    try:
        report = check_config(graph)
    except KeyboardInterrupt as exc:
        text = _interrupted_import(exc)
        if text is None:
            raise _cancelled_import(exc) from None
        report = CheckReport(path=str(graph), error=text)  # a failing import, as any other
    if as_json:
        typer.echo(json.dumps(report.to_json(), indent=2))
    elif report.ok:
        typer.echo(_shown(report.to_text()))
    else:
        typer.echo(_shown(report.to_text()), err=True)
    raise typer.Exit(report.exit_code)


_CHECK_TIMEOUT_HELP = (f"Give up after this many seconds (default {CHECK_TIMEOUT_S:g}): an import that never "
                       "finishes is reported, exit 1.")


def _check_timeout(seconds: float | None) -> float | None:
    """``--timeout`` must be a finite number of seconds > 0 (exit 2 otherwise)."""
    import math

    if seconds is not None and not (math.isfinite(seconds) and seconds > 0):
        msg = f"--timeout {seconds:g}: give a number of seconds > 0"
        raise _usage(msg)
    return seconds


@app.command()
def check(
    graph: Annotated[Path, typer.Argument(help="The graph's YAML file.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print lm-flow's check-config JSON report.")] = False,
    imports: Annotated[list[str] | None, typer.Option("--import", metavar="MODULE|FILE.py",
                                                      help=_IMPORT_HELP)] = None,
    timeout: Annotated[float, typer.Option(help=_CHECK_TIMEOUT_HELP)] = CHECK_TIMEOUT_S,
) -> None:
    """Validate a graph without running kernels. Exit 0 ok, 1 findings, 2 usage error.

    The graph's ``imports:`` and ``--import`` run (a failing one is reported); no kernel is created.
    """
    _check(graph, as_json, imports or [], timeout)


@app.command("check-config", hidden=True)
def check_config_alias(
    graph: Annotated[Path, typer.Argument(help="The graph's YAML file.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the JSON report.")] = False,
    imports: Annotated[list[str] | None, typer.Option("--import", metavar="MODULE|FILE.py",
                                                      help=_IMPORT_HELP)] = None,
    timeout: Annotated[float, typer.Option(help=_CHECK_TIMEOUT_HELP)] = CHECK_TIMEOUT_S,
) -> None:
    """lm-flow's name for ``check``."""
    _check(graph, as_json, imports or [], timeout)


@app.command()
def schema() -> None:
    """Print the JSON Schema of the YAML graph format (for editors)."""
    from flowplex.config import json_schema

    typer.echo(json.dumps(json_schema(), indent=2))


@app.command()
def info() -> None:
    """Print the version, Python and which compiled speed-ups this install uses."""
    import platform

    import flowplex
    from flowplex import _native
    from flowplex.transport import _accel

    typer.echo(f"flowplex {flowplex.__version__} on Python {platform.python_version()} ({sys.platform})")
    typer.echo(f"scheduler: {_native.mode}")
    transport = "compiled (C)" if _accel.fast is not None else "source (pure Python)"
    typer.echo(f"ring transport: {transport}")
    from flowplex.cluster import INSTALL_HINT, describe_cluster, ray_installed

    if ray_installed():
        from importlib.metadata import PackageNotFoundError, version

        try:
            ray_version = version("ray")
        except PackageNotFoundError:
            ray_version = "(version unknown)"
        typer.echo(f"ray: {ray_version} installed; RayExecutor uses {describe_cluster()}")
    else:
        typer.echo(f"ray: not installed (RayExecutor needs it: {INSTALL_HINT})")


shm_app = typer.Typer(help="Shared-memory segments of flowplex under /dev/shm.", no_args_is_help=True)
app.add_typer(shm_app, name="shm")


@shm_app.command("clean")
def shm_clean(
    dry_run: Annotated[bool, typer.Option("--dry-run", help="List what would be removed; remove nothing.")] = False,
) -> None:
    """Remove the rings and process-pool arenas of flowplex processes that died (yours only).

    Only generated names (flowplex-ring-PID-HEX, flowplex-arena-PID-HEX) whose creator PID no
    longer runs; processes that still map one keep working. Named rings are never touched.
    """
    from flowplex._shm import reclaim_dead

    names = reclaim_dead(dry_run=dry_run)
    for name in names:
        typer.echo(f"{'would remove' if dry_run else 'removed'} /dev/shm/{name}")
    typer.echo(f"flowplex: {len(names)} segment(s) of dead processes {'found' if dry_run else 'removed'}", err=True)


@app.command()
def demo(
    duration: Annotated[float, typer.Option(help="Seconds to run before stopping by itself.")] = 20.0,
    mode: Annotated[str, typer.Option(help="panes, log, or auto (panes on a terminal).")] = "auto",
) -> None:
    """Several agents stream into one terminal at once, without tearing (the main demo)."""
    from flowplex.terminal._commands import demo as run_demo

    raise typer.Exit(run_demo(duration=duration, mode=mode))


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def agents(
    ctx: typer.Context,
    mode: Annotated[str, typer.Option(help="panes, log, or auto (panes on a terminal).")] = "auto",
    file: Annotated[Path | None, typer.Option(
        "--file", "-f", metavar="AGENTS.yaml",
        help="Agents to run, from a file (name, cmd, cwd, env, autostart, agent_type, restart).")] = None,
    ring: Annotated[str | None, typer.Option(
        "--ring", metavar="NAME",
        help="Also show what other processes send to the shared-memory ring NAME, one pane per stream.")] = None,
    ring_producers: Annotated[int, typer.Option(
        "--ring-producers", metavar="N", min=1,
        help="With --ring: the stream ends after N producers came and went.")] = 1,
    typing_key: Annotated[str, typer.Option(
        "--typing-key", metavar="KEY", help="The key that enters and leaves typing mode (panes).")] = "ctrl-a",
    bell: Annotated[bool, typer.Option(
        "--bell/--no-bell", help="Ring the bell when an agent starts waiting for input (panes).")] = True,
) -> None:
    """Run commands side by side: flowplex agents -- CMD1 ARGS -- CMD2 ARGS ...

    Panes mode keys: Ctrl-a typing mode (keys go to the focused agent), Tab/1-9 focus, z zoom,
    t ticker, PgUp/PgDn scroll, / search, s stop/start, r restart, k kill, x close, q quit.
    """
    from flowplex.terminal._commands import agents as run_agents

    raise typer.Exit(run_agents(list(ctx.args), mode=mode, file=str(file) if file is not None else None,
                                ring=ring, ring_producers=ring_producers, typing_key=typing_key, bell=bell))


def main() -> None:
    """Console-script entry point."""
    try:
        app()
    except BrokenPipeError:  # `flowplex run g.yaml | head` exits quietly
        sys.stderr.close()
        sys.exit(0)
