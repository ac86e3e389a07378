"""Live taps on an edge: ``echo`` (what flows) and ``hz`` (how fast), never slowing the graph.

A tap is an observer on the edge. On the graph's delivering thread it does O(1) work: ``EchoTap``
describes the packet into a bounded buffer (a full buffer drops the description and counts it),
``RateTap`` appends one clock reading to a bounded window. The control thread drains them into
the client's outbox; what the outbox cannot take is dropped and counted too, so a stalled client
costs the graph nothing.
"""

from __future__ import annotations

import itertools
import math
import time
import zlib
from collections import deque
from typing import TYPE_CHECKING, Any, Final, final

from .._timestamps import ts_name
from ..packets._typeids import TypeId
from ..packets._values import packet_value

if TYPE_CHECKING:
    from ..engine._engine import Engine
    from ..engine._nodes import Edge
    from ..packets import Packet

__all__ = ["EchoTap", "RateTap", "describe"]

ECHO_BUFFER: Final = 1024
"""Packet descriptions an ``echo`` tap holds for its client; more are dropped (and counted)."""
RAW_BUFFER_BYTES: Final = 64 * 1024 * 1024
"""Payload bytes an ``echo --raw`` tap holds at most; past it, packets are dropped (and counted)."""
RATE_WINDOW: Final = 10_000
"""Arrival times a ``hz`` tap keeps: its rate and jitter are over the latest this many packets."""


def describe(packet: Packet, raw: bool) -> tuple[dict[str, Any], bytes | None]:
    """What ``echo`` shows of ``packet``: timestamp, type, value (a frame as dtype, shape and CRC-32),
    metadata; with ``raw``, a buffer's bytes too."""
    record: dict[str, Any] = {"ts": packet.timestamp, "ts_name": ts_name(packet.timestamp),
                              "type": packet.type_name}
    data: bytes | None = None
    value = packet_value(packet)
    if isinstance(value, dict) and "shape" in value:
        arr = packet.as_numpy()
        view = memoryview(arr.data if arr.flags.c_contiguous else arr.tobytes()).cast("B")
        value = {**value, "nbytes": arr.nbytes, "crc32": f"{zlib.crc32(view):08x}"}
        if raw:
            data = bytes(view)
    elif raw and isinstance(value, str) and packet.as_bytes() is not None:
        data = packet.as_bytes()
    record["value"] = value
    keys = packet.metadata_keys()
    if keys:
        record["metadata"] = {k: packet.metadata(k) for k in keys}
    return record, data


