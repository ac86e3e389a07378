"""``flowplex demo`` and ``flowplex agents``: the command functions behind the CLI.

Each returns the process exit code. They write to the terminal only through their display's
writer while it is live, and print their summary with ``typer.echo`` after it stopped.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import TYPE_CHECKING, Final

from ..errors import FlowplexError, GraphCancelled, UsageError
from ._caps import TermCaps
from ._display import AgentInfo, Display
from ._keys import typing_key_byte
from ._logmode import LogRenderer
from ._proxy import redirect_std_streams
from ._registry import register_display, resolve_mode
from ._sanitize import visible_controls
from ._stats import RenderStats
from ._writer import Writer

if TYPE_CHECKING:
    from ..graph import Graph
    from ._agentsfile import AgentEntry
    from ._hub import AgentHub

__all__ = ["agents", "demo", "split_commands"]

DEMO_DISPLAY: Final = "demo"
AGENTS_DISPLAY: Final = "agents"
AGENTS_USAGE: Final = ("usage: flowplex agents [--mode panes|log|auto] [-f agents.yaml] [--ring NAME] "
                       "-- CMD1 ARGS -- CMD2 ARGS ...")
_STOP_TIMEOUT_S: Final = 10.0
RING_FREE_IDS: Final = 1 << 30
_LIVE_BLOCK_S: Final = 1.0
"""How long log mode on a live terminal holds an agent back before it drops lines."""
_FILE_FPS: Final = 240.0
"""Writes per second into a file or a pipe: nobody watches frames there, and a producer that
waits for room waits for the next write."""
_SINK_QUEUE_PACKETS: Final = 16
"""The sink's input-queue bound per command: back-pressure instead of an unbounded backlog.
At least one source invocation's batch (CommandSource emits one chunk of at most 64 KiB, and an end)."""


def demo(duration: float, mode: str) -> int:
    """Run the bundled demo graph for ``duration`` seconds in ``mode``; print a summary.

    Seven agents (four recorded transcripts, three real commands) stream at once. On a
    terminal they go to the panes renderer (``q`` quits early); without one, to plain log
    lines. Returns 0, 2 for a bad argument, 1 if the graph failed, 130 after Ctrl-C.
    """
    if not duration > 0:
        _say(f"flowplex demo: --duration must be positive seconds, got {duration}")
        return 2
    from importlib.resources import files

    yaml_text = files("flowplex._data").joinpath("demo.yaml").read_text(encoding="utf-8")
    try:
        display = _make_display(mode, title="flowplex demo")
    except UsageError as exc:
        _say(f"flowplex demo: {exc}")
        return 2
    graph = build_graph(yaml_text)
    _declare_agents(display, graph)
    started = time.monotonic()
    code, error = _run(graph, display, DEMO_DISPLAY, until=started + duration)
    elapsed = time.monotonic() - started
    if error:
        _say(f"flowplex demo: error: {error}")
    _echo(display, summary("flowplex demo", display.stats(), elapsed))
    return code


