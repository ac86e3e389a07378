"""Comparing two recordings: the first place where their streams diverge, or None when they agree.

Two recordings are equal when they hold the same streams (or the ones asked for) and, stream by
stream, the same sequence of packets: the same timestamps, kinds, values and metadata, and (unless
``bounds=False``) the same bounds between them. How the streams interleave in the file does not
matter: the writer's threads may order them differently from one run to the next.

Floats and arrays are compared with an absolute tolerance ``atol`` (0: exactly); NaN equals NaN.
Arrays must also have the same dtype and shape. Integers, strings, bytes and bools are compared
exactly, whatever ``atol``.

The *first* divergence is well defined, whatever the files' interleaving: each stream's records
are paired by their index in the stream; of the streams that differ, the one whose first differing
record comes earliest in A's file order is reported (a stream that B has more of, where A ran out,
after all of those). Both files are read once, side by side, holding only the records one file has
read ahead of the other.
"""

from __future__ import annotations

import math
import os
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal

from .._suggest import did_you_mean
from ..errors import UsageError
from ._reader import Record, Recording, open_recording

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = ["Comparison", "Divergence", "compare", "describe_value", "diff"]

What = Literal["stream", "count", "ts", "kind", "value", "metadata"]

_SHOWN: Final = 60
"""Characters of a string, bytes or value shown in a divergence before it is cut with ``...``."""


@dataclass(frozen=True, slots=True)
class Divergence:
    """Where two recordings first differ.

    ``what`` says how: ``"stream"`` (a stream in one file only), ``"count"`` (one file has a record
    at ``index`` where the other has none), ``"ts"``, ``"kind"`` (a different value kind, or a bound
    against a packet), ``"value"`` or ``"metadata"``. ``index`` is the record's position in its
    stream (packets, and bounds when they are compared, counted from 0); ``ts`` the timestamp in A
    (in B where A has none). ``a`` and ``b`` are the two records (None where a file has none).
    """

    what: What
    stream: str
    index: int | None
    ts: int | None
    a: Record | None
    b: Record | None
    a_name: str
    b_name: str
    detail: str
    """What differs, in words (the value difference itself: ``7 vs 8``, an array's first element)."""

    def __str__(self) -> str:
        where = f"stream {self.stream!r}"
        if self.index is not None:
            where += f" #{self.index}"
        if self.ts is not None and self.what not in ("ts", "count"):
            where += f" (ts={self.ts})"
        return f"{where}: {self.detail}"


@dataclass(frozen=True, slots=True)
class Comparison:
    """The result of :func:`compare`: the streams and packets compared, and the first divergence."""

    streams: tuple[str, ...]
    """The streams compared (A's order, then those only in B)."""
    packets: int
    """Packets (bounds not counted) read from A in those streams (all of them when equal)."""
    bounds: int
    """Bounds read from A in those streams (0 when they are not compared)."""
    divergence: Divergence | None

    @property
    def equal(self) -> bool:
        """Whether the recordings agree."""
        return self.divergence is None


def diff(a: str | os.PathLike[str] | Recording, b: str | os.PathLike[str] | Recording, *,
         streams: Iterable[str] | None = None, atol: float = 0.0, bounds: bool = True,
         metadata: bool = True) -> Divergence | None:
    """The first divergence between recordings ``a`` and ``b`` (paths or open recordings), or None.

    ``streams`` compares only those (each must be in one file at least; a single ``str`` is one
    stream's name, not its letters); ``atol`` is the absolute
    tolerance for floats and arrays; ``bounds`` and ``metadata`` say whether bounds and packet
    metadata are compared too.

    >>> import os, tempfile
    >>> from flowplex.recording import Recorder
    >>> d = tempfile.mkdtemp()
    >>> for name, last in (("a", 3.0), ("b", 3.5)):
    ...     with Recorder(os.path.join(d, name + ".mcap")) as rec:
    ...         _ = rec.add_stream("x", kind="f64")
    ...         for i, v in enumerate([1.0, 2.0, last]):
    ...             rec.write_value("x", i, v)
    >>> print(diff(os.path.join(d, "a.mcap"), os.path.join(d, "b.mcap")))
    stream 'x' #2 (ts=2): value 3.0 vs 3.5
    >>> diff(os.path.join(d, "a.mcap"), os.path.join(d, "b.mcap"), atol=0.5) is None
    True

    Raises:
        RecordingError: A file cannot be read (missing, not a recording, corrupt).
        UsageError: A name in ``streams`` is in neither file, or ``atol`` is negative or NaN.
    """
    return compare(a, b, streams=streams, atol=atol, bounds=bounds, metadata=metadata).divergence


