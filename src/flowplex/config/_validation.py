"""Turn a pydantic ``ValidationError`` into one readable ``ConfigError`` line.

The first problem wins. Its pydantic ``loc`` is walked against the model classes to find the YAML
path, the model that owns the field (for the list of allowed keys) and the node it belongs to,
giving messages like ``g.yaml:7: nodes[0] (node `a`): unknown field `kernal`; did you mean `kernel`?``.

:func:`check_number_references` runs after it: a name written as a bare number (``executor:
5``) is read as its digits, as lm-flow's YAML reader does, but one that names nothing is reported
as the type mistake it is (``expected an executor name (a string), got integer `5```), not as
an undefined executor named ``5``.
"""

from __future__ import annotations

import re
import types
import typing
from collections.abc import Collection, Iterator, Mapping
from typing import Any, Final, Literal, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from .._suggest import did_you_mean
from ..errors import ConfigError
from ..spec._text import escape_controls
from ._paths import Source, YamlPath, format_path, node_context
from ._schema import (
    ConditionModel,
    ExecutorModel,
    GraphModel,
    InputPolicyModel,
    NodeModel,
    PredicateModel,
    SubgraphModel,
    TimestampConditionModel,
)

__all__ = ["check_number_references", "describe_value", "validate_document"]

_REMOVED: Final[dict[tuple[type[BaseModel], str], str]] = {
    (GraphModel, "max_queued_bytes"): "the byte watermark was removed; use `max_queued_packets`",
    (NodeModel, "input_queue_capacity"): "a legacy key; use `input_queues: {packets: N}`",
}
_BYTES_HINT: Final = "byte capacities are not supported; use `packets`"



_FLOAT_FIELDS = frozenset({"num_cpus", "num_gpus", "max_batch_delay_ms"})
"""Fields that take any number (a Ray executor's requests), not only integers."""

_SHOWN_CHARS: Final = 60
"""Longer strings are cut in messages (a whole non-YAML file can parse as one string)."""


def describe_value(value: object) -> str:
    """How a YAML value is named in messages: ``integer `5```, ``a list``...

    Strings are cut to ``_SHOWN_CHARS`` and their control characters escaped, so a message stays one line.
    """
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"boolean `{str(value).lower()}`"
    if isinstance(value, int):
        return f"integer `{value}`"
    if isinstance(value, float):
        return f"float `{value}`"
    if isinstance(value, str):
        shown = value if len(value) <= _SHOWN_CHARS else value[:_SHOWN_CHARS] + "..."
        return f'string "{escape_controls(shown)}"'
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return f"a {type(value).__name__}"


def _unwrap(tp: Any) -> Any:
    """Strip ``Annotated`` and ``X | None`` wrappers."""
    while True:
        origin = get_origin(tp)
        if origin is typing.Annotated:
            tp = get_args(tp)[0]
        elif origin in (Union, types.UnionType):
            members = [a for a in get_args(tp) if a is not type(None)]
            if len(members) != 1:
                return tp
            tp = members[0]
        else:
            return tp


def _aliases(model: type[BaseModel]) -> dict[str, str]:
    return {(info.alias or name): name for name, info in model.model_fields.items()}


class _Located:
    """What a pydantic ``loc`` points at."""

    def __init__(self, loc: tuple[str | int, ...]) -> None:
        self.path: list[str | int] = []
        self.owner: type[BaseModel] | None = None
        """The model whose field (or unknown key) the last path element is."""
        self.field: str | None = None
        """The YAML key of that field."""
        self.union = False
        """The error is about a value that may have several types."""
        tp: Any = GraphModel
        for part in loc:
            if part == "[key]":  # pydantic's marker for an error in a mapping key, not a YAML key
                break
            tp = _unwrap(tp)
            if isinstance(tp, type) and issubclass(tp, BaseModel):
                self.owner, self.field = tp, str(part)
                self.path.append(str(part))  # a YAML key, even when written as a number
                name = _aliases(tp).get(str(part))
                tp = None if name is None else tp.model_fields[name].annotation
            elif get_origin(tp) is list:
                self.path.append(part)
                tp = get_args(tp)[0]
            elif get_origin(tp) is dict:
                self.path.append(part)
                tp = get_args(tp)[1]
            elif get_origin(tp) in (Union, types.UnionType):
                self.union = True  # the rest of loc names union members, not YAML keys
                break
            else:
                self.path.append(part)
                tp = None


