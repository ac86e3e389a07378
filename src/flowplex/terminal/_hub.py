"""The server of ``flowplex agents -d``: the agents run in a background process, views attach to it.

The background process (:mod:`._serve`) runs the same graph as ``flowplex agents`` (a ``CommandSource`` per
agent feeding a ``TerminalSink``), but the sink draws into a :class:`HubDisplay`: a display
without a terminal that keeps, per agent, a bounded history of what it wrote (the output bytes
and its starts and exits, in order) and the agent's control (keys, stop/restart/kill). The
history is the only buffer: every attached view reads it from a cursor of its own, so a view
that is slow or gone costs the agents nothing, and the next view starts from the oldest output
kept (:data:`HISTORY_BYTES` per agent), which rebuilds the screen and the scrollback.

:class:`AgentHub` serves the display on a control socket (``kind: agents``). Its ops:

``agents``
    ``{"agents": [ROW...]}``: one row per agent (:meth:`HubDisplay.rows`).
``attach``
    ``{"ok": true, "agents": [ROW...], "typing_key": ..., "bell": ...}``, then a stream:
    ``{"ev": "agents", "agents": [ROW...]}`` when a row changed (and first),
    ``{"ev": "output", "sid": N, "pty": BOOL}`` followed by a bytes frame (the agent's raw output),
    ``{"ev": "started", "sid": N, "note": ...}``, ``{"ev": "exited", "sid": N, "note": ...,
    "ok": ..., "exit_code": ...}``, ``{"ev": "lost", "sid": N, "bytes": N}`` (this client
    read too slowly: output left the history before it was sent), ``{"ev": "synced"}`` once
    the history that existed at attach time was sent, ``{"ev": "end", "reason": "stopped"}``.
``input``
    ``{"agent": SID, "data": "..."}``: type ``data`` (bytes as Latin-1 code points) into the agent.
``action``
    ``{"agent": SID, "action": "start|stop|restart|kill"}``.
``resize``
    ``{"sizes": {"SID": [COLUMNS, ROWS], ...}}``: the pane sizes of the client's view; the PTYs
    follow the view that sent its sizes last and is still attached (tmux's "latest" policy).
``stop``
    ``{"now": false}`` ends the agents the gentle way (each command is stopped, the server
    exits); ``{"now": true}`` cancels the graph.

``input``, ``action`` and ``resize`` answer ``{"ok": true}`` unless the request says
``"reply": false`` (an attached view sends them so, and only hears of errors).
"""

from __future__ import annotations

import io
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, final

from ..control import ControlServer, Session
from ..control._server import OUTBOX_LIMIT
from ..errors import ControlError
from ._caps import TermCaps
from ._control import ACTIONS
from ._display import AgentInfo, Display
from ._history import AgentLog, Cursor
from ._writer import Writer

if TYPE_CHECKING:
    from ..graph import Graph

__all__ = ["HISTORY_BYTES", "AgentHub", "HubDisplay", "agent_rows", "session_hub"]

HISTORY_BYTES: Final = 2 * 1024 * 1024
"""Output kept per agent for views that attach later (the oldest goes first)."""
TAKE_BYTES: Final = 256 * 1024
"""The most output of one agent sent to a view in one bytes frame."""
STREAM_QUEUE: Final = 2 * 1024 * 1024
"""A view's unsent frames the stream keeps at most: far below the half of the outbox at which
the server stops reading the view's requests, so its keys never wait behind its output."""
STOP_GRACE_S: Final = 0.5
"""How long the views get to hear that the agents stopped before the socket closes."""
MAX_SIZE: Final = 10_000
"""The largest pane side a view may ask for, in cells."""