def compare(a: str | os.PathLike[str] | Recording, b: str | os.PathLike[str] | Recording, *,
            streams: Iterable[str] | None = None, atol: float = 0.0, bounds: bool = True,
            metadata: bool = True) -> Comparison:
    """:func:`diff`, with what was compared: the streams, and the packets and bounds read from A."""
    if not (isinstance(atol, (int, float)) and not isinstance(atol, bool) and atol >= 0):  # NaN fails >= too
        msg = f"atol must be a number >= 0, got {atol!r}"
        raise UsageError(msg)
    ra = a if isinstance(a, Recording) else open_recording(a)
    try:
        rb = b if isinstance(b, Recording) else open_recording(b)
        try:
            return _Compare(ra, rb, _name(a), _name(b), float(atol), bounds, metadata).run(streams)
        finally:
            if rb is not b:
                rb.close()
    finally:
        if ra is not a:
            ra.close()


def _name(x: str | os.PathLike[str] | Recording) -> str:
    return x.path if isinstance(x, Recording) else os.fspath(x)


class _Compare:
    """One comparison: reads A and B side by side, pairing each stream's records by index."""

    def __init__(self, a: Recording, b: Recording, a_name: str, b_name: str, atol: float, bounds: bool,
                 metadata: bool) -> None:
        self.a, self.b = a, b
        self.a_name, self.b_name = a_name, b_name
        self.atol = atol
        self.bounds = bounds
        self.metadata = metadata
        self.settled: set[str] = set()
        """Streams whose first divergence is known: the rest of them is neither compared nor kept."""
        self.best: tuple[int, Divergence] | None = None
        """The divergence that comes first so far, with its rank (its record's position in A)."""

    def _div(self, what: What, stream: str, index: int | None, ra: Record | None, rb: Record | None,
             detail: str) -> Divergence:
        ts = ra.ts if ra is not None else rb.ts if rb is not None else None
        return Divergence(what, stream, index, ts, ra, rb, self.a_name, self.b_name, detail)

    def _names(self, streams: Iterable[str] | None) -> tuple[list[str], Divergence | None]:
        in_a, in_b = self.a.streams, self.b.streams
        both = [*in_a, *(s for s in in_b if s not in in_a)]
        if streams is None:
            names = both
        else:
            if isinstance(streams, str):  # one name, not its letters
                streams = [streams]
            names = list(dict.fromkeys(streams))
            for s in names:
                if s not in both:
                    msg = (f"no stream {s!r} in {self.a_name} or {self.b_name} "
                           f"(they have {', '.join(map(repr, both)) or 'none'}){did_you_mean(s, both)}")
                    raise UsageError(msg)
            names.sort(key=both.index)
        for s in names:
            if s not in in_b:
                return names, self._div("stream", s, None, None, None, f"in {self.a_name}, not in {self.b_name}")
            if s not in in_a:
                return names, self._div("stream", s, None, None, None, f"in {self.b_name}, not in {self.a_name}")
        return names, None

    def run(self, streams: Iterable[str] | None) -> Comparison:
        names, missing = self._names(streams)
        if missing is not None or not names:
            return Comparison(tuple(names), 0, 0, missing)
        wanted = set(names)
        # Each stream's records not yet paired: A's as (position in A's file order, index in the stream,
        # record), B's as (position in B's file order, index in the stream, record).
        pend_a: dict[str, deque[tuple[int, int, Record]]] = {s: deque() for s in names}
        pend_b: dict[str, deque[tuple[int, int, Record]]] = {s: deque() for s in names}
        count_a = dict.fromkeys(names, 0)
        count_b = dict.fromkeys(names, 0)
        packets = n_bounds = 0
        it_a: Iterator[Record] | None = self.a.messages(bounds=self.bounds, streams=wanted)
        it_b: Iterator[Record] | None = self.b.messages(bounds=self.bounds, streams=wanted)
        pos_a = pos_b = 0  # records read from each
        a_ended = b_ended = False
        while it_a is not None or it_b is not None:
            if self.best is not None:
                it_a = None  # what A holds later ranks after the divergence known
                if not self._unresolved(pend_a):
                    break  # and B has paired every record of A before it
            if it_a is not None:
                ra = next(it_a, None)
                if ra is None:
                    it_a, a_ended = None, True
                    for s in names:  # what B read ahead of A is more than A has
                        if s not in self.settled and pend_b[s]:
                            self._more(pos_a, s, *pend_b[s][0])
                else:
                    pos_a += 1
                    if ra.is_bound:
                        n_bounds += 1
                    else:
                        packets += 1
                    s = ra.stream
                    i = count_a[s]
                    count_a[s] = i + 1
                    if s not in self.settled:
                        if pend_b[s]:
                            self._pair(pos_a, s, i, ra, pend_b[s].popleft()[2])
                        elif b_ended:  # B has no more of this stream: its first record unpaired is where
                            self._less(s, *(pend_a[s][0] if pend_a[s] else (pos_a, i, ra)))
                        else:
                            pend_a[s].append((pos_a, i, ra))
            if it_b is not None:
                rb = next(it_b, None)
                if rb is None:
                    it_b, b_ended = None, True
                    continue
                pos_b += 1
                s = rb.stream
                j = count_b[s]
                count_b[s] = j + 1
                if s in self.settled:
                    continue
                if pend_a[s]:
                    key, i, ra = pend_a[s].popleft()
                    self._pair(key, s, i, ra, rb)
                elif a_ended:
                    self._more(pos_a, s, pos_b, j, rb)
                else:
                    pend_b[s].append((pos_b, j, rb))
        if b_ended:  # the first record of each stream that A has more of
            for s in names:
                if s not in self.settled and pend_a[s]:
                    self._less(s, *pend_a[s][0])
        return Comparison(tuple(names), packets, n_bounds, None if self.best is None else self.best[1])

    def _unresolved(self, pend_a: dict[str, deque[tuple[int, int, Record]]]) -> bool:
        """Whether a record of A that comes before the divergence known is still waiting for B's."""
        assert self.best is not None
        key = self.best[0]
        return any(q and q[0][0] < key for s, q in pend_a.items() if s not in self.settled)

    def _better(self, key: int, stream: str, div: Divergence) -> None:
        self.settled.add(stream)
        if self.best is None or key < self.best[0]:
            self.best = (key, div)

    def _less(self, s: str, key: int, i: int, ra: Record) -> None:
        """A has a record where B has ended."""
        self._better(key, s, self._div(
            "count", s, i, ra, None, f"{self.b_name} ends after {i} record(s); {self.a_name} has "
            f"{_record_text(ra)} at ts={ra.ts}"))

    def _more(self, pos_a: int, s: str, pos_b: int, j: int, rb: Record) -> None:
        """B has a record where A has ended: it ranks after every record of A, in B's order."""
        self._better(pos_a + pos_b, s, self._div(
            "count", s, j, None, rb, f"{self.a_name} ends after {j} record(s); {self.b_name} has "
            f"{_record_text(rb)} at ts={rb.ts}"))

    def _pair(self, key: int, s: str, i: int, ra: Record, rb: Record) -> None:
        div = self._compare(s, i, ra, rb)
        if div is not None:
            self._better(key, s, div)

    def _compare(self, s: str, i: int, ra: Record, rb: Record) -> Divergence | None:
        if ra.ts != rb.ts:
            return self._div("ts", s, i, ra, rb, f"ts={ra.ts} vs ts={rb.ts} ({_record_text(ra)} vs {_record_text(rb)})")
        if ra.kind != rb.kind:
            return self._div("kind", s, i, ra, rb, f"{_record_text(ra)} vs {_record_text(rb)}")
        detail = _value_difference(ra, rb, self.atol)
        if detail is not None:
            return self._div("value", s, i, ra, rb, detail)
        if self.metadata and not _same_metadata(ra.metadata, rb.metadata):
            return self._div("metadata", s, i, ra, rb, f"metadata {_metadata_text(ra)} vs {_metadata_text(rb)}")
        return None


