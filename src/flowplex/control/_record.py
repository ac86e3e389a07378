"""Live recording: a running graph's streams written into an MCAP file (``flowplex record NAME``).

The ``record`` op (``GraphControl``) attaches one :class:`LiveRecording` to the running engine.
For each stream a packet tap and a bound tap (``Engine.observe``, as ``Graph.tap`` does before a
start) feed the same ``recording.Capture`` that ``run --record`` uses: packets are encoded on
the delivering thread, a writer thread writes the file, the queue between them is bounded, and a
full queue holds the graph back (lossless, the default) or drops and counts (``lossy``). The
graph's process writes the file itself, at the absolute path the client named (the client is
the same user: the server checks its uid); a file is recorded by one recording at a time (an
exclusive ``flock`` on it, whichever process holds it).

A stream's recording starts when its tap goes on, so its first message may be mid-stream: a
packet after the first, a bound past timestamps the file never saw. It stops when the client
asks, when the client's connection closes (a killed ``flowplex record`` still leaves a finished
file), when every recorded stream has closed or the graph ended, or when the graph's control
closes. Stopping takes the taps off, lets the packets already inside a tap reach the capture,
then finishes the file, on a thread of its own: the control thread never waits on a disk.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import stat
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, final

from .._suggest import did_you_mean
from ..errors import ControlError, FlowplexError

if TYPE_CHECKING:
    from ..engine._engine import Engine
    from ..engine._nodes import Edge
    from ..packets import Packet
    from ..recording import Capture
    from ._server import Session

__all__ = ["LiveRecording", "RecordRequest", "parse_request"]

log = logging.getLogger("flowplex.control")

COMPRESSIONS: Final = ("zstd", "lz4", "none")
"""What ``compression`` may be (``recording.COMPRESSIONS``'s keys, named here so that a request
is checked before the recorder, and mcap, are loaded)."""
SETTLE_S: Final = 0.05
"""A recording that ends with its streams waits until no packet entered its taps for this long:
the graph's last packets, delivered to observers just after their edge closed, are kept."""
SETTLE_MAX_S: Final = 1.0
"""The longest such a wait lasts (a graph that still delivers is not ending)."""
DRAIN_S: Final = 30.0
"""How long stopping waits for the calls inside the taps (a lossless capture's writer making room)."""


@dataclass(frozen=True, slots=True)
class RecordRequest:
    """A checked ``record`` request: which streams, into which file, how."""

    path: str
    streams: tuple[str, ...]
    compression: str
    lossy: bool


def parse_request(request: dict[str, Any], streams: list[str]) -> RecordRequest:
    """Check a ``record`` request against the graph's ``streams``.

    Raises:
        ControlError: A path that is not absolute, an unknown stream or compression, a bad flag
            (every one a mistake of the caller's: ``flowplex record`` exits 2).
    """
    path = request.get("path")
    if not isinstance(path, str) or not os.path.isabs(path):
        msg = f"record: 'path' must be an absolute path, not {path!r}"
        raise ControlError(msg)
    asked = request.get("streams")
    if asked is None:
        names = list(streams)
    elif isinstance(asked, list) and asked and all(isinstance(s, str) for s in asked):
        names = list(dict.fromkeys(asked))
    else:
        msg = f"record: 'streams' must be a non-empty list of stream names, not {asked!r}"
        raise ControlError(msg)
    for name in names:
        if name not in streams:
            msg = f"no stream named {name!r}{did_you_mean(name, streams)} (streams: {', '.join(streams)})"
            raise ControlError(msg)
    compression = request.get("compression", "zstd")
    if compression not in COMPRESSIONS:
        msg = f"record: compression {compression!r} is not one of {', '.join(COMPRESSIONS)}"
        raise ControlError(msg)
    lossy = request.get("lossy", False)
    if not isinstance(lossy, bool):
        msg = f"record: 'lossy' must be true or false, not {lossy!r}"
        raise ControlError(msg)
    return RecordRequest(path, tuple(names), str(compression), lossy)


