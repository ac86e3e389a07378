"""``Context``: what a kernel sees during ``open``, ``process`` and ``close``.

One context object serves one invocation at a time (a node has ``max_in_flight`` of them). The
kernel reads borrowed inputs, stages outputs with ``emit``/``forward``, and the engine flushes
the staging after the callback returns. Method names are lm-flow's, kept verbatim.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final, SupportsFloat, SupportsInt, final

from .._timestamps import TS_POST_STREAM, TS_UNSET
from .._types import OptionValue
from ..errors import UsageError
from ..packets import Packet, clone_owned, new_buffer, to_packet
from . import _options as opt
from ._ports import PortTable

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from ..packets._packet import BufferAllocator

__all__ = ["Call", "CloseReason", "Context", "NodeInfo"]

log = logging.getLogger("flowplex.kernels")

_ignored_lock = threading.Lock()
"""Guards ``NodeInfo.ignored_emits`` (a rare path: a kernel writing to a port it lacks)."""

PHASE_OPEN: Final = 0
PHASE_PROCESS: Final = 1
PHASE_CLOSE: Final = 2

SPILL_SLICE: Final = 1024
"""Packets one port stages in a call before ``emit`` hands them to the engine's ``spill``."""
SPILL_NEVER: Final = 1 << 60
"""``Call.spill_at`` of a call nothing spills (no engine: ``KernelRunner``, a loopback or Ray
kernel host; a process pool's worker spills to its host)."""


class CloseReason:
    """Why ``close`` runs (``Context.close_reason``); lm-flow's values."""

    NORMAL: Final = 0
    ERROR: Final = 1
    CANCELLED: Final = 2


def _no_counter(name: str, delta: int) -> None:
    return None


def _no_log(level: int, message: str) -> None:
    return None


@dataclass(slots=True)
class NodeInfo:
    """What a context needs to know about its node; shared by all its contexts."""

    name: str
    kernel_name: str
    inputs: PortTable
    outputs: PortTable
    options: OptionValue = None
    side_packets: dict[str, Packet] = field(default_factory=dict)
    is_source: bool = False
    counter_add: Callable[[str, int], None] = _no_counter
    log: Callable[[int, str], None] = _no_log
    strict_ports: bool = False
    """Emits and forwards to an output index the node lacks raise (``strict_ports: true``);
    else they are ignored, as lm-flow does, and counted in ``ignored_emits``."""
    ignored_emits: int = 0
    """Emits, forwards and bounds aimed at output indexes the node does not have."""
    zeros: BufferAllocator | None = None
    """Where ``new_buffer`` gets memory (None: numpy): a process pool's shared memory when the
    node feeds a node on one, so that its frames cross without a copy."""
    conditions: Callable[[str, str, bool], None] | None = None
    """``(op, name, value)`` with op ``notify`` or ``set`` (``cc.notify``, ``cc.set_condition``):
    the graph's conditions in its own process, a list a kernel host returns with the call's
    outcome elsewhere; None where the kernel runs outside any graph (``KernelRunner``)."""
    spill: Callable[[Context], None] | None = None
    """Set by the engine: called by ``emit`` when one port has staged ``Call.spill_at``
    packets in this call, to deliver them and wait for the graph's budget (``Spills.spill``),
    so that one call emitting millions of packets does not hold them all. In a process pool's
    worker it sends them to the host as a partial outcome and waits for the go-ahead."""


