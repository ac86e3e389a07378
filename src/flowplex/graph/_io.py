"""Host-side endpoints: ``Input`` (send into a graph input) and ``Poller`` (pull from an output)."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterator
from typing import TYPE_CHECKING, final

from ..errors import GraphCancelled, StateError, Timeout
from ..packets import Packet, clone_owned, to_packet

if TYPE_CHECKING:
    from ._engine import Engine
    from ._nodes import Edge

__all__ = ["Input", "Poller"]


def _check_ts(ts: object) -> int | None:
    if ts is None:
        return None
    if isinstance(ts, bool) or not isinstance(ts, int):
        msg = f"ts must be an int timestamp, got {type(ts).__name__}"
        raise TypeError(msg)
    return ts


@final
class Input:
    """A graph input port: ``send`` packets into it, then ``close`` it.

    Get one with ``Graph.input(name)``; it stays valid for the graph's lifetime.
    """

    __slots__ = ("_edge", "_engine")

    def __init__(self, engine: Engine, edge: Edge) -> None:
        self._engine = engine
        self._edge = edge

    @property
    def name(self) -> str:
        """The port name."""
        return self._edge.name

    def send(self, value: object, ts: int | None = None) -> None:
        """Send one packet; with the default executor this also runs the nodes it feeds.

        ``value`` is a ``Packet`` or an int/float/bool/str/bytes/ndarray (adopted without a
        copy). Timestamps must strictly increase per port. Raises ``ClosedError`` after
        ``close``, ``UsageError`` (a ``ValueError``) for a missing or non-increasing timestamp,
        ``KernelError`` once the graph has failed.
        """
        engine = self._engine
        work = engine.accept(self._edge, to_packet(value, _check_ts(ts)))
        del value  # the graph now owns the value: a kernel may write into it in place
        engine.run_work(work)

    def try_send(self, value: object, ts: int | None = None) -> bool:
        """Like ``send``; returns False instead of waiting when the graph is full."""
        self.send(value, ts)
        return True

    def send_nowait(self, value: object, ts: int | None = None) -> None:
        """Like ``send``, but raises ``WouldBlock`` instead of waiting when the graph is full."""
        self.send(value, ts)

    def close(self) -> None:
        """No more packets on this port; downstream nodes close once they drain."""
        self._engine.close_graph_input(self._edge)


@final
class Poller:
    """Pulls the packets of one graph output, in order (an independent subscriber).

    ``next(timeout)`` blocks until a packet arrives, the stream ends (``None``) or the timeout
    passes (``Timeout``): it never returns ``None`` while the port can still deliver.
    """

    __slots__ = ("_engine", "_queue", "closed", "name", "observe_bounds")

    def __init__(self, engine: Engine, name: str, observe_bounds: bool) -> None:
        self._engine = engine
        self.name = name
        self.observe_bounds = observe_bounds
        self._queue: deque[Packet] = deque()
        self.closed = False

    # engine side (lock held)
    def push_many(self, packets: list[Packet]) -> None:
        """Append delivered packets."""
        self._queue.extend(packets)

    def push_bound(self, ts: int) -> None:
        """Append an empty packet announcing timestamp bound ``ts``."""
        marker = Packet()
        marker._ts = ts
        self._queue.append(marker)

    def reset(self) -> None:
        """Forget everything (``Graph.reset``)."""
        self._queue.clear()
        self.closed = False

    # host side
    def try_next(self) -> Packet | None:
        """The next packet if one is queued, else ``None``; raises the graph error if failed."""
        engine = self._engine
        with engine.lock:
            if self._queue:
                return self._pop()
            engine.raise_if_failed()
        return None

    def _pop(self) -> Packet:
        p = self._queue.popleft()
        return p if p._value is None else clone_owned(p)

    def next(self, timeout: float | None = None) -> Packet | None:
        """Block for the next packet; ``None`` at the end of the stream.

        Runs delegated work on this thread while waiting. Raises ``Timeout`` when ``timeout``
        seconds pass, ``KernelError`` if the graph failed (after the packets queued before the
        failure), ``DeadlockError`` if the graph stalled.
        """
        engine = self._engine
        deadline = None if timeout is None else time.monotonic() + max(0.0, float(timeout))
        while True:
            with engine.lock:
                if self._queue:
                    return self._pop()
                engine.raise_if_failed()
                if self.closed:
                    return None
                if engine.cancelled:
                    msg = "the graph was cancelled"
                    raise GraphCancelled(msg)
                if engine.state < 2:
                    msg = "Poller.next() before Graph.start()"
                    raise StateError(msg)
            if engine.pump_step():
                continue
            with engine.lock:
                if self._queue or self.closed or engine.error is not None:
                    continue
                if engine.idle() and all(e.closed for e in engine.graph_inputs) and engine.state != 4:
                    msg_0 = f"Poller.next on `{self.name}`"
                    raise engine.stall_error(msg_0)
                try:
                    engine.wait_change(deadline)
                except Timeout:
                    msg = f"Poller.next on `{self.name}` timed out after {timeout} s"
                    raise Timeout(msg) from None

    def __iter__(self) -> Iterator[Packet]:
        """Iterate with ``next()`` until the end of the stream."""
        while True:
            p = self.next()
            if p is None:
                return
            yield p

    def __len__(self) -> int:
        """Packets queued right now."""
        return len(self._queue)

