"""The YAML format as pydantic models: key names, value types and defaults, nothing more.

``extra="forbid"`` everywhere, so a misspelt key is an error, and ``strict=True`` so that
``max_queue_size: "5"`` or ``rate: true`` are rejected as lm-flow's parser rejects them.
Cross-field rules live in ``_convert`` / ``_expand`` (structure) and ``spec._plan`` (semantics).
These models never leave ``flowplex.config``; the engine only sees the frozen specs. The numeric
ranges are checked by the plan (``spec._ranges``); they appear here as ``maximum`` for editors.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field
from pydantic_core import PydanticCustomError

from ..spec import _ranges as ranges
from ..spec._text import control_char

__all__ = [
    "BooleanConditionModel",
    "ConditionModel",
    "EventConditionModel",
    "ExecutorModel",
    "GraphModel",
    "InputPolicyModel",
    "InputPortModel",
    "InputQueuesModel",
    "NodeModel",
    "PeriodicConditionModel",
    "PortQueueModel",
    "PredicateModel",
    "RouteRuleModel",
    "SubgraphModel",
    "TimestampConditionModel",
    "json_schema",
]


def _number_to_name(value: object) -> object:
    # serde_yaml reads `name: 5` as the string "5"; keep accepting it (but not `true`).
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return value


def _printable(value: str) -> str:
    # Names end up in messages, reports and terminal panes: a control character would act there.
    bad = control_char(value)
    if bad is not None:
        kind, template = "control_character", "contains the control character {char}"
        raise PydanticCustomError(kind, template, {"char": bad})
    return value


Name = Annotated[str, BeforeValidator(_number_to_name), AfterValidator(_printable)]
"""A name (node, port, executor...): a string without control characters; a bare YAML integer
is read as its digits."""

Count = Annotated[int, Field(ge=0)]
"""A non-negative integer (lm-flow's ``usize``)."""

MetadataOp = Literal["eq", "ne", "gt", "gte", "lt", "lte", "exists", "contains"]
TimestampOp = Literal["eq", "ne", "gt", "gte", "lt", "lte"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, populate_by_name=False)


class ExecutorModel(_Model):
    """One entry of ``executors``."""

    name: Name = Field(default="", description="Referenced by `node.executor`; `default` is reserved.")
    type: Literal["", "ThreadPoolExecutor", "DelegatingExecutor", "ProcessPoolExecutor", "RayExecutor"] = Field(
        default="", description='"" means ThreadPoolExecutor.'
    )
    num_threads: Count = Field(json_schema_extra={"maximum": ranges.MAX_WORKERS}, 
        default=0,
        description="Worker threads; 0 means 1. Must be 0 on DelegatingExecutor and ProcessPoolExecutor.",
    )
    num_processes: Count = Field(json_schema_extra={"maximum": ranges.MAX_WORKERS}, 
        default=0,
        description=(
            "ProcessPoolExecutor only: worker processes that run the kernels of its nodes (round "
            "robin; a node with max_in_flight N runs on N of them); 0 means one per CPU."
        ),
    )
    restart: Literal["never", "on_failure"] = Field(
        default="never",
        description=(
            "ProcessPoolExecutor only: `on_failure` replaces a worker process that dies (its nodes are "
            "hosted and opened again; the calls it was running fail as `on_error` says); `never` fails "
            "every later call of its nodes."
        ),
    )
    arena_bytes: Count = Field(json_schema_extra={"maximum": ranges.MAX_BYTES}, 
        default=0,
        description=(
            "ProcessPoolExecutor only: bytes of the shared memory that frames cross in; 0 means "
            "the default, 1 GiB (at most half of what /dev/shm has free). When it is full, "
            "producers wait for frames to be consumed."
        ),
    )
    address: str | None = Field(
        default=None,
        description=(
            "RayExecutor only: the Ray cluster; omitted: the Ray instance the program uses, else a new local "
            "one; `auto` (the cluster on this machine), `ray://host:10001` or `IP:port` of a head node."
        ),
    )
    num_cpus: Annotated[float, Field(ge=0)] | None = Field(
        default=None, description="RayExecutor only: CPUs each actor (node or replica) asks for; default 1."
    )
    num_gpus: Annotated[float, Field(ge=0)] | None = Field(
        default=None, description="RayExecutor only: GPUs each actor asks for; default 0."
    )
    memory: Count | None = Field(default=None, description="RayExecutor only: bytes of memory each actor asks for.")
    resources: dict[str, Annotated[float, Field(ge=0)]] | None = Field(
        default=None, description="RayExecutor only: custom resources each actor asks for, e.g. {camera: 1}."
    )
    max_batch: Annotated[int, Field(ge=1)] | None = Field(
        default=None,
        description=(
            "RayExecutor only: invocations per actor call, and calls of a node in flight (per replica); "
            "default 256. Lower it for large frames."
        ),
    )
    max_batch_delay_ms: Annotated[float, Field(ge=0)] | None = Field(
        default=None, description="RayExecutor only: how long a call waits to fill a batch; default 2."
    )
    max_restarts: Count | None = Field(
        default=None, description="RayExecutor only: how often Ray restarts a dead actor; default 0 (never)."
    )
    affinity: list[Count] = Field(
        json_schema_extra={"items": {"type": "integer", "minimum": 0, "maximum": ranges.MAX_CPU_ID}},
        default_factory=list, description="Worker i is pinned to affinity[i % len]."
    )
    priority: int = Field(
        default=0, ge=0, le=99, description="1..99: SCHED_FIFO priority (best effort); 0: normal."
    )


class InputPolicyModel(_Model):
    """A node's ``input_policy``."""

    type: Literal["sync", "immediate", "fixed_size", "sync_set", "batch"] = "sync"
    capacity: Count = Field(json_schema_extra={"maximum": ranges.MAX_PACKETS}, 
        default=0, description="fixed_size: packets kept per port; batch: tuples per call (>= 1)."
    )
    sets: list[list[Name]] = Field(
        default_factory=list, description="sync_set: a partition of the forward input ports into groups."
    )


class PortQueueModel(_Model):
    """A per-port override in ``input_queues.ports``."""

    packets: Count | None = Field(json_schema_extra={"maximum": ranges.MAX_PACKETS}, 
        default=None, description="Omitted: inherit `input_queues.packets`; 0: unlimited."
    )


class InputQueuesModel(_Model):
    """A node's lossless per-input capacities (``input_queues``)."""

    packets: Count = Field(json_schema_extra={"maximum": ranges.MAX_PACKETS}, 
        default=0, description="Default capacity of every forward input; 0 means unlimited."
    )
    ports: dict[Name, PortQueueModel] = Field(default_factory=dict)


class TimestampConditionModel(_Model):
    """The body of ``{timestamp: {op, value}}``."""

    op: TimestampOp
    value: int | None = None


class PredicateModel(_Model):
    """A route condition: exactly one of ``all``, ``any``, ``not``, ``timestamp``, ``metadata``."""

    model_config = ConfigDict(
        json_schema_extra={
            "oneOf": [
                {"required": ["all"]},
                {"required": ["any"]},
                {"required": ["not"]},
                {"required": ["timestamp"]},
                {"required": ["metadata", "op"]},
            ]
        }
    )

    all: list[PredicateModel] | None = None
    any: list[PredicateModel] | None = None
    not_: PredicateModel | None = Field(default=None, alias="not")
    timestamp: TimestampConditionModel | None = None
    metadata: Name | None = Field(default=None, description="The metadata key to test.")
    op: MetadataOp | None = None
    value: bool | int | float | str | None = None


class RouteRuleModel(_Model):
    """One entry of a route node's ``routes``."""

    to: Name = Field(description="One of the route node's output ports.")
    when: PredicateModel | None = None
    default: bool = False


def _port_short_form(value: object) -> object:
    # `input_ports: [cam]` is `[{name: cam}]`; a bare YAML integer is a name too (see `Name`).
    if isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)):
        return {"name": value}
    return value


