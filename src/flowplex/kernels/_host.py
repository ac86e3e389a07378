"""``KernelHost``: run one node's kernel on an instance of its own, from invocations.

What a worker process does with the node recipes it is given: build the kernel, then turn
each ``Invocation`` into one ``open``, ``process`` or ``close`` call and report what the call
did as an ``Outcome`` (staged output, bounds, source requests, counters, logs, timing, the
failure). Nothing here calls a graph: counters and logs are collected into the outcome, and
the engine that receives it applies them. ``KernelHosts`` holds the hosts of the nodes placed
on one executor.
"""

from __future__ import annotations

import threading
import time
import traceback
from collections.abc import Callable, Iterable
from typing import final

from ..errors import ConfigError, UsageError
from ..executors._invocation import Invocation, NodeRecipe, Outcome
from ..packets import Packet, _borrow, _thread_cow_counts, clone_owned
from ._context import PHASE_CLOSE, PHASE_OPEN, PHASE_PROCESS, SPILL_SLICE, Context, NodeInfo
from ._ports import PortTable
from ._registry import Kernel

__all__ = ["KernelHost", "KernelHosts", "describe_failure", "failed_outcome"]


def describe_failure(exc: BaseException, ctx: Context) -> str:
    """``Type: message`` of a kernel failure; the context's ``set_error`` text when the message is empty."""
    text = str(exc)
    if not text and ctx.error_text:
        text = ctx.error_text
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def is_interrupt(exc: BaseException) -> bool:
    """Whether a ``BaseException`` from a kernel is the user's Ctrl-C, to let through.

    Only a ``KeyboardInterrupt`` on the main thread is: signals are delivered there, so one on
    any other thread was raised by code (a kernel), like ``SystemExit`` or a ``BaseException``
    subclass. Those fail their node as any ``Exception`` does: a kernel must not be able to
    kill an engine thread and leave its node running (``wait_done`` would never return).
    """
    return isinstance(exc, KeyboardInterrupt) and threading.current_thread() is threading.main_thread()


def failed_outcome(invocation: Invocation, exc: Exception, num_outputs: int = 0) -> Outcome:
    """An outcome reporting ``exc`` for ``invocation``, which never reached its kernel.

    For an executor whose own machinery failed (a payload that does not encode, an unknown
    node): the engine then fails the node instead of waiting for a completion.
    """
    text = str(exc)
    return Outcome(invocation.node, invocation.seq, [[] for _ in range(num_outputs)],
                   error=f"{type(exc).__name__}: {text}" if text else type(exc).__name__,
                   traceback="".join(traceback.format_exception(exc)), exception=exc)


@final
class _Slot:
    """One context with the node info it reports through: counters and logs land in lists."""

    __slots__ = ("conditions", "counters", "ctx", "info", "logs")

    def __init__(self, host: KernelHost, info: NodeInfo) -> None:
        self.counters: list[tuple[str, int]] = []
        self.logs: list[tuple[int, str]] = []
        self.conditions: list[tuple[str, str, bool]] = []
        info.counter_add = self._counter_add
        info.log = self._log
        info.conditions = self._condition
        self.info = info
        self.ctx = Context(info)
        self.ctx.owner = host

    def _counter_add(self, name: str, delta: int) -> None:
        self.counters.append((name, delta))

    def _log(self, level: int, message: str) -> None:
        self.logs.append((level, message))

    def _condition(self, op: str, name: str, value: bool) -> None:
        self.conditions.append((op, name, value))


