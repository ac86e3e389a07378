"""``record(graph, path)``: a graph's streams written to a recording while it runs.

Each recorded stream gets a tap (``Graph.tap``): on the graph's delivering thread the packet is
encoded at once (the frame's bytes copied, so the graph keeps its buffers to itself) and put in
one queue bounded in bytes; a writer thread of the capture's own moves the queue into the MCAP
file. **Lossless by default**: a full queue holds the delivering thread until the writer made
room, which backpressures the graph like any slow consumer. With ``lossy=True`` a full queue
drops the message instead and counts it, per stream, in the file. A bound that advances with no
packet is recorded (the one every packet implies, its timestamp plus one, is not), so that a
replay reproduces joins exactly.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Final, final

from .._suggest import did_you_mean
from .._timestamps import TS_MAX, TS_MIN
from ..errors import FlowplexError, UsageError
from ._codec import BOUND, encode_bound, encode_packet
from ._writer import Recorder

if TYPE_CHECKING:
    from ..graph import Graph
    from ..packets import Packet

__all__ = ["QUEUE_BYTES", "Capture", "record"]

log = logging.getLogger("flowplex.recording")

QUEUE_BYTES: Final = 64 * 1024 * 1024
"""Encoded messages a capture holds for its writer at most (a message larger than this waits
for an empty queue)."""


def record(graph: Graph, path: str | Path, *, streams: Sequence[str] | None = None, compression: str = "zstd",
           lossy: bool = False, queue_bytes: int = QUEUE_BYTES) -> Capture:
    """Record ``streams`` of ``graph`` (default: every stream) into the MCAP file ``path`` from
    its ``start``; ``close()`` the capture (or leave its ``with``) after the run to finish the file.

    Raises:
        UnknownPortError: A stream the graph does not have.
        StateError: The graph was started already.
        RecordingError: The file cannot be created.
    """
    names = graph.streams() if streams is None else list(streams)
    unknown = [s for s in names if s not in graph.streams()]
    if unknown:
        from ..errors import UnknownPortError

        msg = (f"cannot record stream `{unknown[0]}`: the graph has no such stream"
               f"{did_you_mean(unknown[0], graph.streams())} (streams: {', '.join(graph.streams())})")
        raise UnknownPortError(msg)
    capture = Capture(Recorder(path, compression=compression), lossy=lossy, queue_bytes=queue_bytes)
    try:
        for name in names:
            on_packet, on_bound = capture.stream(name)
            graph.tap(name, on_packet, on_bound)
    except FlowplexError:
        capture.close()
        raise
    return capture


@final
class Capture:
    """Encoded messages on their way from the graph's threads to one ``Recorder`` (see the module)."""

    def __init__(self, recorder: Recorder, *, lossy: bool = False, queue_bytes: int = QUEUE_BYTES) -> None:
        if not isinstance(queue_bytes, int) or queue_bytes <= 0:
            msg = f"queue_bytes must be a positive number of bytes, got {queue_bytes!r}"
            raise UsageError(msg)
        self.recorder = recorder
        self.lossy = lossy
        self.queue_bytes = queue_bytes
        self._queue: deque[tuple[int, int, bytes, int]] = deque()
        self._held = 0
        self._cond = threading.Condition()
        self._closing = False
        self._dropped: dict[int, int] = {}
        self._dropped_bounds: dict[int, int] = {}
        self._unrecordable: dict[str, int] = {}
        self._failure: BaseException | None = None
        self._writer = threading.Thread(target=self._write, name="flowplex-recorder", daemon=True)
        self._writer.start()

    @property
    def path(self) -> str:
        """The recording's file."""
        return self.recorder.path

    def stream(self, name: str) -> tuple[Callable[[Packet], None], Callable[[int], None]]:
        """Add stream ``name`` to the recording: its packet and bound callbacks for ``Graph.tap``."""
        channel = self.recorder.add_stream(name)
        last = [TS_MIN - 1]  # the last packet's timestamp: the bound it implies is not recorded

        def on_packet(packet: Packet) -> None:
            try:
                kind, data = encode_packet(packet, wall_ns=time.time_ns())
            except UsageError as exc:  # a GPU buffer, a custom type: said once per stream, counted
                self._note_unrecordable(name, exc)
                return
            last[0] = packet._ts
            self._put(channel, kind, data)

        def on_bound(ts: int) -> None:
            implied = last[0] + 1 if last[0] < TS_MAX else last[0]
            if ts <= implied:
                return
            self._put(channel, BOUND, encode_bound(ts, wall_ns=time.time_ns()))

        return on_packet, on_bound

    def _put(self, channel: int, kind: int, data: bytes) -> None:
        size = len(data)
        with self._cond:
            while self._held and self._held + size > self.queue_bytes and not self._closing:
                if self.lossy:
                    tally = self._dropped_bounds if kind == BOUND else self._dropped
                    tally[channel] = tally.get(channel, 0) + 1
                    return
                self._cond.wait()  # backpressure: the delivering thread waits for the writer
            if self._closing:
                return
            self._queue.append((channel, kind, data, time.time_ns()))
            self._held += size
            self._cond.notify_all()

    def _note_unrecordable(self, name: str, exc: Exception) -> None:
        with self._cond:
            seen = self._unrecordable.get(name, 0)
            self._unrecordable[name] = seen + 1
        if not seen:
            log.warning("recording.unrecordable stream=%r: %s (such packets are counted as dropped)", name, exc)

    def _write(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._closing:
                    self._cond.wait()
                if not self._queue:
                    return
                channel, kind, data, wall = self._queue.popleft()
                self._held -= len(data)
                self._cond.notify_all()
            try:
                self.recorder.write_encoded(channel, kind, data, wall)
            except Exception as exc:  # a full disk: the graph must not wait on a dead writer
                self._failure = exc
                with self._cond:
                    self.lossy = True
                    self._queue.clear()
                    self._held = 0
                    self._cond.notify_all()
                log.error("recording.failed path=%r: %s (the rest of the run is not recorded)", self.path, exc)
                return

    @property
    def dropped(self) -> dict[str, int]:
        """Messages not recorded so far, by stream: dropped by a lossy capture, or unrecordable."""
        with self._cond:
            by_name = {self.recorder.stream_name(c): n for c, n in self._dropped.items()}
            for name, n in self._unrecordable.items():
                by_name[name] = by_name.get(name, 0) + n
            return by_name

    @property
    def dropped_bounds(self) -> dict[str, int]:
        """Bound advances a lossy capture dropped, by stream (packets are in :attr:`dropped`)."""
        with self._cond:
            return {self.recorder.stream_name(c): n for c, n in self._dropped_bounds.items()}

    def close(self) -> None:
        """Write what is queued, the drop counts and the file's summary; idempotent."""
        with self._cond:
            if self._closing:
                return
            self._closing = True
            self._cond.notify_all()
        self._writer.join()
        if not self.recorder.closed:
            for name, n in self.dropped.items():
                if n:
                    self.recorder.note_dropped(name, n)
            self.recorder.close()

    def __enter__(self) -> Capture:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