class InputPortModel(_Model):
    """A node input port written in the long form: `{name: lidar, timeout_ms: 200}`.

    Only a node's `input_ports` take it (graph, subgraph and output ports are strings). An entry
    written as a plain string is the same as `{name: ...}`.
    """

    name: Name = Field(description="The declaration, as in the short form: `name`, `TAG:name` or `TAG:index:name`.")
    timeout_ms: float | None = Field(
        default=None,
        description=(
            "How long the node waits for this input while it aligns its inputs (input_policy `sync`, "
            "`sync_set` or `batch`) before it proceeds with the input empty; omitted: no timeout. "
            "Not on a back edge."
        ),
        json_schema_extra={"exclusiveMinimum": 0, "maximum": ranges.MAX_DELAY_MS},
    )


InputPort = Annotated[
    InputPortModel, BeforeValidator(_port_short_form, json_schema_input_type=Name | InputPortModel)
]


class PeriodicConditionModel(_Model):
    """The body of `{periodic: {period_ms: P}}`: the node runs at most once every P ms."""

    period_ms: float = Field(
        description="The period in milliseconds (> 0, at most one day).",
        json_schema_extra={"exclusiveMinimum": 0, "maximum": ranges.MAX_DELAY_MS},
    )


class BooleanConditionModel(_Model):
    """The body of `{boolean: {name: N, initial: true}}`: the node runs only while the condition is true."""

    name: Name = Field(
        description=("Switched at run time with `Graph.set_condition(name, bool)`: letters, digits, `_`, `-` "
                     "and `.`; a name is either a boolean or an event across the graph.")
    )
    initial: bool = Field(default=True, description="Whether the condition holds when the graph starts.")