class Call:
    """The engine's record of one invocation: its inputs, staged outputs, timestamp and phase.

    The engine (``flowplex.engine``), the kernel hosts and ``KernelRunner`` fill and read these
    public fields; a kernel never does: it works through ``Context``, the view built on this
    record, whose methods check what they are given. One record serves one invocation at a time.
    """

    __slots__ = ("batch", "bounds", "error_text", "in_done", "in_packets", "out_packets", "owner", "phase", "seq",
                 "source_finished", "spill_at", "ts", "yield_s")

    def __init__(self, num_inputs: int, num_outputs: int) -> None:
        self.owner: object = None
        """The engine's node (or the runner) this call belongs to."""
        self.in_packets: list[Packet | None] = [None] * num_inputs
        """The packet claimed on each input port (None: empty at this timestamp)."""
        self.out_packets: list[list[Packet]] = [[] for _ in range(num_outputs)]
        """Packets staged on each output port, flushed by the engine after the callback."""
        self.batch: list[list[Packet]] | None = None
        """Per input port, the packets of a ``batch`` policy call (None: not a batch call)."""
        self.in_done: list[bool] | None = None
        """Per input port, whether it ended (set for close calls and batches; None: none did)."""
        self.bounds: dict[int, int] | None = None
        """Output port -> next timestamp bound asked for with ``set_next_timestamp_bound``."""
        self.ts = TS_UNSET
        """The call's input timestamp."""
        self.phase = PHASE_PROCESS
        """``PHASE_OPEN``, ``PHASE_PROCESS`` or ``PHASE_CLOSE``."""
        self.source_finished = False
        """A source called ``source_done()`` in this call."""
        self.yield_s: float | None = None
        """The longest ``source_yield`` delay asked for in this call (None: none)."""
        self.error_text: str | None = None
        """``set_error``'s message (None: no error)."""
        self.seq = 0
        self.spill_at = SPILL_NEVER
        """Staged packets on one port at which ``emit`` calls ``info.spill`` (the engine sets
        and adapts it; ``SPILL_NEVER`` without an engine)."""

    def reset_for(self, ts: int, phase: int) -> None:
        """Prepare the record for a new callback (the engine fills inputs after this)."""
        self.ts = ts
        self.phase = phase
        self.bounds = None
        self.source_finished = False
        self.yield_s = None
        self.error_text = None
        self.batch = None
        self.in_done = None


