"""What crosses the executor seam: an invocation out, an outcome back, and a node's recipe.

An in-process executor never builds these: its task *is* the engine's context, filled in
place (zero overhead). An executor that ``hosts_kernels`` (the loopback in
``flowplex.testing``, later a process pool or Ray) runs kernels on instances of its own, so the
engine hands it an ``Invocation`` (plain data: no engine object inside) and gets an ``Outcome``
back through the one completion callback it passed with it. Both encode to bytes with
``flowplex.executors.hosted._codec``; buffers travel out of band.

A leaf module: it imports nothing of the engine.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..kernels._registry import Kernel
    from ..packets import Packet
    from ..spec._specs import NodeSpec

__all__ = ["Complete", "Invocation", "NodeRecipe", "Outcome", "Spill"]


@dataclass(slots=True)
class Invocation:
    """One kernel callback to run: ``open``, ``process`` or ``close`` of one node."""

    node: int
    """The node's index in the graph (the key of its ``NodeRecipe``)."""
    seq: int
    """The node's claim sequence number (``open``: -1)."""
    phase: int
    """``PHASE_OPEN``, ``PHASE_PROCESS`` or ``PHASE_CLOSE`` (``flowplex.kernels._context``)."""
    ts: int
    """The input timestamp the kernel sees (``input_timestamp``)."""
    inputs: list[Packet | None]
    """One slot per input port: the packet at ``ts``, or None."""
    batch: list[list[Packet]] | None = None
    """Under the ``batch`` policy: every packet of the batch, per port."""
    done: list[bool] | None = None
    """Per input port: closed and drained when claimed (``input_is_done``); None = none is."""
    close_reason: int = 0
    """``CloseReason`` of a ``close`` callback."""

    def __reduce__(self) -> tuple[type[Invocation], tuple[object, ...]]:
        # By position: a third of the default (slots) pickle's size and time, each way.
        return (Invocation, (self.node, self.seq, self.phase, self.ts, self.inputs, self.batch, self.done,
                             self.close_reason))


@dataclass(slots=True)
class Outcome:
    """What one callback did, for the engine to apply: staged output, requests, counters, error."""

    node: int
    seq: int
    outputs: list[list[Packet]]
    """Staged packets per output port, in emit order."""
    bounds: dict[int, int] | None = None
    """``set_next_timestamp_bound`` calls: output index → bound."""
    source_done: bool = False
    yield_s: float | None = None
    """``source_yield`` delay in seconds (None when not called)."""
    counters: list[tuple[str, int]] = field(default_factory=list)
    """``counter_add`` calls, in order."""
    logs: list[tuple[int, str]] = field(default_factory=list)
    """``log`` calls (level, already prefixed message), in order."""
    ignored_emits: int = 0
    """Writes to output indexes the node lacks (``NodeInfo.ignored_emits``), this callback."""
    started_ns: int = 0
    """``perf_counter_ns`` when the callback started, on the host that ran it."""
    duration_ns: int = 0
    copies: int = 0
    """Copy-on-write copies the callback made."""
    error: str = ""
    """``Type: message`` of the exception the callback raised ("" when it returned)."""
    traceback: str = ""
    """The formatted traceback of that exception, from the host that ran it."""
    exception: BaseException | None = None
    """The exception itself when it survived encoding (else only ``error`` tells)."""
    partial: bool = False
    """A slice of a call still running (``outputs`` only: what it staged so far, in order): the
    host hands it to the call's ``Spill`` and answers with a go-ahead; the final outcome of the
    call carries the rest (``Call.spill_at``)."""
    conditions: list[tuple[str, str, bool]] = field(default_factory=list)
    """``cc.notify`` / ``cc.set_condition`` calls as ``(op, name, value)``, in order: the graph's
    conditions live in its process, which applies them with the outcome."""

    def __reduce__(self) -> tuple[type[Outcome], tuple[object, ...]]:
        return (Outcome, (self.node, self.seq, self.outputs, self.bounds, self.source_done, self.yield_s,
                          self.counters, self.logs, self.ignored_emits, self.started_ns, self.duration_ns,
                          self.copies, self.error, self.traceback, self.exception, self.partial,
                          self.conditions))


Complete = Callable[[Outcome], None]
"""The engine's completion callback for one invocation: call it exactly once, from any thread."""

Spill = Callable[[list[list["Packet"]]], bool]
"""The engine's handler for the partial outcomes of one ``process`` call still running (its
staged packets so far, per output port): it delivers them into the graph, or keeps them staged
for the final outcome, and blocks until the graph's budget has room. True: the kernel's next
slice may come after ``SPILL_SLICE`` packets again; False (nothing could make room, or the
packets were kept): after twice as many (``Spills.spill``'s rule)."""


@dataclass(frozen=True, slots=True)
class NodeRecipe:
    """What a kernel host needs to build and run one node's kernel on its own instance."""

    index: int
    spec: NodeSpec
    """The node's spec: name, kernel name, ports, options."""
    kernel_cls: type[Kernel]
    """The kernel class (a process pool pickles it by reference)."""
    strict_ports: bool
    side_packets: dict[str, Packet]
    """The side packets set before ``start``."""