class EventConditionModel(_Model):
    """The body of `{event: {name: N}}`: the node runs when `Graph.notify(name)` is called."""

    name: Name = Field(description="Letters, digits, `_`, `-` and `.`, as for `boolean`.")


class ConditionModel(_Model):
    """One entry of a node's `conditions`: a mapping with exactly one key, the kind of condition.

    All of a node's conditions must hold for it to run; a node has at most one of each kind.
    `count` is only for source-like nodes (without input ports), and `periodic` replaces `rate`
    (a node has one or the other).
    """

    model_config = ConfigDict(
        json_schema_extra={
            "oneOf": [{"required": ["periodic"]}, {"required": ["count"]}, {"required": ["boolean"]},
                      {"required": ["event"]}],
        }
    )

    periodic: PeriodicConditionModel | None = Field(default=None, description="Run at most once per period.")
    count: int | None = Field(
        default=None,
        description="Run this many times, then finish (close the outputs, as a source that ends does).",
        json_schema_extra={"minimum": 1},
    )
    boolean: BooleanConditionModel | None = Field(
        default=None, description="Run only while a named switch, set from Python at run time, is on."
    )
    event: EventConditionModel | None = Field(
        default=None, description="Run when something outside the graph notifies the name."
    )


class NodeModel(_Model):
    """One entry of ``nodes`` (a kernel node, a ``type: route`` node or a subgraph instance)."""

    name: Name = ""
    kernel: Name = Field(
        default="",
        description="A registered kernel name, or `module:Class` (a Kernel subclass, imported by module path).",
        examples=["ScaleKernel", "mypkg.vision:Features"],
    )
    type: Name = Field(default="", description="The name of a subgraph, or `route`.", examples=["route"])
    input_ports: list[InputPort] = Field(
        default_factory=list,
        description="`name`, `TAG:name` or `TAG:index:name`, or the long form `{name: ..., timeout_ms: 200}`.",
        examples=[["cam", {"name": "lidar", "timeout_ms": 200}]],
    )
    output_ports: list[Name] = Field(default_factory=list)
    conditions: list[ConditionModel] = Field(
        default_factory=list,
        description=("What must hold for the node to run, each `{kind: value}`: `periodic`, `count`, `boolean`, "
                     "`event`."),
        examples=[[{"periodic": {"period_ms": 100}}, {"count": 10}, {"boolean": {"name": "armed"}}]],
    )
    executor: Name = ""
    max_in_flight: Count = Field(
        json_schema_extra={"maximum": ranges.MAX_WORKERS}, default=0, description="Concurrent invocations; 0 means 1."
    )
    options: Any = None
    input_policy: InputPolicyModel = Field(default_factory=InputPolicyModel)
    input_queues: InputQueuesModel = Field(default_factory=InputQueuesModel)
    back_edges: list[Name] = Field(default_factory=list)
    on_error: Literal["", "abort", "skip"] = ""
    rate: float = Field(
        default=0.0,
        description="Source pacing in Hz; 0 means unpaced, else at least 1e-6.",
        json_schema_extra={"minimum": 0, "maximum": ranges.RATE_MAX_HZ},
    )
    mode: Literal["first", "all"] | None = Field(default=None, description="type: route only.")
    unmatched: Name | None = Field(
        default=None, description="type: route only: `drop`, `error` or an output port."
    )
    routes: list[RouteRuleModel] | None = Field(default=None, description="type: route only.")