# --- values -----------------------------------------------------------------------------------------


def _floats_close(x: float, y: float, atol: float) -> bool:
    if x == y or (math.isnan(x) and math.isnan(y)):
        return True
    return abs(x - y) <= atol  # inf - inf is nan: never close unless equal, as above


def _value_difference(ra: Record, rb: Record, atol: float) -> str | None:
    """How the values of two records of the same kind differ, or None when they are equal."""
    x, y = ra.value, rb.value
    if ra.kind == "buffer":
        return _array_difference(x, y, atol)  # type: ignore[arg-type]
    if ra.kind == "f64":
        assert isinstance(x, float) and isinstance(y, float)
        if _floats_close(x, y, atol):
            return None
        return f"value {x!r} vs {y!r} (|diff| {abs(x - y)!r} > atol {atol:g})" if atol else f"value {x!r} vs {y!r}"
    if x == y:
        return None
    return f"value {describe_value(ra.kind, x)} vs {describe_value(rb.kind, y)}"


def _array_difference(x: npt.NDArray[Any], y: npt.NDArray[Any], atol: float) -> str | None:
    import numpy as np

    if x.dtype != y.dtype or x.shape != y.shape:
        return f"array {_array_text(x)} vs {_array_text(y)}"
    if x.size == 0:
        return None
    kind = x.dtype.kind
    if kind in "fc":
        ok = np.isclose(x, y, rtol=0.0, atol=atol, equal_nan=True)
        if kind == "c":  # isclose's NaN test is on the whole number; keep NaN parts equal part by part
            ok |= (np.isclose(x.real, y.real, rtol=0.0, atol=atol, equal_nan=True)
                   & np.isclose(x.imag, y.imag, rtol=0.0, atol=atol, equal_nan=True))
    elif kind in "iu" and atol > 0:
        unsigned = np.dtype(f"{x.dtype.byteorder}u{x.dtype.itemsize}")
        ux: Any = x.view(unsigned)
        uy: Any = y.view(unsigned)
        gap: Any = np.where(x >= y, ux - uy, uy - ux)  # |x - y| exactly, in the unsigned type of the same width
        ok = gap <= atol
    else:
        ok = x == y
    ok = np.asarray(ok)
    if bool(ok.all()):
        return None
    bad = np.flatnonzero(~ok)
    where = np.unravel_index(int(bad[0]), x.shape)
    at = "[" + ", ".join(str(int(k)) for k in where) + "]"
    ex, ey = x[where].item(), y[where].item()
    tol = f"; atol {atol:g}" if atol else ""
    return (f"array {_array_text(x)}: element {at} {ex!r} vs {ey!r} ({len(bad)} of {x.size} element(s) "
            f"differ{tol})")