class HubDisplay(Display):
    """A display without a terminal: records each agent's output and state for attached views.

    It keeps the agents' controls (so that the keys of a remote view reach the real PTYs), polls
    them for "waiting for input" like any display, and keeps the exited commands' sources
    alive (:attr:`keeps_agents`) so that a view can restart them. ``pane_size`` is the size
    the latest attached view gave for the agent's pane, so the PTYs fit that view.
    """

    mode = "hub"

    def __init__(self, history_bytes: int = HISTORY_BYTES) -> None:
        super().__init__(Writer(io.BytesIO()), TermCaps(is_tty=False), fps=20.0, overflow="drop")
        self.history_bytes = int(history_bytes)
        self._logs: dict[int, AgentLog] = {}
        self.version = 0
        """Bumped whenever a row of :meth:`rows` may have changed (lock held)."""
        self._sizes: OrderedDict[int, dict[int, tuple[int, int]]] = OrderedDict()
        """Pane sizes per attached view, the view that sent them last at the end."""
        self._last_sizes: dict[int, tuple[int, int]] = {}
        self.chunks = 0
        """Output chunks received from the agents (the ``in`` rate of ``flowplex ps``)."""

    @property
    def keeps_agents(self) -> bool:
        return True

    # -- the display's hooks (lock held) ---------------------------------------------------------

    def _on_agent(self, info: AgentInfo, change: str) -> None:
        if change == "new":
            self._logs[info.stream_id] = AgentLog(self.history_bytes)
        self.version += 1

    def _on_feed(self, info: AgentInfo, data: bytes) -> None:
        self.chunks += 1
        agent_log = self._logs[info.stream_id]
        agent_log.pty = info.pty
        agent_log.add("output", data)

    def _on_run(self, info: AgentInfo, note: str) -> None:
        agent_log = self._logs[info.stream_id]
        if info.finished:
            agent_log.add("exited", note=info.note, ok=info.ok, exit_code=info.exit_code)
        else:
            agent_log.add("started", note=note)
        self.version += 1

    def _enter(self) -> None:
        pass

    def _leave(self) -> None:
        pass

    def _render(self, now: float, *, final: bool) -> bytes:
        return b""

    # -- what the hub reads (any thread) -----------------------------------------------------------

    def stream_ids(self) -> list[int]:
        """The agents' stream ids, in the order they appeared."""
        with self._lock:
            return list(self._logs)

    def start_cursor(self, stream_id: int) -> Cursor:
        """A cursor at the agent's oldest event kept (lock taken)."""
        with self._lock:
            agent_log = self._logs.get(stream_id)
            return agent_log.start() if agent_log is not None else Cursor(0, 0)

    def cursors(self) -> dict[int, tuple[Cursor, int]]:
        """For a new view: a cursor at each agent's oldest event, and the event it is synced at."""
        with self._lock:
            return {sid: (log_.start(), log_.next) for sid, log_ in self._logs.items()}

    def take(self, stream_id: int, cursor: Cursor, budget: int = TAKE_BYTES) -> tuple[list[tuple[str, Any]], int, bool]:
        """:meth:`AgentLog.take` of the agent's history, and whether its output is a PTY's (lock taken)."""
        with self._lock:
            agent_log = self._logs.get(stream_id)
            if agent_log is None:
                return [], 0, False
            items, lost = agent_log.take(cursor, budget)
            return items, lost, agent_log.pty

    def rows(self) -> list[dict[str, Any]]:
        """Every agent as the ``agents`` op shows it (:func:`agent_rows`)."""
        return agent_rows(self)

    # -- sizes ---------------------------------------------------------------------------------

    def set_sizes(self, view: int, sizes: dict[int, tuple[int, int]]) -> None:
        """View ``view``'s pane sizes: it becomes the one the PTYs follow."""
        with self._lock:
            self._sizes[view] = sizes
            self._sizes.move_to_end(view)
            self._last_sizes.update(sizes)

    def forget_sizes(self, view: int) -> None:
        """View ``view`` detached: the PTYs follow the view before it (or keep their size)."""
        with self._lock:
            self._sizes.pop(view, None)

    def pane_size(self, stream_id: int) -> tuple[int, int] | None:
        with self._lock:
            for sizes in reversed(self._sizes.values()):
                if stream_id in sizes:
                    return sizes[stream_id]
            return self._last_sizes.get(stream_id)


def agent_rows(display: Display) -> list[dict[str, Any]]:
    """Every agent of ``display`` as the ``agents`` op shows it: number, stream id, name, type,
    state, pid, exit code, and what a view needs to draw and control it."""
    now, controls = display.controls_now()
    return [{"number": i.number, "sid": i.stream_id, "name": i.name, "type": i.agent_type.name.lower(),
             "state": i.state(now), "pid": _pid_of(controls.get(i.stream_id)) if not i.finished else None,
             "exit_code": i.exit_code, "finished": i.finished, "ok": i.ok, "note": i.note,
             "waiting": i.waiting, "started": i.started, "controllable": i.controllable,
             "restarts": i.restarts, "pty": i.pty, "bytes": i.bytes_in, "lines": i.lines}
            for i in display.agents()]


def _pid_of(control: object) -> int | None:
    """The pid of the command behind ``control``: a ``CommandSource``'s control carries its source
    (``_source``, whose ``pid`` is the command's while it runs); other agents have none."""
    pid = getattr(getattr(control, "_source", None), "pid", None)
    return pid if isinstance(pid, int) else None