def _node_name(data: object, path: YamlPath) -> str:
    """The name of the node ``path`` is inside (``nodes[i]`` or ``subgraphs.X.nodes[i]``), if any."""
    if len(path) >= 2 and path[0] == "nodes" and isinstance(path[1], int):
        node, index, top = _get(data, path[:2]), path[1], True
    elif len(path) >= 4 and path[0] == "subgraphs" and path[2] == "nodes" and isinstance(path[3], int):
        node, index, top = _get(data, path[:4]), path[3], False
    else:
        return ""
    if not isinstance(node, Mapping):
        return ""
    name = node.get("name")
    if isinstance(name, str | int) and not isinstance(name, bool) and str(name):
        return str(name)
    if not top:
        return ""
    kind, kernel = node.get("type"), node.get("kernel")
    if kind == "route":
        return f"route#{index}"
    if isinstance(kernel, str) and kernel:
        return f"{kernel}#{index}"
    return kind if isinstance(kind, str) else ""


def _get(data: object, path: YamlPath) -> object:
    for part in path:
        if isinstance(data, Mapping):
            data = data.get(part)
        elif isinstance(data, list) and isinstance(part, int) and 0 <= part < len(data):
            data = data[part]
        else:
            return None
    return data


def _literal_choices(owner: type[BaseModel] | None, field: str | None) -> list[str]:
    if owner is None or field is None:
        return []
    name = _aliases(owner).get(field)
    if name is None:
        return []
    tp = _unwrap(owner.model_fields[name].annotation)
    if get_origin(tp) is Literal:
        return [str(a) for a in get_args(tp) if a]
    return []


def _literal_message(where: _Located, value: object, expected: str) -> str:
    shown = value if isinstance(value, str) else describe_value(value)
    choices = _literal_choices(where.owner, where.field)
    hint = did_you_mean(value, choices) if isinstance(value, str) else ""
    key = (where.owner, where.field)
    if key == (ExecutorModel, "type"):
        return (f"unknown executor type `{shown}`{hint} (supported: ThreadPoolExecutor, DelegatingExecutor, "
                "ProcessPoolExecutor, RayExecutor)")
    if key == (InputPolicyModel, "type"):
        return (
            f"unknown input_policy `{shown}`{hint} (valid: sync / immediate / fixed_size / sync_set / batch)"
        )
    if key == (NodeModel, "on_error"):
        return f'unknown on_error `{shown}`{hint} (expected "abort" or "skip")'
    if key == (GraphModel, "stats"):
        return f"unknown stats level `{shown}`{hint} (expected `off`, `basic` or `full`)"
    if key == (NodeModel, "mode"):
        return f"unknown route mode `{shown}`{hint} (expected `first` or `all`)"
    if key == (TimestampConditionModel, "op") and value in ("exists", "contains"):
        return f"timestamp condition does not support `{value}`"
    if key in ((PredicateModel, "op"), (TimestampConditionModel, "op")):
        return f"unknown operator `{shown}`{hint} (valid: {', '.join(choices)})"
    return f"unknown value `{shown}`{hint} (expected {expected})"


_FIELD_LIKE: Final = re.compile(r"[A-Za-z0-9_. -]{1,40}")
"""Keys quoted in "unknown field" messages; others (a line of a file that is not YAML) are not."""


def _unknown_field(where: _Located, key: str) -> str:
    if _FIELD_LIKE.fullmatch(key) is None:
        return f"unknown field (a {len(key)}-character key that is not a field name)"
    owner = where.owner
    if owner is None:
        return f"unknown field `{key}`"
    if owner is ConditionModel:
        kinds = list(_aliases(owner))
        expected = ", ".join(f"`{k}`" for k in kinds)
        return f"unknown condition `{key}`{did_you_mean(key, kinds)} (expected one of {expected})"
    removed = _REMOVED.get((owner, key))
    if removed is None and key == "bytes" and owner.__name__ in ("InputQueuesModel", "PortQueueModel"):
        removed = _BYTES_HINT
    if removed is not None:
        return f"unknown field `{key}` ({removed})"
    allowed = list(_aliases(owner))
    hint = did_you_mean(key, allowed)
    if hint:
        return f"unknown field `{key}`{hint}"
    return f"unknown field `{key}`, expected one of {', '.join(f'`{a}`' for a in allowed)}"


