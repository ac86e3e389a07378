"""Subgraph expansion: ``type: Name`` nodes become the subgraph's nodes, namespaced.

Pure textual expansion, as in lm-flow: boundary ports map by position (subgraph
``input_ports[i]`` is instance ``input_ports[i]``; tags of inner declarations are kept), every
other inner name gets the instance prefix (``d/mid``), inner nodes are called ``d/a`` (unnamed
ones ``d/{kernel or type}``), nesting accumulates (``d/e/a``). Port names, ``back_edges``,
``input_policy.sets``, ``input_queues.ports`` keys and route ``to``/``unmatched`` are remapped.

Expansion is bounded by ``Limits``: instances nest at most ``max_depth`` deep, and the nodes
plus instances it produces are at most ``max_nodes`` (a few kilobytes of nested instances would
otherwise multiply into millions of nodes); they are counted over the library before anything
is built, and again as they are built.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from .._suggest import did_you_mean
from ..errors import ConfigError
from ..spec._specs import DEFAULT_EXECUTOR, NodeSpec
from ._convert import NodeSite, Rename, classify_node, convert_inputs, convert_node, convert_ports, default_name
from ._include import SubgraphEntry
from ._limits import DEFAULT_LIMITS, Limits, exceeded
from ._paths import Source, YamlPath, format_path
from ._ports import PortDeclError, parse_port_decl, port_specs
from ._schema import NodeModel, SubgraphModel

__all__ = ["Expansion", "expand_nodes"]

_INSTANCE_FIELDS = frozenset({"name", "type", "input_ports", "output_ports"})


@dataclass(slots=True)
class Expansion:
    """The flat node list and, in step, where each node was written."""

    nodes: list[NodeSpec] = field(default_factory=list)
    sites: list[NodeSite] = field(default_factory=list)


def expand_nodes(nodes: Sequence[NodeModel], source: Source, library: dict[str, SubgraphEntry],
                 executor: str = DEFAULT_EXECUTOR, limits: Limits = DEFAULT_LIMITS) -> Expansion:
    """Convert the top-level nodes, expanding subgraph instances recursively.

    ``executor`` is where the nodes that name none run (inner nodes of subgraphs too).

    Raises:
        ConfigError: An unknown or recursive subgraph, a boundary mismatch, any node error, or
            a limit (``max_depth``, ``max_nodes``).
    """
    out = Expansion()
    expander = _Expander(library, out, executor, limits)
    sizes = _Sizes(library, limits)
    planned = 0
    for i, model in enumerate(nodes):
        site = NodeSite(source, ("nodes", i), default_name(model, i))
        planned += sizes.of(model, 0)
        if planned > limits.max_nodes:  # refused before building any of it
            raise site.error((), _too_many(limits.max_nodes))
        expander.node(model, site, _identity, ())
    return out


def _too_many(limit: int) -> str:
    return f"the graph expands to more than {limit} nodes and subgraph instances {exceeded('max_nodes', limit)}"


def _is_instance(model: NodeModel) -> bool:
    return bool(model.type) and model.type != "route" and not model.kernel


class _Sizes:
    """How many nodes and instances a node expands to, counted over the subgraph library (memoised).

    Counting first refuses a subgraph bomb in microseconds instead of after building up to
    ``max_nodes`` nodes. Broken cases (unknown or recursive subgraphs, nesting past
    ``max_depth``) count as 1 here and are reported by the expansion itself, which also counts.
    """

    def __init__(self, library: dict[str, SubgraphEntry], limits: Limits) -> None:
        self.library = library
        self.limits = limits
        self.memo: dict[str, int] = {}
        self.open: set[str] = set()

    def of(self, model: NodeModel, depth: int) -> int:
        if not _is_instance(model):
            return 1
        name = model.type
        known = self.memo.get(name)
        if known is not None:
            return 1 + known
        entry = self.library.get(name)
        if entry is None or name in self.open or depth >= self.limits.max_depth:
            return 1
        self.open.add(name)
        total = 0
        for inner in entry.model.nodes:
            total += self.of(inner, depth + 1)
            if total > self.limits.max_nodes:
                break  # enough to refuse; keeps the numbers small
        self.open.discard(name)
        self.memo[name] = total
        return 1 + total


def _identity(name: str) -> str:
    return name


class _Expander:
    def __init__(self, library: dict[str, SubgraphEntry], out: Expansion, executor: str, limits: Limits) -> None:
        self.library = library
        self.out = out
        self.executor = executor
        self.limits = limits
        self.instances: dict[str, NodeSite] = {}
        self.count = 0
        """Nodes and instances expanded so far."""

    def node(self, model: NodeModel, site: NodeSite, rename: Rename, stack: tuple[str, ...]) -> None:
        self.count += 1
        limit = self.limits.max_nodes
        if self.count > limit:
            raise site.error((), _too_many(limit))
        kind = classify_node(model, site)
        if kind != "instance":
            self.out.nodes.append(convert_node(model, site, kind, rename, self.executor))
            self.out.sites.append(site)
            return
        entry = self.library.get(model.type)
        if entry is None:
            hint = did_you_mean(model.type, self.library)
            raise site.error(("type",), f"unknown subgraph `{model.type}`{hint}")
        if model.type in stack:
            chain = " -> ".join([*stack[stack.index(model.type) :], model.type])
            raise site.error(("type",), f"subgraph `{model.type}` is recursive (expansion cycle: {chain})")
        depth = self.limits.max_depth
        if len(stack) >= depth:
            msg = f"subgraph instances nested more than {depth} deep {exceeded('max_depth', depth)}"
            raise site.error(("type",), msg)
        for name in sorted(model.model_fields_set - _INSTANCE_FIELDS):
            key = NodeModel.model_fields[name].alias or name
            msg = (
                f"`{key}` does not apply to a subgraph instance "
                "(only `name`, `type`, `input_ports` and `output_ports` do; set it on the inner nodes)"
            )
            raise site.error((key,), msg)
        first = self.instances.setdefault(site.name, site)
        if first is not site:
            msg = (
                f"subgraph instance `{site.name}` is defined more than once (first at {first.spec_path}); "
                "node names must be unique (an unnamed instance is named after its subgraph: "
                "give it a `name`)"
            )
            raise site.error(("name",), msg)
        mapping = self.boundary(model, site, entry, rename)
        prefix = f"{site.name}/"

        def inner_rename(name: str) -> str:
            return mapping.get(name, prefix + name)

        for j, inner in enumerate(entry.model.nodes):
            inner_site = NodeSite(
                entry.source,
                ("subgraphs", model.type, "nodes", j),
                prefix + (inner.name or inner.kernel or inner.type),
                expanded=True,
            )
            self.node(inner, inner_site, inner_rename, (*stack, model.type))

    def boundary(
        self, model: NodeModel, site: NodeSite, entry: SubgraphEntry, rename: Rename
    ) -> dict[str, str]:
        """Map the subgraph's boundary port names to the instance's (outer) edge names."""
        at: YamlPath = ("subgraphs", model.type)
        inner_in = _boundary_names(entry, (*at, "input_ports"), entry.model.input_ports, "input")
        inner_out = _boundary_names(entry, (*at, "output_ports"), entry.model.output_ports, "output")
        for j, name in enumerate(inner_out):
            if name in inner_in:
                msg = (
                    f"port `{name}` is also a subgraph input; "
                    "a subgraph cannot pass an input straight through"
                )
                raise _error(entry.source, (*at, "output_ports", j), msg)
        produced = _inner_outputs(entry.model)
        for j, name in enumerate(inner_out):
            if name not in produced:
                hint = did_you_mean(name, produced)
                msg = f"subgraph output `{name}` has no producer inside the subgraph{hint}"
                raise _error(entry.source, (*at, "output_ports", j), msg)
        mapping: dict[str, str] = {}
        for i, port in enumerate(model.input_ports):
            if port.timeout_ms is not None:
                msg = ("`timeout_ms` does not apply to a subgraph instance's port (the instance does not wait; "
                       "set it on the input port of the inner node that consumes it)")
                raise site.error(("input_ports", i, "timeout_ms"), msg)
        ports = {"input_ports": convert_inputs(model.input_ports, site, rename),
                 "output_ports": convert_ports(model.output_ports, site, "output_ports", rename)}
        for kind, inner in (("input_ports", inner_in), ("output_ports", inner_out)):
            outer = [p.name for p in ports[kind]]
            for k, name in enumerate(outer):
                if name in outer[:k]:
                    raise site.error((kind, k), f"port `{name}` is declared more than once in `{kind}`")
            if len(outer) != len(inner):
                what = "input" if kind == "input_ports" else "output"
                msg = (
                    f"subgraph `{model.type}` instance provides {len(outer)} {what} port(s) "
                    f"but the subgraph declares {len(inner)}"
                )
                raise site.error((kind,), msg)
            mapping.update(zip(inner, outer, strict=True))
        return mapping


def _error(source: Source, path: YamlPath, message: str) -> ConfigError:
    return ConfigError(f"{source.prefix(path)}{format_path(path)}: {message}")


def _boundary_names(entry: SubgraphEntry, at: YamlPath, decls: list[str], what: str) -> list[str]:
    ports = port_specs(decls, None, lambda i, message: _error(entry.source, (*at, i), message))
    names: list[str] = []
    for i, port in enumerate(ports):
        if port.name in names:
            raise _error(
                entry.source, (*at, i), f"subgraph {what} port `{port.name}` is declared more than once"
            )
        names.append(port.name)
    return names


def _inner_outputs(sub: SubgraphModel) -> list[str]:
    """Output names of the subgraph's nodes as written (malformed ones are reported later)."""
    names: list[str] = []
    for node in sub.nodes:
        for decl in node.output_ports:
            try:
                names.append(parse_port_decl(decl)[2])
            except PortDeclError:
                continue
    return names