@final
class _View:
    """One attached view: its cursors into the histories, and the pump that streams them."""

    def __init__(self, hub: AgentHub, display: HubDisplay, session: Session) -> None:
        self.hub = hub
        self.display = display
        self.session = session
        starts = display.cursors()
        self.cursors = {sid: cursor for sid, (cursor, _) in starts.items()}
        self.sync_at = {sid: at for sid, (_, at) in starts.items()}
        self.seen = -1
        self.synced = False
        self.ended = False

    def _room(self, need: int) -> bool:
        return OUTBOX_LIMIT - self.session.room() + need <= STREAM_QUEUE

    def pump(self) -> bool:
        """Move what is new into the view's outbox, as much as its share allows (server thread)."""
        hub, session, display = self.hub, self.session, self.display
        if hub.stopping:
            session.send({"ev": "end", "reason": "stopped"})
            self.ended = True
            return False
        version = display.version
        if version != self.seen and self._room(64 * 1024):
            self.seen = version
            session.send({"ev": "agents", "agents": display.rows()})
        for sid in display.stream_ids():
            cursor = self.cursors.get(sid)
            if cursor is None:  # an agent that appeared after the view attached (a ring's stream)
                cursor = self.cursors[sid] = display.start_cursor(sid)
            while self._room(TAKE_BYTES + 64 * 1024):
                items, lost, pty = display.take(sid, cursor)
                if lost:
                    session.send({"ev": "lost", "sid": sid, "bytes": lost})
                if not items:
                    break
                for kind, payload in items:
                    if kind == "output":
                        if session.room() < len(payload) + 1024:  # (only a chunk larger than an outbox)
                            session.send({"ev": "lost", "sid": sid, "bytes": len(payload)})
                            continue
                        session.send({"ev": "output", "sid": sid, "pty": pty})
                        session.send_bytes(payload)
                        hub.sent += 1
                    else:
                        session.send({"ev": kind, "sid": sid, **payload})
        if not self.synced and all(self.cursors[sid].seq >= at for sid, at in self.sync_at.items()):
            self.synced = True
            session.send({"ev": "synced"})
        return True


