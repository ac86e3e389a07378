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
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Final, final

from .._suggest import did_you_mean
from .._timestamps import TS_MAX, TS_MIN
from ..errors import FlowplexError, UsageError
from ._codec import BOUND, I64, I64_MESSAGE, VERSION, encode_bound, encode_packet
from ._writer import Encoded, Recorder

if TYPE_CHECKING:
    from ..graph import Graph
    from ..packets import Packet

__all__ = ["QUEUE_BYTES", "Capture", "record"]

log = logging.getLogger("flowplex.recording")

QUEUE_BYTES: Final = 64 * 1024 * 1024
"""Encoded messages a capture holds for its writer at most (a message larger than this waits
for an empty queue)."""
_WAKE_BYTES: Final = 1024 * 1024
"""Queued bytes that wake the writer at once (or half the queue, when that is less)."""
_LINGER_S: Final = 0.005
"""How long the writer waits for more small messages after the first it finds."""
_NEVER: Final = 2**63


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
    """Encoded messages on their way from the graph's threads to one ``Recorder`` (see the module).

    The writer thread takes the whole queue at once and writes it under one hold of the
    recorder's lock. It is woken when ``_WAKE_BYTES`` are queued (a frame is), or otherwise
    ``_LINGER_S`` after the first message it finds: small messages then go in batches of
    thousands, and the delivering thread pays for an append and a comparison, not a thread switch
    per packet. A graph thread waiting for room, and the writer waiting for work, wait on two
    conditions of one lock.
    """

    def __init__(self, recorder: Recorder, *, lossy: bool = False, queue_bytes: int = QUEUE_BYTES) -> None:
        if not isinstance(queue_bytes, int) or queue_bytes <= 0:
            msg = f"queue_bytes must be a positive number of bytes, got {queue_bytes!r}"
            raise UsageError(msg)
        self.recorder = recorder
        self.lossy = lossy
        self.queue_bytes = queue_bytes
        self._queue: list[Encoded] = []
        self._held = 0
        """Bytes queued or being written (the writer subtracts a batch once it is in the file)."""
        self._wake = max(1, min(_WAKE_BYTES, queue_bytes // 2))
        self._wanted = _NEVER
        """The writer sleeps until ``_held`` reaches this (1: any message; ``_NEVER``: it is busy)."""
        self._lock = threading.Lock()
        self._work = threading.Condition(self._lock)
        self._room = threading.Condition(self._lock)
        self._blocked = 0
        self._limit = queue_bytes
        """What ``_held`` may reach without ``_make_room``: ``queue_bytes``, or -1 once closing or failed."""
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
        put = self._put
        now = time.time_ns
        pack_i64 = I64_MESSAGE.pack

        def on_packet(packet: Packet) -> None:
            wall = now()
            if packet._tid == I64 and packet._meta is None:  # most small streams: one pack, no calls
                put(channel, I64, pack_i64(packet._ts, wall, I64, VERSION, 0, 0, packet._value), wall)
                last[0] = packet._ts
                return
            try:
                kind, data = encode_packet(packet, wall_ns=wall)
            except UsageError as exc:  # a GPU buffer, a custom type: said once per stream, counted
                self._note_unrecordable(name, exc)
                return
            last[0] = packet._ts
            put(channel, kind, data, wall)

        def on_bound(ts: int) -> None:
            implied = last[0] + 1 if last[0] < TS_MAX else last[0]
            if ts <= implied:
                return
            wall = now()
            put(channel, BOUND, encode_bound(ts, wall_ns=wall), wall)

        return on_packet, on_bound

    def _put(self, channel: int, kind: int, data: bytes, wall: int) -> None:
        # Once per packet: the lock is taken by hand (``with`` costs a third more here), and one
        # comparison with ``_limit`` (-1 once closing or failed) sends every unusual case to
        # ``_make_room``.
        size = len(data)
        lock = self._lock
        lock.acquire()
        held = self._held + size
        if held > self._limit:
            try:
                if self._make_room(channel, kind, size):
                    self._append(channel, kind, data, wall, self._held + size)
            finally:
                lock.release()
            return
        self._queue.append((channel, kind, data, wall))
        self._held = held
        if held >= self._wanted:
            self._wanted = _NEVER
            self._work.notify()
        lock.release()

    def _append(self, channel: int, kind: int, data: bytes, wall: int, held: int) -> None:
        self._queue.append((channel, kind, data, wall))
        self._held = held
        if held >= self._wanted:
            self._wanted = _NEVER
            self._work.notify()

    def _make_room(self, channel: int, kind: int, size: int) -> bool:
        """With the lock held and the queue full: wait for room (lossless) or count a drop (lossy,
        or after the writer failed). Whether to queue the message (not once the capture closes)."""
        while (self._held and self._held + size > self.queue_bytes and not self._closing) or self._failure:
            if self.lossy or self._failure is not None:
                tally = self._dropped_bounds if kind == BOUND else self._dropped
                tally[channel] = tally.get(channel, 0) + 1
                return False
            if self._wanted != _NEVER:  # the writer lingers for more: what there is will do
                self._wanted = _NEVER
                self._work.notify()
            self._blocked += 1
            try:
                self._room.wait()  # backpressure: the delivering thread waits for the writer
            finally:
                self._blocked -= 1
        return not self._closing

    def _note_unrecordable(self, name: str, exc: Exception) -> None:
        with self._work:
            seen = self._unrecordable.get(name, 0)
            self._unrecordable[name] = seen + 1
        if not seen:
            log.warning("recording.unrecordable stream=%r: %s (such packets are counted as dropped)", name, exc)

    def _take(self) -> tuple[list[Encoded], int]:
        """Wait for a batch worth writing (see the class) and take the whole queue; ``[]`` at the end."""
        with self._work:
            while not self._closing and self._held < self._wake:
                if self._queue:
                    self._wanted = self._wake
                    if not self._work.wait(_LINGER_S):
                        break  # lingered long enough: write what there is
                else:
                    self._wanted = 1
                    self._work.wait()
            self._wanted = _NEVER
            batch, self._queue = self._queue, []
            return batch, self._held

    def _write(self) -> None:
        while True:
            batch, size = self._take()
            if not batch:
                return
            try:
                self.recorder.write_encoded_many(batch)
            except Exception as exc:  # a full disk: the graph must not wait on a dead writer
                with self._work:
                    self._failure = exc
                    self._limit = -1
                    # The batch and what is queued count as dropped (the batch's first messages
                    # may have reached the file before the error: an overcount, never an undercount).
                    for channel, kind, _, _ in (*batch, *self._queue):
                        tally = self._dropped_bounds if kind == BOUND else self._dropped
                        tally[channel] = tally.get(channel, 0) + 1
                    self._queue = []
                    self._held = 0
                    self._room.notify_all()
                log.error("recording.failed path=%r: %s (the rest of the run is not recorded)", self.path, exc)
                return
            del batch
            with self._work:
                self._held -= size
                if self._blocked:
                    self._room.notify_all()

    @property
    def failure(self) -> BaseException | None:
        """The writer's own failure (a full disk mid-run), or None while it writes.

        Once set, nothing more reaches the file and every later message is counted as dropped.
        """
        with self._work:
            return self._failure

    @property
    def dropped(self) -> dict[str, int]:
        """Messages not recorded so far, by stream: dropped by a lossy capture, or unrecordable."""
        with self._work:
            by_name = {self.recorder.stream_name(c): n for c, n in self._dropped.items()}
            for name, n in self._unrecordable.items():
                by_name[name] = by_name.get(name, 0) + n
            return by_name

    @property
    def dropped_bounds(self) -> dict[str, int]:
        """Bound advances a lossy capture dropped, by stream (packets are in :attr:`dropped`)."""
        with self._work:
            return {self.recorder.stream_name(c): n for c, n in self._dropped_bounds.items()}

    def close(self) -> None:
        """Write what is queued, the drop counts and the file's summary; idempotent."""
        with self._work:
            if self._closing:
                return
            self._closing = True
            self._limit = -1
            self._work.notify_all()
            self._room.notify_all()
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