def agents(
    argv: list[str],
    mode: str,
    *,
    file: str | None = None,
    ring: str | None = None,
    ring_producers: int = 1,
    typing_key: str = "ctrl-a",
    bell: bool = True,
    detach: bool = False,
    name: str | None = None,
    control: bool = True,
    record: str | None = None,
    record_input: bool = False,
) -> int:
    """Run commands side by side, each in its own PTY and pane: ``-- CMD1 ARGS -- CMD2 ARGS``.

    ``file``: an agents file (:mod:`flowplex.terminal._agentsfile`) whose agents come first.
    ``ring``: also show what other processes send to the shared-memory ring of that name (one
    pane per stream id); it ends after ``ring_producers`` producers came and went.

    Ends when every command has exited (on a terminal with keys, after ``q``, so that the
    results stay readable). Returns 0 when every command exited 0, else the first failing
    command's status (128+N for a signal) and names the failed ones on stderr; 2 for a usage
    error, 130 after Ctrl-C.

    ``detach``: run them in a background server instead (named ``name``, or ``agents``,
    ``agents-2``...), print its name and return 0 once it serves (:mod:`._detach`). Without it
    the session is live all the same, under that name (``flowplex agents ls/send/stop NAME``),
    unless ``control`` is False.

    ``record``: record each agent's output into that MCAP file, and with ``record_input`` what
    was typed into each command (:mod:`._record`).
    """
    if detach:
        from ._detach import start_detached

        return start_detached(argv, name=name, file=file, ring=ring, ring_producers=ring_producers,
                              typing_key=typing_key, bell=bell, record=record, record_input=record_input)
    entries = agent_entries(argv, file, ring)
    if entries is None:
        return 2
    try:
        typing_key_byte(typing_key)  # a bad key is an error in log mode too, not only where it is used
        display = _make_display(mode, title="flowplex agents", typing_key=typing_key, bell=bell)
    except UsageError as exc:
        _say(f"flowplex agents: {exc}")
        return 2
    # Commands take stream ids of their own; with a ring, far from the ids its producers pick.
    first_id = RING_FREE_IDS if ring is not None else 1
    nodes = agent_nodes(entries, first_id, ring, ring_producers)
    for i, entry in enumerate(entries):
        display.add_agent(first_id + i, entry.name, entry.agent_type)
    try:
        graph = build_graph(json.dumps({"nodes": nodes}))  # JSON is YAML: no quoting to get wrong
    except FlowplexError as exc:
        _say(f"flowplex agents: {exc}")
        return 2
    from ..errors import ControlError
    from ._hub import session_hub

    try:
        hub = (session_hub(display, graph, name, typing_key=typing_key, bell=bell, source=file or "")
               if control else None)
    except ControlError as exc:
        _say(f"flowplex agents: {exc}")
        return 2
    recording = None
    if record is not None:
        from ._record import record_session

        try:
            recording = record_session(graph, display, record, [e.name for e in entries], first_id,
                                       ring=ring is not None, inputs=record_input)
        except FlowplexError as exc:
            if hub is not None:
                hub.close()
            _say(f"flowplex agents: --record: {exc}")
            return 2
    started = time.monotonic()
    try:
        code, error = _run_agents(graph, display, hub)
    finally:
        recorded = recording.close() if recording is not None else ""  # the graph stopped: every packet is in
    if error:
        _say(f"flowplex agents: error: {error}")
    now = time.monotonic()
    _echo(display, summary("flowplex agents", display.stats(), now - started))
    infos = [info for info in display.agents() if info.stream_id >= 0]  # not the stdout/stderr proxies
    _echo(display, roster(infos, now))
    if recorded:
        _say(f"flowplex agents: {recorded}")
    if code:
        return code
    return _agents_status(infos, range(first_id, first_id + len(entries)))


def agent_entries(argv: list[str], file: str | None, ring: str | None) -> list[AgentEntry] | None:
    """The agents to run: the file's, then the command line's (renamed apart); None after a
    usage error, which it reported."""
    from ..errors import ConfigError
    from ._agentsfile import entries_from_commands, load_agents_file, unique_names

    try:
        entries = load_agents_file(file) if file else []
        extra = entries_from_commands(split_commands(argv))
    except ConfigError as exc:
        _say(f"flowplex agents: {exc}")
        return None
    names = unique_names((e.name for e in extra), taken=(e.name for e in entries))
    entries += [dataclasses.replace(e, name=n) for e, n in zip(extra, names, strict=True)]
    if not entries and ring is None:
        _say(f"flowplex agents: no commands given\n{AGENTS_USAGE}")
        return None
    if ring is not None and not ring.strip():
        _say("flowplex agents: --ring: give the ring's name")
        return None
    return entries


