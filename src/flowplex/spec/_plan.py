"""Planning: check a ``GraphSpec`` and derive its edge, executor and port tables.

Registry-free and thread-free, so ``flowplex check-config`` and ``Graph.from_yaml`` share it.
Every semantic rule of the YAML format lives here (the config layer only parses, namespaces and
normalises), so a spec built by hand is checked exactly like one loaded from YAML.

Errors name the offending value: ``nodes[2].input_ports[0] (node `cam`): port `frmae` has no
producer; did you mean `frame`?``. A ``locate`` callback (given by the YAML loader) prefixes
``file.yaml:LINE:``.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Final, TypeAlias

from .._suggest import did_you_mean
from ..errors import ConfigError
from . import _ranges as ranges
from ._conditions import (
    CONTRACT_WHERE,
    condition_names_problem,
    conditions_problem,
    timeouts_problem,
)
from ._specs import (
    DEFAULT_EXECUTOR,
    EXECUTOR_TYPES,
    POLICY_TYPES,
    ROUTE_KERNEL,
    ConditionSpec,
    ExecutorSpec,
    GraphSpec,
    NodeSpec,
    PortSpec,
    PredicateSpec,
)
from ._text import control_char, escape_controls

__all__ = [
    "DEFAULT_EXECUTOR_SPEC",
    "METADATA_OPS",
    "TIMESTAMP_OPS",
    "Diagnostic",
    "EdgePlan",
    "GraphPlan",
    "Locate",
    "build_plan",
    "merge_conditions",
    "node_where",
]

DEFAULT_EXECUTOR_SPEC: Final = ExecutorSpec(name="default", type="ThreadPoolExecutor", num_threads=0)
"""Executor #0. ``num_threads=0`` marks flowplex's default executor (runs on the calling thread)."""

METADATA_OPS: Final = ("eq", "ne", "gt", "gte", "lt", "lte", "exists", "contains")
TIMESTAMP_OPS: Final = ("eq", "ne", "gt", "gte", "lt", "lte")

FieldPath: TypeAlias = tuple[str | int, ...]
"""A YAML path relative to a node (``("input_ports", 0)``) or to the document root."""

Locate: TypeAlias = Callable[[int | None, FieldPath], str]
"""``locate(node_index_or_None, field_path)`` returns a message prefix such as ``"g.yaml:12: "``."""


@dataclass(frozen=True, slots=True)
class Diagnostic:
    """A static finding that is not an error (logged as a warning at build)."""

    code: str
    """``unconsumed_graph_input``, ``unconsumed_node_output``, ``unused_executor``, ``route_*``."""
    message: str


@dataclass(frozen=True, slots=True)
class EdgePlan:
    """One edge: named after its single producer's port, consumed by any number of ports."""

    name: str
    producer: int | None
    """Index of the producing node, or ``None`` for a graph input."""
    producer_port: int
    """Flat output-port index on the producer (0 for a graph input)."""
    consumers: tuple[tuple[int, int], ...]
    """``(node index, flat input-port index)`` of every consumer, in node order."""
    is_graph_output: bool


@dataclass(frozen=True, slots=True)
class GraphPlan:
    """A checked graph: the spec plus every table the runtime needs."""

    spec: GraphSpec
    edges: dict[str, EdgePlan]
    """Every edge by name, in a deterministic order (graph inputs, then node outputs)."""
    graph_inputs: tuple[str, ...]
    graph_outputs: tuple[str, ...]
    executors: tuple[ExecutorSpec, ...]
    """Executor table; index 0 is always ``DEFAULT_EXECUTOR_SPEC``."""
    node_executor: tuple[int, ...]
    """Executor index of each node."""
    topo_order: tuple[int, ...]
    """Node indices in a topological order of the graph without back edges."""
    diagnostics: tuple[Diagnostic, ...]


def build_plan(spec: GraphSpec, *, locate: Locate | None = None) -> GraphPlan:
    """Check ``spec`` and build its tables.

    Args:
        spec: A graph, usually from ``flowplex.config.load_yaml``.
        locate: Optional source locator used to prefix messages with ``file:LINE:``.

    Returns:
        The plan; static findings that are not errors are in ``diagnostics``.

    Raises:
        ConfigError: For the first rule the graph breaks; the message starts with the YAML path.
    """
    return _Planner(spec, locate).plan()


def node_where(node: NodeSpec, field: FieldPath = ()) -> str:
    """The message prefix for ``field`` of ``node``: ``nodes[0].rate (node `a`)``.

    Expanded subgraph nodes read ``subgraphs.Foo.nodes[1].rate (expanded node `d/b`)``.
    """
    base, sep, note = node.path.partition(" (")
    note = f"({note}" if sep else f"(node `{node.name}`)"
    return escape_controls(f"{base}{_format_field(field)} {note}")


