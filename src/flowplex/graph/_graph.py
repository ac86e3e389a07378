"""``Graph``: the public facade over a built graph (lm-flow's Python ``Graph`` API)."""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, final

from .._log import kernel_log
from .._state import GraphState
from .._suggest import suggest
from .._types import PathLike
from ..engine._build import build_engine
from ..engine._clock import Clock
from ..engine._engine import INITIALIZED, TERMINATED, Engine
from ..errors import StateError, UnknownPortError, UsageError
from ..packets import Packet, new_buffer, to_packet
from ..spec._plan import GraphPlan, build_plan
from ..spec._specs import GraphSpec
from ._args import check_callback, check_count, check_flag, check_int, check_name, check_timeout, check_ts
from ._io import Input, Poller

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from ..config import Limits
    from ..control import GraphControl
    from ._async import AsyncDriver, AsyncOutputEvents

log = logging.getLogger("flowplex.graph")

__all__ = ["Graph"]


_FACTORY_TOKEN = object()


@final
class Graph:
    """A dataflow graph built from YAML, ready to ``start``.

    Build one with ``Graph.from_yaml(text)`` or ``Graph.from_yaml_file(path)`` and use it as a
    context manager so its threads stop before the interpreter exits:

    >>> import flowplex
    >>> with flowplex.Graph.from_yaml('''
    ... nodes:
    ...   - { name: s, kernel: ScaleKernel, input_ports: [x], output_ports: [y], options: { factor: 3 } }
    ... input_ports: [x]
    ... output_ports: [y]
    ... ''') as g:
    ...     out = g.add_poller("y")
    ...     g.start()
    ...     g.send("x", 14, ts=0)
    ...     g.close_all_inputs()
    ...     print(out.next().as_int())
    ...     g.wait_done()
    42
    """

    def __init__(self, plan: object = None, token: object = None) -> None:
        if token is not _FACTORY_TOKEN or not isinstance(plan, GraphPlan):
            msg = "create graphs with Graph.from_yaml(text), Graph.from_yaml_file(path) or Graph.from_spec(spec)"
            raise TypeError(msg)
        self._plan = plan
        self._counters_lock = threading.Lock()
        self._counters: dict[str, int] = {}
        self._engine: Engine = build_engine(plan, self._counter_add, kernel_log)
        if plan.spec.trace_capacity > 0:
            self.enable_tracing(plan.spec.trace_capacity)
        self._side_packets: dict[str, Packet] = {}
        self._inputs = {name: Input(self._engine.admission, self._engine.edges[name]) for name in plan.graph_inputs}
        self._pollers: list[Poller] = []
        self._closed = False
        self._driver: AsyncDriver | None = None
        self._control: GraphControl | None = None

    # -- construction ------------------------------------------------------------------------

    @classmethod
    def from_yaml(cls, yaml: str, *, limits: Limits | None = None, clock: Clock | None = None) -> Graph:
        """Build a graph from YAML text (``include`` needs ``from_yaml_file``).

        ``limits`` bounds what loading may cost (``flowplex.config.Limits``; default: its
        defaults, or the ``FLOWPLEX_MAX_*`` environment variables). ``clock``: see ``set_clock``.
        """
        from ..config._load import load_plan

        return cls(load_plan(yaml, limits=limits), _FACTORY_TOKEN)._with_clock(clock)

    @classmethod
    def from_yaml_file(cls, path: PathLike, *, limits: Limits | None = None, clock: Clock | None = None) -> Graph:
        """Build a graph from a YAML file; ``include`` paths are relative to it. ``limits`` and
        ``clock`` as for ``from_yaml``."""
        from ..config._load import load_plan_file

        return cls(load_plan_file(path, limits=limits), _FACTORY_TOKEN)._with_clock(clock)

    @classmethod
    def from_spec(cls, spec: GraphSpec, *, clock: Clock | None = None) -> Graph:
        """Build a graph from an already parsed ``GraphSpec``."""
        return cls(build_plan(spec), _FACTORY_TOKEN)._with_clock(clock)

    def _with_clock(self, clock: Clock | None) -> Graph:
        if clock is not None:
            self.set_clock(clock)
        return self

    # -- time and conditions -----------------------------------------------------------------

    def set_clock(self, clock: Clock) -> None:
        """Run the graph's timing rules on ``clock`` (before ``start``).

        Engine time (``rate``, ``source_yield``, ``periodic`` conditions, ``call_after``, input
        timeouts) is read from it: ``flowplex.testing.FakeClock`` makes them run on virtual time,
        which a test moves (``advance``) or lets move by itself (``autojump=True``). Host timeouts
        (``wait_done(timeout=...)``, ``next``) stay in real seconds.
        """
        if not isinstance(clock, Clock):
            msg = (f"set_clock: expected a clock (flowplex.testing.FakeClock, or an object with "
                   f"__call__, wait, jump_to and autojump), got {type(clock).__name__}")
            raise UsageError(msg)
        self._require_state((INITIALIZED,), "set_clock")
        self._engine.conditions.set_clock(clock)

    @property
    def clock(self) -> Clock:
        """The clock the graph's timing rules read (the system's unless ``set_clock`` gave one)."""
        return self._engine.conditions.clock

    def set_condition(self, name: str, value: bool) -> None:
        """Enable (True) or disable (False) every node with the ``boolean`` condition ``name``.

        Any thread, any time (before ``start`` too: it sets the value the graph starts with).
        A disabled node keeps its inputs queued (backpressure holds) and runs again once enabled.
        """
        if not isinstance(value, bool):
            msg = f"set_condition: value must be True or False, got {value!r}"
            raise UsageError(msg)
        self._engine.conditions.set_condition(name, value)

    def notify(self, name: str) -> None:
        """Signal the ``event`` condition ``name``: each node waiting on it may run once more.

        Safe from any thread (a driver's callback, say); notifications before the node can run
        are counted, not lost.
        """
        self._engine.conditions.notify_event(name)

    # -- lifecycle ---------------------------------------------------------------------------

    @property
    def state(self) -> GraphState:
        """The lifecycle state."""
        return GraphState(self._engine.status.state)

    def __repr__(self) -> str:
        state = self._engine.status.state
        return f"<flowplex.Graph state={state} ({GraphState(state).name}) nodes={len(self._engine.nodes)}>"

    def __enter__(self) -> Graph:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.close()

    def _require_state(self, allowed: tuple[int, ...], what: str) -> None:
        state = self._engine.status.state
        if state not in allowed:
            names = "/".join(GraphState(s).name for s in allowed)
            msg = f"{what} is only allowed while the graph is {names} (it is {GraphState(state).name})"
            raise StateError(msg)

    def set_side_packet(self, name: str, value: object) -> None:
        """Set a constant every kernel can read with ``cc.side_packet(name)``; before ``start``."""
        check_name(name, "set_side_packet", "name")
        self._require_state((INITIALIZED,), "set_side_packet")
        packet = to_packet(value, None, True)
        packet._owned = False
        self._side_packets[name] = packet
        self._engine.set_side_packet(name, packet)

    def start(self, timeout: float | None = None, *, control: str | bool | None = None) -> None:
        """Open every kernel, in node order, then start running.

        ``control`` serves the graph live to ``flowplex ps/top/echo/hz/dot/stop`` on a Unix socket
        of this user's: a name (taken as given; ``ControlError`` when a live graph holds it),
        ``True`` (the YAML file's stem, or ``graph``, made unique with ``-2``, ``-3``...),
        ``False`` (none), or ``None``: the YAML's ``control:`` key decides (absent: none).
        ``close()`` removes the socket.

        Without ``timeout`` (the default) each kernel's ``open`` runs on this thread; Ctrl-C
        interrupts it as any Python code. With ``timeout`` seconds, the whole start (workers
        loading kernels included) is bounded: the opens run on a helper thread while this one
        waits, and ``Timeout`` names the node still opening when the time is up. ``cancel()``
        from another thread ends such a wait (and one for a process pool's worker) with
        ``GraphCancelled``. A hung ``open`` cannot be stopped: its thread (a daemon) is left
        running, ``close()`` does not wait for it, and the graph cannot be started again.

        Raises:
            KernelError: A kernel's ``open`` failed (it names the node).
            Timeout: ``timeout`` passed first.
            GraphCancelled: ``cancel()`` was called while the start waited.
        """
        timeout = check_timeout(timeout, "start")
        self._require_state((INITIALIZED,), "start")
        self._serve_control(self._plan.spec.control if control is None else control)
        try:
            self._engine.start(None if timeout is None else time.monotonic() + timeout)
        except BaseException:
            self._close_control()
            raise

    @property
    def control_name(self) -> str | None:
        """The name ``flowplex ps`` lists this graph under while it serves a control socket; else None."""
        return self._control.name if self._control is not None else None

    def _serve_control(self, control: str | bool | None) -> None:
        if control is None or control is False:
            return
        if not isinstance(control, (str, bool)):
            msg = f"start(control=...) takes a name, True or False, not {type(control).__name__}"
            raise UsageError(msg)
        from ..control import GraphControl
        from ..control._paths import default_name

        source = self._plan.spec.source or ""
        if control is True:
            stem = default_name(os.path.splitext(os.path.basename(source))[0]) if source else "graph"
            self._control = GraphControl(self, self._engine, stem, exact=False, source=source)
        else:
            self._control = GraphControl(self, self._engine, control, exact=True, source=source)

    def _close_control(self) -> None:
        if self._control is not None:
            self._control.close()
            self._control = None

    def close(self) -> None:
        """Cancel if still running, wait briefly, stop threads. Idempotent.

        The wait for running calls to finish and nodes to close lasts at most 5 s, and ends
        after 1 s in which none did (about a second in all, threads joined): a ``process``
        (or ``open``, ``close``) that never returns is named in a warning
        (``graph.close.abandoned``) and left running on its thread, a daemon that does not keep
        the interpreter from exiting.

        Releases every packet the graph still holds (queued input, feedback registers, side
        packets), so adopted arrays are writeable again. Packets already in poller queues are
        the host's: they stay readable, and are released with the poller (or when read and
        dropped).
        """
        if self._closed:
            return
        self._closed = True
        self._close_control()
        if self._driver is not None:
            self._driver.stop()
        self._engine.stop()
        if self._engine.status.state == TERMINATED:  # no callback can still read a side packet
            self._side_packets.clear()

    def reset(self) -> None:
        """Make a terminated graph startable again; kernels stay opened (``open`` is skipped).

        Queued packets (and pollers' unread ones) are dropped, side packets are kept.
        """
        self._engine.reset()
        with self._counters_lock:
            self._counters.clear()

    # -- subscribers ---------------------------------------------------------------------------

    def _output_edge(self, port: str) -> Any:
        if port not in self._plan.graph_outputs:
            hint = suggest(port, list(self._plan.graph_outputs))
            tail = f"; did you mean `{hint}`?" if hint else f" (graph outputs: {list(self._plan.graph_outputs)})"
            msg = f"graph output port `{port}` does not exist{tail}"
            raise UnknownPortError(msg)
        return self._engine.edges[port]

    def add_poller(
        self,
        port: str,
        *,
        observe_timestamp_bounds: bool = False,
        capacity: int = 0,
        overflow: str = "block",
    ) -> Poller:
        """Subscribe to graph output ``port``; before ``start``.

        ``capacity=0`` (the default) is unbounded. A bounded poller applies ``overflow`` when
        full: ``block`` (lossless: producers wait, cooperatively, until you read),
        ``drop_oldest``, ``drop_newest`` or ``latest`` (capacity 1); drops are counted in
        ``poller.dropped``.
        """
        check_name(port, "add_poller")
        check_flag(observe_timestamp_bounds, "add_poller", "observe_timestamp_bounds")
        capacity = check_int(capacity, "add_poller", "capacity")  # its range: Poller, with the policy
        check_name(overflow, "add_poller", "overflow")
        edge = self._output_edge(port)
        self._require_state((INITIALIZED,), "add_poller")
        poller = Poller(self._engine.waits, self._engine.add_poller(edge, observe_timestamp_bounds, capacity, overflow))
        self._pollers.append(poller)
        return poller

    def observe(self, port: str, fn: Callable[[Packet], object], *, observe_timestamp_bounds: bool = False) -> None:
        """Call ``fn(packet)`` for every packet on graph output ``port``, on the delivering thread.

        The packet is borrowed: copy what you keep. Before ``start``.
        """
        check_name(port, "observe")
        check_callback(fn, "observe")
        check_flag(observe_timestamp_bounds, "observe", "observe_timestamp_bounds")
        edge = self._output_edge(port)
        self._require_state((INITIALIZED,), "observe")
        self._engine.observe(edge, fn, observe_timestamp_bounds)

    def streams(self) -> list[str]:
        """Every stream's name: the graph inputs, then each node output port (a graph output too)."""
        return list(self._engine.edges)

    def tap(self, stream: str, on_packet: Callable[[Packet], object],
            on_bound: Callable[[int], object] | None = None) -> None:
        """Call ``on_packet(packet)`` for every packet on any stream (an edge or a graph port), and
        ``on_bound(ts)`` when its timestamp bound advances to ``ts`` (every packet advances it past
        its own timestamp too). On the delivering thread; the packet is borrowed. Before ``start``.
        """
        check_name(stream, "tap")
        check_callback(on_packet, "tap")
        if on_bound is not None:
            check_callback(on_bound, "tap")
        edges = self._engine.edges
        if stream not in edges:
            hint = suggest(stream, list(edges))
            msg = f"stream `{stream}` does not exist" + (f"; did you mean `{hint}`?" if hint else
                                                         f" (streams: {list(edges)})")
            raise UnknownPortError(msg)
        self._require_state((INITIALIZED,), "tap")
        self._engine.observe(edges[stream], on_packet, False)
        if on_bound is not None:
            self._engine.observe(edges[stream], lambda marker: on_bound(marker._ts), True, packets=False)

    def events(self, port: str) -> AsyncOutputEvents:
        """``async for`` over graph output ``port``: ``PacketEvent``, ``TimestampBoundEvent``, then
        ``DoneEvent``. Call before ``start``; iterating starts the graph on the running loop."""
        from ._async import AsyncOutputEvents  # asyncio is imported only by async users

        check_name(port, "events")
        poller = self.add_poller(port, observe_timestamp_bounds=True)
        return AsyncOutputEvents(self, self._async_driver(), poller)

    async def run_async(self, *, timeout: float | None = None, cancel_grace: float = 0.0) -> None:
        """Start (if needed) and drive the graph from asyncio until it terminates.

        On ``timeout`` the graph is cancelled, given ``cancel_grace`` seconds to finish, and
        ``Timeout`` is raised; task cancellation does the same and re-raises. A graph still
        running when the grace ends (the default 0 does not wait) gets a ``RuntimeWarning``;
        ``close()`` then completes the cleanup. Negative seconds raise ``ValueError``.
        """
        from ._async import run_async

        await run_async(self, self._async_driver(), timeout, cancel_grace)

    def _async_driver(self) -> AsyncDriver:
        if self._driver is None:
            from ._async import AsyncDriver

            self._driver = AsyncDriver(self, self._engine, lambda: self._closed)
        return self._driver

    def set_wakeup_callback(self, fn: Callable[[], object] | None) -> None:
        """Install the one wakeup callback: called from engine threads when the graph made
        progress (coalesce it; then call ``pump_step`` from your loop). ``None`` removes it."""
        if fn is not None:
            check_callback(fn, "set_wakeup_callback")
        self._engine.set_wakeup(fn)  # type: ignore[arg-type]
        if fn is not None:
            fn()

    # -- inputs --------------------------------------------------------------------------------

    def input(self, port: str) -> Input:
        """The handle of graph input ``port`` (``KeyError`` if there is none)."""
        if type(port) is not str:
            check_name(port, "input")
        handle = self._inputs.get(port)
        if handle is None:
            hint = suggest(port, list(self._inputs))
            tail = f"; did you mean `{hint}`?" if hint else f" (graph inputs: {list(self._inputs)})"
            msg = f"graph input port `{port}` does not exist{tail}"
            raise UnknownPortError(msg)
        return handle

    def send(self, port: str, value: object, ts: int | None = None, *, timeout: float | None = None) -> None:
        """``self.input(port).send(value, ts)``: see ``Input.send``."""
        if type(port) is not str:
            check_name(port, "send")
        if type(ts) is not int:
            ts = check_ts(ts, "send")
        if timeout is not None:
            timeout = check_timeout(timeout, "send")
        handle = self.input(port)
        admission = self._engine.admission
        work = admission.accept(handle._edge, to_packet(value, ts, True), timeout=timeout)
        del value  # see Input.send: keep no reference while the graph runs
        admission.run_work(work)

    def send_nowait(self, port: str, value: object, ts: int | None = None) -> None:
        """``self.input(port).send_nowait(value, ts)``: raises ``WouldBlock`` when full."""
        check_name(port, "send_nowait")
        self.input(port).send_nowait(value, check_ts(ts, "send_nowait"))

    def try_send(self, port: str, value: object, ts: int | None = None) -> bool:
        """``self.input(port).try_send(value, ts)``: False when the graph is full."""
        check_name(port, "try_send")
        return self.input(port).try_send(value, check_ts(ts, "try_send"))

    def new_buffer(self, shape: tuple[int, ...] | list[int], dtype: npt.DTypeLike) -> tuple[Packet, np.ndarray]:
        """A zero-filled buffer packet and a writable view of it, to fill then ``send``.

        ``send`` hands the buffer over without copying: the view turns read-only there, and a
        kernel may write into the memory in place; the view is writeable again once no packet
        shares the buffer, the one returned here included (see ``flowplex.packets.new_buffer``).
        When a graph input feeds a node on a process pool, the buffer is allocated in the
        pool's shared memory (after ``start``), so that it reaches the worker without a copy.
        """
        return new_buffer(shape, dtype, zeros=self._engine.input_zeros)

    def close_input(self, port: str) -> None:
        """Close graph input ``port``."""
        check_name(port, "close_input")
        self.input(port).close()

    def close_all_inputs(self) -> None:
        """Close every graph input."""
        for handle in self._inputs.values():
            handle.close()

    # -- control -------------------------------------------------------------------------------

    def cancel(self) -> None:
        """Stop the graph: no new invocations, every node closes with reason CANCELLED.

        Any thread may call it: a ``start`` that waits for an open (see ``start``) raises
        ``GraphCancelled``; ``wait_done`` returns once the nodes closed (``close()`` bounds
        that wait when a call never returns)."""
        self._engine.cancel()

    def pause(self) -> None:
        """Stop claiming new invocations (sends still queue) until ``resume``."""
        self._engine.set_paused(True)

    def resume(self) -> None:
        """Undo ``pause`` and rescan every node."""
        self._engine.set_paused(False)

    def pump_step(self) -> bool:
        """Run one delegated task on this thread; False when there was none."""
        return self._engine.pump.pump_step()

    def pump_steps(self, max_steps: int) -> int:
        """Run up to ``max_steps`` delegated tasks; returns how many ran."""
        max_steps = check_count(max_steps, "pump_steps", "max_steps")  # a TypeError or ValueError first
        return self._engine.pump.pump(max_steps)

    def wait_done(self, timeout: float | None = None) -> None:
        """Block until every node has closed; raise the graph's error, if any.

        Runs delegated work on this thread meanwhile. Raises ``StateError`` if the graph is idle
        with graph inputs still open (it cannot finish by itself), ``DeadlockError`` if it
        stalled, ``GraphCancelled`` after ``cancel``, ``KernelError`` if a kernel failed and
        ``Timeout`` after ``timeout`` seconds. A negative ``timeout`` polls once, as in lm-flow.
        """
        timeout = check_timeout(timeout, "wait_done")
        self._engine.waits.wait_done(None if timeout is None else time.monotonic() + float(timeout))

    def wait_until_idle(self, timeout: float | None = None) -> None:
        """Block until nothing is running or queued for execution (closes nothing)."""
        timeout = check_timeout(timeout, "wait_until_idle")
        self._engine.waits.wait_until_idle(None if timeout is None else time.monotonic() + float(timeout))

    # -- introspection -------------------------------------------------------------------------

    def last_error(self) -> str:
        """Text of the first error (``""`` when none)."""
        return self._engine.status.error_text

    def dropped_count(self, port: str) -> int:
        """Packets dropped on edge ``port`` by lossy policies."""
        check_name(port, "dropped_count")
        edge = self._engine.edges.get(port)
        if edge is None:
            msg = f"no edge named `{port}`"
            raise UnknownPortError(msg)
        return edge.dropped

    def overwritten_count(self, port: str) -> int:
        """Feedback values replaced before they were read, on back-edge ``port``.

        lm-lmflow reports these as drops (with the fixed_size warning); flowplex keeps them
        apart: a feedback register is meant to keep only the newest value.
        """
        check_name(port, "overwritten_count")
        edge = self._engine.edges.get(port)
        if edge is None:
            msg = f"no edge named `{port}`"
            raise UnknownPortError(msg)
        return sum(p.overwritten for n in self._engine.snapshot().nodes for p in n.ports
                   if p.is_back and p.edge == port)

    def _counter_add(self, name: str, delta: int) -> None:
        with self._counters_lock:
            self._counters[name] = self._counters.get(name, 0) + delta

    def counter_value(self, name: str) -> int:
        """Value of the named counter kernels add to with ``cc.counter_add`` (0 if unset)."""
        check_name(name, "counter_value", "name")
        with self._counters_lock:
            return self._counters.get(name, 0)

    def executor_names(self) -> list[str]:
        """``["default", ...]`` in YAML order."""
        return [ex.name for ex in self._plan.executors]

    @property
    def plan(self) -> GraphPlan:
        """The checked plan the graph was built from."""
        return self._plan

    # -- diagnostics (issue 4) --
    # Each takes one snapshot (``Engine.snapshot``: the engine's only diagnostics seam) and hands it to
    # flowplex.diagnostics to format (imported lazily: `import flowplex` stays fast).

    if TYPE_CHECKING:
        from ..diagnostics._dot_view import DotView
        from ..diagnostics._stats import GraphStats, NodeStats

    def to_dot(self, view: str | DotView = "topology") -> str:
        """Graphviz DOT of the graph: ``"topology"``, ``"compact"`` or ``"diagnostics"`` (``DotView``).

        Callable at any time, from any thread (one snapshot per export). The compact and
        diagnostics views report deltas since the previous export of the same view. Raises
        ``UsageError`` (a ``ValueError``) for an unknown view.
        """
        from ..diagnostics._dot import to_dot

        return to_dot(self._engine.snapshot(), self._plan, view, owner=self, counter_value=self.counter_value)

    def stats(self) -> GraphStats:
        """A frozen snapshot of every node, port, edge and executor counter (one lock pass)."""
        from ..diagnostics._stats import graph_stats

        return graph_stats(self._engine.snapshot(), self._plan)

    def node_stats(self) -> list[NodeStats]:
        """Per-node stats snapshots in YAML order (``self.stats().nodes``)."""
        return list(self.stats().nodes)

    def enable_tracing(self, capacity: int = 65_536) -> None:
        """Record each kernel invocation (a ring of ``capacity`` events) for ``to_chrome_trace``.

        Forces stats ``full`` (tracing needs per-call timing); call it before ``start``.
        """
        from ..diagnostics._trace import Tracer

        self._engine.set_tracer(Tracer(capacity))

    def to_chrome_trace(self) -> str:
        """The traced invocations as Chrome/Perfetto Trace Event Format JSON text (lm-flow's type).

        Empty (``{"traceEvents": [], ...}``) unless tracing is on (``enable_tracing`` or the
        YAML's ``trace_capacity``).
        """
        from ..diagnostics._trace import chrome_trace

        return chrome_trace(self._engine.snapshot())

    def dump(self) -> str:
        """lm-flow's text snapshot: header, node table, then port, edge and poller lines."""
        from ..diagnostics._stats import dump, graph_stats

        return dump(graph_stats(self._engine.snapshot(), self._plan))