@final
class AgentHub:
    """The control endpoint of an agents session (see the module docstring for its ops).

    Over a :class:`HubDisplay` (``flowplex agents -d``) it serves every op; over the display of a
    session that runs in its own terminal (``flowplex agents``), every op but ``attach`` and
    ``resize``: that terminal is the one view. ``on_stop(now)`` is called (server thread) when a
    client asks the agents to stop.
    """

    def __init__(self, display: Display, name: str, *, exact: bool, typing_key: str, bell: bool,
                 on_stop: Callable[[bool], None], source: str = "") -> None:
        self.display = display
        self.typing_key = typing_key
        self.bell = bell
        self.source = source
        self.stopping = False
        self.state = "RUNNING"
        self.sent = 0
        self._on_stop = on_stop
        self._views: dict[int, _View] = {}
        self._rates: deque[tuple[float, int, int]] = deque(maxlen=2)
        self._rates.append((time.monotonic(), 0, 0))
        self._server = ControlServer(
            name, {"agents": self._agents, "attach": self._attach, "input": self._input, "action": self._action,
                   "resize": self._resize, "stop": self._stop}, self._summary, kind="agents", exact=exact)
        self._server.ticks.append(self._sample)

    @property
    def name(self) -> str:
        """The name the server got (``agents``, ``agents-2``...)."""
        return self._server.name

    @property
    def path(self) -> Path:
        """The control socket."""
        return self._server.path

    def close(self) -> None:
        """Tell the attached views that the agents stopped, then stop serving."""
        self.stopping = True
        self._server.wake()
        deadline = time.monotonic() + STOP_GRACE_S
        while any(not v.ended for v in list(self._views.values())) and time.monotonic() < deadline:
            time.sleep(0.02)
        if self._views:
            time.sleep(0.05)  # their last frames leave the outboxes
        self._server.close()

    # -- ops (server thread) -------------------------------------------------------------------

    @property
    def _hub(self) -> HubDisplay:
        """The display, when it keeps histories for views; ``ControlError`` when it is a terminal's."""
        if not isinstance(self.display, HubDisplay):
            msg = (f"{self.name} runs in a terminal of its own (flowplex agents without -d): only a background "
                   f"server (flowplex agents -d) can be attached to")
            raise ControlError(msg)
        return self.display

    def _sample(self) -> None:
        chunks = self.display.chunks if isinstance(self.display, HubDisplay) else 0
        self._rates.append((time.monotonic(), chunks, self.sent))

    def _summary(self) -> dict[str, Any]:
        (t0, in0, out0), (t1, in1, out1) = self._rates[0], self._rates[-1]
        dt = max(t1 - t0, 1e-9)
        rows = agent_rows(self.display)
        return {"state": self.state, "source": self.source, "nodes": len(rows),
                "agents": self.display.agent_states(), "clients": len(self._views),
                "in_per_s": (in1 - in0) / dt if t1 > t0 else 0.0, "out_per_s": (out1 - out0) / dt if t1 > t0 else 0.0,
                "errors": sum(1 for r in rows if r["finished"] and not r["ok"]), "error": ""}

    def _agents(self, session: Session, request: dict[str, Any]) -> dict[str, Any]:
        return {"agents": agent_rows(self.display)}

    def _attach(self, session: Session, request: dict[str, Any]) -> None:
        hub = self._hub
        if id(session) in self._views:
            msg = "this connection is attached already"
            raise ControlError(msg)
        view = _View(self, hub, session)
        self._views[id(session)] = view
        session.send({"ok": True, "agents": hub.rows(), "typing_key": self.typing_key, "bell": self.bell})
        session.pumps.append(view.pump)
        session.on_close.append(lambda: self._detached(id(session)))
        return None

    def _detached(self, key: int) -> None:
        self._views.pop(key, None)
        self._hub.forget_sizes(key)

    def _agent(self, request: dict[str, Any]) -> int:
        sid = request.get("agent")
        known = [i.stream_id for i in self.display.agents()]
        if not isinstance(sid, int) or isinstance(sid, bool) or sid not in known:
            msg = f"no agent with stream id {sid!r} (agents: {', '.join(map(str, known)) or 'none'})"
            raise ControlError(msg)
        return sid

    def _control(self, sid: int) -> Any:
        control = self.display.controls_now()[1].get(sid)
        if control is None:
            info = next((i for i in self.display.agents() if i.stream_id == sid), None)
            who = f"{info.number} ({info.name})" if info is not None else str(sid)
            msg = f"agent {who} is not a command: it takes no keys"
            raise ControlError(msg)
        return control

    @staticmethod
    def _answer(request: dict[str, Any], answer: dict[str, Any]) -> dict[str, Any] | None:
        return answer if request.get("reply", True) else None

    def _input(self, session: Session, request: dict[str, Any]) -> dict[str, Any] | None:
        sid = self._agent(request)
        data = request.get("data")
        if not isinstance(data, str):
            msg = "input: 'data' must be a string (bytes as Latin-1 code points)"
            raise ControlError(msg)
        raw = data.encode("latin-1")  # a code point past 255: UnicodeEncodeError, a ValueError: an error answer
        control = self._control(sid)
        control.write(raw)
        return self._answer(request, {"bytes": len(raw)})

    def _action(self, session: Session, request: dict[str, Any]) -> dict[str, Any] | None:
        sid = self._agent(request)
        action = request.get("action")
        if action not in ACTIONS:
            msg = f"unknown action {action!r}; expected one of {', '.join(ACTIONS)}"
            raise ControlError(msg)
        self._control(sid).request(action)
        return self._answer(request, {"action": action})

    def _resize(self, session: Session, request: dict[str, Any]) -> dict[str, Any] | None:
        sizes = request.get("sizes")
        if not isinstance(sizes, dict):
            msg = "resize: 'sizes' must map stream ids to [columns, rows]"
            raise ControlError(msg)
        parsed: dict[int, tuple[int, int]] = {}
        for key, value in sizes.items():
            if (not isinstance(value, list) or len(value) != 2
                    or not all(isinstance(v, int) and 1 <= v <= MAX_SIZE for v in value)):
                msg = f"resize: the size of agent {key} must be [columns, rows] of 1 to {MAX_SIZE}, not {value!r}"
                raise ControlError(msg)
            parsed[int(key)] = (value[0], value[1])
        self._hub.set_sizes(id(session), parsed)
        return self._answer(request, {})

    def _stop(self, session: Session, request: dict[str, Any]) -> dict[str, Any]:
        now = bool(request.get("now", False))
        self.state = "STOPPING"
        self._on_stop(now)
        return {"stopping": "cancel" if now else "drain"}


def session_hub(display: Display, graph: Graph, name: str | None, *, typing_key: str, bell: bool,
                source: str = "") -> AgentHub:
    """The control endpoint of an agents session that runs in its own terminal: ``ls``, ``send``
    and ``stop`` reach it by name (``agents``, ``agents-2``... unless ``name`` is given)."""

    def on_stop(now: bool) -> None:
        if now:
            graph.cancel()
        display.quit_requested.set()

    return AgentHub(display, name or "agents", exact=name is not None, typing_key=typing_key, bell=bell,
                    on_stop=on_stop, source=source)
