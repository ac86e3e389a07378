"""Kernel invocations as a Chrome / Perfetto trace (Trace Event Format JSON).

``Tracer`` is the engine's ``tracer`` hook: the engine calls it after each measured ``process``
callback, on the thread that ran it. Events go into a bounded ring (the oldest are overwritten
and counted), so tracing a long run keeps memory flat. ``chrome_trace`` turns the ring into
``{"traceEvents": [...], "displayTimeUnit": "ms"}``: one ``ph: "X"`` complete event per
invocation with ``ts``/``dur`` in microseconds, ``pid`` 1, ``tid`` per worker thread, the node
name as event name and the packet timestamp in ``args``.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from typing import TYPE_CHECKING, Final

from .._timestamps import ts_name
from ..errors import UsageError

if TYPE_CHECKING:
    from .._snapshot import EngineSnapshot

__all__ = ["DEFAULT_TRACE_CAPACITY", "Tracer", "chrome_trace"]

DEFAULT_TRACE_CAPACITY: Final = 65_536
"""Events kept by ``Graph.enable_tracing()``: about 10 MB of JSON; raise it for long runs."""

_Event = tuple[str, str, int, int, int, int]
"""``(node, callback, packet ts, start_ns, duration_ns, tid)``."""


class Tracer:
    """A bounded ring of kernel invocations, fed by the engine's ``tracer`` hook.

    Thread-safe: the hook runs on worker threads while ``events`` may be read from any thread.
    """

    def __init__(self, capacity: int = DEFAULT_TRACE_CAPACITY) -> None:
        if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 1:
            msg = f"trace capacity must be an int >= 1, got {capacity!r}"
            raise UsageError(msg)
        self.capacity = capacity
        self.origin_ns = time.perf_counter_ns()
        """Trace time zero (``ts`` 0 in the JSON)."""
        self.overwritten = 0
        """Events lost to the ring's bound."""
        self._events: deque[_Event] = deque(maxlen=capacity)
        self._threads: dict[int, tuple[int, str]] = {}
        self._lock = threading.Lock()

    def __call__(self, node: str, callback: str, ts: int, start_ns: int, duration_ns: int) -> None:
        """The engine hook (``Engine.tracer``); called after each measured callback."""
        ident = threading.get_ident()
        with self._lock:
            entry = self._threads.get(ident)
            if entry is None:
                entry = (len(self._threads), threading.current_thread().name)
                self._threads[ident] = entry
            if len(self._events) == self.capacity:
                self.overwritten += 1
            self._events.append((node, callback, ts, start_ns, duration_ns, entry[0]))

    def events(self) -> list[_Event]:
        """A copy of the recorded events, oldest first."""
        with self._lock:
            return list(self._events)

    def threads(self) -> list[tuple[int, str]]:
        """``(tid, thread name)`` of every thread that ran a traced callback."""
        with self._lock:
            return sorted(self._threads.values())


def chrome_trace(snapshot: EngineSnapshot) -> str:
    """The Trace Event Format JSON of the invocations traced so far by ``snapshot``'s tracer.

    Without tracing (no ``Graph.enable_tracing`` and no ``trace_capacity``) this is an empty but
    valid trace, as in lm-flow. Events are sorted by start time; metadata events come first.
    """
    tracer = snapshot.tracer
    if not isinstance(tracer, Tracer):
        return json.dumps({"traceEvents": [], "displayTimeUnit": "ms"})
    kernels = {n.name: n.kernel for n in snapshot.nodes}
    events: list[dict[str, object]] = [
        {"name": "process_name", "ph": "M", "pid": 1, "args": {"name": "flowplex graph"}},
    ]
    for tid, name in tracer.threads():
        events.append({"name": "thread_name", "ph": "M", "pid": 1, "tid": tid, "args": {"name": name}})
    records = sorted(tracer.events(), key=lambda e: (e[3], e[5]))
    for node, callback, ts, start_ns, duration_ns, tid in records:
        events.append({
            "name": node,
            "cat": callback,
            "ph": "X",
            "pid": 1,
            "tid": tid,
            "ts": round((start_ns - tracer.origin_ns) / 1000, 3),
            "dur": round(duration_ns / 1000, 3),
            "args": {"kernel": kernels.get(node, ""), "phase": callback, "input_ts": _ts_arg(ts)},
        })
    out: dict[str, object] = {"traceEvents": events, "displayTimeUnit": "ms"}
    if tracer.overwritten:
        out["otherData"] = {"overwritten_events": tracer.overwritten}
    return json.dumps(out)


def _ts_arg(ts: int) -> int | str:
    """Plain timestamps stay numbers; sentinels get their names (``PreStream``, ``Done``, ...)."""
    name = ts_name(ts)
    return ts if name == str(ts) else name