class SubgraphModel(_Model):
    """One entry of ``subgraphs``."""

    nodes: list[NodeModel] = Field(default_factory=list)
    input_ports: list[Name] = Field(default_factory=list)
    output_ports: list[Name] = Field(default_factory=list)


class GraphModel(_Model):
    """A whole YAML document."""

    include: list[Name] = Field(
        default_factory=list, description="Subgraph library files (file loading only)."
    )
    imports: list[Annotated[str, Field(min_length=1), AfterValidator(_printable)]] = Field(
        default_factory=list,
        description=(
            "Kernel code to import before kernels are resolved: module names (from sys.path) or "
            "paths to .py files, relative to this file."
        ),
        examples=[["mypkg.kernels", "../kernels/my_kernels.py"]],
    )
    executors: list[ExecutorModel] = Field(default_factory=list)
    nodes: list[NodeModel] = Field(default_factory=list)
    subgraphs: dict[Name, SubgraphModel] = Field(default_factory=dict)
    input_ports: list[Name] = Field(default_factory=list)
    output_ports: list[Name] = Field(default_factory=list)
    default_executor: Name = Field(
        default="",
        description=(
            "The executor of every node that names none (`flowplex run --default-executor` overrides "
            'it); "" means `default`, the implicit executor.'
        ),
    )
    max_queue_size: Count = Field(
        json_schema_extra={"maximum": ranges.MAX_PACKETS}, default=100,
        description="Soft backlog warning threshold; 0 disables.",
    )
    max_queued_packets: Count | None = Field(json_schema_extra={"maximum": ranges.MAX_PACKETS}, 
        default=None, description="Global packet watermark; 0 means unlimited."
    )
    watchdog_ms: Count = Field(default=0, json_schema_extra={"maximum": ranges.MAX_DELAY_MS})
    buffer_pool_max_bytes: Count = Field(default=0, json_schema_extra={"maximum": ranges.MAX_BYTES})
    stats: Literal["off", "basic", "full"] | None = None
    stats_timing: bool | None = Field(default=None, description="Legacy: true means `stats: full`.")
    trace_capacity: Count = Field(json_schema_extra={"maximum": ranges.MAX_TRACE_CAPACITY}, 
        default=0, description="Execution trace ring size (lm-lmflow >= 0.3.3); 0 is off."
    )
    strict_ports: bool = Field(
        default=False,
        description="Make emit/forward to an output index a node lacks an error (default: ignored and counted).",
    )
    control: bool | Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")] | None = Field(
        default=None,
        description=("Serve a live control socket while the graph runs (`flowplex ps/top/echo/stop`): a name, or "
                     "true for the file's stem. `flowplex run` serves one unless this is false or --no-control."),
    )


def json_schema() -> dict[str, Any]:
    """The JSON Schema (2020-12) of the YAML graph format, for editors.

    Unlike lm-flow's schema file it includes route nodes (``type: route``, ``mode``,
    ``unmatched``, ``routes``).
    """
    schema = GraphModel.model_json_schema(by_alias=True)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "flowplex graph",
        **schema,
    }
