"""Schema models -> frozen specs, for one node or executor at a time.

Structural rules that need the YAML shape (``kernel`` vs ``type``, route fields on other nodes,
predicate shape, port declaration syntax) are checked here; semantic rules are left to the plan.
Defaults are normalised the lm-flow way: ``max_in_flight: 0`` is 1, ``num_threads: 0`` is 1,
``executor: ""`` is ``default``, ``on_error: ""`` is ``abort``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Literal

from .._types import OptionValue
from ..errors import ConfigError
from ..spec._conditions import timeout_problem
from ..spec._specs import (
    CONDITION_KINDS,
    DEFAULT_EXECUTOR,
    ROUTE_KERNEL,
    ConditionSpec,
    ExecutorSpec,
    InputPolicySpec,
    InputQueuesSpec,
    NodeSpec,
    PortSpec,
    PredicateSpec,
    RaySpec,
    RouteRuleSpec,
    RouteSpec,
)
from ._paths import Source, YamlPath, format_path, node_context
from ._ports import port_specs
from ._schema import ConditionModel, ExecutorModel, InputPortModel, NodeModel, PredicateModel, RouteRuleModel
from ._validation import describe_value

__all__ = [
    "NodeKind",
    "NodeSite",
    "Rename",
    "classify_node",
    "convert_conditions",
    "convert_executor",
    "convert_inputs",
    "convert_node",
    "default_name",
]

Rename = Callable[[str], str]
"""Maps a port name as written to its edge name (identity at top level; namespacing in subgraphs)."""

NodeKind = Literal["kernel", "route", "instance"]


@dataclass(frozen=True, slots=True)
class NodeSite:
    """Where a node was written and what it is called, for messages and line numbers."""

    source: Source
    yaml_path: YamlPath
    """``("nodes", 3)`` or ``("subgraphs", "Foo", "nodes", 1)``."""
    name: str
    expanded: bool = False

    @property
    def spec_path(self) -> str:
        """``NodeSpec.path``: ``nodes[3]`` or ``subgraphs.Foo.nodes[1] (expanded node `d/b`)``."""
        if self.expanded:
            return f"{format_path(self.yaml_path)}{node_context(self.name, expanded=True)}"
        return format_path(self.yaml_path)

    def locate(self, field: YamlPath) -> str:
        """The ``file:LINE: `` prefix for ``field`` of this node."""
        return self.source.prefix((*self.yaml_path, *field))

    def where(self, field: YamlPath) -> str:
        """``file:LINE: nodes[3].field (node `a`)``: the prefix of a message about ``field``."""
        return self.locate(field) + format_path((*self.yaml_path, *field)) + node_context(self.name,
                                                                                          expanded=self.expanded)

    def error(self, field: YamlPath, message: str) -> ConfigError:
        """``file:LINE: nodes[3].field (node `a`): message``."""
        return ConfigError(f"{self.where(field)}: {message}")


def default_name(model: NodeModel, index: int) -> str:
    """A top-level node's name: as written, else ``{kernel}#{index}`` / ``route#{index}``.

    An unnamed subgraph instance is called after its subgraph (lm-flow's rule).
    """
    if model.name:
        return model.name
    if model.type == "route":
        return f"route#{index}"
    if model.kernel:
        return f"{model.kernel}#{index}"
    return model.type


def classify_node(model: NodeModel, site: NodeSite) -> NodeKind:
    """Whether a node runs a kernel, routes, or instantiates a subgraph.

    Raises:
        ConfigError: Neither or both of ``kernel``/``type``; ``kernel`` on a route node; route
            fields on a node that is not a route.
    """
    if model.type == "route":
        if model.kernel:
            raise site.error(("kernel",), "route node must not declare `kernel` (the engine provides it)")
        return "route"
    if model.mode not in (None, "first") or model.unmatched not in (None, "drop") or model.routes:
        raise site.error((), "route fields are only valid when `type: route`")
    if model.kernel and model.type:
        raise site.error((), "node has both `kernel` and `type` -- only one is allowed")
    if model.kernel:
        return "kernel"
    if model.type:
        return "instance"
    raise site.error((), "node has neither `kernel` nor `type` -- one is required")


_RAY_FIELDS = ("address", "num_cpus", "num_gpus", "memory", "resources", "max_batch", "max_batch_delay_ms",
               "max_restarts")


def _ray_spec(model: ExecutorModel) -> tuple[RaySpec, tuple[str, ...]]:
    """The Ray settings of an entry, and which of them it wrote."""
    written = tuple(name for name in _RAY_FIELDS if getattr(model, name) is not None)
    default = RaySpec()
    spec = RaySpec(
        address=model.address if model.address is not None else default.address,
        num_cpus=model.num_cpus if model.num_cpus is not None else default.num_cpus,
        num_gpus=model.num_gpus if model.num_gpus is not None else default.num_gpus,
        memory=model.memory if model.memory is not None else default.memory,
        resources=tuple(sorted((model.resources or {}).items())),
        max_batch=model.max_batch if model.max_batch is not None else default.max_batch,
        max_batch_delay_ms=(model.max_batch_delay_ms if model.max_batch_delay_ms is not None
                            else default.max_batch_delay_ms),
        max_restarts=model.max_restarts if model.max_restarts is not None else default.max_restarts,
    )
    return spec, written


def convert_executor(model: ExecutorModel) -> ExecutorSpec:
    """An ``executors[]`` entry as a spec (``type: ""`` is a pool; a pool's 0 threads is 1)."""
    ray, ray_fields = _ray_spec(model)
    if model.type in ("DelegatingExecutor", "ProcessPoolExecutor", "RayExecutor"):
        # Kept as written so the plan can reject thread settings on an executor without threads.
        return ExecutorSpec(
            name=model.name,
            type=model.type,
            num_threads=model.num_threads,
            affinity=tuple(model.affinity),
            priority=model.priority,
            num_processes=model.num_processes,
            restart=model.restart,
            arena_bytes=model.arena_bytes,
            ray=ray,
            ray_fields=ray_fields,
        )
    return ExecutorSpec(
        name=model.name,
        type="ThreadPoolExecutor",
        num_threads=model.num_threads or 1,
        affinity=tuple(model.affinity),
        priority=model.priority,
        num_processes=model.num_processes,
        restart=model.restart,
        arena_bytes=model.arena_bytes,
        ray=ray,
        ray_fields=ray_fields,
    )


def _identity(name: str) -> str:
    return name


def convert_ports(decls: list[str], site: NodeSite, kind: str, rename: Rename) -> tuple[PortSpec, ...]:
    """Parse a node's ``input_ports`` or ``output_ports``."""
    return port_specs(decls, rename, lambda i, message: site.error((kind, i), message))


def convert_inputs(models: list[InputPortModel], site: NodeSite, rename: Rename) -> tuple[PortSpec, ...]:
    """Parse a node's ``input_ports``: short-form names and long-form ``{name, timeout_ms}`` mappings.

    A written ``timeout_ms`` must be a valid duration here, where 0 can still be told from "not
    written"; where it may be used (policy, back edges) is the plan's rule.
    """
    ports = port_specs([m.name for m in models], rename, lambda i, message: site.error(("input_ports", i), message))
    out: list[PortSpec] = []
    for i, (port, model) in enumerate(zip(ports, models, strict=True)):
        if model.timeout_ms is None:
            out.append(port)
            continue
        problem = timeout_problem(model.timeout_ms)
        if problem is not None:
            raise site.error(("input_ports", i, "timeout_ms"), problem)
        out.append(replace(port, timeout_ms=float(model.timeout_ms)))
    return tuple(out)


def convert_conditions(models: list[ConditionModel], site: NodeSite) -> tuple[ConditionSpec, ...]:
    """A node's ``conditions``: each entry a mapping with exactly one key, the kind.

    Values are checked by the plan (``spec._conditions``), as for conditions built in Python.
    """
    out: list[ConditionSpec] = []
    for k, model in enumerate(models):
        at: YamlPath = ("conditions", k)
        kinds = [kind for kind in CONDITION_KINDS if getattr(model, kind) is not None]
        if len(kinds) != 1:
            found = f", got {' and '.join(f'`{kind}`' for kind in kinds)}" if kinds else ""
            expected = ", ".join(f"`{kind}`" for kind in CONDITION_KINDS)
            raise site.error(at, f"a condition is a mapping with exactly one key, one of {expected}{found}")
        where = format_path((*site.yaml_path, *at))
        if model.periodic is not None:
            out.append(ConditionSpec("periodic", where, period_s=model.periodic.period_ms / 1e3))
        elif model.count is not None:
            out.append(ConditionSpec("count", where, count=model.count))
        elif model.boolean is not None:
            out.append(ConditionSpec("boolean", where, name=model.boolean.name, initial=model.boolean.initial))
        elif model.event is not None:
            out.append(ConditionSpec("event", where, name=model.event.name))
    return tuple(out)


def convert_node(model: NodeModel, site: NodeSite, kind: NodeKind, rename: Rename = _identity,
                 executor: str = DEFAULT_EXECUTOR) -> NodeSpec:
    """A kernel or route node as a spec; port-valued fields go through ``rename``.

    ``executor`` is where a node that names none runs (the document's ``default_executor``).
    """
    policy = model.input_policy
    queues = model.input_queues
    return NodeSpec(
        name=site.name,
        kernel=ROUTE_KERNEL if kind == "route" else model.kernel,
        path=site.spec_path,
        input_ports=convert_inputs(model.input_ports, site, rename),
        output_ports=convert_ports(model.output_ports, site, "output_ports", rename),
        executor=model.executor or executor,
        max_in_flight=model.max_in_flight or 1,
        options=_options(model.options, site, ("options",)),
        input_policy=InputPolicySpec(
            type=policy.type,
            capacity=policy.capacity,
            sets=tuple(tuple(rename(p) for p in group) for group in policy.sets),
        ),
        input_queues=InputQueuesSpec(
            packets=queues.packets,
            ports=tuple((rename(port), q.packets) for port, q in queues.ports.items()),
        ),
        back_edges=tuple(rename(b) for b in model.back_edges),
        on_error="skip" if model.on_error == "skip" else "abort",
        rate=model.rate,
        route=_route(model, site, rename) if kind == "route" else None,
        conditions=convert_conditions(model.conditions, site),
    )


def _route(model: NodeModel, site: NodeSite, rename: Rename) -> RouteSpec:
    unmatched = model.unmatched if model.unmatched is not None else "drop"
    return RouteSpec(
        mode=model.mode or "first",
        unmatched=unmatched if unmatched in ("drop", "error") else rename(unmatched),
        rules=tuple(_rule(rule, site, ("routes", k), rename) for k, rule in enumerate(model.routes or ())),
    )


def _rule(model: RouteRuleModel, site: NodeSite, at: YamlPath, rename: Rename) -> RouteRuleSpec:
    when = None if model.when is None else _predicate(model.when, site, (*at, "when"))
    return RouteRuleSpec(to=rename(model.to), when=when, default=model.default)


def _predicate(model: PredicateModel, site: NodeSite, at: YamlPath) -> PredicateSpec:
    kinds = [
        kind
        for kind, value in (
            ("all", model.all),
            ("any", model.any),
            ("not", model.not_),
            ("timestamp", model.timestamp),
            ("metadata", model.metadata),
        )
        if value is not None
    ]
    if len(kinds) != 1:
        found = f", got {' and '.join(f'`{k}`' for k in kinds)}" if kinds else ""
        msg = f"a condition needs exactly one of `all`, `any`, `not`, `timestamp`, `metadata`{found}"
        raise site.error(at, msg)
    kind = kinds[0]
    if kind != "metadata" and (model.op is not None or model.value is not None):
        msg = (
            "`op` and `value` belong to a `metadata` condition "
            "(a timestamp condition is written `{timestamp: {op: gt, value: 10}}`)"
        )
        raise site.error(at, msg)
    if model.all is not None:
        return PredicateSpec(kind="all", children=_children(model.all, site, (*at, "all")))
    if model.any is not None:
        return PredicateSpec(kind="any", children=_children(model.any, site, (*at, "any")))
    if model.not_ is not None:
        return PredicateSpec(kind="not", children=(_predicate(model.not_, site, (*at, "not")),))
    if model.timestamp is not None:
        return PredicateSpec(kind="timestamp", op=model.timestamp.op, value=model.timestamp.value)
    if model.op is None:
        raise site.error(at, "metadata condition requires `op`")
    return PredicateSpec(kind="metadata", key=model.metadata or "", op=model.op, value=model.value)


def _children(models: list[PredicateModel], site: NodeSite, at: YamlPath) -> tuple[PredicateSpec, ...]:
    return tuple(_predicate(child, site, (*at, i)) for i, child in enumerate(models))


def _options(value: object, site: NodeSite, at: YamlPath) -> OptionValue:
    """Check that ``options`` holds only YAML scalars, lists and string-keyed mappings."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, list):
        return [_options(item, site, (*at, i)) for i, item in enumerate(value)]
    if isinstance(value, dict):
        out: dict[str, OptionValue] = {}
        for key, item in value.items():
            if isinstance(key, bool) or not isinstance(key, str | int):
                raise site.error(at, f"option keys must be strings, got {describe_value(key)}")
            out[str(key)] = _options(item, site, (*at, str(key)))
        return out
    raise site.error(at, f"unsupported option value ({describe_value(value)}); use a string, number or list")
