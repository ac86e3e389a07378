"""Runtime state of ports, edges, nodes and pollers' queues, and the readiness rules of the input policies.

All of it is guarded by the engine's one lock; nothing here runs user code.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Final, Protocol, final

from .._timestamps import TS_DONE, TS_MIN, TS_PRE_STREAM, TS_UNSET, TS_UNSTARTED
from ..errors import ConfigError
from ..packets import Packet, type_name
from ._handoff import HANDOFF

if TYPE_CHECKING:
    from ..executors import Executor
    from ..executors._protocol import Inbox
    from ..kernels import Kernel
    from ..kernels._context import Context, NodeInfo
    from ..spec._specs import NodeSpec
    from ._budget import Budget
    from ._engine_common import Submitter

Observer = Callable[["Packet"], object]

log = logging.getLogger("flowplex.graph")

SYNC: Final = 0
IMMEDIATE: Final = 1
FIXED_SIZE: Final = 2
SYNC_SET: Final = 3
BATCH: Final = 4
POLICY_CODES: Final = {"sync": SYNC, "immediate": IMMEDIATE, "fixed_size": FIXED_SIZE, "sync_set": SYNC_SET,
                       "batch": BATCH}


class NodeGate(Protocol):
    """What the parts below ``_conditions`` call on a node's gate (``_conditions.Gate``)."""

    ports: list[InPort]

    def claimed(self) -> bool: ...
    def finished(self) -> bool: ...
    def drop_late(self) -> None: ...
    def stalled(self) -> None: ...
    def cancel(self) -> None: ...
    def holding(self) -> str: ...


class InPort:
    """One consumer input port: its own FIFO, its bound and its closed flag."""

    __slots__ = ("bound", "capacity", "chained", "closed", "edge", "fixed", "index", "is_back", "late", "name", "node",
                 "overwritten", "peak", "queue", "skip_below", "timeout_s", "timeouts", "timer_for", "warn_at")

    def __init__(self, node: Node, index: int, name: str, is_back: bool) -> None:
        self.node = node
        self.index = index
        self.name = name
        self.is_back = is_back
        self.queue: deque[Packet] = deque()
        self.bound = TS_PRE_STREAM
        self.closed = False
        self.fixed = 0
        """``fixed_size`` capacity (0 = lossless)."""
        self.capacity = 0
        """Lossless capacity from ``input_queues`` (0 = unlimited)."""
        self.peak = 0
        self.overwritten = 0
        self.warn_at = 0
        """Next backlog depth that logs a soft-limit warning (doubles each time)."""
        self.edge: Edge | None = None
        self.chained = False
        """Producer and consumer are hop nodes on one executor that ``runs_on_caller``: a hop may run the next."""
        self.timeout_s = 0.0
        """``timeout_ms`` of the port, in seconds (0: a join waits for it as long as it takes)."""
        self.timeouts = 0
        """Times a join gave up waiting for this port (``_conditions``)."""
        self.late = 0
        """Packets dropped because they came after their join had timed out."""
        self.skip_below = TS_MIN
        """Packets below this timestamp are late (set by a timeout)."""
        self.timer_for: int | None = None
        """The timestamp an armed timeout waits for a packet at."""

    def reset(self) -> None:
        """Back to the state before ``start``."""
        self.queue.clear()
        self.bound = TS_PRE_STREAM
        self.closed = False
        self.peak = 0
        self.overwritten = 0
        self.warn_at = 0
        self.timeouts = 0
        self.late = 0
        self.skip_below = TS_MIN
        self.timer_for = None

    def new_peak(self, edge_name: str, soft_limit: int) -> None:
        """Record the queue's new peak; warn at the soft limit, then at each doubling of it."""
        depth = len(self.queue)
        self.peak = depth
        if soft_limit and depth > max(self.warn_at, soft_limit):
            self.warn_at = max(self.warn_at, soft_limit) * 2
            log.warning("edge `%s` has %d packets backlogged at `%s.%s` (soft limit %d)", edge_name, depth,
                        self.node.name, self.name, soft_limit)