def agent_nodes(
    entries: list[AgentEntry], first_id: int, ring: str | None, ring_producers: int
) -> list[dict[str, object]]:
    """The graph's nodes: a ``CommandSource`` per agent, the ring's source, the terminal sink."""
    nodes: list[dict[str, object]] = []
    ports: list[str] = []
    for i, entry in enumerate(entries):
        port = f"out{i}"
        ports.append(port)
        options: dict[str, object] = {
            "argv": list(entry.argv), "name": entry.name, "stream_id": first_id + i,
            "agent_type": entry.agent_type.name.lower(), "display": AGENTS_DISPLAY,
            "autostart": entry.autostart, "restart": entry.restart,
            "restart_limit": entry.restart_limit if entry.restart_limit is not None else -1,
            "restart_delay_s": entry.restart_delay_s,
        }
        if entry.cwd is not None:
            options["cwd"] = entry.cwd
        if entry.env:
            options["env"] = dict(entry.env)
        nodes.append({"name": f"cmd{i}", "kernel": "CommandSource", "output_ports": [port], "options": options})
    if ring is not None:
        ports.append("ring")
        nodes.append({"name": "ring", "kernel": "RingSource", "output_ports": ["ring"],
                      "options": {"ring": ring.strip(), "expect_producers": max(1, ring_producers)}})
    nodes.append({"name": "screen", "kernel": "TerminalSink", "input_ports": ports,
                  "input_policy": {"type": "immediate"}, "input_queues": {"packets": _SINK_QUEUE_PACKETS},
                  "options": {"display": AGENTS_DISPLAY}})
    return nodes


def _run_agents(graph: Graph, display: Display, hub: AgentHub | None) -> tuple[int, str]:
    """``_run`` for ``flowplex agents``: orphans of the commands (double forks, setsid daemons)
    come to us instead of init and are killed and reaped once the graph stopped, so no agent
    outlives the command; the session's control endpoint closes with it."""
    from ..agents._lifetime import become_subreaper, sweep_orphans

    reaper = become_subreaper()
    try:
        return _run(graph, display, AGENTS_DISPLAY, until=None, linger=True)
    finally:
        if hub is not None:
            hub.close()
        if reaper:
            sweep_orphans()


def _agents_status(infos: list[AgentInfo], commands: range) -> int:
    """The exit status of a run that ended by itself: the first failed command's, 1 when a
    command did not finish, else 0 (a ring's streams, outside ``commands``, have none)."""
    failed = [info for info in infos if info.finished and not info.ok]  # commands only: streams end ok
    if failed:
        named = ", ".join(f"{info.number} {info.name} ({info.note or 'failed'})" for info in failed)
        _say(f"flowplex agents: failed: {named}")
        status = failed[0].exit_code if failed[0].exit_code is not None else 1
        return status if status > 0 else 128 - status
    unfinished = [info for info in infos if not info.finished and info.stream_id in commands]
    if unfinished:
        named = ", ".join(f"{info.number} {info.name}" for info in unfinished)
        _say(f"flowplex agents: did not finish: {named}")
        return 1
    return 0


def roster(infos: list[AgentInfo], now: float) -> str:
    """The closing table: every agent's number, name, state, lines, bytes and run time.

    >>> from flowplex.terminal import AgentInfo
    >>> from flowplex.transport import AgentType
    >>> a = AgentInfo(1, "bash", AgentType.INFO, 1, bytes_in=2048, finished=True, exit_code=0, lines=12,
    ...               started_at=0.0, ended_at=1.5)
    >>> print(roster([a], 2.0))
       1  bash  exited (0)  12 lines  2.0 KB  1.5 s
    """
    if not infos:
        return ""
    rows = [(f"{i.number:>4}", i.name, i.state(now) + (f", {i.restarts} restarts" if i.restarts else ""),
             f"{i.lines} lines", _size(i.bytes_in), f"{i.duration(now):.1f} s") for i in infos]
    widths = [max(len(r[c]) for r in rows) for c in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(w) if c in (1, 2) else cell.rjust(w)
                               for c, (cell, w) in enumerate(zip(r, widths, strict=True))).rstrip()
                     for r in rows)