@final
class KernelHost:
    """One node's kernel instance, run one invocation at a time per context.

    ``run`` may be called from several threads at once (a node with ``max_in_flight > 1``):
    each concurrent call gets a context of its own, reused afterwards. Each context has its own
    ``NodeInfo``, so that counters, logs and ignored emits land in the right outcome (the
    rate-limited warning about ignored emits therefore counts per context, on this host).
    """

    __slots__ = ("_free", "_inputs", "_outputs", "_side_packets", "_spill", "kernel", "recipe")

    def __init__(self, recipe: NodeRecipe, spill: Callable[[Context], None] | None = None) -> None:
        """Build the kernel instance; ``spill`` becomes its contexts' ``NodeInfo.spill`` (a
        process pool's worker sends a long call's output ahead in slices; None: never).

        Raises:
            ConfigError: The kernel's constructor raised (the message names the node).
        """
        spec = recipe.spec
        try:
            self.kernel: Kernel = recipe.kernel_cls()
        except Exception as exc:
            msg = f"{spec.label}: constructing kernel `{spec.kernel}` failed: {type(exc).__name__}: {exc}"
            raise ConfigError(msg) from exc
        self.recipe = recipe
        self._inputs = PortTable(spec.input_ports)
        self._outputs = PortTable(spec.output_ports)
        self._side_packets: dict[str, Packet] = {}
        self._spill = spill
        self._free: list[_Slot] = []
        self.set_side_packets(recipe.side_packets)

    @property
    def index(self) -> int:
        """The node's index in the graph."""
        return self.recipe.index

    def serves(self, recipe: NodeRecipe) -> bool:
        """Whether ``recipe`` describes this host's node (same kernel class, spec and strictness)."""
        mine = self.recipe
        return (recipe.index == mine.index and recipe.kernel_cls is mine.kernel_cls
                and recipe.strict_ports == mine.strict_ports and recipe.spec == mine.spec)

    def set_side_packets(self, side_packets: dict[str, Packet]) -> None:
        """Replace the side packets the kernel sees (borrowed handles: the kernel cannot change them)."""
        self._side_packets.clear()
        self._side_packets.update({name: _borrow(clone_owned(p)) for name, p in side_packets.items()})

    def run(self, invocation: Invocation) -> Outcome:
        """Run one callback of the kernel and report what it did.

        The invocation is handed over: its input packets become borrowed, and its input slots
        are emptied after the callback (as the engine releases a context's inputs), so that
        ``take_input`` + ``make_mutable`` may write in place when nothing else holds a buffer.
        An exception from the kernel becomes the outcome's ``error`` (its output is then
        discarded), ``SystemExit`` and other ``BaseException``s included; only a Ctrl-C on
        the main thread (``is_interrupt``) propagates.

        Raises:
            UsageError: The invocation does not fit the node (phase, number of input slots).
        """
        fn = self._callback(invocation.phase)
        inputs = invocation.inputs
        if len(inputs) != len(self._inputs):
            msg = (f"node `{self.recipe.spec.name}`: invocation has {len(inputs)} input slot(s), the node has "
                   f"{len(self._inputs)} input port(s)")
            raise UsageError(msg)
        try:
            slot = self._free.pop()
        except IndexError:
            slot = self._new_slot()
        ctx = slot.ctx
        info = slot.info
        ctx.reset_for(invocation.ts, invocation.phase)
        ctx.seq = invocation.seq
        ctx.close_reason = invocation.close_reason
        ctx.in_done = invocation.done
        _borrow_all(inputs)
        ctx.in_packets = inputs
        batch = invocation.batch
        if batch is not None:
            for packets in batch:
                _borrow_all(packets)
            ctx.batch = batch
        ignored = info.ignored_emits
        copies = _thread_cow_counts()[0]
        error = tb = ""
        failure: BaseException | None = None
        started = time.perf_counter_ns()
        try:
            fn(ctx)
        except BaseException as exc:
            if is_interrupt(exc):
                self._release(slot, inputs)
                raise
            duration = time.perf_counter_ns() - started
            error = describe_failure(exc, ctx)
            tb = _format_traceback(exc)
            failure = exc
        else:
            duration = time.perf_counter_ns() - started
        outcome = self._outcome(invocation, slot, failure)
        outcome.ignored_emits = info.ignored_emits - ignored
        outcome.started_ns = started
        outcome.duration_ns = duration
        outcome.copies = _thread_cow_counts()[0] - copies
        outcome.error = error
        outcome.traceback = tb
        self._release(slot, inputs)
        return outcome

    def _callback(self, phase: int) -> Callable[[Context], None]:
        kernel = self.kernel
        if phase == PHASE_PROCESS:
            return kernel.process
        if phase == PHASE_OPEN:
            return kernel.open
        if phase == PHASE_CLOSE:
            return kernel.close
        msg = f"node `{self.recipe.spec.name}`: invocation phase {phase} is none of open (0), process (1), close (2)"
        raise UsageError(msg)

    def _outcome(self, invocation: Invocation, slot: _Slot, failure: BaseException | None) -> Outcome:
        """Move what the callback staged out of the context (a failed callback's output is dropped)."""
        ctx = slot.ctx
        staged = ctx.out_packets
        if failure is None:
            outputs = staged
            ctx.out_packets = [[] for _ in staged]
            bounds = ctx.bounds
        else:
            outputs = [[] for _ in staged]
            for packets in staged:
                packets.clear()
            bounds = None
        counters, logs, conditions = slot.counters, slot.logs, slot.conditions
        slot.counters, slot.logs, slot.conditions = [], [], []
        return Outcome(invocation.node, invocation.seq, outputs, bounds, ctx.source_finished, ctx.yield_s,
                       counters, logs, exception=failure, conditions=conditions)

    def _release(self, slot: _Slot, inputs: list[Packet | None]) -> None:
        """Drop every reference the context holds to the invocation, and reuse the context."""
        for i in range(len(inputs)):
            inputs[i] = None
        ctx = slot.ctx
        ctx.batch = None
        ctx.in_done = None
        ctx.bounds = None
        for packets in ctx.out_packets:
            packets.clear()
        slot.counters.clear()
        slot.conditions.clear()
        slot.logs.clear()
        self._free.append(slot)

    def _new_slot(self) -> _Slot:
        spec = self.recipe.spec
        info = NodeInfo(
            name=spec.name, kernel_name=spec.kernel, inputs=self._inputs, outputs=self._outputs,
            options=spec.options, side_packets=self._side_packets, is_source=spec.is_source,
            strict_ports=self.recipe.strict_ports, spill=self._spill,
        )
        slot = _Slot(self, info)
        if self._spill is not None:
            slot.ctx.spill_at = SPILL_SLICE
        return slot


