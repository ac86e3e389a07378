"""``GraphControl``: a running ``Graph`` behind a control socket (``ps``, ``top``, ``echo``, ``hz``,
``dot``, ``stop``, ``record``, ``condition``, ``notify``).

Everything it reports comes from the graph's own snapshots (``Graph.stats``), sampled once a
second by the control thread so that rates are deltas over a known interval; nothing of it runs
per packet unless a client taps an edge (``_taps``) or records streams (``_record``). ``top``
switches the graph's callback timing on when it first asks (p50/p99 and a core's share need it):
a graph nobody watches pays nothing.
"""

from __future__ import annotations

import functools
import os
import threading
import time
from collections import deque
from typing import TYPE_CHECKING, Any, Final, final

from .._state import GraphState
from .._suggest import did_you_mean
from ..errors import ControlError, FlowplexError
from ._server import ControlServer, Session
from ._taps import ECHO_BUFFER, EchoTap, RateTap

if TYPE_CHECKING:
    from ..diagnostics import GraphStats, NodeStats
    from ..engine._engine import Engine
    from ..graph import Graph
    from ._record import LiveRecording

__all__ = ["GraphControl", "node_rows"]

ECHO_PER_TICK: Final = 100
"""Packets an ``echo`` stream sends per control tick (20 ms) at most: 5,000 per second; past that
the tap's buffer fills and the rest are dropped and counted, so a fast edge keeps its speed."""
STREAM_BACKLOG: Final = 256 * 1024
"""Unsent bytes past which a streaming client counts as stalled: its packets are dropped, and counted."""
SAMPLE_S: Final = 1.0
"""How often the control thread samples the graph's counters (the base of every rate)."""
RECORD_FINISH_S: Final = 60.0
"""How long the graph's close waits for its live recordings to finish their files."""
RECORD_REPORT_S: Final = 0.5
"""How long it then gives their clients' ``end`` events to be queued."""