def split_commands(argv: list[str]) -> list[list[str]]:
    """``["--", "ls", "-l", "--", "date"]`` → ``[["ls", "-l"], ["date"]]`` (empty groups dropped).

    >>> split_commands(["ls", "-l", "--", "date", "--"])
    [['ls', '-l'], ['date']]
    """
    groups: list[list[str]] = [[]]
    for arg in argv:
        if arg == "--":
            groups.append([])
        else:
            groups[-1].append(arg)
    return [g for g in groups if g]


def summary(what: str, st: RenderStats, elapsed_s: float) -> str:
    """One line: agents, messages, bytes, frames and what was dropped (and cut, when lines were).

    >>> from flowplex.terminal import RenderStats
    >>> summary("demo", RenderStats("log", 2, 10, 2048, 5, 4096, 900, 3, 0, 0, 0, 0, 1, 0, 0.01, 0.0), 1.0)
    'demo: 2 agents, 10 messages, 2.0 KB in; 5 frames, 4.0 KB out (819 B/frame); 0 skipped, 3 coalesced, 0 dropped; \
1.0 s'
    """
    per_frame = st.bytes_out // st.frames if st.frames else 0
    return (
        f"{what}: {st.agents} agents, {st.messages} messages, {_size(st.bytes_in)} in; "
        f"{st.frames} frames, {_size(st.bytes_out)} out ({per_frame} B/frame); "
        f"{st.skipped_frames} skipped, {st.coalesced} coalesced, {st.dropped} dropped"
        + (f", {st.cut_lines} long lines cut" if st.cut_lines else "")
        + (f", {st.cut_sequences} unterminated escapes cut" if st.cut_sequences else "") + f"; {elapsed_s:.1f} s"
    )


def _say(text: str) -> None:
    """One line on standard error; foreign text in it (argv, a file's names, an engine error)
    has its control characters shown, not obeyed."""
    import typer  # (on first use: `flowplex attach` starts without the CLI framework)

    typer.echo(visible_controls(text), err=True)


def _echo(display: Display, text: str) -> None:
    """Print the summary, unless the reader of standard output went away (then stay quiet)."""
    import typer  # (on first use: `flowplex attach` starts without the CLI framework)

    if display.writer.broken:
        _silence_stdout()
        return
    try:
        typer.echo(visible_controls(text))
    except BrokenPipeError:
        _silence_stdout()


def _silence_stdout() -> None:
    # Later flushes (at exit) must not fail on the closed pipe either.
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stdout_fd())
        os.close(devnull)
    except OSError:
        pass


def _size(n: int) -> str:
    if n < 1024:
        return f"{n} B"
    if n < 1024 * 1024:
        return f"{n / 1024:.1f} KB"
    return f"{n / (1024 * 1024):.1f} MB"


def _make_display(mode: str, *, title: str, typing_key: str = "ctrl-a", bell: bool = True) -> Display:
    writer = Writer(stdout_fd())
    caps = TermCaps.detect(writer.fd)
    if resolve_mode(mode, caps) == "panes":
        from ._panes import PaneRenderer

        return PaneRenderer(writer, caps, title=title, typing_key=typing_key, bell=bell)
    if caps.is_tty:
        # A live terminal that cannot keep up holds the agents back a moment, then loses lines
        # (counted, and a notice line says how many) rather than freezing them.
        return LogRenderer(writer, caps, overflow="block", block_timeout_s=_LIVE_BLOCK_S)
    # A file or a pipe: lossless. The display waits for the writer, the sink for the display,
    # and the sink's bounded input queues make the engine pause the commands' reads (the PTYs
    # fill and the programs' writes block). Lines are never cut by time: nobody watches them form.
    return LogRenderer(writer, caps, overflow="block", block_timeout_s=None, fps=_FILE_FPS, partial_flush_s=None)


def _declare_agents(display: Display, graph: Graph) -> None:
    """Give the display every agent of the graph before it starts, in stream-id order, so that
    the layout is final from the first frame (panes do not move as agents begin to talk)."""
    for node in graph.plan.spec.nodes:
        options = node.options if isinstance(node.options, dict) else {}
        sid = options.get("stream_id")
        if isinstance(sid, int) and not isinstance(sid, bool):
            name = options.get("name")
            display.add_agent(sid, name if isinstance(name, str) and name else node.name, options.get("agent_type"))


