"""Host-side endpoints: ``Input`` (send into a graph input) and ``Poller`` (pull from an output)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, final

from ..engine._nodes import OVERFLOW_POLICIES
from ..errors import WouldBlock
from ..packets import Packet, to_packet
from ._args import check_timeout, check_ts

if TYPE_CHECKING:
    from ..engine._admission import Admission
    from ..engine._nodes import Edge, OutputQueue
    from ..engine._waiting import Waits

__all__ = ["Input", "Poller"]


@final
class Input:
    """A graph input port: ``send`` packets into it, then ``close`` it.

    Get one with ``Graph.input(name)``; it stays valid for the graph's lifetime.
    """

    __slots__ = ("_admission", "_edge")

    def __init__(self, admission: Admission, edge: Edge) -> None:
        self._admission = admission
        self._edge = edge

    @property
    def name(self) -> str:
        """The port name."""
        return self._edge.name

    def send(self, value: object, ts: int | None = None, *, timeout: float | None = None) -> None:
        """Send one packet; with the default executor this also runs the nodes it feeds.

        ``value`` is a ``Packet`` or an int/float/bool/str/bytes/ndarray (adopted without a
        copy). Timestamps must strictly increase per port. When the graph is full (its packet
        watermark, or a blocking poller), waits for room — up to ``timeout`` seconds, then
        ``Timeout``; a graph that is full and can never drain raises ``DeadlockError``.
        Raises ``ClosedError`` after ``close``, ``UsageError`` (a ``ValueError``) for a missing
        or non-increasing timestamp, ``KernelError`` once the graph has failed.
        """
        admission = self._admission
        if type(ts) is not int:  # the common case costs one check; the helper names the mistake
            ts = check_ts(ts, "Input.send")
        if timeout is not None:
            timeout = check_timeout(timeout, "Input.send")
        work = admission.accept(self._edge, to_packet(value, ts, True), timeout=timeout)
        del value  # the graph now owns the value: a kernel may write into it in place
        admission.run_work(work)

    def send_nowait(self, value: object, ts: int | None = None) -> None:
        """Like ``send``, but raises ``WouldBlock`` instead of waiting when the graph is full."""
        admission = self._admission
        work = admission.accept(self._edge, to_packet(value, check_ts(ts, "Input.send_nowait"), True), wait=False)
        del value
        admission.run_work(work)

    def try_send(self, value: object, ts: int | None = None) -> bool:
        """Like ``send_nowait`` but returns False instead of raising when the graph is full."""
        admission = self._admission
        ts = check_ts(ts, "Input.try_send")
        try:
            work = admission.accept(self._edge, to_packet(value, ts, True), wait=False)
        except WouldBlock:
            return False
        del value
        admission.run_work(work)
        return True

    def close(self) -> None:
        """No more packets on this port; downstream nodes close once they drain."""
        self._admission.close_input(self._edge)


@final
class Poller:
    """Pulls the packets of one graph output, in order (an independent subscriber).

    ``next(timeout)`` blocks until a packet arrives, the stream ends (``None``) or the timeout
    passes (``Timeout``): it never returns ``None`` while the port can still deliver. The host's
    endpoint over the engine's ``OutputQueue``: it reads that queue only through ``Waits``.
    """

    __slots__ = ("_out", "_waits")

    OVERFLOW_POLICIES = OVERFLOW_POLICIES

    def __init__(self, waits: Waits, out: OutputQueue) -> None:
        self._waits = waits
        self._out = out

    @property
    def name(self) -> str:
        """The graph output port this poller reads."""
        return self._out.name

    @property
    def capacity(self) -> int:
        """Packets it holds before ``overflow`` applies (0: unbounded)."""
        return self._out.capacity

    @property
    def overflow(self) -> str:
        """What a full bounded poller does: ``block``, ``drop_oldest``, ``drop_newest`` or ``latest``."""
        return self._out.overflow

    @property
    def dropped(self) -> int:
        """Packets lost to the overflow policy so far (counted, never silent)."""
        return self._out.dropped

    @property
    def closed(self) -> bool:
        """The stream ended: nothing more will be queued (queued packets may remain)."""
        return self._out.closed

    def try_next(self) -> Packet | None:
        """The next packet if one is queued, else ``None``; raises the graph error if failed."""
        return self._waits.try_next(self._out)

    def next(self, timeout: float | None = None) -> Packet | None:
        """Block for the next packet; ``None`` at the end of the stream.

        Runs delegated work on this thread while waiting. Raises ``Timeout`` when ``timeout``
        seconds pass, ``KernelError`` if the graph failed (after the packets queued before the
        failure), ``DeadlockError`` if the graph stalled.
        """
        timeout = check_timeout(timeout, "Poller.next")
        deadline = None if timeout is None else time.monotonic() + max(0.0, float(timeout))
        return self._waits.next(self._out, deadline, timeout)

    def __iter__(self) -> Iterator[Packet]:
        """Iterate with ``next()`` until the end of the stream."""
        while True:
            p = self.next()
            if p is None:
                return
            yield p

    def __len__(self) -> int:
        """Packets queued right now."""
        return len(self._out)