@final
class _Tap:
    """One stream's two observers in front of the capture's callbacks; it counts the packets
    that reached the capture and knows how many calls are inside it (``quiesce`` waits them out)."""

    __slots__ = ("bound", "cond", "entered", "inflight", "name", "on_bound", "on_packet", "packet", "seen",
                 "stopping")

    def __init__(self, name: str, on_packet: Callable[[Packet], None], on_bound: Callable[[int], None]) -> None:
        self.name = name
        self.on_packet = on_packet
        self.on_bound = on_bound
        self.cond = threading.Condition(threading.Lock())
        self.inflight = 0
        self.entered = 0
        """Calls that came in so far (packets and bounds): how ``settle`` sees the stream quiet."""
        self.seen = 0
        """Packets handed to the capture (recorded, or dropped by it and counted there)."""
        self.stopping = False
        # Bound once: the engine finds an observer to take off by identity.
        self.packet: Callable[[Packet], None] = self._packet
        self.bound: Callable[[Packet], None] = self._bound

    def _enter(self) -> bool:
        with self.cond:
            if self.stopping:
                return False
            self.inflight += 1
            self.entered += 1
            return True

    def _leave(self, packets: int) -> None:
        with self.cond:
            self.inflight -= 1
            self.seen += packets
            if self.stopping and not self.inflight:
                self.cond.notify_all()

    def _packet(self, packet: Packet) -> None:
        if not self._enter():
            return
        done = 0
        try:
            self.on_packet(packet)  # (may wait: a lossless capture's queue is full)
            done = 1
        finally:
            self._leave(done)

    def _bound(self, marker: Packet) -> None:
        if not self._enter():
            return
        try:
            self.on_bound(marker.timestamp)
        finally:
            self._leave(0)

    def quiesce(self, deadline: float) -> None:
        """No call enters from now on; wait (until ``deadline``) for those inside to leave."""
        with self.cond:
            self.stopping = True
            while self.inflight and (left := deadline - time.monotonic()) > 0:
                self.cond.wait(left)


