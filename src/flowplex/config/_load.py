"""The loading pipeline: YAML text -> parsed -> schema-checked -> imports -> includes -> expanded -> planned.

The order matters for which error a broken file reports first, and follows lm-flow's: parse,
``include``, subgraph expansion, node checks, plan; flowplex's ``imports`` (the user's kernel
code) run right after the schema check, and ``kernel: module:Class`` references are imported
after the plan. The plan runs here too, with the document's line table, so that every error
(not only schema errors) carries ``file.yaml:LINE:``.
"""

from __future__ import annotations

import os
from pathlib import Path

from .._types import PathLike
from ..errors import ConfigError
from ..kernels._registry import registered_kernels
from ..spec._plan import FieldPath, GraphPlan, build_plan
from ..spec._specs import DEFAULT_EXECUTOR, GraphSpec, PortSpec, StatsLevel
from ._convert import convert_executor
from ._expand import expand_nodes
from ._imports import run_imports
from ._include import collect_subgraphs, read_text
from ._kernels import resolve_module_classes
from ._limits import Limits, resolve_limits
from ._marks import parse_document
from ._paths import Source, format_path
from ._ports import port_specs
from ._schema import GraphModel
from ._validation import check_number_references, validate_document

__all__ = ["load_plan", "load_plan_file", "load_yaml", "load_yaml_file"]


def load_yaml(text: str, *, source: str | None = None, limits: Limits | None = None) -> GraphSpec:
    """Parse and check a YAML graph description.

    Args:
        text: The YAML document.
        source: A name for the text (a file name) to prefix messages with ``source:LINE:``.
            It is only a label: ``include`` still needs ``load_yaml_file``, and relative
            ``imports`` paths are resolved against the current directory.
        limits: What the load may cost; ``None`` means ``Limits.from_env()`` (the defaults,
            unless ``FLOWPLEX_MAX_*`` variables are set).

    Returns:
        The subgraph-expanded graph; ``flowplex.graph`` can plan it without further errors.

    Raises:
        ConfigError: The first problem found, e.g.
            ``nodes[0]: unknown field `kernal`; did you mean `kernel`?``.

    >>> spec = load_yaml("nodes: [{kernel: Src, output_ports: [x]}]\\noutput_ports: [x]")
    >>> spec.nodes[0].name, spec.max_queue_size
    ('Src#0', 100)
    """
    return _load(text, source, None, None, limits).spec


def load_yaml_file(path: PathLike, *, limits: Limits | None = None) -> GraphSpec:
    """Read, parse and check a YAML graph file, resolving its ``include`` files.

    Its ``imports`` (and its included files') run while it loads, relative to the file naming them.

    Messages start with ``path:LINE:`` (``path`` as given). ``limits`` as for ``load_yaml``;
    they apply to each included file too (``max_document_bytes`` per file).

    Raises:
        ConfigError: The file cannot be read (or is not a regular file), or the first problem
            found in it or its includes.
    """
    return load_plan_file(path, limits=limits).spec


def load_plan_file(
    path: PathLike, *, default_executor: str | None = None, limits: Limits | None = None
) -> GraphPlan:
    """``load_yaml_file`` that also returns the plan it checked (no second planning pass).

    ``default_executor`` replaces the document's ``default_executor`` key when given.
    """
    bounds = resolve_limits(limits)
    name = os.fspath(path)
    text = read_text(name, f"graph file `{name}`", bounds.max_document_bytes)
    return _load(text, name, Path(name), default_executor, bounds)


def load_plan(
    text: str, *, source: str | None = None, default_executor: str | None = None, limits: Limits | None = None
) -> GraphPlan:
    """``load_yaml`` that also returns the plan it checked (no second planning pass).

    ``default_executor`` replaces the document's ``default_executor`` key when given.
    """
    return _load(text, source, None, default_executor, limits)


def _stats(model: GraphModel, source: Source) -> StatsLevel:
    if model.stats is not None and model.stats_timing is not None:
        msg = f"{source.prefix(('stats_timing',))}`stats` and legacy `stats_timing` cannot be used together"
        raise ConfigError(msg)
    if model.stats is not None:
        return model.stats
    return "full" if model.stats_timing else "basic"


def _graph_ports(decls: list[str], source: Source, kind: str) -> tuple[PortSpec, ...]:
    def error(i: int, message: str) -> ConfigError:
        return ConfigError(f"{source.prefix((kind, i))}{format_path((kind, i))}: {message}")

    return port_specs(decls, None, error)


def _unique(targets: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(targets))


def _load(
    text: str, name: str | None, file: Path | None, default_executor: str | None, limits: Limits | None
) -> GraphPlan:
    bounds = resolve_limits(limits)
    data, source = parse_document(text, name, bounds)
    model = validate_document(data, source)
    stats = _stats(model, source)
    # Relative import paths of YAML text without a file resolve against the current directory.
    imports = run_imports(model, source, file.parent if file is not None else Path.cwd())
    library = collect_subgraphs(model, source, file, bounds)
    check_number_references(data, executors=[ex.name for ex in model.executors], subgraphs=library.subgraphs,
                            kernels=registered_kernels(), source=source, check_default=not default_executor)
    executor = default_executor or model.default_executor or DEFAULT_EXECUTOR
    expansion = expand_nodes(model.nodes, source, library.subgraphs, executor, bounds)
    spec = GraphSpec(
        nodes=tuple(expansion.nodes),
        input_ports=_graph_ports(model.input_ports, source, "input_ports"),
        output_ports=_graph_ports(model.output_ports, source, "output_ports"),
        executors=tuple(convert_executor(ex) for ex in model.executors),
        max_queue_size=model.max_queue_size,
        max_queued_packets=model.max_queued_packets,
        watchdog_ms=model.watchdog_ms,
        buffer_pool_max_bytes=model.buffer_pool_max_bytes,
        stats=stats,
        trace_capacity=model.trace_capacity,
        strict_ports=model.strict_ports,
        control=model.control,
        default_executor=executor,
        source=name,
        imports=_unique((*imports, *library.imports)),
    )
    sites = expansion.sites

    def locate(node: int | None, field: FieldPath) -> str:
        if node is None:
            return source.prefix(field)
        return sites[node].locate(field)

    plan = build_plan(spec, locate=locate)
    resolve_module_classes(spec.nodes, sites)  # after the plan: a graph's structure is checked first
    return plan
