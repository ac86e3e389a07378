"""``ControlServer``: a live graph's control socket, served by one thread that never blocks on a client.

The thread runs a selector over the listening socket and every client. What a client may cost
the process is bounded: its partial request (``MAX_REQUEST``), its unsent replies (``OUTBOX_LIMIT``;
past half of it the server stops reading that client's requests, so a flood waits in the client's
own socket), and a slot among ``MAX_CLIENTS``. Garbage, an oversized length or a peer of another
user closes the connection; a stalled reader only loses the stream events it cannot take (the
streaming op counts them). Handlers run on this thread: they answer at once or install a *pump*
that the thread calls every ``TICK_S`` to move stream events into the client's outbox.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import selectors
import socket
import struct
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final, final

from .._suggest import did_you_mean
from ..errors import ControlError
from ._paths import check_name, runtime_dir
from ._wire import MAX_REPLY, MAX_REQUEST, PROTOCOL, FrameReader, ProtocolError, encode, encode_bytes

__all__ = ["MAX_CLIENTS", "ControlServer", "Handler", "Session", "is_live"]

log = logging.getLogger("flowplex.control")

MAX_CLIENTS: Final = 64
"""Connections served at once; one more is told so and closed."""
OUTBOX_LIMIT: Final = MAX_REPLY + 1024 * 1024
"""Unsent bytes one client may hold: one largest frame and a little more."""
TICK_S: Final = 0.02
"""How often pumps run while a client streams."""
MAX_NAME_TRIES: Final = 99
"""``NAME``, ``NAME-2`` ... ``NAME-99``: the default names tried before giving up."""

Handler = Callable[["Session", dict[str, Any]], "dict[str, Any] | None"]
"""An op: the answer (sent as ``{"ok": true, ...}``), or None when it installed a pump that streams."""
Pump = Callable[[], bool]
"""Called on the server thread every tick while the client streams; False ends the stream."""


@final
class Session:
    """One connected client: its partial request, its outbox, its pumps and what to undo at close."""

    def __init__(self, sock: socket.socket, uid: int) -> None:
        self.sock = sock
        self.uid = uid
        self.reader = FrameReader(MAX_REQUEST)
        self.outbox: deque[bytes] = deque()
        self.queued = 0
        self.sent_head = 0  # bytes of outbox[0] already sent
        self.pumps: list[Pump] = []
        self.on_close: list[Callable[[], None]] = []
        self.eof = False
        self.closed = False

    def send(self, obj: dict[str, Any]) -> bool:
        """Queue a JSON frame; False (nothing queued) when the client's outbox is full."""
        return self._queue(encode(obj))

    def send_bytes(self, data: bytes | memoryview) -> bool:
        """Queue a bytes frame (it belongs to the JSON frame sent before it); False when full."""
        return self._queue(encode_bytes(data))

    def room(self) -> int:
        """Bytes the outbox may still take."""
        return max(0, OUTBOX_LIMIT - self.queued)

    def _queue(self, frame: bytes) -> bool:
        if self.closed or self.queued + len(frame) > OUTBOX_LIMIT:
            return False
        self.outbox.append(frame)
        self.queued += len(frame)
        return True


