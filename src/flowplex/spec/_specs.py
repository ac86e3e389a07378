"""Parsed, validated, immutable descriptions of a graph.

``flowplex.config`` turns YAML into these specs; ``flowplex.spec._plan`` checks them and
derives the edge tables; the runtime only ever sees specs and plans, never YAML or pydantic.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final, Literal

from .._types import OptionValue

PolicyType = Literal["sync", "immediate", "fixed_size", "sync_set", "batch"]
POLICY_TYPES: Final[tuple[str, ...]] = ("sync", "immediate", "fixed_size", "sync_set", "batch")

ExecutorType = Literal["ThreadPoolExecutor", "DelegatingExecutor", "ProcessPoolExecutor", "RayExecutor"]
EXECUTOR_TYPES: Final[tuple[str, ...]] = ("ThreadPoolExecutor", "DelegatingExecutor", "ProcessPoolExecutor",
                                          "RayExecutor")

StatsLevel = Literal["off", "basic", "full"]
RestartPolicy = Literal["never", "on_failure"]
"""What a ``ProcessPoolExecutor`` does when a worker process dies."""
OnError = Literal["abort", "skip"]

DEFAULT_EXECUTOR: Final = "default"
"""The implicit executor #0 that every graph has; the name is reserved."""

ROUTE_KERNEL: Final = "__lmflow.route"
"""The kernel name of engine-provided ``type: route`` nodes (lm-flow's name, kept verbatim)."""


@dataclass(frozen=True, slots=True)
class PortSpec:
    """One port declaration: ``name``, ``TAG:name`` or ``TAG:index:name``."""

    name: str
    tag: str = ""
    index: int = 0
    """Index within ``tag`` (auto-assigned in declaration order when not written)."""
    timeout_ms: float = 0.0
    """A node input's timeout (the long form ``{name: cam, timeout_ms: 200}``): how long a join
    waits for this input before it proceeds with it empty; 0 means no timeout."""


@dataclass(frozen=True, slots=True)
class InputPolicySpec:
    """A node's readiness policy (``input_policy``)."""

    type: PolicyType = "sync"
    capacity: int = 0
    """``fixed_size``: queue length kept per port; ``batch``: aligned tuples per invocation."""
    sets: tuple[tuple[str, ...], ...] = ()
    """``sync_set``: a partition of the forward input ports into alignment groups."""


@dataclass(frozen=True, slots=True)
class InputQueuesSpec:
    """Lossless per-input packet capacities (``input_queues``); 0 means unlimited."""

    packets: int = 0
    ports: tuple[tuple[str, int | None], ...] = ()
    """Per-port overrides ``(port name, packets)``; ``None`` inherits ``packets``."""

    def capacity_of(self, port: str) -> int:
        """The effective capacity of an input port (0 = unlimited)."""
        for name, packets in self.ports:
            if name == port:
                return self.packets if packets is None else packets
        return self.packets


ConditionKind = Literal["periodic", "count", "boolean", "event"]
CONDITION_KINDS: Final[tuple[str, ...]] = ("periodic", "count", "boolean", "event")
"""The kinds a node's ``conditions`` entry may have."""


@dataclass(frozen=True, slots=True)
class ConditionSpec:
    """One entry of a node's ``conditions``: all of a node's conditions must hold for it to run."""

    kind: ConditionKind
    where: str = ""
    """Where it was declared, for messages: ``nodes[1].conditions[0]`` or ``get_contract``."""
    period_s: float = 0.0
    """``periodic``: the node runs at most once per period (seconds, > 0)."""
    count: int = 0
    """``count``: the node runs this many times, then finishes (>= 1)."""
    name: str = ""
    """``boolean`` and ``event``: the name ``Graph.set_condition`` / ``Graph.notify`` use."""
    initial: bool = True
    """``boolean``: whether the node is enabled when the graph starts."""


@dataclass(frozen=True, slots=True)
class PredicateSpec:
    """A routing condition; ``kind`` is one of all, any, not, timestamp, metadata."""

    kind: Literal["all", "any", "not", "timestamp", "metadata"]
    children: tuple[PredicateSpec, ...] = ()
    key: str = ""
    op: str = ""
    value: bool | int | float | str | None = None


@dataclass(frozen=True, slots=True)
class RouteRuleSpec:
    """One rule of a route node: send to ``to`` when ``when`` holds (or by default)."""

    to: str
    when: PredicateSpec | None = None
    default: bool = False


@dataclass(frozen=True, slots=True)
class RouteSpec:
    """The routing fields of a ``type: route`` node."""

    mode: Literal["first", "all"] = "first"
    unmatched: str = "drop"
    """``drop``, ``error`` or the name of one of the node's output ports."""
    rules: tuple[RouteRuleSpec, ...] = ()


