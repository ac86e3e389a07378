"""``KernelRunner``: drive one kernel without a graph (for unit tests of kernels)."""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Mapping
from typing import Any, final

from .._log import kernel_log
from .._timestamps import TS_UNSET, TS_UNSTARTED
from ..errors import KernelError, StateError, UsageError
from ..packets import Packet, clone_owned, to_packet, type_name
from ..spec._specs import PortSpec
from ._context import PHASE_CLOSE, PHASE_OPEN, PHASE_PROCESS, CloseReason, Context, NodeInfo
from ._contract import declare_contract
from ._ports import PortTable
from ._registry import kernel_class

__all__ = ["KernelRunner"]


@final
class KernelRunner:
    """Runs one registered kernel by hand: ``add_input`` → ``process(ts)`` → ``try_next``.

    Ports are named ``in0..`` and ``out0..``; the node is called ``kernel_runner``. Every
    ``process`` call starts with fresh staging (lm-lmflow's runner dropped emits after the
    first call; this one does not).

    >>> import flowplex
    >>> with flowplex.KernelRunner("ScaleKernel", options={"factor": 3}) as r:
    ...     r.add_input(0, 5)
    ...     r.process(7)
    ...     p = r.try_next()
    ...     (p.as_int(), p.timestamp)
    (15, 7)
    """

    def __init__(
        self,
        kernel: str,
        input_ports: int = 1,
        output_ports: int = 1,
        options: Any = None,
        side_packets: Mapping[str, object] | None = None,
    ) -> None:
        if input_ports < 0 or output_ports < 0:
            msg = "kernel runner: port counts must be >= 0"
            raise UsageError(msg)
        cls = kernel_class(kernel, where="kernel runner")
        self._inputs = PortTable(tuple(PortSpec(f"in{i}", "", i) for i in range(input_ports)))
        self._outputs = PortTable(tuple(PortSpec(f"out{i}", "", i) for i in range(output_ports)))
        self._contract = declare_contract(cls, self._inputs, self._outputs, "kernel runner contract")
        self._kernel = cls()
        self._options: Any = None
        self._info = NodeInfo(
            name="kernel_runner", kernel_name=kernel, inputs=self._inputs, outputs=self._outputs,
            is_source=input_ports == 0, counter_add=self._counter_add, log=kernel_log,
        )
        self._counters: dict[str, int] = {}
        self._ctx = Context(self._info)
        self._ctx.owner = self
        self._pending: list[Packet | None] = [None] * input_ports
        self._results: list[deque[Packet]] = [deque() for _ in range(output_ports)]
        self._opened = False
        self._closed = False
        if options is not None:
            self.set_options(options)
        for name, value in (side_packets or {}).items():
            self.set_side_packet(name, value)

    def _counter_add(self, name: str, delta: int) -> None:
        self._counters[name] = self._counters.get(name, 0) + delta

    def counter_value(self, name: str) -> int:
        """Value of a counter the kernel added to with ``cc.counter_add`` (0 if unset)."""
        return self._counters.get(name, 0)

    def set_options(self, options: Any) -> None:
        """Replace the kernel's options (any JSON-serialisable value); before ``start``."""
        self._require_unopened("options")
        # Round-trip through JSON so the kernel sees exactly what a YAML graph would give it.
        self._info.options = json.loads(json.dumps(options))

    def set_side_packet(self, name: str, value: object) -> None:
        """Set a side packet; before ``start``."""
        self._require_unopened("side packets")
        packet = to_packet(value, None, True)
        packet._owned = False
        self._info.side_packets[name] = packet

    def _require_unopened(self, what: str) -> None:
        if self._opened:
            msg = f"kernel runner: {what} must be set before start()"
            raise StateError(msg)

    def __enter__(self) -> KernelRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> None:
        """Open the kernel (idempotent); checks required side packets."""
        if self._opened:
            return
        for name in self._contract.side_packets:
            if name not in self._info.side_packets:
                msg = f"kernel runner missing required side packet `{name}`"
                raise UsageError(msg)
        ctx = self._ctx
        ctx.reset_for(TS_UNSTARTED, PHASE_OPEN)
        self._call("open", ctx)
        for staged in ctx.out_packets:
            staged.clear()
        self._opened = True

    def add_input(self, port: int, value: object, ts: int | None = None) -> None:
        """Stage one packet on input ``port`` for the next ``process`` call."""
        if not 0 <= port < len(self._pending):
            msg = f"kernel runner: input port {port} is out of range (num_inputs={len(self._pending)})"
            raise UsageError(msg)
        if self._pending[port] is not None:
            msg = f"kernel runner: input port {port} already has a packet for the next process call"
            raise StateError(msg)
        packet = to_packet(value, ts, True)
        packet._owned = False
        self._pending[port] = packet

    def process(self, timestamp: int) -> None:
        """Run ``process`` once at ``timestamp``; outputs go to ``try_next``."""
        self.start()
        ctx = self._ctx
        ctx.reset_for(timestamp, PHASE_PROCESS)
        packet: Packet | None = None
        for i, packet in enumerate(self._pending):
            if packet is not None and packet.timestamp == TS_UNSET:
                packet._ts = timestamp
            want = self._contract.input_types[i]
            if packet is not None and want and packet.type_id != want:
                self._pending = [None] * len(self._pending)
                msg = (f"kernel runner: input port {i} type mismatch: contract declares {type_name(want)}, "
                       f"actual {packet.type_name}")
                raise UsageError(msg)
            ctx.in_packets[i] = packet
        del packet  # hold no extra reference: take_input + make_mutable may then write in place
        self._pending = [None] * len(self._pending)
        try:
            self._call("process", ctx)
        finally:
            for i in range(len(ctx.in_packets)):
                ctx.in_packets[i] = None
        self._collect(ctx)

    def _call(self, name: str, ctx: Context) -> None:
        try:
            getattr(self._kernel, name)(ctx)
        except Exception as exc:
            for staged in ctx.out_packets:
                staged.clear()
            msg = f"kernel failed: [kernel_runner] {type(exc).__name__}: {exc}"
            raise self._error(msg, ctx.ts if name == "process" else None) from exc

    def _collect(self, ctx: Context) -> None:
        for o, staged in enumerate(ctx.out_packets):
            want = self._contract.output_types[o]
            for p in staged:
                if want and not p.is_empty and p.type_id != want:
                    staged.clear()
                    msg = (f"kernel failed: [kernel_runner] output port {o} type mismatch: contract declares "
                           f"{type_name(want)}, emitted {p.type_name}")
                    raise self._error(msg, ctx.ts)
        for o, staged in enumerate(ctx.out_packets):
            self._results[o].extend(staged)
            staged.clear()

    def _error(self, message: str, ts: int | None) -> KernelError:
        return KernelError(message, node=self._info.name, kernel=self._info.kernel_name, ts=ts)

    def try_next(self, port: int = 0) -> Packet | None:
        """The next output packet of ``port``, or ``None``."""
        if not 0 <= port < len(self._results):
            msg = f"kernel runner: output port {port} is out of range (num_outputs={len(self._results)})"
            raise UsageError(msg)
        q = self._results[port]
        return clone_owned(q.popleft()) if q else None

    def close(self) -> None:
        """Run ``close`` (reason NORMAL) if the kernel was opened; idempotent."""
        if self._closed:
            return
        self._closed = True
        if not self._opened:
            return
        ctx = self._ctx
        ctx.reset_for(TS_UNSET, PHASE_CLOSE)
        ctx.close_reason = CloseReason.NORMAL
        self._call("close", ctx)
        self._collect(ctx)