@final
class GraphControl:
    """The control endpoint of one graph; ``close`` removes it (the graph's ``close`` does too)."""

    def __init__(self, graph: Graph, engine: Engine, name: str, *, exact: bool = True, source: str = "") -> None:
        self._graph = graph
        self._engine = engine  # the graph's own: ops read its edges and tap them
        self._source = source
        self._samples: deque[GraphStats] = deque(maxlen=2)
        self._lock = threading.Lock()
        self._samples.append(graph.stats())
        self._recordings: list[LiveRecording] = []
        """Live recordings not known to be finished (pruned as new ones start)."""
        self._recording_of: dict[int, LiveRecording] = {}
        """The recording of each connection that asked for one (by ``id(session)``)."""
        self._server = ControlServer(
            name, {"top": self._top, "echo": self._echo, "hz": self._hz, "dot": self._dot, "stop": self._stop,
                   "record": self._record, "condition": self._condition, "notify": self._notify},
            self._summary, kind="graph", exact=exact)
        self._server.ticks.append(self._sample)

    @property
    def name(self) -> str:
        """The name clients reach the graph by."""
        return self._server.name

    @property
    def path(self) -> str:
        """The control socket's path."""
        return str(self._server.path)

    def close(self) -> None:
        """Finish the live recordings' files (their clients hear how they ended), then stop
        serving; taps detach as their sessions end."""
        with self._lock:
            recordings = list(self._recordings)
        ended = self._terminated()  # (else the close cancels a running graph: nothing to wait for)
        for rec in recordings:
            rec.stop("graph closed", settle=ended)
        deadline = time.monotonic() + RECORD_FINISH_S
        for rec in recordings:
            rec.done.wait(max(0.0, deadline - time.monotonic()))
        deadline = time.monotonic() + RECORD_REPORT_S
        for rec in recordings:
            rec.reported.wait(max(0.0, deadline - time.monotonic()))
        self._server.close()

    # -- sampling ------------------------------------------------------------------------------

    def _sample(self) -> None:
        stats = self._graph.stats()
        with self._lock:
            self._samples.append(stats)

    def _pair(self) -> tuple[GraphStats, GraphStats]:
        """The oldest kept sample and a fresh snapshot: the interval every rate is measured over."""
        now = self._graph.stats()
        with self._lock:
            before = self._samples[0]
        return before, now

    # -- ops -----------------------------------------------------------------------------------

    def _summary(self, pair: tuple[GraphStats, GraphStats] | None = None) -> dict[str, Any]:
        before, now = pair or self._pair()
        dt = max((now.taken_ns - before.taken_ns) / 1e9, 1e-9)
        (in0, out0), (in1, out1) = self._flow(before), self._flow(now)
        return {"state": now.state, "source": self._source, "nodes": len(now.nodes),
                "in_per_s": (in1 - in0) / dt, "out_per_s": (out1 - out0) / dt,
                "errors": sum(n.errors for n in now.nodes) + (1 if now.error and not any(n.errors for n in now.nodes)
                                                              else 0),
                "error": now.error}

    def _flow(self, stats: GraphStats) -> tuple[int, int]:
        """Packets into the graph (what its sources emit and its entry nodes take from graph inputs)
        and out of it (what its sinks take and the producers of graph outputs send), so far."""
        entry, exit_in, exit_out = self._ends
        nodes = stats.nodes
        return (sum(nodes[i].packets_out if nodes[i].is_source else nodes[i].packets_in for i in entry),
                sum(nodes[i].packets_in for i in exit_in) + sum(nodes[i].packets_out for i in exit_out))

    @functools.cached_property
    def _ends(self) -> tuple[list[int], list[int], list[int]]:
        """Node indexes: the entry nodes (sources, consumers of graph inputs), the sinks (no
        outputs) and the producers of graph outputs."""
        stats = self._samples[0]
        index = {n.node_name: i for i, n in enumerate(stats.nodes)}
        fed = {index[c[0]] for e in stats.edges if e.is_graph_input for c in e.consumers if c[0] in index}
        entry = sorted({i for i, n in enumerate(stats.nodes) if n.is_source} | fed)
        producers = {e.producer for e in stats.edges if e.producer is not None}
        sinks = [i for i, n in enumerate(stats.nodes) if n.node_name not in producers]
        to_outputs = sorted({index[e.producer] for e in stats.edges if e.is_graph_output and e.producer in index})
        return entry, sinks, [i for i in to_outputs if i not in sinks]

    def _top(self, session: Session, request: dict[str, Any]) -> dict[str, Any]:
        if request.get("timing", True) and self._engine.stats_level != "full":
            self._engine.enable_timing()
        before, now = pair = self._pair()  # one snapshot serves the summary and the rows
        return {"summary": self._summary(pair), "interval_s": (now.taken_ns - before.taken_ns) / 1e9,
                "stats_level": now.stats_level, "rows": node_rows(before, now, self._workers()),
                "queued": now.queued, "queue_limit": now.queue_limit}

    def _workers(self) -> dict[str, str]:
        """Where each executor runs its work: this process, or its worker processes' pids."""
        out = {}
        for name, ex in zip(self._graph.executor_names(), self._engine.executors, strict=False):
            pids = getattr(ex, "pids", None)  # a process pool's workers (the one executor kind with pids)
            out[name] = ("pid " + ",".join(map(str, pids()))) if callable(pids) else f"pid {os.getpid()}"
        return out

    def _edge(self, stream: object) -> Any:
        edges = self._engine.edges
        if not isinstance(stream, str) or stream not in edges:
            msg = f"no stream named {stream!r}{did_you_mean(str(stream), list(edges))} (streams: {', '.join(edges)})"
            raise ControlError(msg)
        return edges[stream]

    def _attach(self, session: Session, edge: Any, tap: Any) -> None:
        engine = self._engine
        engine.observe(edge, tap, False)
        session.on_close.append(lambda: engine.unobserve(edge, tap))

    def _echo(self, session: Session, request: dict[str, Any]) -> None:
        edge = self._edge(request.get("stream"))
        limit = request.get("n")
        if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 1):
            msg = f"-n must be a positive count, not {limit!r}"
            raise ControlError(msg)
        tap = EchoTap(self._engine, edge, limit, bool(request.get("raw", False)))
        tap.attach()
        session.on_close.append(tap.close)
        lost = [0]  # packets taken in but never sent: the client stalled
        sent = [0]
        session.send({"ok": True, "stream": edge.name})

        def pump() -> bool:
            # A bounded share of the control thread per tick: it holds the GIL the graph runs on.
            for _ in range(ECHO_PER_TICK):
                if session.queued > STREAM_BACKLOG:
                    break
                item = tap.take()
                if item is None:
                    break
                record, data = item
                record["raw"] = len(data) if data is not None else None
                if not session.send({"ev": "packet", **record}):
                    lost[0] += 1
                    continue
                sent[0] += 1
                if data is not None:
                    for i in range(0, max(len(data), 1), 8 << 20):
                        session.send_bytes(data[i:i + (8 << 20)])
            if session.queued > STREAM_BACKLOG:  # the client stopped reading: its packets go, the graph goes on
                lost[0] += tap.discard()
            elif not tap.attached and len(tap.buffer) < ECHO_BUFFER // 2:
                tap.attach()
            ended = edge.closed and not tap.buffer
            if tap.complete or ended:
                tap.close()
                # Every packet of the edge since the tap came on is either sent or dropped.
                session.send({"ev": "end", "reason": "count" if tap.complete else "closed",
                              "sent": sent[0], "dropped": tap.dropped + lost[0]})
                return False
            return True

        session.pumps.append(pump)
        return None

    def _hz(self, session: Session, request: dict[str, Any]) -> None:
        edge = self._edge(request.get("stream"))
        period = float(request.get("period_s", 1.0))
        if not 0.05 <= period <= 60:
            msg = f"period_s must be between 0.05 and 60, not {period}"
            raise ControlError(msg)
        tap = RateTap()
        self._attach(session, edge, tap)
        session.send({"ok": True, "stream": edge.name})
        due = [time.monotonic() + period]

        def pump() -> bool:
            if time.monotonic() < due[0]:
                return True
            due[0] += period
            session.send({"ev": "hz", **tap.report()})
            if edge.closed:
                session.send({"ev": "end", "reason": "closed", "count": tap.count})
                return False
            return True

        session.pumps.append(pump)
        return None

    def _dot(self, session: Session, request: dict[str, Any]) -> dict[str, Any]:
        view = request.get("view", "diagnostics")
        return {"dot": self._graph.to_dot(str(view))}

    def _record(self, session: Session, request: dict[str, Any]) -> None:
        """Record streams into a file until this connection asks to stop (``stop: true``) or
        closes, the streams end, or the graph closes (``_record``); the answer names the
        streams, the ``end`` event says what was recorded."""
        from ._record import LiveRecording, parse_request

        key = id(session)
        current = self._recording_of.get(key)
        if request.get("stop"):
            if current is None:
                msg = "record: this connection records nothing (send record with a path first)"
                raise ControlError(msg)
            current.stop(str(request.get("reason") or "stopped"))
            return None
        if current is not None:
            msg = f"record: this connection records {current.path} already (one recording per connection)"
            raise ControlError(msg)
        state = self._graph.state
        if state not in (GraphState.RUNNING, GraphState.DRAINING):
            msg = (f"the graph is {state.name.lower()}: it has nothing to record" if state == GraphState.TERMINATED
                   else f"the graph is {state.name.lower()}, not running: try again once it runs")
            raise ControlError(msg)
        edges = self._engine.edges
        try:
            rec = LiveRecording(self._engine, edges, parse_request(request, list(edges)), self._terminated)
        except FlowplexError as exc:  # a bad request, path or file: the caller's to fix (exit 2)
            session.send({"ok": False, "error": str(exc), "usage": True})
            return None
        with self._lock:
            self._recordings = [r for r in self._recordings if not r.done.is_set()] + [rec]
        self._recording_of[key] = rec

        def closed() -> None:  # the client went away (a killed `flowplex record`): the file is finished all the same
            self._recording_of.pop(key, None)
            rec.reported.set()
            rec.stop("client closed")

        session.on_close.append(closed)
        session.send({"ok": True, "path": rec.path, "streams": rec.streams})
        session.pumps.append(lambda: rec.pump(session))
        return None

    def _condition(self, session: Session, request: dict[str, Any]) -> dict[str, Any]:
        """Set a ``boolean`` condition (``condition``, ``value``); with none named, list the conditions."""
        name, value = request.get("condition"), request.get("value")
        conditions = self._engine.conditions
        if name is None:
            return conditions.listing()
        if not isinstance(name, str) or not isinstance(value, bool):
            msg = f"condition: condition must be a name and value true or false, not {name!r} and {value!r}"
            raise ControlError(msg)
        try:
            self._graph.set_condition(name, value)
        except FlowplexError as exc:  # an unknown name: the message lists the known ones
            raise ControlError(str(exc)) from None
        return {"name": name, "value": value}

    def _notify(self, session: Session, request: dict[str, Any]) -> dict[str, Any]:
        """Signal the ``event`` condition named by ``event`` once."""
        name = request.get("event")
        if not isinstance(name, str):
            msg = f"notify: event must be a name, not {name!r}"
            raise ControlError(msg)
        try:
            self._graph.notify(name)
        except FlowplexError as exc:
            raise ControlError(str(exc)) from None
        return {"name": name}

    def _terminated(self) -> bool:
        return self._graph.state == GraphState.TERMINATED

    def _stop(self, session: Session, request: dict[str, Any]) -> dict[str, Any]:
        if request.get("now"):
            self._graph.cancel()
            return {"stopping": "cancel"}
        self._graph.close_all_inputs()
        self._engine.finish_sources()
        return {"stopping": "drain"}