def _problem(error: ErrorDetails, where: _Located) -> str:
    kind = error["type"]
    value = error.get("input")
    ctx = error.get("ctx") or {}
    got = describe_value(value)
    if where.union:
        return f"expected a boolean, number or string, got {got}"
    if kind in ("extra_forbidden", "invalid_key"):
        return escape_controls(_unknown_field(where, str(where.field)))
    if kind == "control_character":
        shown = escape_controls(value) if isinstance(value, str) else got
        return f"`{shown}` contains the control character {ctx.get('char')}; names must be printable"
    if kind == "missing":
        return f"missing field `{where.field}`"
    if kind == "literal_error":
        return _literal_message(where, value, str(ctx.get("expected", "")))
    if kind == "string_type" and isinstance(value, dict) and where.field in ("input_ports", "output_ports") \
            and where.owner in (GraphModel, SubgraphModel, NodeModel):
        return ("expected a port declaration (a string), got a mapping; the long form "
                "`{name: ..., timeout_ms: ...}` is only for a node's `input_ports`")
    if kind in ("model_type", "model_attributes_type") and (where.owner, where.field) == (NodeModel, "input_ports"):
        return ("expected a port declaration (a string, or a mapping with `name` and `timeout_ms`), "
                f"got {got}")
    if kind in ("model_type", "model_attributes_type") and (where.owner, where.field) == (NodeModel, "conditions"):
        return f"expected a condition (a mapping with one key, e.g. `{{count: 10}}`), got {got}"
    if kind == "string_too_short":
        return f"expected a non-empty string, got {got}"
    if kind == "greater_than_equal":
        if ctx.get("ge") == 0:
            noun = "number" if isinstance(value, float) or where.field in _FLOAT_FIELDS else "integer"
            return f"expected a non-negative {noun}, got {got}"
        return f"must be >= {ctx.get('ge')}, got {value}"
    if kind == "less_than_equal":
        return f"must be <= {ctx.get('le')}, got {value}"
    expected = {
        "int_type": "an integer",
        "float_type": "a number",
        "bool_type": "`true` or `false`",
        "string_type": "a string",
        "list_type": "a list",
        "dict_type": "a mapping",
        "model_type": "a mapping",
        "model_attributes_type": "a mapping",
    }.get(kind)
    if expected is not None:
        return f"expected {expected}, got {got}"
    return f"{error['msg']} (got {got})"


def _first_error(exc: ValidationError, data: object, source: Source) -> ConfigError:
    """The error for the problem that comes first in the document (pydantic orders by field)."""
    located = [(error, _Located(tuple(error["loc"]))) for error in exc.errors(include_url=False)]
    error, where = min(
        located,
        # On one line, a misspelt key beats the missing field it was meant to be (`{period: 5}`).
        key=lambda pair: (source.line_of(tuple(pair[1].path)) or 0, pair[0]["type"] == "missing"),
    )
    path: YamlPath = tuple(where.path)
    short = isinstance(_get(data, path[:-1]), str | int)
    if len(path) >= 3 and path[-1] == "name" and path[-3] == "input_ports" and short:
        path = path[:-1]  # a short-form port (`[cam]`) is read as `{name: cam}`; report at the string
        where.path = list(path)
    what = escape_controls(_problem(error, where))  # values are quoted in it; keep it one safe line
    if error["type"] in ("extra_forbidden", "invalid_key", "missing"):
        line_path, path = path, path[:-1]  # report at the mapping, point at the key
    else:
        line_path = path
    label = format_path(path)
    prefix = source.prefix(line_path)
    if label:
        return ConfigError(f"{prefix}{label}{node_context(_node_name(data, path))}: {what}")
    return ConfigError(f"{prefix}{what}")


def validate_document(data: object, source: Source) -> GraphModel:
    """Validate a parsed YAML document against the schema.

    Raises:
        ConfigError: For the first problem, with its path and (for files) its line.
    """
    if data is None:
        data = {}
    if not isinstance(data, dict):
        # Named by type only: this may be a file that is not YAML at all, quoted nowhere.
        got = "a string" if isinstance(data, str) else describe_value(data)
        msg = f"{source.prefix(())}a graph document must be a mapping of top-level fields, got {got}"
        raise ConfigError(msg)
    try:
        return GraphModel.model_validate(data)
    except ValidationError as exc:
        raise _first_error(exc, data, source) from None


# -- names written as numbers -----------------------------------------------------------------------


