"""asyncio integration: one driver task per graph pumps it when the engine signals progress.

The engine calls a wakeup callback (from any thread) when something progressed; the driver
turns that into ``loop.call_soon_threadsafe(event.set)``, coalesced so a busy graph costs one
hand-off per batch of progress, not one per packet. No polling timers.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import warnings
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Protocol

from .._events import DoneEvent, OutputEvent, PacketEvent, TimestampBoundEvent
from .._state import GraphState
from .._timestamps import TS_DONE
from ..engine._engine import TERMINATED
from ..errors import StateError, Timeout
from ._args import check_grace

if TYPE_CHECKING:
    from ..engine._engine import Engine
    from ._io import Poller

__all__ = ["AsyncDriver", "AsyncOutputEvents", "Driven"]


class Driven(Protocol):
    """What the driver needs of its ``Graph`` (a protocol: this module never names the facade's class)."""

    @property
    def state(self) -> GraphState: ...

    def start(self, timeout: float | None = None) -> None: ...

    def cancel(self) -> None: ...

    def wait_done(self, timeout: float | None = None) -> None: ...


class AsyncDriver:
    """Pumps one graph from an asyncio loop; shared by ``run_async`` and every ``events``."""

    def __init__(self, graph: Driven, engine: Engine, closed: Callable[[], bool]) -> None:
        self._graph = graph
        self._engine = engine
        self._closed = closed
        self._loop: asyncio.AbstractEventLoop | None = None
        self._event: asyncio.Event | None = None
        self._changed: asyncio.Condition | None = None
        self._task: asyncio.Task[None] | None = None
        self._pending = False
        self._lock = threading.Lock()

    def ensure_running(self) -> asyncio.Task[None]:
        """Start the drive task on the running loop (starting the graph if needed)."""
        loop = asyncio.get_running_loop()
        if self._loop is not None and self._loop is not loop:
            msg = "this graph is already driven by another event loop"
            raise StateError(msg)
        if self._task is not None:
            return self._task
        graph = self._graph
        if self._closed():
            msg = "run_async/events need an open graph: this one was closed (Graph.close)"
            raise StateError(msg)
        if graph.state == GraphState.CREATED:
            msg = "the graph is not initialized"
            raise StateError(msg)
        self._loop = loop
        self._event = asyncio.Event()
        self._changed = asyncio.Condition()
        self._engine.set_wakeup(self._wakeup)
        if graph.state == GraphState.INITIALIZED:
            graph.start()
        self._task = loop.create_task(self._drive(), name="flowplex-driver")
        return self._task

    def _wakeup(self) -> None:
        # Any engine thread. Coalesced: one call_soon_threadsafe until the driver runs again.
        with self._lock:
            if self._pending:
                return
            self._pending = True
        loop, event = self._loop, self._event
        if loop is not None and event is not None:
            with contextlib.suppress(RuntimeError):  # the loop is closed
                loop.call_soon_threadsafe(event.set)

    async def _drive(self) -> None:
        engine = self._engine
        event = self._event
        changed = self._changed
        if event is None or changed is None:  # pragma: no cover - set by ensure_running
            return
        try:
            while True:
                event.clear()
                with self._lock:
                    self._pending = False
                engine.pump.pump()
                async with changed:
                    changed.notify_all()
                if engine.status.state == TERMINATED:
                    return
                if not event.is_set():
                    # Check at most every 50 ms as well: a stall or a closing scan needs no wakeup.
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(event.wait(), 0.05)
        finally:
            engine.set_wakeup(None)
            async with changed:
                changed.notify_all()

    async def wait_change(self) -> None:
        """Wait for the driver's next publication."""
        changed = self._changed
        if changed is None:
            return
        async with changed:
            # Bounded: a publication just missed costs at most one slice, never a hang.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(changed.wait(), 0.1)

    def terminated(self) -> bool:
        """Whether the driven graph's engine has terminated."""
        return self._engine.status.state == TERMINATED

    def stop(self) -> None:
        """Cancel the drive task (``Graph.close``)."""
        task, self._task = self._task, None
        self._engine.set_wakeup(None)
        if task is not None and not task.done():
            task.cancel()


async def run_async(graph: Driven, driver: AsyncDriver, timeout: object, cancel_grace: object) -> None:
    """``Graph.run_async``: drive until terminated, then raise the graph's error if any.

    On ``timeout`` and on cancellation of the calling task the graph is cancelled and given
    ``cancel_grace`` seconds to terminate; if it has not, a ``RuntimeWarning`` says so and
    ``Graph.close()`` finishes the cleanup. A second cancellation during the grace abandons
    the wait and is un-counted, so the caller sees one cancellation request, not two.
    """
    limit = check_grace(timeout, "run_async", "timeout", optional=True)
    grace = check_grace(cancel_grace, "run_async", "cancel_grace", optional=False)
    task = driver.ensure_running()
    try:
        await asyncio.wait_for(asyncio.shield(task), limit)
    except TimeoutError:
        await _cancel_and_grace(graph, driver, task, grace, "timeout")
        msg = f"run_async timed out after {timeout} seconds"
        raise Timeout(msg) from None
    except asyncio.CancelledError:
        current = asyncio.current_task()
        try:
            await _cancel_and_grace(graph, driver, task, grace, "cancellation")
        except asyncio.CancelledError:
            # A second cancel() abandoned the grace: the caller asked to stop once already and
            # re-raising below honours that; keep cancelling() at the count it expects.
            if current is not None:
                current.uncancel()
        raise
    graph.wait_done()


async def _cancel_and_grace(graph: Driven, driver: AsyncDriver, task: asyncio.Task[None], grace: float,
                            reason: str) -> None:
    """Cancel the graph and wait up to ``grace`` s for it to terminate; warn if it did not.

    A cancellation of the caller during the wait propagates (``run_async`` un-counts it).
    """
    graph.cancel()
    if grace > 0 and not task.done():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(task), grace)
    if task.done() or driver.terminated():
        return
    warnings.warn(
        f"run_async {reason} grace expired before the graph terminated; "
        "Graph.close() will complete synchronous cleanup",
        RuntimeWarning,
        stacklevel=4,  # _cancel_and_grace, run_async, Graph.run_async, then the awaiting code
    )


class AsyncOutputEvents:
    """``async for event in graph.events(port)``: packets, bounds, then ``DoneEvent``."""

    def __init__(self, graph: Driven, driver: AsyncDriver, poller: Poller) -> None:
        self._graph = graph
        self._driver = driver
        self._poller = poller
        self._done = False

    def __aiter__(self) -> AsyncIterator[OutputEvent]:
        return self

    async def __anext__(self) -> OutputEvent:
        if self._done:
            raise StopAsyncIteration
        task = self._driver.ensure_running()
        while True:
            packet = self._poller.try_next()
            if packet is not None:
                if not packet.is_empty:
                    return PacketEvent(packet)
                if packet.timestamp == TS_DONE:
                    self._done = True
                    await asyncio.shield(task)
                    self._graph.wait_done()
                    return DoneEvent()
                return TimestampBoundEvent(packet.timestamp)
            if task.done():
                self._done = True
                self._graph.wait_done()
                raise StopAsyncIteration
            await self._driver.wait_change()