def node_rows(before: GraphStats, now: GraphStats, workers: dict[str, str]) -> list[dict[str, Any]]:
    """``top``'s table: one row per node, rates over the interval between the two snapshots."""
    dt = max((now.taken_ns - before.taken_ns) / 1e9, 1e-9)
    old = {n.node_name: n for n in before.nodes}
    ports = {(n.node_name, p.name): p for n in now.nodes for p in n.ports}
    blocked_on: dict[str, str] = {}
    for edge in now.edges:
        full = (any(ports[c].full for c in edge.consumers if c in ports)
                or any(p.capacity and p.overflow == "block" and p.queued >= p.capacity for p in edge.pollers))
        if edge.producer is not None and full:
            blocked_on.setdefault(edge.producer, edge.name)
    rows = []
    for n in now.nodes:
        o = old.get(n.node_name, n)
        depth = max(n.ports, key=lambda p: p.queued, default=None)
        rows.append({
            "node": n.node_name, "kernel": n.kernel_name, "executor": n.executor,
            "worker": workers.get(n.executor, ""),
            "in_per_s": (n.packets_in - o.packets_in) / dt, "out_per_s": (n.packets_out - o.packets_out) / dt,
            "queued": n.queued, "bound": (depth.capacity or depth.fixed) if depth is not None else 0,
            "p50_us": n.p50_us, "p99_us": n.p99_us,
            "core": ((n.total_process_us - o.total_process_us) / 1e6 / dt
                     if before.stats_level == "full" and now.stats_level == "full" else None),  # timed throughout
            "state": state_text(n, now, blocked_on.get(n.node_name)),
            "drops": sum(p.dropped for p in n.ports), "errors": n.errors,
            "timeouts": (sum(p.timeouts for p in n.ports) if any(p.timeout_ms for p in n.ports)
                         else None),  # None: no input of it has a timeout_ms
        })
    return rows


def state_text(n: NodeStats, graph: GraphStats, full_output: str | None) -> str:
    """What the node does now, in words: running, waiting on input X, blocked on output Y, held..."""
    if n.state in ("CLOSED", "ERROR", "CREATED"):
        return n.state.lower()
    if n.blocked:
        return f"blocked on output {full_output}" if full_output else "blocked on output"
    if n.running:
        return "running"
    if n.held:  # a condition: disabled, waiting for an event, a period
        return n.held
    if n.state == "WAITING_SOURCE":
        return "waiting for its next turn"
    if n.is_source:
        held = graph.queue_limit and graph.counted >= graph.queue_limit
        return "held by backpressure" if held else "idle"
    empty = [p.name for p in n.ports if not p.queued and not p.closed]
    return f"waiting on input {empty[0]}" if empty else "idle"
