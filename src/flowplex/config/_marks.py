"""Strict YAML parsing that remembers the line of every value.

The document is composed first (PyYAML node tree, which carries marks), walked once to record the
line of each path and to reject duplicate keys, then constructed. Scalars resolve by the YAML 1.2
core schema, as lm-flow's parser does: ``off``/``yes``/``on`` are strings (``stats: off`` must mean
the string), ``017`` is decimal, ``0o17`` octal, and dates stay strings.
"""

from __future__ import annotations

import math
import re
from typing import Final

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from ..errors import ConfigError
from ._paths import Source, YamlPath, format_path

__all__ = ["parse_document"]

_MERGE_TAG: Final = "tag:yaml.org,2002:merge"

# The C parser is ~10x faster; scalar resolution still runs the Python resolver below.
_BaseLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _Loader(_BaseLoader):  # type: ignore[valid-type,misc]
    """SafeLoader with YAML 1.2 core-schema scalars."""

    yaml_implicit_resolvers: dict[str | None, list[tuple[str, re.Pattern[str]]]] = {}  # noqa: RUF012


def _construct_int(loader: yaml.SafeLoader, node: Node) -> int:
    text = str(loader.construct_scalar(node))  # type: ignore[arg-type]
    if text.startswith("0o"):
        return int(text[2:], 8)
    if text.startswith("0x"):
        return int(text[2:], 16)
    return int(text, 10)


def _construct_float(loader: yaml.SafeLoader, node: Node) -> float:
    text = str(loader.construct_scalar(node)).lower()  # type: ignore[arg-type]
    if text.endswith(".inf"):
        return -math.inf if text.startswith("-") else math.inf
    if text.endswith(".nan"):
        return math.nan
    return float(text)


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)
_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:int", re.compile(r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$"), list("-+0123456789")
)
_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(
        r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
        r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
    ),
    list("-+.0123456789"),
)
_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:null", re.compile(r"^(?:~|null|Null|NULL|)$"), ["~", "n", "N", ""]
)
_Loader.add_implicit_resolver(_MERGE_TAG, re.compile(r"^(?:<<)$"), ["<"])
_Loader.add_constructor("tag:yaml.org,2002:int", _construct_int)
_Loader.add_constructor("tag:yaml.org,2002:float", _construct_float)


def _record(root: Node, source: Source) -> None:
    """Record the line of every key and item under ``root``; reject duplicate keys and alias loops."""
    lines = source.lines
    lines[()] = root.start_mark.line + 1
    # Iterative depth-first walk; the bool marks "leaving this node" so ancestors can be tracked.
    stack: list[tuple[Node, YamlPath, bool]] = [(root, (), False)]
    ancestors: set[int] = set()
    done: set[int] = set()
    while stack:
        node, path, leaving = stack.pop()
        if leaving:
            ancestors.discard(id(node))
            done.add(id(node))
            continue
        if id(node) in ancestors:
            where = f"{source.name}:{node.start_mark.line + 1}: " if source.name else ""
            what = "a YAML alias refers to its own anchor (recursive data)"
            msg = f"{where}{format_path(path) or 'document'}: {what}"
            raise ConfigError(msg)
        if id(node) in done:  # an alias of something already walked
            continue
        ancestors.add(id(node))
        stack.append((node, path, True))
        if isinstance(node, MappingNode):
            keys: set[str] = set()
            for key_node, value_node in node.value:
                if key_node.tag == _MERGE_TAG or not isinstance(key_node, ScalarNode):
                    continue
                key = str(key_node.value)
                if key in keys:
                    where = f"{source.name}:{key_node.start_mark.line + 1}: " if source.name else ""
                    if path:
                        where += f"{format_path(path)}: "
                    msg = f"{where}duplicate field `{key}`"
                    raise ConfigError(msg)
                keys.add(key)
                lines[(*path, key)] = key_node.start_mark.line + 1
                stack.append((value_node, (*path, key), False))
        elif isinstance(node, SequenceNode):
            for index, item in enumerate(node.value):
                lines[(*path, index)] = item.start_mark.line + 1
                stack.append((item, (*path, index), False))


def _parse_failed(exc: yaml.YAMLError, name: str | None) -> ConfigError:
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    context = getattr(exc, "context", None)
    text = f"{context}, {problem}" if context else str(problem)
    if mark is None:
        return ConfigError(f"{name + ': ' if name else ''}YAML parse failed: {text}")
    where = f"{name}:{mark.line + 1}: " if name else ""
    return ConfigError(f"{where}YAML parse failed: {text} at line {mark.line + 1} column {mark.column + 1}")


def parse_document(text: str, name: str | None) -> tuple[object, Source]:
    """Parse one YAML document.

    Args:
        text: The YAML text.
        name: The file name shown in messages, or ``None``.

    Returns:
        The constructed data (``None`` for an empty document) and its ``Source`` line table.

    Raises:
        ConfigError: ``YAML parse failed: ...`` with line and column, or a duplicate key.
    """
    source = Source(name)
    loader = _Loader(text)
    try:
        try:
            root = loader.get_single_node()
        except yaml.composer.ComposerError as exc:
            if "single document" in str(exc.context or ""):
                msg = "a YAML stream with more than one document is not supported"
                msg = f"{name + ': ' if name else ''}YAML parse failed: {msg}"
                raise ConfigError(msg) from None
            raise
        if root is None:
            return None, source
        _record(root, source)
        data = loader.construct_document(root)
    except ConfigError:
        raise
    except yaml.YAMLError as exc:
        raise _parse_failed(exc, name) from None
    except (ValueError, TypeError) as exc:  # a constructor rejected a tagged scalar
        msg = f"{name + ': ' if name else ''}YAML parse failed: {exc}"
        raise ConfigError(msg) from None
    finally:
        loader.dispose()
    return data, source