def check_number_references(data: object, *, executors: Collection[str], subgraphs: Collection[str],
                            kernels: Collection[str], source: Source, check_default: bool = True) -> None:
    """Report a reference written as a bare number that names nothing as a type error.

    Covered: ``default_executor``, and in each node (top level and in ``subgraphs``)
    ``executor``, ``kernel``, ``type``, ``input_ports`` (against the streams produced in the
    same scope), ``back_edges`` and ``input_policy.sets`` (against the node's inputs), a route's
    ``routes[].to`` and ``unmatched`` (against its outputs); and ``output_ports`` of the graph and
    of each subgraph. A number that does name something (``executors: [{name: 5}]`` with
    ``executor: 5``) is accepted, as lm-flow accepts it.

    Args:
        data: The parsed document (already schema-checked).
        executors: The names of the declared executors.
        subgraphs: The names of the subgraphs it can instantiate (its own and included ones).
        kernels: The names of the registered kernels.
        source: Its line table, for the message.
        check_default: Whether the document's ``default_executor`` is used (not overridden).

    Raises:
        ConfigError: For the first such reference, with its path and line.
    """
    if not isinstance(data, Mapping):
        return
    if check_default:
        _check_number(data, ("default_executor",), data.get("default_executor"), executors, "an executor", source)
    scopes: list[tuple[YamlPath, Mapping[str, Any]]] = [((), data)]
    library = data.get("subgraphs")
    if isinstance(library, Mapping):
        scopes += [(("subgraphs", str(name)), body) for name, body in library.items() if isinstance(body, Mapping)]
    for base, scope in scopes:
        nodes = scope.get("nodes")
        nodes = nodes if isinstance(nodes, list) else []
        streams = set(_port_names(scope.get("input_ports")))
        for node in nodes:
            if isinstance(node, Mapping):
                streams.update(_port_names(node.get("output_ports")))
        for i, node in enumerate(nodes):
            if isinstance(node, Mapping):
                _check_node(data, (*base, "nodes", i), node, streams, executors, subgraphs, kernels, source)
        for k, port in enumerate(_list(scope.get("output_ports"))):
            _check_number(data, (*base, "output_ports", k), port, streams, "a stream", source)


def _check_node(data: object, path: YamlPath, node: Mapping[str, Any], streams: Collection[str],
                executors: Collection[str], subgraphs: Collection[str], kernels: Collection[str],
                source: Source) -> None:
    """The references of one node (see ``check_number_references``)."""
    _check_number(data, (*path, "executor"), node.get("executor"), executors, "an executor", source)
    _check_number(data, (*path, "kernel"), node.get("kernel"), kernels, "a kernel", source)
    _check_number(data, (*path, "type"), node.get("type"), subgraphs, "a subgraph", source)
    inputs = set(_port_names(node.get("input_ports")))
    for k, port in enumerate(_list(node.get("input_ports"))):
        if isinstance(port, Mapping):
            _check_number(data, (*path, "input_ports", k, "name"), port.get("name"), streams, "a stream", source)
        else:
            _check_number(data, (*path, "input_ports", k), port, streams, "a stream", source)
    for k, port in enumerate(_list(node.get("back_edges"))):
        _check_number(data, (*path, "back_edges", k), port, inputs, "an input port of the node", source)
    policy = node.get("input_policy")
    if isinstance(policy, Mapping):
        for k, group in enumerate(_list(policy.get("sets"))):
            for m, port in enumerate(_list(group)):
                where = (*path, "input_policy", "sets", k, m)
                _check_number(data, where, port, inputs, "an input port of the node", source)
    outputs = set(_port_names(node.get("output_ports")))
    for k, rule in enumerate(_list(node.get("routes"))):
        if isinstance(rule, Mapping):
            _check_number(data, (*path, "routes", k, "to"), rule.get("to"), outputs, "an output port", source)
    _check_number(data, (*path, "unmatched"), node.get("unmatched"), outputs, "an output port", source)


def _check_number(data: object, path: YamlPath, value: object, names: Collection[str], what: str,
                  source: Source) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or str(value) in names:
        return
    # No "did you mean": a number is a type mistake, not a typo (`5` is one edit from `x`).
    label = format_path(path)
    msg = (f"{source.prefix(path)}{label}{node_context(_node_name(data, path))}: expected the name of {what} "
           f"(a string), got {describe_value(value)}")
    raise ConfigError(msg)


def _list(value: object) -> list[object]:
    return value if isinstance(value, list) else []


def _port_names(decls: object) -> Iterator[str]:
    """The stream names of port declarations: ``name``, ``TAG:name``, ``TAG:index:name``, or a number.

    A long-form input port (``{name: cam, timeout_ms: 200}``) is its ``name``.
    """
    for decl in _list(decls):
        if isinstance(decl, Mapping):
            decl = decl.get("name")
        if isinstance(decl, str):
            yield decl.rsplit(":", 1)[-1]
        elif isinstance(decl, int) and not isinstance(decl, bool):
            yield str(decl)