def merge_conditions(node: NodeSpec, extra: Sequence[ConditionSpec]) -> tuple[ConditionSpec, ...]:
    """``node``'s conditions followed by ``extra`` (those its kernel's ``get_contract`` declared), checked.

    The same rules as the plan's (``spec._conditions``): each condition alone, then the combination,
    e.g. a ``periodic`` condition in both the YAML and the contract. A name used by a boolean and an
    event on different nodes is a graph rule: check the merged lists with ``condition_names_problem``.

    Raises:
        ConfigError: ``nodes[0].kernel (node `a`): get_contract: ...`` for a problem of a contract
            condition, ``nodes[0].conditions[1] (node `a`): ...`` for one of the node's own.
    """
    merged = (*node.conditions, *extra)
    problem = conditions_problem(node, merged)
    if problem is None:
        return merged
    cond = merged[problem.index]
    if cond.where == CONTRACT_WHERE or problem.index >= len(node.conditions):
        msg = f"{node_where(node, ('kernel',))}: get_contract: condition `{cond.kind}`: {problem.message}"
    else:
        msg = f"{node_where(node, ('conditions', problem.index, *problem.field))}: {problem.message}"
    raise ConfigError(msg)


def _format_field(field: Iterable[str | int], *, root: bool = False) -> str:
    out = []
    for part in field:
        if isinstance(part, int):
            out.append(f"[{part}]")
        else:
            out.append(part if root and not out else f".{part}")
    return "".join(out)


def _shown(value: float) -> str:
    """A number as a message shows it: ``1e-300``, ``NaN``, a huge integer abbreviated."""
    if isinstance(value, float):
        return "NaN" if math.isnan(value) else f"{value:g}"
    text = str(value)
    return text if len(text) <= 24 else f"{text[:12]}... ({len(text)} digits)"


def _hint(word: str, candidates: Iterable[str]) -> str:
    return did_you_mean(word, candidates)


def _predicate_key(pred: PredicateSpec) -> tuple[object, ...]:
    """Identity of a condition; typed, so ``1``, ``1.0`` and ``true`` differ."""
    return (
        pred.kind,
        tuple(_predicate_key(c) for c in pred.children),
        pred.key,
        pred.op,
        type(pred.value).__name__,
        pred.value,
    )


