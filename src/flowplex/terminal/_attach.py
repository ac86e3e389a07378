"""``flowplex attach NAME``: today's panes view of ``flowplex agents``, on a detached server's agents.

Each attached terminal renders for itself: it builds the usual :class:`PaneRenderer` at its own
size, feeds it the agents' raw output as the server sends it (first the history the server
kept, then what comes live; see :mod:`._hub`), and gives the panes :class:`RemoteAgent`
controls, so that typing mode and the stop/restart/kill keys reach the real agents as
requests. Its pane sizes go to the server, whose PTYs follow the latest view.

Detaching (``d`` outside typing mode, ``Ctrl-\\`` in any mode, and ``q``: the view's quit)
leaves the agents running; so does a terminal that closes or dies: the server only loses a
reader.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Callable
from contextlib import ExitStack
from typing import Any, Final

from ..control import Client
from ..errors import ControlError, UsageError
from ._caps import TermCaps
from ._control import ACTIONS
from ._keys import typing_key_byte
from ._pane_input import PaneInput
from ._panes import PaneRenderer
from ._remote import INPUT_PIECE, open_agents
from ._sanitize import visible_controls
from ._writer import Writer

__all__ = ["DETACH_BYTE", "AttachRenderer", "RemoteAgent", "attach"]

DETACH_BYTE: Final = b"\x1c"
"""Ctrl-\\: detaches in any mode, typing mode too (dtach's and abduco's detach key)."""
DETACH_KEY: Final = "d"
"""Detaches outside typing mode (tmux's prefix + d)."""
FEED_WAIT_S: Final = 30.0
"""How long the view's reader waits for the renderer before it drops output (a huge history
is replayed through the emulators at their pace: nothing of it may be lost meanwhile)."""
FEED_BUDGET: Final = 32 * 1024
"""Output per pane run through its emulator per frame: a view replaying a long history shows
every pane within a frame or two instead of after the longest one (the default 256 KiB of
short lines keeps pyte busy for a fifth of a second)."""
POLL_S: Final = 0.05
"""How often the view looks at its pane sizes (after a resize or a zoom) and its end."""


class Link:
    """The view's connection: requests from any thread (one at a time), frames read by one thread."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self._lock = threading.Lock()
        self.broken = False

    def send(self, op: str, **args: Any) -> None:
        """Send a request; a server that went away is noticed by the reader, not here."""
        with self._lock:
            if self.broken:
                return
            try:
                self.client.send(op, **args)
            except ControlError:
                self.broken = True

    def close(self) -> None:
        """Close the connection (the reader's wait ends)."""
        import socket

        with self._lock:
            self.broken = True
        with contextlib.suppress(OSError):
            self.client.sock.shutdown(socket.SHUT_RDWR)
        self.client.close()


class RemoteAgent:
    """An :class:`~flowplex.terminal._control.AgentControl` whose agent runs in the server: keys
    and actions become requests, and "waiting" is what the server last said."""

    def __init__(self, link: Link, stream_id: int) -> None:
        self._link = link
        self.stream_id = stream_id
        self.waits = False

    def write(self, data: bytes) -> None:
        for i in range(0, len(data), INPUT_PIECE):
            self._link.send("input", agent=self.stream_id, data=data[i:i + INPUT_PIECE].decode("latin-1"), reply=False)

    def request(self, action: str) -> None:
        if action not in ACTIONS:
            msg = f"unknown agent action {action!r}; expected one of {', '.join(ACTIONS)}"
            raise UsageError(msg)
        self._link.send("action", agent=self.stream_id, action=action, reply=False)

    def waiting(self) -> str:
        return "read" if self.waits else ""


class _AttachInput(PaneInput):
    """The panes' keys, and ``d`` detaches (outside typing mode and the search prompt)."""

    def __init__(self, *args: Any, on_detach: Callable[[], None], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._on_detach = on_detach

    def handle_key(self, key: str) -> None:
        if key == DETACH_KEY and self._board.prompt is None:
            self._on_detach()
            return
        super().handle_key(key)


class AttachRenderer(PaneRenderer):
    """The panes view with the detach keys: ``d`` outside typing mode, Ctrl-\\ in any mode.

    ``q`` (and Ctrl-C outside typing mode) end the view too: an attached view never stops the
    agents. :attr:`detached` tells a detach key from the server going away.
    """

    def __init__(self, writer: Writer, caps: TermCaps, *, typing_key: str = "ctrl-a", **kwargs: Any) -> None:
        super().__init__(writer, caps, typing_key=typing_key, **kwargs)
        self.detached = False
        # The renderer's own input part, with the detach key: built from the same parts.
        self._input = _AttachInput(self._board, self._layout, self._drawer, self._scroll,
                                   typing_key=typing_key_byte(typing_key), controls=self._roster.controls,
                                   wake=self._wake, quit_requested=self.quit_requested, on_detach=self.detach)

    def detach(self) -> None:
        """Leave the view; the agents keep running."""
        self.detached = True
        self.quit_requested.set()

    def handle_input(self, data: bytes) -> None:
        cut = data.find(DETACH_BYTE)
        if cut < 0:
            super().handle_input(data)
            return
        if cut:
            super().handle_input(data[:cut])
        self.detach()


class _View:
    """What one attached terminal knows of the server: its agents, their controls, its sizes."""

    def __init__(self, display: AttachRenderer, link: Link) -> None:
        self.display = display
        self.link = link
        self.controls: dict[int, RemoteAgent] = {}
        self.known: set[int] = set()
        self.sizes: dict[str, list[int]] = {}
        self.synced = threading.Event()
        self.ended = ""
        """``stopped`` (the server said so) or ``lost`` (the connection broke), once it happened."""

    def declare(self, rows: list[dict[str, Any]]) -> None:
        """Add the agents not seen yet (and their controls); rename and update the others."""
        display = self.display
        for row in rows:
            sid = int(row["sid"])
            display.add_agent(sid, str(row["name"]), str(row["type"]))
            self.known.add(sid)
            if row.get("controllable"):
                control = self.controls.get(sid)
                if control is None:
                    control = self.controls[sid] = RemoteAgent(self.link, sid)
                    display.attach_control(sid, control, started=bool(row.get("started", True)))
                control.waits = bool(row.get("waiting"))

    def read(self) -> None:
        """The reader thread: the server's frames into the display, until the stream ends."""
        display = self.display
        target: tuple[int, bool] | None = None
        try:
            while True:
                frame = self.link.client.next_frame()
                if isinstance(frame, bytes):
                    if target is not None:
                        display.feed(target[0], frame, pty=target[1])
                    target = None
                    continue
                ev = frame.get("ev")
                target = None  # a bytes frame belongs to the JSON frame just before it, or to none
                if ev == "output":
                    target = (int(frame["sid"]), bool(frame.get("pty", True)))
                elif ev == "started":
                    display.begin_stream(int(frame["sid"]), str(frame.get("note", "")))
                elif ev == "exited":
                    display.end_stream(int(frame["sid"]), str(frame.get("note", "")), ok=bool(frame.get("ok", True)),
                                       exit_code=frame.get("exit_code"))
                elif ev == "agents":
                    self.declare(frame["agents"])
                elif ev == "synced":
                    self.synced.set()
                elif ev == "lost":
                    display.notice(f"{frame.get('bytes', 0)} bytes of output were lost: this terminal fell behind")
                elif ev == "end":
                    self.ended = "stopped"
                    display.quit_requested.set()
                    return
                elif frame.get("ok") is False:
                    display.notice(str(frame.get("error", "the server refused a request")))
        except ControlError:
            if not display.quit_requested.is_set():
                self.ended = "lost"
                display.quit_requested.set()

    def send_sizes(self) -> None:
        """Tell the server the panes' sizes when they changed (a resize, a zoom, a new agent)."""
        sizes: dict[str, list[int]] = {}
        for sid in sorted(self.known):
            size = self.display.pane_size(sid)
            if size is not None:
                sizes[str(sid)] = [size[0], size[1]]
        if sizes and sizes != self.sizes:
            self.sizes = sizes
            self.link.send("resize", sizes=sizes, reply=False)


def attach(name: str, *, typing_key: str | None = None, bell: bool | None = None) -> int:
    """Show the agents of detached server ``name`` until a detach key; the exit code.

    0 after a detach (or when the agents were stopped meanwhile), 1 when there is no such
    server or the connection was lost, 2 for a usage error (not a terminal, a bad key).
    ``typing_key`` and ``bell`` default to what ``flowplex agents -d`` was given.
    """
    from ._commands import display_running, quit_on_signals, stdout_fd
    from ._proxy import redirect_std_streams

    writer = Writer(stdout_fd())
    caps = TermCaps.detect(writer.fd)
    if not caps.is_tty:
        _say("flowplex attach: standard output is not a terminal; from a script use "
             "flowplex agents ls NAME / flowplex agents send NAME AGENT TEXT")
        return 2
    try:
        client, info = open_agents(name)
    except ControlError as exc:
        _say(f"flowplex attach: {exc}")
        return 1
    try:
        answer = client.request("attach")
        key = typing_key or str(answer.get("typing_key") or "ctrl-a")
        typing_key_byte(key)
    except (ControlError, UsageError) as exc:
        client.close()
        _say(f"flowplex attach: {exc}")
        return 2 if isinstance(exc, UsageError) else 1
    client.sock.settimeout(None)  # a stream: quiet agents are no timeout
    link = Link(client)
    served = str(info.get("name", name))
    dot = "·" if caps.unicode else "-"
    display = AttachRenderer(writer, caps, title=f"flowplex attach {served} {dot} d detach", typing_key=key,
                             bell=bool(answer.get("bell", True)) if bell is None else bell,
                             overflow="block", block_timeout_s=FEED_WAIT_S, feed_budget_bytes=FEED_BUDGET)
    view = _View(display, link)
    view.declare(answer.get("agents", []))
    caught: list[int] = []
    reader = threading.Thread(target=view.read, name="flowplex-attach-reader", daemon=True)
    with ExitStack() as stack:
        stack.enter_context(display_running(display))
        stack.enter_context(quit_on_signals(display, caught))
        stack.enter_context(redirect_std_streams(display))
        reader.start()
        while not display.quit_requested.is_set():
            view.send_sizes()
            display.quit_requested.wait(POLL_S)
    link.close()
    reader.join(timeout=2.0)
    if view.ended == "lost" and not display.detached:
        _say(f"flowplex attach: lost the connection to {served}")
        return 1
    if view.ended == "stopped" and not display.detached:
        _say(f"flowplex attach: the agents of {served} stopped")
        return 0
    _say(f"flowplex attach: detached from {served}; its agents keep running (flowplex attach {served})")
    return 0


def _say(text: str) -> None:
    """One line on standard error (after the view left the screen), foreign text in it shown."""
    sys.stderr.write(visible_controls(text) + "\n")
    sys.stderr.flush()
