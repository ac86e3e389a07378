"""Build the runtime of a graph from a checked plan: kernels, contracts, nodes, edges, executors."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Final, cast

from ..errors import ConfigError
from ..executors import DelegatingExecutor, Executor, ThreadPoolExecutor
from ..executors._placement import default_executor
from ..kernels._context import Context, NodeInfo
from ..kernels._contract import declare_contract
from ..kernels._ports import PortTable
from ..kernels._registry import Kernel, kernel_class
from ..kernels._route import make_route_kernel
from ..packets import type_name
from ..spec._conditions import condition_names_problem
from ..spec._plan import GraphPlan, merge_conditions
from ..spec._specs import ROUTE_KERNEL, ConditionSpec, ExecutorSpec, GraphSpec
from ._engine import Engine
from ._nodes import BATCH, FIXED_SIZE, Edge, Node

if TYPE_CHECKING:
    from ..executors._protocol import KernelHostExecutor

log = logging.getLogger("flowplex.graph")

DEFAULT_MAX_QUEUED_PACKETS: Final = 4096
"""Default global watermark when ``max_queued_packets`` is not configured."""
DEFAULT_MAX_QUEUED_BYTES: Final = 64 * 1024 * 1024
"""Default cap on buffer bytes queued in node inputs and pollers when ``max_queued_packets`` is not configured."""

_now: Final[dict[int, str]] = {}
"""Thread id -> the node whose kernel it is creating (user code: ``get_contract``, ``__init__``)."""


def building_now(thread_id: int) -> str | None:
    """The node whose kernel thread ``thread_id`` is creating now, or None: for a deadline
    watching from another thread (``flowplex run --timeout``) to name it."""
    return _now.get(thread_id)


def build_engine(plan: GraphPlan, counter_add: Callable[[str, int], None],
                 log_fn: Callable[[int, str], None]) -> Engine:
    """Instantiate every kernel and wire the runtime; raises ``ConfigError``/``KeyError``."""
    if plan.spec.imports:
        _ensure_imported(plan.spec.imports)
    executors = [default_executor("default") if i == 0 else make_executor(ex) for i, ex in enumerate(plan.executors)]

    nodes: list[Node] = []
    conditions: list[tuple[ConditionSpec, ...]] = []  # per node: YAML's and get_contract's
    me = threading.get_ident()
    for i, spec in enumerate(plan.spec.nodes):
        inputs = PortTable(spec.input_ports)
        outputs = PortTable(spec.output_ports)
        _now[me] = f"node `{spec.name}` (kernel `{spec.kernel}`: its get_contract or constructor)"
        try:
            if spec.kernel == ROUTE_KERNEL:
                cls: type[Kernel] = make_route_kernel(spec)
            else:
                cls = kernel_class(spec.kernel, where=f"{spec.path}.kernel")
            contract = declare_contract(cls, inputs, outputs, f"{spec.path}.kernel (node `{spec.name}`)")
            try:
                instance = cls()
            except Exception as exc:
                msg = f"{spec.label}: constructing kernel `{spec.kernel}` failed: {type(exc).__name__}: {exc}"
                raise ConfigError(msg) from exc
        finally:
            _now.pop(me, None)
        info = NodeInfo(
            name=spec.name, kernel_name=spec.kernel, inputs=inputs, outputs=outputs, options=spec.options,
            is_source=spec.is_source, counter_add=counter_add, log=log_fn, strict_ports=plan.spec.strict_ports,
        )
        node = Node(i, spec, instance, info, executors[plan.node_executor[i]])
        host = cast("KernelHostExecutor", node.executor) if node.executor.hosts_kernels else None
        # An executor that batches calls (Ray): claims run ahead of answers, flushed in order. Not
        # for a node with a back edge (its next call must see the register its last one fed) nor
        # under fixed_size (it drops the stale packets a node too slow to take them leaves queued).
        if host is not None and not node.backs and node.policy != FIXED_SIZE:
            node.max_in_flight = max(node.max_in_flight, host.calls_in_flight(spec))
            if node.max_in_flight > 1:
                node.fast1 = None
        node.in_types = list(contract.input_types)
        node.out_types = list(contract.output_types)
        node.typed_inputs = any(node.in_types)
        node.typed_outputs = any(node.out_types)
        node.side_required = list(contract.side_packets)
        conditions.append(merge_conditions(spec, contract.conditions))
        for _ in range(node.max_in_flight + 1):  # +1: the close callback's context
            ctx = Context(info)
            ctx.owner = node
            node.contexts.append(ctx)
        nodes.append(node)

    edges: dict[str, Edge] = {}
    for name, ep in plan.edges.items():
        producer = nodes[ep.producer] if ep.producer is not None else None
        edge = Edge(name, producer)
        for node_index, port_index in ep.consumers:
            port = nodes[node_index].inputs[port_index]
            port.edge = edge
            edge.consumers.append(port)
        edges[name] = edge
    for node in nodes:
        node.out_edges = [edges[p.name] for p in node.spec.output_ports]
        node.out_edge = node.out_edges[0] if len(node.out_edges) == 1 else None
    for edge in edges.values():
        edge.update_solo()

    _check_static_types(plan, nodes)
    for diag in plan.diagnostics:
        log.warning("%s", diag.message)
    engine = Engine(nodes, edges, list(plan.graph_inputs), executors, plan.spec.strict_ports)
    configure_limits(engine, plan.spec, nodes)
    _attach_conditions(engine, nodes, conditions)
    return engine


def _attach_conditions(engine: Engine, nodes: list[Node], conditions: list[tuple[ConditionSpec, ...]]) -> None:
    """Give each node its conditions (YAML and ``get_contract``); a name is a boolean or an event."""
    clash = condition_names_problem(conditions, [n.name for n in nodes])
    if clash is not None:
        at, _, message = clash
        msg = f"{nodes[at].spec.label}: {message}"
        raise ConfigError(msg)
    for node, merged in zip(nodes, conditions, strict=True):
        engine.conditions.attach(node, merged)
        # A hosted kernel's ops come back in its outcome and are applied here too (``apply_outcome``).
        node.info.conditions = engine.conditions.kernel_op


def make_executor(spec: ExecutorSpec) -> Executor:
    """The factory: the only place that names executor classes (from the plan's ``type``)."""
    if spec.type == "DelegatingExecutor":
        return DelegatingExecutor(spec.name)
    if spec.type == "ProcessPoolExecutor":
        # Imported here: multiprocessing and the arena cost a graph without a pool 40 ms.
        from ..executors.processes import DEFAULT_ARENA_BYTES, ProcessPoolExecutor

        return ProcessPoolExecutor(spec.name, spec.num_processes or None, restart=spec.restart,
                                   arena_bytes=spec.arena_bytes or DEFAULT_ARENA_BYTES)
    if spec.type == "RayExecutor":
        from ..executors.ray import RayExecutor

        ray = spec.ray
        return RayExecutor(spec.name, ray.address or None, num_cpus=ray.num_cpus, num_gpus=ray.num_gpus,
                           memory=ray.memory, resources=dict(ray.resources), max_batch=ray.max_batch,
                           max_batch_delay_ms=ray.max_batch_delay_ms, max_restarts=ray.max_restarts)
    return ThreadPoolExecutor(spec.name, spec.num_threads, spec.affinity, spec.priority)


def configure_limits(engine: Engine, spec: GraphSpec, nodes: list[Node]) -> None:
    """Apply the graph-level settings: watermark, soft limit, stats level, watchdog."""
    if spec.max_queued_packets is None:
        # flowplex bounds memory by default (lm-lmflow does not): node input queues and poller
        # queues together may hold at most DEFAULT_MAX_QUEUED_PACKETS packets and
        # DEFAULT_MAX_QUEUED_BYTES of buffers before graph-input sends wait. A poller's queue
        # counts because a host that reads slowly is the commonest way to fall behind.
        engine.budget.limit_packets = DEFAULT_MAX_QUEUED_PACKETS
        engine.budget.limit_bytes = DEFAULT_MAX_QUEUED_BYTES
    else:
        engine.budget.limit_packets = spec.max_queued_packets
    engine.budget.soft_limit = spec.max_queue_size
    for node in nodes:
        node.limited = any(port.capacity for edge in node.out_edges for port in edge.consumers)
        node.simple = not node.is_source and node.max_in_flight == 1 and len(node.out_edges) <= 1
        node.hop = (node.simple and node.policy != BATCH and not node.backs and not node.typed_inputs
                    and not node.typed_outputs and not node.rate_period and not node.remote)
    for node in nodes:
        for edge in node.out_edges:
            for port in edge.consumers:
                port.chained = (node.hop and port.node.hop and port.node.executor is node.executor
                                and node.on_caller)
    engine.stats_level = "full" if spec.watchdog_ms > 0 else spec.stats
    engine.scheduler.watchdog_ns = spec.watchdog_ms * 1_000_000
    engine.scheduler.timed = engine.stats_level == "full"
    if spec.watchdog_ms > 0 and spec.stats != "full":
        log.info("stats is overridden to full because watchdog_ms > 0")


def _check_static_types(plan: GraphPlan, nodes: list[Node]) -> None:
    """Both ends of an edge declare concrete types: they must agree (ADR #42, level 1)."""
    for name, ep in plan.edges.items():
        if ep.producer is None:
            continue
        producer = nodes[ep.producer]
        out_t = producer.out_types[ep.producer_port]
        if not out_t:
            continue
        for node_index, port_index in ep.consumers:
            consumer = nodes[node_index]
            in_t = consumer.in_types[port_index]
            if in_t and in_t != out_t:
                msg = (
                    f"{consumer.spec.path}.input_ports[{port_index}] (node `{consumer.name}`): type mismatch on "
                    f"edge `{name}`: {producer.spec.path} `{producer.name}` output port "
                    f"`{name}` declares {type_name(out_t)}, but node `{consumer.name}` input port "
                    f"`{consumer.inputs[port_index].name}` declares {type_name(in_t)}"
                )
                raise ConfigError(msg)


def _ensure_imported(targets: tuple[str, ...]) -> None:
    """Import a spec's kernel code; a no-op for what loading its YAML already imported."""
    from pathlib import Path

    from ..kernels._loading import import_target

    for i, target in enumerate(targets):
        import_target(target, base=Path.cwd(), where=f"imports[{i}]")