def _array_text(arr: npt.NDArray[np.generic]) -> str:
    return f"{arr.dtype}[{'x'.join(map(str, arr.shape))}]"


def _cut(text: str) -> str:
    return text if len(text) <= _SHOWN else text[:_SHOWN - 3] + "..."


def describe_value(kind: str, value: object) -> str:
    """A short text for a record's value in a divergence (a string, bytes or array summarised)."""
    if kind == "buffer":
        return f"array {_array_text(value)}"  # type: ignore[arg-type]
    if kind == "bytes":
        assert isinstance(value, bytes)
        return f"{len(value)} byte(s) {_cut(value.hex())}"
    if kind == "empty":
        return "empty"
    return _cut(repr(value))


def _record_text(r: Record) -> str:
    if r.is_bound:
        return "a bound"
    return f"{r.kind} {describe_value(r.kind, r.value)}"


def _same_scalar(x: object, y: object) -> bool:
    if type(x) is not type(y):
        return False
    if isinstance(x, float) and isinstance(y, float):
        return x == y or (math.isnan(x) and math.isnan(y))
    return x == y


def _same_metadata(x: Mapping[str, object] | None, y: Mapping[str, object] | None) -> bool:
    mx: Mapping[str, object] = x or {}
    my: Mapping[str, object] = y or {}
    return mx.keys() == my.keys() and all(_same_scalar(v, my[k]) for k, v in mx.items())


def _metadata_text(r: Record) -> str:
    import json

    return _cut(json.dumps(r.metadata or {}, sort_keys=True))