class Edge:
    """An edge: one producer port, any number of consumer ports, pollers and observers."""

    __slots__ = ("bound_observers", "bound_pollers", "closed", "consumers", "dropped", "is_graph_input",
                 "last_sent", "name", "observers", "pollers", "producer", "published", "solo", "sole_poller",
                 "blocking")

    def __init__(self, name: str, producer: Node | None) -> None:
        self.name = name
        self.producer = producer
        self.is_graph_input = producer is None
        self.consumers: list[InPort] = []
        self.pollers: list[OutputQueue] = []
        self.observers: list[Observer] = []
        self.bound_pollers: list[OutputQueue] = []
        self.bound_observers: list[Observer] = []
        self.closed = False
        self.dropped = 0
        self.last_sent = TS_UNSET
        self.published = TS_UNSTARTED
        self.blocking: list[OutputQueue] = []
        """Bounded pollers with the ``block`` policy (they bound graph-input sends)."""
        self.solo: InPort | None = None
        """The only consumer port when it is plain and nobody subscribes (delivery fast path)."""
        self.sole_poller: OutputQueue | None = None
        """The only reader when it is one unbounded poller (a graph output: delivery fast path)."""

    def update_solo(self) -> None:
        """Recompute ``solo`` after consumers or subscribers change."""
        plain = (len(self.consumers) == 1 and not self.consumers[0].is_back and not self.consumers[0].fixed
                 and not self.consumers[0].capacity
                 and not self.pollers and not self.observers and not self.bound_pollers and not self.bound_observers)
        self.solo = self.consumers[0] if plain else None
        polled = (not self.consumers and len(self.pollers) == 1 and not self.pollers[0].capacity
                  and not self.observers and not self.bound_pollers and not self.bound_observers)
        self.sole_poller = self.pollers[0] if polled else None
        self.blocking = [p for p in self.pollers if p.blocks]

    def reset(self) -> None:
        """Back to the state before ``start``."""
        self.closed = False
        self.dropped = 0
        self.last_sent = TS_UNSET
        self.published = TS_UNSTARTED


