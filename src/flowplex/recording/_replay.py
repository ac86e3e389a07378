"""``Player``: a recording's messages in file order, each with the moment it is due.

This is the engine-free half of replaying (the ``ReplaySource`` kernel is the other): it picks
the channels that feed each output, keeps the recorded pacing scaled by ``rate`` (wall time
between messages divided by it; ``rate=inf`` is "as fast as the graph takes them"), cuts the
``start``/``end`` window (seconds from the first replayed message) and, with ``loop``, plays
the window again with every timestamp shifted by one period, so that each stream keeps
strictly increasing timestamps and streams that were aligned stay aligned.

The period is the window's timestamp span plus the smallest step between two timestamps of one
stream: round ``k`` is round 0 shifted by ``k`` periods, whatever the streams.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Generator, Iterable, Iterator
from dataclasses import dataclass
from typing import Final, final

from .._timestamps import TS_DONE, TS_MAX, TS_MIN
from ..errors import UsageError
from ._reader import Record

__all__ = ["RATE_MAX", "Due", "Player", "parse_rate"]

RATE_MAX: Final = math.inf
"""``rate: max``: no pacing, every message is due at once."""


def parse_rate(value: object, where: str = "rate") -> float:
    """``"max"`` or a positive finite number (``2``, ``"0.5"``, ``"2x"``) as a speed factor.

    Raises:
        UsageError: Anything else (the message starts with ``where``).
    """
    if isinstance(value, str):
        text = value.strip().lower()
        if text == "max":
            return RATE_MAX
        text = text.removesuffix("x")
        try:
            value = float(text)
        except ValueError:
            msg = f"{where}: expected a positive number or max, got {value!r}"
            raise UsageError(msg) from None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
        msg = f"{where}: expected a positive number or max, got {value!r}"
        raise UsageError(msg)
    return float(value)


@dataclass(frozen=True, slots=True)
class Due:
    """One message to replay: the output it goes to, its record, its (shifted) timestamp, and
    when it is due, in seconds after the replay started."""

    output: int
    record: Record
    ts: int
    at_s: float
    round: int


@final
class Player:
    """The messages of some channels of a recording, due one after another (see the module).

    ``messages`` opens the recording's messages (bounds included) anew for each round;
    ``outputs`` maps a channel to the output index it feeds (a channel may feed one output).
    """

    def __init__(self, messages: Callable[[], Iterable[Record]], outputs: dict[str, int], *,
                 rate: float = 1.0, loop: bool = False, start_s: float = 0.0, end_s: float | None = None,
                 loop_gap_s: float = 0.0) -> None:
        if not math.isfinite(start_s) or start_s < 0:
            msg = f"start: expected a number of seconds >= 0, got {start_s!r}"
            raise UsageError(msg)
        if end_s is not None and (math.isnan(end_s) or end_s <= start_s):
            msg = f"end: expected a number of seconds after start ({start_s:g}), got {end_s!r}"
            raise UsageError(msg)
        if not (math.isfinite(loop_gap_s) and loop_gap_s >= 0):
            msg = f"loop gap: expected a number of seconds >= 0, got {loop_gap_s!r}"
            raise UsageError(msg)
        self._messages = messages
        self._outputs = outputs
        self.rate = rate
        self.loop = loop
        self.start_s = start_s
        self.end_s = end_s
        self.loop_gap_s = loop_gap_s
        self._wall0: int | None = None  # the first replayed message's wall time: the window's origin
        self._first_ts: int | None = None  # timestamps of round 0's window
        self._last_ts = TS_MIN
        self._step = 0  # the smallest step between two timestamps of one stream, in round 0
        self._span_s = 0.0  # round 0's wall span, from the window's start
        self._round_at_s = 0.0  # when the current round began, in replay seconds
        self._lasts: dict[int, int] = {}
        self._iter = self._rounds()
        self._next: Due | None = None
        self._ended = False
        self.overflowed = False
        """Whether looping stopped because shifted timestamps would pass ``TS_MAX``."""

    def peek(self) -> Due | None:
        """The next message, without taking it; None at the end."""
        if self._next is None and not self._ended:
            self._next = next(self._iter, None)
            self._ended = self._next is None
        return self._next

    def pop(self) -> Due | None:
        """Take the next message; None at the end."""
        due = self.peek()
        self._next = None
        return due

    def _rounds(self) -> Iterator[Due]:
        played = yield from self._round(0)
        if not (self.loop and played):
            return
        period = self._last_ts - (self._first_ts or 0) + max(self._step, 1)
        k = 1
        while True:
            if self._last_ts + k * period > TS_MAX:
                self.overflowed = True
                return
            self._round_at_s += (self._span_s + self.loop_gap_s) / self.rate if self.rate != RATE_MAX else 0.0
            yield from self._round(k, k * period)
            k += 1

    def _round(self, k: int, shift: int = 0) -> Generator[Due, None, int]:
        """One pass over the window; round 0 learns the window's timestamps on the way."""
        played = 0
        for r in self._messages():
            out = self._outputs.get(r.stream)
            if out is None:
                continue
            if self._wall0 is None:
                self._wall0 = r.wall_ns
            rel = (r.wall_ns - self._wall0) / 1e9
            if rel < self.start_s:
                continue
            if self.end_s is not None and rel > self.end_s:
                break
            if r.is_bound and (r.ts >= TS_DONE or (r.ts > TS_MAX and self.loop)):
                # The stream's end: the replay's own end closes it. A bound past TS_MAX (left by
                # a node that saw a packet at TS_POST_STREAM) is replayed, unless a loop goes on.
                continue
            if k == 0:
                self._learn(out, r.ts, rel)
            played += 1
            at = 0.0 if self.rate == RATE_MAX else self._round_at_s + (rel - self.start_s) / self.rate
            yield Due(out, r, r.ts + shift, at, k)
        return played

    def _learn(self, out: int, ts: int, rel: float) -> None:
        if self._first_ts is None:
            self._first_ts = ts
        self._first_ts = min(self._first_ts, ts)
        self._last_ts = max(self._last_ts, ts)
        self._span_s = max(self._span_s, rel - self.start_s)
        last = self._lasts.get(out)
        if last is not None and ts > last:
            self._step = ts - last if self._step == 0 else min(self._step, ts - last)
        self._lasts[out] = ts