@final
class EchoTap:
    """The packets of one edge for one ``echo`` client, at most ``limit`` of them (None: all).

    A scalar, string or bytes packet is kept as it is (the engine never changes a packet it
    delivered) and described on the control thread; a frame is described at once, so that the
    tap holds no frame's memory (only its bytes, with ``raw``, up to ``RAW_BUFFER_BYTES``).

    When its buffer is full the tap takes itself off the edge, so that an edge faster than the
    client (or a stalled client) runs at full speed, and ``attach`` puts it back once the control
    thread made room. The packets missed meanwhile are counted exactly from the producer's own
    ``packets_out`` (both read under the engine's lock) where the producer has this one output;
    on other edges (a graph input, a node with several outputs) the tap stays on and counts each
    packet it drops.
    """

    def __init__(self, engine: Engine, edge: Edge, limit: int | None, raw: bool) -> None:
        self.engine = engine
        self.edge = edge
        self.limit = limit
        self.raw = raw
        self.buffer: deque[Packet | tuple[dict[str, Any], bytes | None]] = deque()
        self.held_bytes = 0
        self.seen = 0
        self.dropped = 0
        producer = edge.producer
        self.counted = producer is not None and len(producer.out_edges) == 1
        self.attached = False
        self.mark = 0
        """The producer's ``packets_out`` when the tap took itself off."""

    def __call__(self, packet: Packet) -> None:
        """The observer: on the delivering thread, cheap, never blocking."""
        if not self.attached:
            self.dropped += 1  # flushed before the tap came off, delivered after: not in ``mark``
            return
        if self.limit is not None and self.seen >= self.limit:
            return
        if len(self.buffer) >= ECHO_BUFFER or self.held_bytes > RAW_BUFFER_BYTES:
            self.dropped += 1
            if self.counted:
                self.detach()
            return
        self.seen += 1
        if packet._tid != TypeId.BUFFER:
            self.buffer.append(packet)
            return
        record, data = describe(packet, self.raw)
        if data is not None:
            self.held_bytes += len(data)
        self.buffer.append((record, data))

    def attach(self) -> None:
        """Put the tap on its edge (again), counting what it missed while it was off."""
        status = self.engine.status
        with status.lock:
            if self.attached:
                return
            edge = self.edge
            edge.observers = [*edge.observers, self]
            edge.update_solo()
            if self.counted and self.mark:
                self.dropped += edge.producer.packets_out - self.mark  # type: ignore[union-attr]
            self.attached = True

    def detach(self) -> None:
        """Take the tap off its edge; packets from now on are counted, not seen."""
        status = self.engine.status
        with status.lock:
            if not self.attached:
                return
            edge = self.edge
            edge.observers = [f for f in edge.observers if f is not self]
            edge.update_solo()
            self.mark = edge.producer.packets_out if self.counted else 0  # type: ignore[union-attr]
            self.attached = False

    def close(self) -> None:
        """Off for good: what was missed since the last ``detach`` is counted."""
        was_off = not self.attached
        self.detach()
        if was_off and self.counted and self.mark:
            with self.engine.status.lock:
                self.dropped += self.edge.producer.packets_out - self.mark  # type: ignore[union-attr]
                self.mark = self.edge.producer.packets_out  # type: ignore[union-attr]

    def take(self) -> tuple[dict[str, Any], bytes | None] | None:
        """The oldest description not yet sent, or None."""
        try:
            item = self.buffer.popleft()
        except IndexError:
            return None
        if not isinstance(item, tuple):
            return describe(item, self.raw)
        if item[1] is not None:
            self.held_bytes -= len(item[1])
        return item

    def discard(self) -> int:
        """Drop every description not yet sent, without describing them; how many."""
        n = len(self.buffer)
        for _ in range(n):
            item = self.buffer.popleft()
            if isinstance(item, tuple) and item[1] is not None:
                self.held_bytes -= len(item[1])
        return n

    @property
    def complete(self) -> bool:
        """``limit`` packets were seen and all of them taken."""
        return self.limit is not None and self.seen >= self.limit and not self.buffer


@final
class RateTap:
    """Arrival times on one edge: every packet counted, the latest ``RATE_WINDOW`` kept for jitter."""

    def __init__(self) -> None:
        self.arrivals: deque[int] = deque(maxlen=RATE_WINDOW)
        self.count = 0
        self.started_ns = time.perf_counter_ns()

    def __call__(self, packet: Packet) -> None:
        """The observer: one clock reading per packet, whatever the packet's size."""
        self.arrivals.append(time.perf_counter_ns())
        self.count += 1

    def report(self) -> dict[str, Any]:
        """Rate and inter-arrival statistics over the window (seconds; None where too few packets)."""
        times = list(self.arrivals)
        now = time.perf_counter_ns()
        out: dict[str, Any] = {"count": self.count, "window": len(times), "rate_hz": None, "mean_s": None,
                               "min_s": None, "max_s": None, "std_s": None,
                               "since_last_s": (now - times[-1]) / 1e9 if times else None}
        if len(times) >= 2:
            gaps = [(b - a) / 1e9 for a, b in itertools.pairwise(times)]
            mean = sum(gaps) / len(gaps)
            out.update(rate_hz=1.0 / mean if mean > 0 else None, mean_s=mean, min_s=min(gaps), max_s=max(gaps),
                       std_s=math.sqrt(sum((g - mean) ** 2 for g in gaps) / len(gaps)))
        return out