def build_graph(yaml_text: str) -> Graph:
    from .. import agents as _agents  # noqa: F401  (registers the agent kernels)
    from ..graph import Graph

    return Graph.from_yaml(yaml_text)


def _run(graph: Graph, display: Display, name: str, *, until: float | None, linger: bool = False) -> tuple[int, str]:
    """Run ``graph`` into ``display`` until ``until`` (monotonic), the graph ends, or ``q``.

    Returns ``(exit code, error text)``. The display is always stopped (terminal restored) and
    the graph always stopped (its commands killed) before this returns.
    """
    from ..graph import GraphState

    code, error = 0, ""
    caught: list[int] = []
    with ExitStack() as stack:
        stack.enter_context(register_display(name, display))
        stack.enter_context(display_running(display))
        stack.enter_context(quit_on_signals(display, caught))
        stack.enter_context(redirect_std_streams(display))
        stack.callback(stop_graph, graph)
        try:
            graph.start()
            hinted = False
            while not display.quit_requested.is_set():
                if until is not None and time.monotonic() >= until:
                    break
                if graph.state == GraphState.TERMINATED:
                    break
                if linger and not hinted and _all_finished(display):
                    # Exited commands keep their panes (and can be restarted) until q.
                    _set_title(display, "all commands finished: press q to quit")
                    hinted = True
                display.quit_requested.wait(0.05)
            if linger and not display.quit_requested.is_set() and _has_keys(display):
                if not hinted:
                    _set_title(display, "all commands finished: press q to quit")
                display.quit_requested.wait()
            if getattr(display, "interrupted", False):
                code = 130
            drain(graph, display)
        except GraphCancelled:
            pass
        except KeyboardInterrupt:
            code = 130
            display.draining.set()
        except FlowplexError as exc:
            code, error = 1, str(exc)
    if caught and not code:
        code = 128 + caught[0]
    return code, error


@contextmanager
def quit_on_signals(display: Display, caught: list[int]) -> Iterator[None]:
    """SIGTERM/SIGHUP end the run like ``q`` does, so the terminal is restored (main thread only)."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_signal(signum: int, frame: object) -> None:
        caught.append(signum)
        display.quit_requested.set()  # Event.set from a handler: only the main thread waits on it

    saved = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)


@contextmanager
def display_running(display: Display) -> Iterator[Display]:
    display.start()
    try:
        yield display
    finally:
        display.stop()


def drain(graph: Graph, display: Display) -> None:
    """End the graph the gentle way: its sources see ``draining`` and finish by themselves."""
    from ..graph import GraphState

    display.draining.set()
    if graph.state in (GraphState.RUNNING, GraphState.DRAINING, GraphState.TERMINATED):
        graph.wait_done(timeout=_STOP_TIMEOUT_S)  # a graph that already failed raises its error here


def stop_graph(graph: Graph) -> None:
    """Whatever happened, stop the graph (its commands are killed by their ``close``)."""
    from ..graph import GraphState

    try:
        if graph.state in (GraphState.RUNNING, GraphState.DRAINING):
            graph.cancel()
            graph.wait_done(timeout=_STOP_TIMEOUT_S)
    except (FlowplexError, KeyboardInterrupt):
        pass
    finally:
        graph.close()


def _all_finished(display: Display) -> bool:
    infos = display.agents()
    return bool(infos) and all(info.finished for info in infos)


def _has_keys(display: Display) -> bool:
    from ._panes import PaneRenderer

    return isinstance(display, PaneRenderer) and display.interactive


def _set_title(display: Display, text: str) -> None:
    from ._panes import PaneRenderer

    if isinstance(display, PaneRenderer):
        display.title = f"{display.title} · {text}"
        display.flush(timeout=1.0)


def stdout_fd() -> int:
    try:
        return sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):
        return 1