@final
class ControlServer:
    """The control endpoint of one process: a Unix socket named after the graph, and its thread.

    ``name`` is taken as given (an error when a live process holds it) or, with ``exact=False``,
    made unique with ``-2``, ``-3``... ``info`` adds the owner's fields to the ``info`` op's answer.
    """

    def __init__(self, name: str, handlers: dict[str, Handler], info: Callable[[], dict[str, Any]], *,
                 kind: str = "graph", exact: bool = True, directory: Path | None = None) -> None:
        self.kind = kind
        self.directory = directory or runtime_dir()
        self.handlers: dict[str, Handler] = {"info": self._info, **handlers}
        self.info_fn = info
        self.started = time.time()
        self.ticks: list[Callable[[], None]] = []
        self._soon: deque[Callable[[], None]] = deque()
        self.name, self._listener = _claim(self.directory, check_name(name), exact)
        self.path = self.directory / f"{self.name}.sock"
        self._inode = self.path.stat().st_ino
        self._sessions: dict[int, Session] = {}
        self._sel = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        for s in (self._listener, self._wake_r, self._wake_w):
            s.setblocking(False)
        self._sel.register(self._listener, selectors.EVENT_READ, None)
        self._sel.register(self._wake_r, selectors.EVENT_READ, None)
        self._closing = False
        self._refused: deque[tuple[float, socket.socket]] = deque()
        self._thread = threading.Thread(target=self._serve, name=f"flowplex-control-{self.name}", daemon=True)
        self._thread.start()

    # -- the owner's side ----------------------------------------------------------------------

    def call_soon(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` on the server thread soon (any thread may call it)."""
        self._soon.append(fn)
        self.wake()

    def wake(self) -> None:
        """Make the server thread look at its pumps and queued calls now."""
        with contextlib.suppress(OSError):
            self._wake_w.send(b"\0")

    def close(self) -> None:
        """Stop serving: end every session, remove the socket (when it is still ours)."""
        if self._closing:
            return
        self._closing = True
        self.wake()
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout=2.0)
        with contextlib.suppress(OSError):
            if self.path.stat().st_ino == self._inode:
                self.path.unlink()

    def __enter__(self) -> ControlServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def clients(self) -> int:
        """Connections open now."""
        return len(self._sessions)

    # -- the thread ----------------------------------------------------------------------------

    def _info(self, session: Session, request: dict[str, Any]) -> dict[str, Any]:
        return {"name": self.name, "pid": os.getpid(), "kind": self.kind, "protocol": PROTOCOL,
                "started": self.started, "uptime_s": time.time() - self.started, **self.info_fn()}

    def _serve(self) -> None:
        last_tick = time.monotonic()
        try:
            while not self._closing:
                streaming = any(s.pumps for s in self._sessions.values())
                for key, events in self._sel.select(TICK_S if streaming or self._soon else 1.0):
                    if key.fileobj is self._listener:
                        self._accept()
                    elif key.fileobj is self._wake_r:
                        with contextlib.suppress(OSError):
                            self._wake_r.recv(4096)
                    else:
                        session: Session = key.data
                        if events & selectors.EVENT_READ:
                            self._read(session)
                        if events & selectors.EVENT_WRITE and not session.closed:
                            self._write(session)
                while self._soon:
                    self._run(self._soon.popleft())
                self._close_refused()
                now = time.monotonic()
                if now - last_tick >= 1.0:
                    last_tick = now
                    for fn in self.ticks:
                        self._run(fn)
                for session in list(self._sessions.values()):
                    self._pump(session)
        finally:
            for session in list(self._sessions.values()):
                _flush(session)  # the last answers (to `stop`, say) reach their clients
                self._drop(session)
            self._sel.close()
            for s in (self._listener, self._wake_r, self._wake_w):
                s.close()
            for _, sock in self._refused:
                sock.close()

    @staticmethod
    def _run(fn: Callable[[], None]) -> None:
        try:
            fn()
        except Exception:  # an owner's callback must not end the control thread
            log.exception("control callback %r failed", fn)

    def _accept(self) -> None:
        while True:
            try:
                sock, _ = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return
            sock.setblocking(False)
            uid = _peer_uid(sock)
            if uid not in (os.getuid(), 0):
                self._linger(sock, f"refused: uid {uid} is not the graph's owner (uid {os.getuid()})")
                continue
            if len(self._sessions) >= MAX_CLIENTS:
                self._linger(sock, f"refused: {MAX_CLIENTS} clients are connected already; try again later")
                continue
            session = Session(sock, uid)
            self._sessions[sock.fileno()] = session
            self._sel.register(sock, selectors.EVENT_READ, session)

    def _linger(self, sock: socket.socket, text: str) -> None:
        """Refuse ``sock`` and keep it (at most ``MAX_CLIENTS`` of them, half a second each) until closed."""
        _refuse(sock, text)
        self._refused.append((time.monotonic(), sock))
        while len(self._refused) > MAX_CLIENTS:
            self._refused.popleft()[1].close()

    def _close_refused(self) -> None:
        now = time.monotonic()
        while self._refused and now - self._refused[0][0] > 0.5:
            self._refused.popleft()[1].close()

    def _read(self, session: Session) -> None:
        try:
            data = session.sock.recv(65536)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._drop(session)
            return
        if not data:
            session.eof = True
            session.pumps.clear()
            self._interest(session)
            return
        try:
            frames = session.reader.feed(data)
        except ProtocolError as exc:
            session.outbox.clear()
            session.queued = 0
            session.send({"ok": False, "error": f"protocol error: {exc}"})
            session.eof = True
            self._interest(session)
            return
        for frame in frames:
            if isinstance(frame, dict):
                self._dispatch(session, frame)
        self._interest(session)

    def _dispatch(self, session: Session, request: dict[str, Any]) -> None:
        if request.get("v") != PROTOCOL:
            session.send({"ok": False, "error": f"protocol version {request.get('v')!r} is not spoken here "
                                                f"(this {self.kind} speaks {PROTOCOL})"})
            return
        op = request.get("op")
        handler = self.handlers.get(op) if isinstance(op, str) else None
        if handler is None:
            ops = sorted(self.handlers)
            hint = "" if op in KNOWN_OPS else did_you_mean(str(op), ops)  # another kind's op is no typo
            if hint:
                text = f"unknown op {op!r}{hint}"
            else:
                text = (f"{self.name} is {_article(self.kind)} {self.kind}: it has no op {op!r} "
                        f"(its ops: {', '.join(ops)})")
            session.send({"ok": False, "error": text})
            return
        try:
            answer = handler(session, request)
        except (ControlError, ValueError, KeyError, TypeError) as exc:
            reason = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc  # (KeyError's str quotes)
            session.send({"ok": False, "error": str(reason)})
            return
        except Exception as exc:
            log.exception("control op %r failed", op)
            session.send({"ok": False, "error": f"internal error in op {op!r}: {exc!r}"})
            return
        if answer is not None:
            session.send({"ok": True, **answer})

    def _pump(self, session: Session) -> None:
        if session.closed:
            return
        if session.pumps:
            keep = []
            for pump in session.pumps:
                try:
                    if pump():
                        keep.append(pump)
                except Exception:
                    log.exception("control stream %r failed", pump)
            session.pumps = keep
        self._interest(session)

    def _write(self, session: Session) -> None:
        outbox = session.outbox
        try:
            while outbox:
                head = outbox[0]
                n = session.sock.send(memoryview(head)[session.sent_head:])
                session.sent_head += n
                if session.sent_head < len(head):
                    break
                outbox.popleft()
                session.queued -= len(head)
                session.sent_head = 0
        except (BlockingIOError, InterruptedError):
            pass
        except OSError:
            self._drop(session)
            return
        self._interest(session)

    def _interest(self, session: Session) -> None:
        """Register what the session waits for: reads while its outbox has room, writes while it holds any."""
        if session.closed:
            return
        if session.eof and not session.outbox:
            self._drop(session)
            return
        events = 0
        if not session.eof and session.queued < OUTBOX_LIMIT // 2:
            events |= selectors.EVENT_READ
        if session.outbox:
            events |= selectors.EVENT_WRITE
        try:  # (never 0: a session over half its outbox holds frames, so it waits to write)
            self._sel.modify(session.sock, events or selectors.EVENT_WRITE, session)
        except (KeyError, ValueError, OSError):
            self._drop(session)

    def _drop(self, session: Session) -> None:
        if session.closed:
            return
        session.closed = True
        session.pumps.clear()
        for fn in session.on_close:
            self._run(fn)
        session.on_close.clear()
        self._sessions.pop(session.sock.fileno(), None)
        with contextlib.suppress(KeyError, ValueError, OSError):
            self._sel.unregister(session.sock)
        session.sock.close()
        session.outbox.clear()


KNOWN_OPS: Final = frozenset({"info", "top", "echo", "hz", "dot", "stop", "record", "condition", "notify",
                              "agents", "attach", "input", "action", "resize"})
"""The ops of every kind of endpoint (a graph's, an agents session's)."""


def _article(word: str) -> str:
    return "an" if word[:1] in "aeiou" else "a"


def _flush(session: Session, timeout: float = 0.2) -> None:
    """Send what the session still holds, waiting at most ``timeout`` in all (the server is closing)."""
    if session.closed or not session.outbox:
        return
    deadline = time.monotonic() + timeout
    try:
        session.sock.settimeout(timeout)
        while session.outbox and time.monotonic() < deadline:
            head = session.outbox.popleft()
            session.sock.sendall(memoryview(head)[session.sent_head:])
            session.sent_head = 0
    except OSError:
        pass


def _peer_uid(sock: socket.socket) -> int:
    """The connecting process's uid (``SO_PEERCRED``); -1 when the system cannot say."""
    try:
        creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    except (OSError, AttributeError):
        return -1
    return int(struct.unpack("3i", creds)[1])


def _refuse(sock: socket.socket, text: str) -> None:
    """Send the refusal and stop writing; the socket stays open a moment (``_linger``) so that a
    request already on its way does not reset the connection before the client read why."""
    with contextlib.suppress(OSError):
        sock.send(encode({"ok": False, "error": text}))
        sock.shutdown(socket.SHUT_WR)


def is_live(path: Path, timeout: float = 0.5) -> bool:
    """Whether a process serves ``path`` now (a refused or missing socket: no)."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(timeout)
    try:
        probe.connect(str(path))
    except (ConnectionRefusedError, FileNotFoundError, NotADirectoryError):
        return False
    except OSError:
        return True  # a full backlog or a slow peer: someone is there
    finally:
        probe.close()
    return True


def _claim(directory: Path, name: str, exact: bool) -> tuple[str, socket.socket]:
    """Bind the socket of ``name`` (or the first free ``name-N``), removing stale ones on the way."""
    with open(directory / ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        candidates = [name] if exact else [name] + [f"{name}-{i}" for i in range(2, MAX_NAME_TRIES + 1)]
        for candidate in candidates:
            path = directory / f"{check_name(candidate[:64])}.sock"
            if path.exists() or path.is_symlink():
                if is_live(path):
                    continue
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
            listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                listener.bind(str(path))
                os.chmod(path, 0o600)
                listener.listen(MAX_CLIENTS)
            except OSError as exc:
                listener.close()
                msg = f"cannot listen on {path}: {exc.strerror or exc}"
                raise ControlError(msg) from None
            return candidate, listener
    if exact:
        msg = f"a live graph is already named {name!r}; choose another name (--name) or stop it (flowplex stop {name})"
    else:
        msg = f"{MAX_NAME_TRIES} live graphs are named after {name!r} already; choose a name (--name)"
    raise ControlError(msg)