@final
class LiveRecording:
    """One client's recording of a running graph (see the module docstring).

    Made on the control thread by the ``record`` op; ``stop`` (any thread, never blocking)
    starts finishing it, ``finish`` waits for that; ``result`` is what ``flowplex record``
    prints, set when ``done`` is.

    Raises (from the constructor):
        ControlError: The file is being recorded already, or is not a regular file.
        RecordingError: The file cannot be created.
    """

    def __init__(self, engine: Engine, edges: dict[str, Edge], request: RecordRequest,
                 ended: Callable[[], bool]) -> None:
        from ..recording import Capture, Recorder

        self.request = request
        self.path = request.path
        self.started = time.time()
        self._t0 = time.monotonic()
        self._engine = engine
        self._ended = ended
        self._edges = [edges[name] for name in request.streams]
        self._lock_fd = _claim(request.path)
        try:
            self._capture: Capture = Capture(Recorder(request.path, compression=request.compression),
                                             lossy=request.lossy)
        except BaseException:
            os.close(self._lock_fd)
            raise
        try:
            self._taps = [_Tap(name, *self._capture.stream(name)) for name in request.streams]
        except BaseException:
            self._capture.close()
            os.close(self._lock_fd)
            raise
        # Every tap is made before any goes on: a failure above leaves the graph as it was.
        for edge, tap in zip(self._edges, self._taps, strict=True):
            engine.observe(edge, tap.packet, False)
            engine.observe(edge, tap.bound, True, packets=False)
        self._lock = threading.Lock()
        self.reason = ""
        """Why it stopped (``""`` while it records): the client's reason, ``closed``, ``graph closed``..."""
        self.done = threading.Event()
        """Set once the file is finished and :attr:`result` is ready."""
        self.reported = threading.Event()
        """Set once the client was told (or went away): the graph's close waits for it a moment."""
        self.result: dict[str, Any] = {}
        self._closer: threading.Thread | None = None

    @property
    def streams(self) -> list[str]:
        """The recorded streams, in the order asked."""
        return list(self.request.streams)

    def stop(self, reason: str, *, settle: bool = False) -> None:
        """Start finishing the recording (idempotent: the first reason stays). ``settle``: first
        wait until the taps are quiet (the streams ended; their last packets may be on their way)."""
        with self._lock:
            if self.reason:
                return
            self.reason = reason
            self._closer = threading.Thread(target=self._finish, args=(settle,), name="flowplex-record-close",
                                            daemon=True)
        self._closer.start()

    def finish(self, reason: str, *, settle: bool = False, timeout: float | None = None) -> None:
        """``stop``, then wait (at most ``timeout`` seconds) until the file is finished."""
        self.stop(reason, settle=settle)
        self.done.wait(timeout)

    def check_end(self) -> None:
        """Stop, settling, when every recorded stream has closed or the graph ended (control thread)."""
        if not self.reason and (all(edge.closed for edge in self._edges) or self._ended()):
            self.stop("closed", settle=True)

    def pump(self, session: Session) -> bool:
        """The client's stream (control thread): nothing until the recording is finished, then
        its ``end`` event; False once sent."""
        self.check_end()
        if not self.done.is_set():
            return True
        session.send({"ev": "end", **self.result})
        self.reported.set()
        return False

    def _finish(self, settle: bool) -> None:
        error = ""
        try:
            if settle:
                self._settle(time.monotonic() + SETTLE_MAX_S)
            for edge, tap in zip(self._edges, self._taps, strict=True):
                self._engine.unobserve(edge, tap.packet)
                self._engine.unobserve(edge, tap.bound)
            deadline = time.monotonic() + DRAIN_S
            for tap in self._taps:
                tap.quiesce(deadline)
            self._capture.close()
        except (OSError, FlowplexError) as exc:  # a full disk at the summary: the chunks before it stay readable
            error = f"{self.path}: {exc}"
        except Exception as exc:  # the client must hear of it, and the graph's close must not wait
            log.exception("record.finish.failed path=%r", self.path)
            error = f"{self.path}: internal error while finishing the recording: {exc!r}"
        finally:
            os.close(self._lock_fd)
        self.result = self._summary(error)
        self.done.set()

    def _settle(self, deadline: float) -> None:
        """Wait until no call is inside a tap and none entered for ``SETTLE_S``."""
        def activity() -> tuple[int, int]:
            return sum(t.entered for t in self._taps), sum(t.inflight for t in self._taps)

        before = activity()
        while time.monotonic() < deadline:
            time.sleep(SETTLE_S)
            now = activity()
            if now == before and not now[1]:
                return
            before = now

    def _summary(self, error: str) -> dict[str, Any]:
        capture = self._capture
        dropped = capture.dropped
        dropped_bounds = capture.dropped_bounds
        failure = capture.failure  # the writer's own failure (a full disk mid-run)
        if failure is not None and not error:
            error = f"{self.path}: {failure} (the rest of the recording was not written)"
        streams = {}
        for tap in self._taps:
            lost = dropped.get(tap.name, 0)
            streams[tap.name] = {"packets": tap.seen - lost, "dropped": lost,
                                 "dropped_bounds": dropped_bounds.get(tap.name, 0)}
        size = 0
        with contextlib.suppress(OSError):
            size = os.path.getsize(self.path)
        return {"reason": self.reason, "path": self.path, "streams": streams,
                "packets": sum(s["packets"] for s in streams.values()),
                "dropped": sum(s["dropped"] for s in streams.values()), "lossy": self.request.lossy,
                "compression": self.request.compression, "bytes": size,
                "duration_s": time.monotonic() - self._t0, "error": error or None}


def _claim(path: str) -> int:
    """Open ``path`` for writing (created, not truncated) and lock it for this recording: a
    second recording of the same file, in this process or another, is refused."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        pass
    except OSError as exc:
        msg = f"{path}: {exc.strerror or exc}"
        raise ControlError(msg) from None
    else:
        if not stat.S_ISREG(info.st_mode):
            what = "a directory" if stat.S_ISDIR(info.st_mode) else "not a regular file"
            msg = f"{path}: cannot record into it: it is {what}"
            raise ControlError(msg)
    try:  # (O_NONBLOCK: a FIFO put there since the check must not hang the control thread)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC | os.O_NONBLOCK, 0o644)
    except OSError as exc:
        msg = f"{path}: cannot create the recording: {exc.strerror or exc}"
        raise ControlError(msg) from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        msg = f"{path} is being recorded already (a file takes one recording at a time)"
        raise ControlError(msg) from None
    return fd