@final
class Context(Call):
    """The per-invocation view a kernel works through (lm-flow's ``Context``), over its ``Call``."""

    __slots__ = ("_info", "close_reason")

    def __init__(self, info: NodeInfo) -> None:
        super().__init__(len(info.inputs), len(info.outputs))
        self._info = info
        self.close_reason = CloseReason.NORMAL

    # -- identity -------------------------------------------------------------------------

    @property
    def num_inputs(self) -> int:
        """Number of input ports."""
        return len(self.in_packets)

    @property
    def num_outputs(self) -> int:
        """Number of output ports."""
        return len(self.out_packets)

    @property
    def node_name(self) -> str:
        """The node's (expanded) name, e.g. ``prep/cast``."""
        return self._info.name

    @property
    def kernel_name(self) -> str:
        """The registered kernel name."""
        return self._info.kernel_name

    @property
    def input_timestamp(self) -> int:
        """The invocation's timestamp: aligned input ts, source sequence, UNSTARTED or DONE."""
        return self.ts

    def input_id(self, tag: str, index: int = 0) -> int:
        """Flat input index of ``(tag, index)``, or ``INVALID_ID``."""
        return self._info.inputs.id(tag, index)

    def output_id(self, tag: str, index: int = 0) -> int:
        """Flat output index of ``(tag, index)``, or ``INVALID_ID``."""
        return self._info.outputs.id(tag, index)

    def input_index(self, name: str) -> int:
        """Flat input index of the port bound to edge ``name``, or ``INVALID_ID``."""
        return self._info.inputs.index(name)

    def output_index(self, name: str) -> int:
        """Flat output index of the port bound to edge ``name``, or ``INVALID_ID``."""
        return self._info.outputs.index(name)

    def input_name(self, index: int) -> str:
        """Edge name of input ``index``; ``""`` when out of range."""
        return self._info.inputs.name(index)

    def output_name(self, index: int) -> str:
        """Edge name of output ``index``; ``""`` when out of range."""
        return self._info.outputs.name(index)

    # -- inputs ---------------------------------------------------------------------------

    def input(self, index: int) -> Packet:
        """The borrowed packet on input ``index`` (an empty packet when none was delivered).

        Do not keep it after the callback; use ``take_input`` to own (and mutate) it.
        """
        if 0 <= index < len(self.in_packets):
            p = self.in_packets[index]
            if p is not None:
                return p
        return Packet()

    def input_is_empty(self, index: int) -> bool:
        """Whether no packet was delivered on input ``index`` this invocation."""
        return not (0 <= index < len(self.in_packets)) or self.in_packets[index] is None

    def input_is_done(self, index: int) -> bool:
        """Whether input ``index`` was closed and drained when this invocation was claimed."""
        done = self.in_done
        return done is not None and 0 <= index < len(done) and done[index]

    def input_count(self, index: int) -> int:
        """Packets on input ``index``: 0 or 1, or the batch size under the ``batch`` policy."""
        if self.batch is not None:
            return len(self.batch[index]) if 0 <= index < len(self.batch) else 0
        return 0 if self.input_is_empty(index) else 1

    def input_at(self, index: int, k: int) -> Packet:
        """The k-th packet of input ``index`` (k = 0 only, outside the ``batch`` policy)."""
        if self.batch is not None:
            if 0 <= index < len(self.batch) and 0 <= k < len(self.batch[index]):
                return self.batch[index][k]
            return Packet()
        return self.input(index) if k == 0 else Packet()

    def take_input(self, index: int) -> Packet:
        """Move the packet out of input ``index``: the caller owns it (a second take is empty).

        Owning is what allows ``packet.make_mutable()`` to write in place when nobody else
        holds the payload.
        """
        if not 0 <= index < len(self.in_packets):
            return Packet()
        p = self.in_packets[index]
        if p is None:
            return Packet()
        self.in_packets[index] = None
        if self.batch is not None and self.batch[index]:
            self.batch[index].pop(0)
        return clone_owned(p)

    # -- outputs --------------------------------------------------------------------------

    def emit(self, index: int, value: object, ts: int | None = None) -> None:
        """Stage ``value`` on output ``index``.

        ``value`` is a ``Packet`` or an int/float/bool/str/bytes/ndarray. With no ``ts`` the
        packet keeps its own timestamp; an unset one becomes the invocation's timestamp (in
        ``close``: ``TS_POST_STREAM``, not lm-flow's ``TS_DONE`` which no port can accept).
        """
        out = self.out_packets
        if not 0 <= index < len(out):
            self._no_output("emit", index)
            return
        if type(value) is Packet and not value._owned:
            value = clone_owned(value)  # never retime a handle other consumers share
        p = to_packet(value, ts)
        if p._ts == TS_UNSET:
            p._ts = TS_POST_STREAM if self.phase == PHASE_CLOSE else self.ts
        p._owned = False
        staged = out[index]
        staged.append(p)
        if len(staged) >= self.spill_at:
            spill = self._info.spill
            if spill is not None:
                spill(self)

    def forward(self, in_index: int, out_index: int) -> None:
        """Stage input ``in_index`` on output ``out_index`` by reference (zero-copy)."""
        # Most kernels call this once per packet: try the plain case first (negative indexes
        # would wrap around, so they go the checking way).
        if in_index >= 0 and out_index >= 0:
            try:
                p = self.in_packets[in_index]
                staged = self.out_packets[out_index]
            except (IndexError, TypeError):
                pass
            else:
                if p is not None:
                    staged.append(p)
                    return
        self._forward_checked(in_index, out_index)

    def _forward_checked(self, in_index: int, out_index: int) -> None:
        out = self.out_packets
        p = self.in_packets[in_index] if 0 <= in_index < len(self.in_packets) else None
        if p is None:
            msg = f"forward: input port {in_index} has no packet in this invocation"
            raise UsageError(msg)
        if not 0 <= out_index < len(out):
            self._no_output("forward", out_index)
            return
        out[out_index].append(p)

    def _no_output(self, what: str, index: int) -> None:
        """A write to an output index the node lacks: an error under ``strict_ports``, else
        ignored like lm-flow does, counted and logged (at the 1st, 2nd, 4th, ... time)."""
        info = self._info
        num = len(self.out_packets)
        if info.strict_ports or index < 0:
            msg = f"{what}: output port index {index} is out of range (num_outputs={num})"
            raise UsageError(msg)
        with _ignored_lock:
            info.ignored_emits += 1
            count = info.ignored_emits
        if count & (count - 1) == 0:
            log.warning("node `%s`: %s to output port index %d ignored: the node has %d output port(s); "
                        "%d ignored so far (set strict_ports: true to make this an error)",
                        info.name, what, index, num, count)

    def set_next_timestamp_bound(self, out_index: int, ts: int) -> None:
        """Promise that output ``out_index`` gets nothing earlier than ``ts`` (when it emits
        nothing in this invocation); lets downstream alignment proceed."""
        if not 0 <= out_index < len(self.out_packets):
            self._no_output("set_next_timestamp_bound", out_index)
            return
        if self.bounds is None:
            self.bounds = {}
        self.bounds[out_index] = ts

    def new_buffer(self, shape: tuple[int, ...] | list[int], dtype: npt.DTypeLike) -> tuple[Packet, np.ndarray]:
        """A zero-filled engine buffer and a writable view of it, to fill then emit."""
        return new_buffer(shape, dtype, zeros=self._info.zeros)

    # -- options ----------------------------------------------------------------------------

    def has_option(self, key: str) -> bool:
        """Whether dot path ``key`` exists in the node's options."""
        return not opt.is_missing(opt.lookup(self._info.options, key))

    def option_int(self, key: str, default: int = 0) -> int:
        """Integer option (default on missing key or type mismatch)."""
        v = opt.as_int(opt.lookup(self._info.options, key))
        return default if v is None else v

    def option_float(self, key: str, default: float = 0.0) -> float:
        """Float option; ints are accepted (default on missing key or type mismatch)."""
        v = opt.as_float(opt.lookup(self._info.options, key))
        return default if v is None else v

    def option_bool(self, key: str, default: bool = False) -> bool:
        """Bool option (default on missing key or type mismatch)."""
        v = opt.as_bool(opt.lookup(self._info.options, key))
        return default if v is None else v

    def option_str(self, key: str, default: str = "") -> str:
        """String option (default on missing key or type mismatch)."""
        v = opt.as_str(opt.lookup(self._info.options, key))
        return default if v is None else v

    def option_int_array(self, key: str) -> list[int]:
        """List-of-ints option (``[]`` when missing)."""
        return opt.int_array(opt.lookup(self._info.options, key))

    def option_float_array(self, key: str) -> list[float]:
        """List-of-floats option (``[]`` when missing)."""
        return opt.float_array(opt.lookup(self._info.options, key))

    def option_str_array(self, key: str) -> list[str]:
        """List-of-strings option (``[]`` when missing)."""
        return opt.str_array(opt.lookup(self._info.options, key))

    def option_count(self, key: str) -> int:
        """Length of a list option (0 when missing or not a list)."""
        v = opt.lookup(self._info.options, key)
        return len(v) if isinstance(v, list) else 0

    def options_json(self) -> str:
        """The whole options subtree as JSON (``"{}"`` when there are none)."""
        return opt.to_json(self._info.options)

    def _require(self, key: str, value: object | None) -> object:
        if value is None:
            msg = f"node `{self._info.name}`: required parameter options.{key} is missing or type mismatch"
            raise ValueError(msg)
        return value

    def require_option_int(self, key: str) -> int:
        """Integer option that must be present (``ValueError`` otherwise)."""
        v = opt.as_int(opt.lookup(self._info.options, key))
        self._require(key, v)
        return v  # type: ignore[return-value]

    def require_option_float(self, key: str) -> float:
        """Float option that must be present (``ValueError`` otherwise)."""
        v = opt.as_float(opt.lookup(self._info.options, key))
        self._require(key, v)
        return v  # type: ignore[return-value]

    def require_option_bool(self, key: str) -> bool:
        """Bool option that must be present (``ValueError`` otherwise)."""
        v = opt.as_bool(opt.lookup(self._info.options, key))
        self._require(key, v)
        return v  # type: ignore[return-value]

    def require_option_str(self, key: str) -> str:
        """String option that must be present (``ValueError`` otherwise)."""
        v = opt.as_str(opt.lookup(self._info.options, key))
        self._require(key, v)
        return v  # type: ignore[return-value]

    # -- side packets, logging, counters --------------------------------------------------

    def has_side_packet(self, name: str) -> bool:
        """Whether the host set side packet ``name``."""
        return name in self._info.side_packets

    def side_packet(self, name: str) -> Packet:
        """The borrowed side packet ``name`` (an empty packet when absent)."""
        p = self._info.side_packets.get(name)
        return p if p is not None else Packet()

    def log(self, level: SupportsInt, msg: object) -> None:
        """Send ``msg`` to the log callback, prefixed with ``[node-name]``."""
        self._info.log(int(level), f"[{self._info.name}] {msg}")

    def set_error(self, msg: object) -> None:
        """Text used for the failure if this callback then raises without a message."""
        self.error_text = str(msg)

    def counter_add(self, name: str, delta: SupportsInt = 1) -> None:
        """Add ``delta`` to the graph-wide named counter ``name``."""
        self._info.counter_add(name, int(delta))

    # -- sources ------------------------------------------------------------------------------

    def source_done(self) -> None:
        """(Sources) After this invocation, never call ``process`` again; the node closes."""
        self.source_finished = True

    def call_after(self, delay_seconds: SupportsFloat | str) -> None:
        """Ask to be called again ``delay_seconds`` after this call, even if no input comes.

        On a source it is ``source_yield``. On any other node the call comes with no new inputs
        (every ``input_is_empty``) at the timestamp of the node's last input; a later request
        replaces a pending one, so calling it on every packet flushes once the inputs go idle.
        The delay runs on the graph's clock. Raises ``ValueError`` for a negative or
        non-finite delay.
        """
        delay = _delay(delay_seconds, "call_after")
        self.yield_s = delay if self.yield_s is None else max(self.yield_s, delay)

    def notify(self, name: str) -> None:
        """Signal the graph's ``event`` condition ``name`` (as ``Graph.notify``)."""
        self._condition_op("notify", name, True)

    def set_condition(self, name: str, value: bool) -> None:
        """Enable or disable the graph's ``boolean`` condition ``name`` (as ``Graph.set_condition``)."""
        if not isinstance(value, bool):
            msg = f"set_condition: value must be True or False, got {value!r}"
            raise UsageError(msg)
        self._condition_op("set", name, value)

    def _condition_op(self, op: str, name: str, value: bool) -> None:
        fn = self._info.conditions
        if fn is None:
            msg = (f"cc.{'notify' if op == 'notify' else 'set_condition'}: node `{self._info.name}` runs "
                   "outside a graph, which has no conditions to signal")
            raise UsageError(msg)
        fn(op, name, value)

    def source_yield(self, delay_seconds: SupportsFloat | str = 0.0) -> None:
        """(Sources) Nothing to produce now: call ``process`` again after ``delay_seconds``.

        No worker thread waits meanwhile. Raises ``ValueError`` for a negative or non-finite
        delay; a non-source node calling it fails its invocation.
        """
        if not self._info.is_source:
            msg = "source_yield is only valid for source nodes (other nodes: call_after)"
            raise UsageError(msg)
        delay = _delay(delay_seconds, "source_yield")
        self.yield_s = delay if self.yield_s is None else max(self.yield_s, delay)


def _delay(value: SupportsFloat | str, what: str) -> float:
    """A delay in seconds (``source_yield``, ``call_after``), checked."""
    try:
        delay = float(value)
    except (TypeError, ValueError):
        msg = f"{what}: delay must be a number of seconds, got {value!r}"
        raise ValueError(msg) from None
    if not math.isfinite(delay) or delay < 0 or delay > 1e9:
        msg = f"{what}: delay must be finite and >= 0 seconds, got {value!r}"
        raise ValueError(msg)
    return delay