class Node:
    """A kernel instance plus its scheduling state."""

    __slots__ = ("batch", "close_started", "closed", "contexts", "errors", "executor", "fast_port", "fwd",
                 "in_flight", "index", "info", "inputs", "is_source", "kernel", "last_start", "max_in_flight",
                 "next_flush", "on_error_skip", "opened", "out_edges", "packets_in", "packets_out", "pending",
                 "policy", "processed", "rate_period", "seq", "sets", "source_done", "spec", "typed_inputs",
                 "typed_outputs", "in_types", "out_types", "waiting", "wake_gen", "backs",
                 "side_required", "copies", "claimable", "closable", "closed_fwd", "total_ns", "max_ns", "hist",
                 "running_since", "blocked", "blocked_since", "block_events", "limited", "fast1", "simple", "hop",
                 "out_edge", "inbox", "on_caller", "remote", "handler", "gate", "wake_due")

    def __init__(self, index: int, spec: NodeSpec, kernel: Kernel, info: NodeInfo, executor: Executor) -> None:
        self.index = index
        self.spec = spec
        self.kernel = kernel
        self.info = info
        self.executor = executor
        self.inbox: Inbox | None = executor.inbox()
        """``executor.inbox()``: where the hop path queues this node's next invocation, when
        host threads run its executor's work."""
        self.on_caller = executor.runs_on_caller
        """``executor.runs_on_caller``: the hop path asks the executor for its ``backlog()``."""
        self.remote = executor.hosts_kernels
        """``executor.hosts_kernels``: its callbacks cross the seam as invocations (``_seam``)."""
        self.handler: Submitter = HANDOFF if self.remote else executor
        """Where its claimed work is submitted: its executor, or for a hosted kernel the
        engine's hand-off, which calls the executor's ``invoke`` itself (``_handoff``)."""
        self.is_source = spec.is_source
        self.max_in_flight = max(1, spec.max_in_flight)
        self.policy = POLICY_CODES[spec.input_policy.type]
        self.batch = spec.input_policy.capacity if self.policy == BATCH else 0
        self.on_error_skip = spec.on_error == "skip"
        self.rate_period = 1.0 / spec.rate if spec.rate > 0 else 0.0
        backs = set(spec.back_edges)
        self.inputs = [InPort(self, i, p.name, p.name in backs) for i, p in enumerate(spec.input_ports)]
        for port, decl in zip(self.inputs, spec.input_ports, strict=True):
            port.timeout_s = decl.timeout_ms / 1000.0
        self.gate: NodeGate | None = None
        """Its conditions and input timeouts (``_conditions``); None for most nodes."""
        self.fwd = [p for p in self.inputs if not p.is_back]
        self.backs = [p for p in self.inputs if p.is_back]
        # Fast path: one forward port, no feedback, a single-packet policy.
        self.fast_port = (
            self.fwd[0] if len(self.fwd) == 1 and not self.backs and self.policy in (SYNC, IMMEDIATE, FIXED_SIZE)
            else None
        )
        self.fast1 = self.fast_port if self.max_in_flight == 1 and len(self.inputs) == 1 else None
        """``fast_port`` when the node also runs one invocation at a time (the claim fast path)."""
        names = {p.name: p for p in self.fwd}
        self.sets = [[names[n] for n in group] for group in spec.input_policy.sets] if self.policy == SYNC_SET else []
        for p in self.fwd:
            if self.policy == FIXED_SIZE:
                p.fixed = spec.input_policy.capacity
            else:
                p.capacity = spec.input_queues.capacity_of(p.name)
        self.out_edges: list[Edge] = []
        self.out_edge: Edge | None = None
        """The output edge of a node with exactly one output port."""
        self.simple = False
        """A chain link: not a source, one invocation at a time, at most one output port."""
        self.hop = False
        """``simple``, not ``batch``, no feedback, no declared types, no ``rate``, kernel run here:
        ``Scheduler.run_hop``."""
        self.in_types: list[int] = []
        self.out_types: list[int] = []
        self.typed_inputs = False
        self.typed_outputs = False
        self.side_required: list[str] = []
        self.contexts: list[Context] = []
        self.pending: dict[int, Context] = {}
        """Finished invocations waiting to be flushed (claim order, or a blocked flush)."""
        self.limited = False
        """Some consumer of an output has a lossless capacity or a blocking poller."""
        self.block_events = 0
        self.opened = False
        self.reset()

    def reset(self) -> None:
        """Back to the state before ``start`` (kernel instance and ``opened`` are kept)."""
        self.close_started = False
        self.closed = False
        self.claimable = self.opened
        """``opened and not close_started``: may be claimed (one check on the hot path)."""
        self.closable = False
        """Every forward input closed (or ``source_done``): worth a close check."""
        self.closed_fwd = 0
        self.in_flight = 0
        self.blocked = False
        """A finished invocation waits for room downstream (cooperative backpressure)."""
        self.blocked_since = 0.0
        self.seq = 0
        self.next_flush = 0
        self.pending.clear()
        self.source_done = False
        self.waiting = False
        self.wake_due = False
        """A ``call_after`` fired: the next claim may be a call with no new inputs."""
        self.wake_gen = getattr(self, "wake_gen", 0) + 1
        self.last_start = 0.0
        self.processed = 0
        self.errors = 0
        self.packets_in = 0
        self.packets_out = 0
        self.copies = 0
        """Copy-on-write copies made inside ``process`` (stats ``full``)."""
        self.info.ignored_emits = 0
        self.total_ns = 0
        self.max_ns = 0
        self.hist = [0] * 32
        """Power-of-two histogram of callback durations in µs (stats ``full``)."""
        self.running_since = 0
        for p in self.inputs:
            p.reset()

    def record_time(self, duration_ns: int) -> None:
        """Account one measured callback (stats ``full``)."""
        self.total_ns += duration_ns
        if duration_ns > self.max_ns:
            self.max_ns = duration_ns
        self.hist[min(31, (duration_ns // 1000).bit_length())] += 1

    @property
    def name(self) -> str:
        """The node's name."""
        return self.info.name

    def queued(self) -> int:
        """Packets waiting in this node's input queues."""
        return sum(len(p.queue) for p in self.inputs)

    def may_close(self) -> bool:
        """All forward inputs closed and drained (or, for a source, ``source_done``)."""
        if self.is_source:
            return self.source_done
        return all(p.closed and not p.queue for p in self.fwd)


def takes_at_once(node: Node, port: InPort) -> bool:
    """Whether ``schedule`` would claim ``node`` for a packet queued on ``port`` at once.

    True when ``port`` is the node's only input under the claim fast path (``fast1``), its
    queue is empty and the node is idle and claimable: the engine then hands the packet to the
    node directly instead of queueing it (``Claims.hand_over``), the graph not being halted.
    """
    return (node.fast1 is port and not port.queue and not node.in_flight and node.claimable
            and not node.blocked)


def ready_ts(node: Node) -> int | None:
    """The timestamp the node would process next under its policy, or ``None``."""
    policy = node.policy
    if policy == IMMEDIATE:
        best: int | None = None
        for p in node.fwd:
            if p.queue:
                t = p.queue[0]._ts
                if best is None or t < best:
                    best = t
        return best
    if policy == SYNC_SET:
        chosen: int | None = None
        for group in node.sets:
            found = sync_ts(group)
            if found is not None and (chosen is None or found < chosen):
                chosen = found
        return chosen
    return sync_ts(node.fwd)


def sync_ts(ports: list[InPort]) -> int | None:
    """lm-flow's ``sync`` rule: the smallest front ts, if no empty port may still undercut it."""
    min_packet: int | None = None
    min_bound = TS_DONE
    for p in ports:
        q = p.queue
        if q:
            t = q[0]._ts
            if min_packet is None or t < min_packet:
                min_packet = t
        elif p.bound < min_bound:
            min_bound = p.bound
    if min_packet is None or min_bound <= min_packet:
        return None
    return min_packet


def sync_set_group(node: Node, ts: int) -> list[InPort]:
    """The first group (declaration order) that is ready at ``ts``."""
    for group in node.sets:
        if sync_ts(group) == ts:
            return group
    return node.fwd  # unreachable when ``ts`` came from ``ready_ts``


def batch_plan(node: Node) -> tuple[list[int], int] | None:
    """Under ``batch``: how many packets each forward port contributes, and the last ts.

    Simulates up to N ``sync`` rounds over the queue fronts; fires with N rounds, or with
    fewer only when every forward input is closed (flushing the remainder).
    """
    ports = node.fwd
    n = node.batch
    cursors = [0] * len(ports)
    rounds = 0
    last: int = TS_UNSET
    while rounds < n:
        min_packet: int | None = None
        min_bound = TS_DONE
        for i, p in enumerate(ports):
            q = p.queue
            c = cursors[i]
            if c < len(q):
                t = q[c]._ts
                if min_packet is None or t < min_packet:
                    min_packet = t
            elif p.bound < min_bound:
                min_bound = p.bound
        if min_packet is None or min_bound <= min_packet:
            break
        found: int = min_packet
        for i, p in enumerate(ports):
            c = cursors[i]
            if c < len(p.queue) and p.queue[c]._ts == found:
                cursors[i] = c + 1
        last = found
        rounds += 1
    if rounds == 0:
        return None
    if rounds < n and not all(p.closed for p in ports):
        return None
    return cursors, last


def input_type_error(node: Node, ctx: Context) -> str:
    """Why the claimed inputs break the node's declared input types ("" when they do not)."""
    for i, want in enumerate(node.in_types):
        p = ctx.in_packets[i]
        if want and p is not None and p._tid != want:
            hint = " (packets of type id 0 only pass ports declared `any`)" if p._tid == 0 else ""
            return (f"input port `{node.inputs[i].name}` type mismatch: contract declares {type_name(want)}, "
                    f"actual {type_name(p._tid)}{hint}")
    return ""


def _output_type_error(node: Node, ctx: Context) -> str:
    """Why staged output breaks the node's declared output types ("" when it does not)."""
    for o, want in enumerate(node.out_types):
        if not want:
            continue
        for p in ctx.out_packets[o]:
            if p._value is not None and p._tid != want:
                return (f"output port `{node.out_edges[o].name}` type mismatch: contract declares "
                        f"{type_name(want)}, emitted {type_name(p._tid)}")
    return ""


OVERFLOW_POLICIES: Final = ("block", "drop_oldest", "drop_newest", "latest")
"""What a bounded poller does when full: producers wait (``block``) or a packet is dropped, counted."""


@final
class OutputQueue:
    """The packets delivered to one poller of a graph output, in order (engine side; lock held).

    ``packets`` is written by the engine only; the host takes from it through ``Waits``.
    """

    __slots__ = ("_budget", "blocks", "capacity", "closed", "dropped", "edge", "last_read", "last_reader", "name",
                 "observe_bounds", "overflow", "packets", "readers")

    def __init__(self, budget: Budget, edge: Edge, observe_bounds: bool, capacity: int = 0,
                 overflow: str = "block") -> None:
        name = edge.name
        if overflow not in OVERFLOW_POLICIES:
            choices = list(OVERFLOW_POLICIES)
            msg = f"add_poller(`{name}`): unknown overflow policy {overflow!r}; use one of {choices}"
            raise ConfigError(msg)
        if capacity < 0 or (capacity == 0 and overflow != "block"):
            msg = f"add_poller(`{name}`): a bounded poller needs capacity >= 1 (got {capacity})"
            raise ConfigError(msg)
        if overflow == "latest" and capacity != 1:
            msg = f"add_poller(`{name}`): overflow='latest' keeps one packet; use capacity=1"
            raise ConfigError(msg)
        if capacity and observe_bounds:
            msg = f"add_poller(`{name}`): bounded pollers do not receive timestamp-bound events"
            raise ConfigError(msg)
        self._budget = budget
        self.edge = edge
        self.name = name
        self.observe_bounds = observe_bounds
        self.capacity = capacity
        self.overflow = overflow
        self.blocks = capacity > 0 and overflow == "block"
        """Lossless and bounded: producers wait (cooperatively) for the host to read."""
        self.dropped = 0
        self.packets: deque[Packet] = deque()
        """Delivered, not yet read: the engine appends (lock held), ``Waits`` takes for the host."""
        self.closed = False
        # Who reads this poller: a blocked ``send`` waits (rather than calling the graph
        # deadlocked) while another thread drains a poller that holds the backlog.
        self.readers = 0
        """Threads inside ``next()`` right now (lock held to change)."""
        self.last_read = 0.0
        """``time.monotonic()`` of the last packet taken (0.0: never)."""
        self.last_reader = 0
        """``threading.get_ident()`` of the thread that took it."""

    def push_many(self, packets: list[Packet]) -> None:
        """Append delivered packets, applying the overflow policy of a bounded poller.

        Queued packets (and their buffer bytes) count toward the graph's limits, like packets
        in node queues: a host that reads slowly makes ``send`` wait instead of growing memory.
        """
        q = self.packets
        budget = self._budget
        cap = self.capacity
        if not cap or self.blocks:
            q.extend(packets)
            budget.add(packets)
            return
        removed: list[Packet] = []  # queued packets pushed out by the newcomers
        if self.overflow == "drop_newest":
            room = max(0, cap - len(q))
            added, lost = packets[:room], packets[room:]
            q.extend(added)
        else:  # drop_oldest / latest: the newest win
            added = packets
            q.extend(packets)
            removed = lost = [q.popleft() for _ in range(max(0, len(q) - cap))]
        budget.replace(added, removed)
        self._count_drops(len(lost))

    def _count_drops(self, n: int) -> None:
        if n <= 0:
            return
        before = self.dropped
        self.dropped += n
        if (self.dropped & (self.dropped - 1)) == 0 or before.bit_length() != self.dropped.bit_length():
            log.warning("poller overflow: output `%s` policy=%s capacity=%d queued=%d dropped_total=%d", self.name,
                        self.overflow, self.capacity, len(self.packets), self.dropped)

    def push_bound(self, ts: int) -> None:
        """Append an empty packet announcing timestamp bound ``ts``."""
        marker = Packet()
        marker._ts = ts
        self.packets.append(marker)
        self._budget.add_uncounted(1)

    def reset(self) -> None:
        """Forget everything (``Graph.reset``)."""
        self.packets.clear()
        self.closed = False
        self.dropped = 0

    def __len__(self) -> int:
        """Packets queued right now."""
        return len(self.packets)
