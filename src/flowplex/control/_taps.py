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
from ..packets._values import packet_value

if TYPE_CHECKING:
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
    """The packets of one edge for one ``echo`` client, at most ``limit`` of them (None: all)."""

    def __init__(self, limit: int | None, raw: bool) -> None:
        self.limit = limit
        self.raw = raw
        self.buffer: deque[tuple[dict[str, Any], bytes | None]] = deque()
        self.held_bytes = 0
        self.seen = 0
        self.dropped = 0

    def __call__(self, packet: Packet) -> None:
        """The observer: on the delivering thread, cheap, never blocking."""
        if self.limit is not None and self.seen >= self.limit:
            return
        if len(self.buffer) >= ECHO_BUFFER or self.held_bytes > RAW_BUFFER_BYTES:
            self.dropped += 1
            return
        self.seen += 1
        record, data = describe(packet, self.raw)
        if data is not None:
            self.held_bytes += len(data)
        self.buffer.append((record, data))

    def take(self) -> tuple[dict[str, Any], bytes | None] | None:
        """The oldest description not yet sent, or None."""
        try:
            record, data = self.buffer.popleft()
        except IndexError:
            return None
        if data is not None:
            self.held_bytes -= len(data)
        return record, data

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