class _Planner:
    """One planning pass; ``plan()`` raises at the first broken rule."""

    def __init__(self, spec: GraphSpec, locate: Locate | None) -> None:
        self.spec = spec
        self.nodes = spec.nodes
        self.locate = locate
        self.executor_index: dict[str, int] = {DEFAULT_EXECUTOR: 0}
        self.node_index: dict[str, int] = {}
        self.executors: list[ExecutorSpec] = [DEFAULT_EXECUTOR_SPEC]

    # -- errors -------------------------------------------------------------------------------

    def fail(self, node: int | None, field: FieldPath, message: str) -> ConfigError:
        """The error for ``field`` of node ``node`` (or of the document when ``None``)."""
        prefix = self.locate(node, field) if self.locate is not None else ""
        where = _format_field(field, root=True) if node is None else node_where(self.nodes[node], field)
        return ConfigError(f"{prefix}{where}: {message}" if where else f"{prefix}{message}")

    def check_range(self, node: int | None, field: FieldPath, value: float, low: float, high: float,
                    what: str = "") -> None:
        """``low <= value <= high`` (not NaN), else ``field: must be in LOW..HIGH[what], got VALUE``."""
        if low <= value <= high:
            return
        raise self.fail(node, field, f"must be in {_shown(low)}..{_shown(high)}{what}, got {_shown(value)}")

    def check_text(self, node: int | None, field: FieldPath, what: str, text: str) -> None:
        """A name must not hold control characters (they would act on the terminal showing it)."""
        bad = control_char(text)
        if bad is not None:
            msg = f"{what} `{escape_controls(text)}` contains the control character {bad}; names must be printable"
            raise self.fail(node, field, msg)

    # -- the pass -----------------------------------------------------------------------------

    def plan(self) -> GraphPlan:
        self.check_graph_numbers()
        self.check_executors()
        node_executor = tuple(self.check_node(n) for n in range(len(self.nodes)))
        self.check_condition_names()
        graph_inputs = self.check_graph_ports("input_ports", "graph input port")
        graph_outputs = self.check_graph_ports("output_ports", "graph output port")
        edges = self.link(graph_inputs, graph_outputs)
        topo = self.topo_order(edges)
        diagnostics = self.diagnostics(edges, node_executor)
        return GraphPlan(
            spec=self.spec,
            edges=edges,
            graph_inputs=graph_inputs,
            graph_outputs=graph_outputs,
            executors=tuple(self.executors),
            node_executor=node_executor,
            topo_order=topo,
            diagnostics=diagnostics,
        )

    def check_graph_numbers(self) -> None:
        spec = self.spec
        self.check_range(None, ("max_queue_size",), spec.max_queue_size, 0, ranges.MAX_PACKETS, " packets")
        if spec.max_queued_packets is not None:
            self.check_range(None, ("max_queued_packets",), spec.max_queued_packets, 0, ranges.MAX_PACKETS,
                             " packets (0: unlimited)")
        self.check_range(None, ("watchdog_ms",), spec.watchdog_ms, 0, ranges.MAX_DELAY_MS, " ms (0: off)")
        self.check_range(None, ("buffer_pool_max_bytes",), spec.buffer_pool_max_bytes, 0, ranges.MAX_BYTES,
                         " bytes")
        self.check_range(None, ("trace_capacity",), spec.trace_capacity, 0, ranges.MAX_TRACE_CAPACITY,
                         " events (0: off)")

    def check_executor_numbers(self, at: FieldPath, ex: ExecutorSpec) -> None:
        self.check_range(None, (*at, "num_threads"), ex.num_threads, 0, ranges.MAX_WORKERS)
        self.check_range(None, (*at, "num_processes"), ex.num_processes, 0, ranges.MAX_WORKERS, " (0: one per CPU)")
        self.check_range(None, (*at, "arena_bytes"), ex.arena_bytes, 0, ranges.MAX_BYTES, " bytes")
        for k, core in enumerate(ex.affinity):
            self.check_range(None, (*at, "affinity", k), core, 0, ranges.MAX_CPU_ID, " (a CPU id)")
        if ex.type != "RayExecutor":
            return
        ray = ex.ray
        self.check_range(None, (*at, "num_cpus"), ray.num_cpus, 0, ranges.MAX_RAY_AMOUNT)
        self.check_range(None, (*at, "num_gpus"), ray.num_gpus, 0, ranges.MAX_RAY_AMOUNT)
        for key, amount in ray.resources:
            self.check_range(None, (*at, "resources", key), amount, 0, ranges.MAX_RAY_AMOUNT)
        self.check_range(None, (*at, "memory"), ray.memory, 0, ranges.MAX_BYTES, " bytes")
        self.check_range(None, (*at, "max_batch"), ray.max_batch, 1, ranges.MAX_BATCH)
        self.check_range(None, (*at, "max_batch_delay_ms"), ray.max_batch_delay_ms, 0, ranges.MAX_DELAY_MS, " ms")
        self.check_range(None, (*at, "max_restarts"), ray.max_restarts, 0, ranges.MAX_RESTARTS)

    def check_executors(self) -> None:
        for i, ex in enumerate(self.spec.executors):
            at: FieldPath = ("executors", i)
            self.check_text(None, (*at, "name"), "executor name", ex.name)
            if not ex.name:
                msg = "executor entry must have a name; nodes select an executor by it"
                raise self.fail(None, (*at, "name"), msg)
            if ex.name == DEFAULT_EXECUTOR:
                raise self.fail(None, (*at, "name"), "`default` is reserved for the implicit executor")
            if ex.name in self.executor_index:
                raise self.fail(None, (*at, "name"), f"executor `{ex.name}` defined more than once")
            if ex.type not in EXECUTOR_TYPES:
                hint = _hint(ex.type, EXECUTOR_TYPES)
                msg = f"unknown executor type `{ex.type}`{hint} (supported: {', '.join(EXECUTOR_TYPES)})"
                raise self.fail(None, (*at, "type"), msg)
            if ex.type == "DelegatingExecutor":
                if ex.num_threads or ex.affinity or ex.priority:
                    msg = (
                        "DelegatingExecutor owns no threads, so `num_threads`, `affinity`, and `priority` "
                        'are meaningless; drop those fields or use type: "ThreadPoolExecutor"'
                    )
                    raise self.fail(None, at, msg)
            elif ex.type == "ProcessPoolExecutor":
                if ex.num_threads or ex.affinity or ex.priority:
                    msg = (
                        "ProcessPoolExecutor runs kernels in worker processes, so `num_threads`, `affinity`, "
                        "and `priority` do not apply; set `num_processes` instead"
                    )
                    raise self.fail(None, at, msg)
                if ex.num_processes < 0:
                    msg = f"num_processes must be >= 0 (0: one per CPU), got {ex.num_processes}"
                    raise self.fail(None, (*at, "num_processes"), msg)
            elif ex.type == "RayExecutor":
                if ex.num_threads or ex.affinity or ex.priority:
                    msg = (
                        "RayExecutor runs kernels in Ray actors, so `num_threads`, `affinity`, and `priority` "
                        "do not apply; set `num_cpus` (per actor) instead"
                    )
                    raise self.fail(None, at, msg)
                for key, _ in ex.ray.resources:
                    if not key:
                        raise self.fail(None, (*at, "resources"), "resource names must not be empty")
                if "address" in ex.ray_fields and not ex.ray.address.strip():
                    msg = ("must not be empty: omit it for a local Ray instance, or give auto, ray://host:port "
                           "or IP:port")
                    raise self.fail(None, (*at, "address"), msg)
                for field_name in ("num_cpus", "num_gpus", "max_batch_delay_ms"):
                    value = getattr(ex.ray, field_name)
                    if not math.isfinite(value):
                        raise self.fail(None, (*at, field_name), f"must be a finite number, got {value}")
            elif ex.num_threads < 1:
                raise self.fail(None, (*at, "num_threads"), f"num_threads must be >= 1, got {ex.num_threads}")
            written = [(name, "RayExecutor") for name in ex.ray_fields]
            written += [(name, "ProcessPoolExecutor") for name in ("num_processes", "arena_bytes") if getattr(ex, name)]
            for field_name, owner in written:
                if ex.type != owner:
                    raise self.fail(None, (*at, field_name), _only_for(field_name, owner, ex.type))
            if ex.arena_bytes and ex.arena_bytes < 65536:
                msg = f"arena_bytes must be 0 (the default, 1 GiB) or at least 65536 (64 KiB), got {ex.arena_bytes}"
                raise self.fail(None, (*at, "arena_bytes"), msg)
            if ex.restart not in ("never", "on_failure"):
                msg = f"unknown restart `{ex.restart}`; expected `never` or `on_failure`"
                raise self.fail(None, (*at, "restart"), msg)
            if ex.restart != "never" and ex.type != "ProcessPoolExecutor":
                raise self.fail(None, (*at, "restart"), _only_for("restart", "ProcessPoolExecutor", ex.type))
            if not 0 <= ex.priority <= 99:
                raise self.fail(None, (*at, "priority"), f"priority must be in 0..99, got {ex.priority}")
            if any(core < 0 for core in ex.affinity):
                raise self.fail(None, (*at, "affinity"), "affinity core ids must be >= 0")
            self.check_executor_numbers(at, ex)
            self.executor_index[ex.name] = len(self.executors)
            self.executors.append(ex)
        default = self.spec.default_executor
        if default not in self.executor_index:
            hint = _hint(default, self.executor_index)
            msg = f"undefined executor `{default}`{hint} (declare it under `executors`, or drop `default_executor`)"
            raise self.fail(None, ("default_executor",), msg)

    # -- one node -----------------------------------------------------------------------------

    def check_node(self, n: int) -> int:
        """Check every node-local rule of node ``n``; returns its executor index."""
        node = self.nodes[n]
        self.check_name(n)
        self.check_ports(n, "input_ports", node.input_ports)
        self.check_ports(n, "output_ports", node.output_ports)
        inputs = [p.name for p in node.input_ports]
        if node.route is not None or node.kernel == ROUTE_KERNEL:
            self.check_route(n)
        elif not node.kernel:
            raise self.fail(n, ("kernel",), "node has no `kernel`")
        self.check_back_edges(n, inputs)
        self.check_policy(n, inputs)
        self.check_timeouts(n)
        self.check_queues(n, inputs)
        if node.on_error not in ("abort", "skip"):
            hint = _hint(node.on_error, ("abort", "skip"))
            msg = f'unknown on_error `{node.on_error}`{hint} (expected "abort" or "skip")'
            raise self.fail(n, ("on_error",), msg)
        if node.rate != 0:
            if not math.isfinite(node.rate) or node.rate <= 0:
                shown = "NaN" if math.isnan(node.rate) else f"{node.rate:g}"
                raise self.fail(n, ("rate",), f"rate must be a positive, finite number (Hz), got {shown}")
            self.check_range(n, ("rate",), node.rate, ranges.RATE_MIN_HZ, ranges.RATE_MAX_HZ, " Hz (0: unpaced)")
            if not node.is_source:
                msg = (
                    "rate only applies to source nodes (no input ports); "
                    "a non-source is driven by upstream data"
                )
                raise self.fail(n, ("rate",), msg)
        problem = conditions_problem(node, node.conditions)
        if problem is not None:
            raise self.fail(n, ("conditions", problem.index, *problem.field), problem.message)
        return self.check_executor_choice(n)

    def check_timeouts(self, n: int) -> None:
        node = self.nodes[n]
        for kind in ("input_ports", "output_ports"):
            problem = timeouts_problem(node, kind)
            if problem is not None:
                raise self.fail(n, (kind, *problem[0]), problem[1])

    def check_condition_names(self) -> None:
        problem = condition_names_problem([node.conditions for node in self.nodes], [node.name for node in self.nodes])
        if problem is not None:
            n, index, msg = problem
            kind = self.nodes[n].conditions[index].kind
            raise self.fail(n, ("conditions", index, kind, "name"), msg)

    def check_name(self, n: int) -> None:
        node = self.nodes[n]
        if not node.name:
            raise self.fail(n, ("name",), "node name must not be empty")
        self.check_text(n, ("name",), "node name", node.name)
        first = self.node_index.setdefault(node.name, n)
        if first != n:
            msg = (
                f"node `{node.name}` is defined more than once (first at {self.nodes[first].path}); "
                "node names must be unique"
            )
            raise self.fail(n, ("name",), msg)

    def check_ports(self, n: int, kind: str, ports: Sequence[PortSpec]) -> None:
        names: set[str] = set()
        slots: dict[tuple[str, int], str] = {}
        by_tag: dict[str, list[int]] = {}
        for k, port in enumerate(ports):
            if not port.name:
                raise self.fail(n, (kind, k), "port name must not be empty")
            self.check_text(n, (kind, k), "port name", port.name)
            self.check_text(n, (kind, k), "port tag", port.tag)
            if port.name in names:
                raise self.fail(n, (kind, k), f"port `{port.name}` is declared more than once in `{kind}`")
            names.add(port.name)
            if port.index < 0:
                raise self.fail(n, (kind, k), f"port `{port.name}`: index must be >= 0, got {port.index}")
            other = slots.get((port.tag, port.index))
            if other is not None:
                msg = (
                    f"port `{port.name}` (tag=`{port.tag}`, index={port.index}) is a duplicate of "
                    f"port `{other}`"
                )
                raise self.fail(n, (kind, k), msg)
            slots[(port.tag, port.index)] = port.name
            by_tag.setdefault(port.tag, []).append(port.index)
        for tag, indices in by_tag.items():
            if sorted(indices) != list(range(len(indices))):
                got = ", ".join(str(i) for i in sorted(indices))
                raise self.fail(n, (kind,), f"tag `{tag}` index must be contiguous from 0, got [{got}]")

    def check_back_edges(self, n: int, inputs: list[str]) -> None:
        node = self.nodes[n]
        for k, name in enumerate(node.back_edges):
            if name not in inputs:
                hint = _hint(name, inputs)
                msg = f"back_edge `{name}` is not one of this node's input ports{hint}"
                raise self.fail(n, ("back_edges", k), msg)
        if inputs and set(inputs) <= set(node.back_edges):
            msg = "every input port is a back_edge -- a node needs at least one forward input to ever fire"
            raise self.fail(n, ("back_edges",), msg)

    def check_policy(self, n: int, inputs: list[str]) -> None:
        policy = self.nodes[n].input_policy
        at: FieldPath = ("input_policy",)
        if policy.type not in POLICY_TYPES:
            hint = _hint(policy.type, POLICY_TYPES)
            msg = f"unknown input_policy `{policy.type}`{hint} (valid: {' / '.join(POLICY_TYPES)})"
            raise self.fail(n, (*at, "type"), msg)
        if policy.type == "fixed_size" and policy.capacity < 1:
            raise self.fail(n, (*at, "capacity"), "fixed_size policy capacity must be >= 1")
        if policy.type == "batch" and policy.capacity < 1:
            raise self.fail(n, (*at, "capacity"), "batch policy capacity (the batch size) must be >= 1")
        self.check_range(n, (*at, "capacity"), policy.capacity, 0, ranges.MAX_PACKETS, " packets")
        if policy.type != "sync_set":
            return
        if not policy.sets:
            raise self.fail(n, (*at, "sets"), "sync_set policy must provide sets (input port groups)")
        back_edges = set(self.nodes[n].back_edges)
        seen: set[str] = set()
        for g, group in enumerate(policy.sets):
            if not group:
                raise self.fail(n, (*at, "sets", g), "group must not be empty")
            for name in group:
                if name in back_edges:
                    raise self.fail(
                        n, (*at, "sets", g), f"back_edge `{name}` must not appear in a sync_set group"
                    )
                if name not in inputs:
                    hint = _hint(name, inputs)
                    raise self.fail(n, (*at, "sets", g), f"unknown input port `{name}`{hint}")
                if name in seen:
                    raise self.fail(n, (*at, "sets", g), f"input port `{name}` appears in multiple groups")
                seen.add(name)
        for name in inputs:
            if name not in seen and name not in back_edges:
                msg = (
                    f"input port `{name}` is not assigned to a group; put it in its own group "
                    f"([{name}]) if it needs no alignment"
                )
                raise self.fail(n, (*at, "sets"), msg)

    def check_queues(self, n: int, inputs: list[str]) -> None:
        node = self.nodes[n]
        queues = node.input_queues
        at: FieldPath = ("input_queues",)
        if queues.packets < 0:
            raise self.fail(n, (*at, "packets"), f"packets must be >= 0, got {queues.packets}")
        self.check_range(n, (*at, "packets"), queues.packets, 0, ranges.MAX_PACKETS, " (0: unlimited)")
        lossless = queues.packets > 0
        for name, packets in queues.ports:
            if name not in inputs:
                hint = _hint(name, inputs)
                msg = f"input queue capacity override references unknown input port `{name}`{hint}"
                raise self.fail(n, (*at, "ports", name), msg)
            if packets is not None and packets < 0:
                raise self.fail(n, (*at, "ports", name, "packets"), f"packets must be >= 0, got {packets}")
            if packets is not None:
                self.check_range(n, (*at, "ports", name, "packets"), packets, 0, ranges.MAX_PACKETS, " (0: unlimited)")
            if packets and name in node.back_edges:
                msg = (
                    f"input queue capacity override for back-edge input `{name}` is not supported; "
                    "back-edges always use their capacity-1 latest-value register"
                )
                raise self.fail(n, (*at, "ports", name), msg)
            lossless = lossless or bool(packets)
        if lossless and node.input_policy.type == "fixed_size":
            msg = (
                "lossless input queue capacities cannot be combined with input_policy=fixed_size "
                "(lossy drop-oldest)"
            )
            raise self.fail(n, at, msg)

    def check_executor_choice(self, n: int) -> int:
        node = self.nodes[n]
        name = node.executor or DEFAULT_EXECUTOR
        index = self.executor_index.get(name)
        if index is None:
            hint = _hint(name, self.executor_index)
            raise self.fail(n, ("executor",), f"undefined executor `{name}`{hint}")
        ex = self.executors[index]
        if node.max_in_flight < 1:
            raise self.fail(n, ("max_in_flight",), f"max_in_flight must be >= 1, got {node.max_in_flight}")
        self.check_range(n, ("max_in_flight",), node.max_in_flight, 1, ranges.MAX_WORKERS)
        # A process pool takes any max_in_flight: calls beyond its replicas queue at the workers,
        # pipelined (the pipe's latency overlaps the work), their outputs still in claim order.
        # So does a Ray executor (one actor per replica).
        if node.max_in_flight > 1 and index != 0 and ex.type not in ("ProcessPoolExecutor", "RayExecutor"):
            workers = 1 if ex.type == "DelegatingExecutor" else ex.num_threads
            if workers < 2:
                msg = (
                    f"max_in_flight={node.max_in_flight} needs an executor with more than one thread, "
                    f"but executor `{ex.name}` provides {workers} -- there would be no parallelism"
                )
                raise self.fail(n, ("max_in_flight",), msg)
        if node.is_source and ex.type == "DelegatingExecutor":
            raise self.fail(n, ("executor",), "source nodes cannot run on DelegatingExecutor")
        return index

    # -- route nodes --------------------------------------------------------------------------

    def check_route(self, n: int) -> None:
        node = self.nodes[n]
        route = node.route
        if route is None:
            raise self.fail(n, (), "route node requires route fields (`routes` or `unmatched`)")
        if node.kernel != ROUTE_KERNEL:
            raise self.fail(n, (), "route fields are only valid when `type: route`")
        if len(node.input_ports) != 1:
            raise self.fail(n, ("input_ports",), "route nodes require exactly one input port")
        if not node.output_ports:
            raise self.fail(n, ("output_ports",), "route nodes require at least one output port")
        if route.mode not in ("first", "all"):
            raise self.fail(n, ("mode",), f"unknown route mode `{route.mode}` (expected `first` or `all`)")
        outputs = [p.name for p in node.output_ports]
        seen_default = False
        for k, rule in enumerate(route.rules):
            if rule.to not in outputs:
                hint = _hint(rule.to, outputs)
                raise self.fail(n, ("routes", k, "to"), f"unknown output port `{rule.to}`{hint}")
            if rule.default:
                if rule.when is not None:
                    raise self.fail(n, ("routes", k), "default route must not declare `when`")
                if seen_default:
                    raise self.fail(n, ("routes", k), "at most one default route is allowed")
                seen_default = True
            elif rule.when is None:
                raise self.fail(n, ("routes", k), "non-default route requires `when`")
            else:
                self.check_predicate(n, ("routes", k, "when"), rule.when)
        if route.unmatched not in ("drop", "error") and route.unmatched not in outputs:
            hint = _hint(route.unmatched, ["drop", "error", *outputs])
            msg = f"expected `drop`, `error`, or an output port, got `{route.unmatched}`{hint}"
            raise self.fail(n, ("unmatched",), msg)
        if not route.rules and route.unmatched == "drop":
            msg = (
                "at least one route rule is required "
                "(with none and `unmatched: drop`, every packet is dropped)"
            )
            raise self.fail(n, ("routes",), msg)

    def check_predicate(self, n: int, at: FieldPath, pred: PredicateSpec) -> None:
        if pred.kind in ("all", "any"):
            if not pred.children:
                raise self.fail(n, (*at, pred.kind), f"`{pred.kind}` condition must not be empty")
            for i, child in enumerate(pred.children):
                self.check_predicate(n, (*at, pred.kind, i), child)
        elif pred.kind == "not":
            if len(pred.children) != 1:
                raise self.fail(n, (*at, "not"), "`not` takes exactly one condition")
            self.check_predicate(n, (*at, "not"), pred.children[0])
        elif pred.kind == "timestamp":
            self.check_timestamp_condition(n, (*at, "timestamp"), pred)
        elif pred.kind == "metadata":
            self.check_metadata_condition(n, at, pred)
        else:
            raise self.fail(n, at, f"unknown condition kind `{pred.kind}`")

    def check_timestamp_condition(self, n: int, at: FieldPath, pred: PredicateSpec) -> None:
        if pred.op in ("exists", "contains"):
            raise self.fail(n, (*at, "op"), f"timestamp condition does not support `{pred.op}`")
        if pred.op not in TIMESTAMP_OPS:
            hint = _hint(pred.op, TIMESTAMP_OPS)
            raise self.fail(
                n, (*at, "op"), f"unknown operator `{pred.op}`{hint} (valid: {', '.join(TIMESTAMP_OPS)})"
            )
        if pred.value is None:
            raise self.fail(n, at, "timestamp condition requires `value`")
        if isinstance(pred.value, bool) or not isinstance(pred.value, int):
            raise self.fail(n, (*at, "value"), "timestamp condition requires an integer `value`")
        self.check_range(n, (*at, "value"), pred.value, ranges.TS_MIN, ranges.TS_MAX, " (a timestamp)")

    def check_metadata_condition(self, n: int, at: FieldPath, pred: PredicateSpec) -> None:
        if not pred.key:
            raise self.fail(n, (*at, "metadata"), "metadata condition key must not be empty")
        if pred.op not in METADATA_OPS:
            hint = _hint(pred.op, METADATA_OPS)
            raise self.fail(
                n, (*at, "op"), f"unknown operator `{pred.op}`{hint} (valid: {', '.join(METADATA_OPS)})"
            )
        if pred.op == "exists":
            if pred.value is not None:
                raise self.fail(n, (*at, "value"), "metadata `exists` condition must not declare `value`")
        elif pred.value is None:
            raise self.fail(n, at, f"metadata `{pred.op}` condition requires `value`")
        elif pred.op == "contains" and not isinstance(pred.value, str):
            raise self.fail(n, (*at, "value"), "metadata `contains` condition requires a string value")

    # -- graph ports, producers and consumers -------------------------------------------------

    def check_graph_ports(self, kind: str, what: str) -> tuple[str, ...]:
        names: list[str] = []
        for i, port in enumerate(getattr(self.spec, kind)):
            if not port.name:
                raise self.fail(None, (kind, i), "port name must not be empty")
            self.check_text(None, (kind, i), what, port.name)
            if port.name in names:
                raise self.fail(None, (kind, i), f"{what} `{port.name}` is declared more than once")
            names.append(port.name)
        return tuple(names)

    def link(self, graph_inputs: tuple[str, ...], graph_outputs: tuple[str, ...]) -> dict[str, EdgePlan]:
        producers: dict[str, tuple[int | None, int]] = {name: (None, 0) for name in graph_inputs}
        for n, node in enumerate(self.nodes):
            for k, port in enumerate(node.output_ports):
                previous = producers.get(port.name)
                if previous is None:
                    producers[port.name] = (n, k)
                    continue
                if previous[0] is None:
                    raise self.fail(n, ("output_ports", k), f"port `{port.name}` is also a graph input")
                first = self.nodes[previous[0]]
                msg = (
                    f"port `{port.name}` has multiple producers (node `{first.name}` and node `{node.name}`)"
                )
                raise self.fail(n, ("output_ports", k), msg)
        consumers: dict[str, list[tuple[int, int]]] = {name: [] for name in producers}
        for n, node in enumerate(self.nodes):
            for k, port in enumerate(node.input_ports):
                users = consumers.get(port.name)
                if users is None:
                    hint = _hint(port.name, producers)
                    raise self.fail(n, ("input_ports", k), f"port `{port.name}` has no producer{hint}")
                users.append((n, k))
        outputs = set(graph_outputs)
        for i, name in enumerate(graph_outputs):
            if name not in producers:
                hint = _hint(name, producers)
                raise self.fail(None, ("output_ports", i), f"graph output `{name}` has no producer{hint}")
        return {
            name: EdgePlan(
                name=name,
                producer=producer,
                producer_port=port,
                consumers=tuple(consumers[name]),
                is_graph_output=name in outputs,
            )
            for name, (producer, port) in producers.items()
        }

    # -- topology -----------------------------------------------------------------------------

    def topo_order(self, edges: dict[str, EdgePlan]) -> tuple[int, ...]:
        """Kahn's algorithm over forward edges, lowest node index first among the ready ones."""
        count = len(self.nodes)
        successors: list[list[int]] = [[] for _ in range(count)]
        indegree = [0] * count
        for edge in edges.values():
            if edge.producer is None:
                continue
            for consumer, port in edge.consumers:
                if self.nodes[consumer].input_ports[port].name in self.nodes[consumer].back_edges:
                    continue
                successors[edge.producer].append(consumer)
                indegree[consumer] += 1
        ready = [n for n in range(count) if indegree[n] == 0]
        heapq.heapify(ready)
        order: list[int] = []
        while ready:
            n = heapq.heappop(ready)
            order.append(n)
            for m in successors[n]:
                indegree[m] -= 1
                if indegree[m] == 0:
                    heapq.heappush(ready, m)
        if len(order) < count:
            raise self.cycle_error(successors, {n for n in range(count) if indegree[n] > 0}, edges)
        return tuple(order)

    def cycle_error(
        self, successors: list[list[int]], stuck: set[int], edges: dict[str, EdgePlan]
    ) -> ConfigError:
        """Find one cycle among the ``stuck`` nodes and describe it, starting at its first node."""
        # Every stuck node has a stuck predecessor, so walking predecessors must revisit a node.
        predecessor: dict[int, int] = {}
        for n in sorted(stuck):
            for m in successors[n]:
                if m in stuck:
                    predecessor.setdefault(m, n)
        walk: list[int] = [min(stuck)]
        position = {walk[0]: 0}
        while True:
            prev = predecessor[walk[-1]]
            if prev in position:
                cycle = walk[position[prev] :]
                break
            position[prev] = len(walk)
            walk.append(prev)
        cycle.reverse()  # now in edge direction: cycle[i] -> cycle[i + 1] -> ... -> cycle[0]
        start = cycle.index(min(cycle))
        cycle = cycle[start:] + cycle[:start]
        first, last = cycle[0], cycle[-1]
        port = next(
            k
            for k, p in enumerate(self.nodes[first].input_ports)
            if edges[p.name].producer == last and p.name not in self.nodes[first].back_edges
        )
        names = " -> ".join(f"`{self.nodes[c].name}`" for c in [*cycle, first])
        feedback = self.nodes[first].input_ports[port].name
        msg = (
            f"topology cycle: node {names}; mark a feedback input with `back_edges` "
            f"(e.g. `back_edges: [{feedback}]` on node `{self.nodes[first].name}`)"
        )
        return self.fail(first, ("input_ports", port), msg)

    # -- static diagnostics -------------------------------------------------------------------

    def diagnostics(
        self, edges: dict[str, EdgePlan], node_executor: tuple[int, ...]
    ) -> tuple[Diagnostic, ...]:
        found: list[Diagnostic] = []
        for edge in edges.values():
            if edge.consumers or edge.is_graph_output:
                continue
            if edge.producer is None:
                msg = (
                    f"graph input port `{edge.name}` is consumed by no node; packets sent in will be dropped"
                )
                found.append(Diagnostic("unconsumed_graph_input", msg))
            else:
                msg = (
                    f"node `{self.nodes[edge.producer].name}` output port `{edge.name}` has no downstream "
                    "consumer and is not a graph output; output will be dropped"
                )
                found.append(Diagnostic("unconsumed_node_output", msg))
        used = set(node_executor)
        for index, ex in enumerate(self.executors):
            if index == 0 or index in used or ex.type != "ThreadPoolExecutor":
                continue
            threads = f"{ex.num_threads} thread{'s' if ex.num_threads != 1 else ''}"
            msg = f"executor `{ex.name}` is defined but not used by any node ({threads} will idle)"
            found.append(Diagnostic("unused_executor", msg))
        for node in self.nodes:
            found.extend(self.route_diagnostics(node))
        return tuple(found)

    @staticmethod
    def route_diagnostics(node: NodeSpec) -> list[Diagnostic]:
        route = node.route
        if route is None:
            return []
        found: list[Diagnostic] = []
        if any(rule.default for rule in route.rules) and route.unmatched != "drop":
            msg = (
                f"route node `{node.name}` has a default rule, "
                f"so unmatched policy `{route.unmatched}` is unreachable"
            )
            found.append(Diagnostic("route_unreachable_unmatched", msg))
        seen: dict[tuple[object, ...], int] = {}
        for number, rule in enumerate(route.rules, start=1):
            if rule.when is None:
                continue
            key = _predicate_key(rule.when)
            if route.mode == "all":
                key = (rule.to, key)
            earlier = seen.setdefault(key, number)
            if earlier == number:
                continue
            if route.mode == "first":
                msg = (
                    f"route node `{node.name}` rule {number} duplicates earlier rule {earlier}; "
                    "first mode makes it unreachable"
                )
                found.append(Diagnostic("route_shadowed_rule", msg))
            else:
                msg = (
                    f"route node `{node.name}` rule {number} duplicates an earlier rule and may emit the "
                    f"same packet twice to `{rule.to}`"
                )
                found.append(Diagnostic("route_duplicate_emit", msg))
        return found


def _only_for(field_name: str, owner: str, actual: str) -> str:
    """The error for an executor field written on an executor type that does not take it."""
    return (f"`{field_name}` applies to {owner} only (this executor is a {actual}; drop the field or change "
            "its `type`)")
