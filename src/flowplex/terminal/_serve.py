"""The detached agents server's process: what ``flowplex agents -d`` starts in the background.

It runs the graph of ``flowplex agents`` with a :class:`~flowplex.terminal._hub.HubDisplay`
behind a control socket (:class:`~flowplex.terminal._hub.AgentHub`), until a client asks it to
stop (the ``stop`` op), SIGTERM or SIGINT, or the graph ends by itself; a SIGHUP does not end it.
Its standard output and error are its log; it learns its name when it binds the socket, renames
its log after it and tells the starting command (:mod:`._detach`) its name through a pipe once
the agents run.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import sys
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import ControlError, FlowplexError
from ._hub import AgentHub, HubDisplay

if TYPE_CHECKING:
    from ..graph import Graph
    from ._record import AgentsRecording

__all__ = ["ServeSpec", "main", "serve"]


@dataclass(slots=True)
class ServeSpec:
    """What ``flowplex agents -d`` hands its background process (as JSON, its one argument)."""

    argv: list[str]
    name: str
    exact: bool
    file: str | None = None
    ring: str | None = None
    ring_producers: int = 1
    typing_key: str = "ctrl-a"
    bell: bool = True
    ready_fd: int = -1
    """Where the process writes its name once it serves (a pipe to the starting command)."""
    log: str = ""
    """The log file it was started with (named once the name is known: ``<runtime>/NAME.log``)."""
    record: str | None = None
    """``--record``: the recording to write (an absolute path)."""
    record_input: bool = False
    """``--record-input``: what is typed into the agents goes into the recording too."""


def serve(spec: ServeSpec) -> int:
    """Run the agents of ``spec`` behind a control socket until they are stopped; the exit code.

    Returns 2 for a usage error (reported on standard error, which is the log), 1 when the
    name is taken or the graph could not start or failed, else 0.
    """
    from ..agents._lifetime import become_subreaper, sweep_orphans
    from ..control._paths import log_path

    built = _build(spec)
    if built is None:
        return 2
    graph, display, count, recording = built
    cancel = threading.Event()

    def on_stop(now: bool) -> None:
        if now:
            cancel.set()
        display.quit_requested.set()

    try:
        hub = AgentHub(display, spec.name, exact=spec.exact, typing_key=spec.typing_key, bell=spec.bell,
                       on_stop=on_stop, source=spec.file or "")
    except ControlError as exc:
        _say(f"flowplex agents: {exc}")
        if recording is not None:
            recording.close()
        return 1
    if spec.log:
        with contextlib.suppress(OSError):
            os.replace(spec.log, log_path(hub.name))
    _serve_signals(display)
    # Orphans of the commands come to us, and are swept at the end (as `flowplex agents` does).
    reaper = become_subreaper()
    try:
        code = _run(graph, display, hub, cancel, spec.ready_fd, count)
    finally:
        hub.close()
        if reaper:
            sweep_orphans()
        recorded = recording.close() if recording is not None else ""
    if recorded:
        _say(f"flowplex agents: {hub.name}: {recorded}")
    _say(f"flowplex agents: {hub.name}: stopped")
    return code


def _build(spec: ServeSpec) -> tuple[Graph, HubDisplay, int, AgentsRecording | None] | None:
    """The graph of ``flowplex agents`` drawing into a new hub, how many agents it has and its
    recording (with ``--record``); None after a usage error (reported)."""
    from . import _commands as commands

    entries = commands.agent_entries(spec.argv, spec.file, spec.ring)
    if entries is None:
        return None
    display = HubDisplay()
    first_id = commands.RING_FREE_IDS if spec.ring is not None else 1
    for i, entry in enumerate(entries):  # in stream-id order from the first frame of every view
        display.add_agent(first_id + i, entry.name, entry.agent_type)
    nodes = commands.agent_nodes(entries, first_id, spec.ring, spec.ring_producers)
    try:
        graph = commands.build_graph(json.dumps({"nodes": nodes}))
    except FlowplexError as exc:
        _say(f"flowplex agents: {exc}")
        return None
    recording = None
    if spec.record is not None:
        from ._record import record_session

        try:
            recording = record_session(graph, display, spec.record, [e.name for e in entries], first_id,
                                       ring=spec.ring is not None, inputs=spec.record_input)
        except FlowplexError as exc:
            _say(f"flowplex agents: --record: {exc}")
            return None
    return graph, display, len(entries), recording


def _run(graph: Graph, display: HubDisplay, hub: AgentHub, cancel: threading.Event, ready_fd: int, count: int) -> int:
    """Start the graph, say we serve, and run until asked to stop; the graph is always stopped."""
    from ..graph import GraphState
    from . import _commands as commands
    from ._registry import register_display

    with register_display(commands.AGENTS_DISPLAY, display):
        display.start()
        try:
            graph.start(control=False)  # the hub is the control endpoint
            _say(f"flowplex agents: {hub.name}: {count} agents served on {hub.path} (pid {os.getpid()})")
            _ready(ready_fd, hub.name)
            while not display.quit_requested.is_set() and graph.state != GraphState.TERMINATED:
                display.quit_requested.wait(0.1)
            hub.state = "STOPPING"
            if cancel.is_set():
                graph.cancel()
            commands.drain(graph, display)
        except FlowplexError as exc:
            _say(f"flowplex agents: error: {exc}")
            return 1
        finally:
            commands.stop_graph(graph)
            display.stop()
    return 0


def _serve_signals(display: HubDisplay) -> None:
    """SIGTERM and SIGINT stop the agents the gentle way; SIGHUP is no reason to (detached).

    SIGHUP gets a handler rather than ``SIG_IGN``: an ignored signal stays ignored across
    ``exec``, and the agents must see the default.
    """

    def stop(signum: int, frame: object) -> None:
        display.quit_requested.set()

    def hangup(signum: int, frame: object) -> None:
        pass

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGHUP, hangup)


def _ready(fd: int, name: str) -> None:
    """Tell the starting command our name: it prints it and exits 0."""
    if fd < 0:
        return
    with contextlib.suppress(OSError):
        os.write(fd, f"{name}\n".encode())
    with contextlib.suppress(OSError):
        os.close(fd)


def main() -> None:
    """The background process's entry: ``python -c 'from flowplex.terminal._serve import main; main()' SPEC``."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s flowplex: %(levelname)s: %(message)s"))
    root = logging.getLogger("flowplex")
    root.addHandler(handler)
    root.setLevel(logging.WARNING)
    spec = ServeSpec(**json.loads(sys.argv[1]))
    sys.exit(serve(spec))


def _say(text: str) -> None:
    """A line of the log (standard error, unbuffered)."""
    print(text, file=sys.stderr, flush=True)