@dataclass(frozen=True, slots=True)
class NodeSpec:
    """One node after subgraph expansion."""

    name: str
    kernel: str
    """Registered kernel name or ``module:Class`` reference; ``ROUTE_KERNEL`` for route nodes."""
    path: str
    """Where the node came from, for error messages: ``nodes[2]`` or
    ``subgraphs.Foo.nodes[1] (expanded node 'd/b')``."""
    input_ports: tuple[PortSpec, ...] = ()
    output_ports: tuple[PortSpec, ...] = ()
    executor: str = DEFAULT_EXECUTOR
    max_in_flight: int = 1
    options: OptionValue = None
    input_policy: InputPolicySpec = field(default_factory=InputPolicySpec)
    input_queues: InputQueuesSpec = field(default_factory=InputQueuesSpec)
    back_edges: tuple[str, ...] = ()
    on_error: OnError = "abort"
    rate: float = 0.0
    """Source pacing in Hz; 0 means unpaced."""
    route: RouteSpec | None = None
    """Set only for ``type: route`` nodes."""
    conditions: tuple[ConditionSpec, ...] = ()
    """The ``conditions`` key (the kernel's ``get_contract`` may add more at build)."""

    @property
    def is_source(self) -> bool:
        """A node with no input ports produces on its own."""
        return not self.input_ports

    @property
    def label(self) -> str:
        """``path (node `name`)``: the prefix of every error about this node (lm-flow's quoting)."""
        return f"{self.path} (node `{self.name}`)"


@dataclass(frozen=True, slots=True)
class RaySpec:
    """The settings of a ``RayExecutor`` (``executors[]`` fields that only it takes)."""

    address: str = ""
    """"" (the process's Ray instance, or a new local one), ``auto``, ``ray://host:port`` or ``IP:port``."""
    num_cpus: float = 1.0
    num_gpus: float = 0.0
    memory: int = 0
    resources: tuple[tuple[str, float], ...] = ()
    max_batch: int = 256
    max_batch_delay_ms: float = 2.0
    max_restarts: int = 0


@dataclass(frozen=True, slots=True)
class ExecutorSpec:
    """A user-declared executor (``executors[]``)."""

    name: str
    type: ExecutorType = "ThreadPoolExecutor"
    num_threads: int = 1
    affinity: tuple[int, ...] = ()
    priority: int = 0
    num_processes: int = 0
    """``ProcessPoolExecutor``: worker processes; 0 means one per CPU (``os.cpu_count()``)."""
    restart: RestartPolicy = "never"
    """``ProcessPoolExecutor``: ``never`` or ``on_failure`` (a dead worker is replaced)."""
    arena_bytes: int = 0
    """``ProcessPoolExecutor``: the shared-memory arena's size; 0 means the default (1 GiB)."""
    ray: RaySpec = field(default_factory=RaySpec)
    """``RayExecutor``: its settings (the defaults on any other executor)."""
    ray_fields: tuple[str, ...] = ()
    """The Ray-only fields written in the YAML (the plan rejects them on other executors)."""


@dataclass(frozen=True, slots=True)
class GraphSpec:
    """A whole graph: the validated, subgraph-expanded content of one YAML document."""

    nodes: tuple[NodeSpec, ...] = ()
    input_ports: tuple[PortSpec, ...] = ()
    output_ports: tuple[PortSpec, ...] = ()
    executors: tuple[ExecutorSpec, ...] = ()
    max_queue_size: int = 100
    max_queued_packets: int | None = None
    """Global packet watermark; ``None`` means "not configured" (flowplex then applies its
    default bound), 0 means explicitly unlimited."""
    watchdog_ms: int = 0
    buffer_pool_max_bytes: int = 0
    stats: StatsLevel = "basic"
    trace_capacity: int = 0
    """Size of the execution-trace event ring (lm-lmflow 0.3.3's ``trace_capacity``); 0 is off."""
    strict_ports: bool = False
    """An ``emit``/``forward`` to an output index the node lacks raises (else: ignored, counted)."""
    source: str | None = None
    """The file the graph was loaded from, if any (for messages)."""
    control: str | bool | None = None
    """The ``control`` key: serve a control socket under this name (true: the file's stem)."""
    default_executor: str = DEFAULT_EXECUTOR
    """Where the nodes that name no ``executor`` were placed (the ``default_executor`` key): the
    loader writes it into each such node's ``executor``; the plan checks that it exists."""
    imports: tuple[str, ...] = ()
    """The kernel code the graph imports (``imports:``, its includes' too, in the order they ran):
    module names and absolute ``.py`` paths. Building a graph imports them first (a no-op when
    loading the YAML already did)."""