def _borrow_all(packets: list[Packet | None] | list[Packet]) -> None:
    """Mark the packets borrowed, as the engine's inputs are (a function: no loop variable may
    keep a packet alive during the callback, or ``make_mutable`` would see it shared)."""
    for p in packets:
        if p is not None:
            p._owned = False


def _format_traceback(exc: BaseException) -> str:
    """The formatted traceback from the kernel's frame on (the host's own frame is left out)."""
    tb = exc.__traceback__
    if tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return "".join(traceback.format_exception(type(exc), exc, tb))


@final
class KernelHosts:
    """The kernel hosts of the nodes placed on one executor, by node index."""

    __slots__ = ("_hosts", "_spill")

    def __init__(self, spill: Callable[[Context], None] | None = None) -> None:
        """``spill``: each host's (see ``KernelHost``)."""
        self._hosts: dict[int, KernelHost] = {}
        self._spill = spill

    def host(self, recipes: Iterable[NodeRecipe]) -> None:
        """Host exactly these nodes (``Graph.start``).

        A node hosted already under the same recipe keeps its instance, opened state included
        (a restart after ``Graph.reset``: the engine does not send ``open`` again); only its side
        packets are replaced. Nodes absent from ``recipes`` are dropped. All or nothing: when a
        constructor fails, the hosts stay as they were.

        Raises:
            ConfigError: A kernel constructor raised.
            UsageError: Two recipes have the same index.
        """
        hosts: dict[int, KernelHost] = {}
        kept: list[tuple[KernelHost, NodeRecipe]] = []
        for recipe in recipes:
            if recipe.index in hosts:
                msg = f"host: two recipes for node index {recipe.index}"
                raise UsageError(msg)
            old = self._hosts.get(recipe.index)
            if old is not None and old.serves(recipe):
                hosts[recipe.index] = old
                kept.append((old, recipe))
            else:
                hosts[recipe.index] = KernelHost(recipe, self._spill)
        for old, recipe in kept:
            old.set_side_packets(recipe.side_packets)
        self._hosts = hosts

    def clear(self) -> None:
        """Drop every host, letting go of their side packets at once (reference cycles
        between a host and its contexts would otherwise keep them until a garbage collection)."""
        for host in self._hosts.values():
            host.set_side_packets({})
            host.recipe.side_packets.clear()  # the recipe's own copy of the handles
        self._hosts = {}

    def __getitem__(self, index: int) -> KernelHost:
        return self._hosts[index]

    def __contains__(self, index: object) -> bool:
        return index in self._hosts

    def __len__(self) -> int:
        return len(self._hosts)

    def run(self, invocation: Invocation) -> Outcome:
        """Run ``invocation`` on the host of its node (see ``KernelHost.run``).

        Raises:
            UsageError: No hosted node has the invocation's index, or the invocation does not
                fit the node.
        """
        host = self._hosts.get(invocation.node)
        if host is None:
            hosted = ", ".join(map(str, sorted(self._hosts))) or "none"
            msg = f"run: no hosted node has index {invocation.node} (hosted: {hosted})"
            raise UsageError(msg)
        return host.run(invocation)

    def num_outputs(self, index: int) -> int:
        """The output ports of hosted node ``index`` (0 when it is not hosted)."""
        host = self._hosts.get(index)
        return 0 if host is None else len(host.recipe.spec.output_ports)
