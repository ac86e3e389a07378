"""Strict YAML parsing that remembers the line of every value.

The document's events are scanned first, without building anything, to enforce the ``Limits``
(size, nesting, and the number of values after alias expansion: a YAML "billion laughs" is
refused here, in time linear in its text). It is then composed (PyYAML node tree, which carries
marks), walked once to record the line of each path and to reject duplicate keys, then
constructed. Scalars resolve by the YAML 1.2
core schema, as lm-flow's parser does: ``off``/``yes``/``on`` are strings (``stats: off`` must mean
the string), ``017`` is decimal, ``0o17`` octal, and dates stay strings.
"""

from __future__ import annotations

import math
import re
from typing import Final

import yaml
from yaml.events import (
    AliasEvent,
    CollectionEndEvent,
    CollectionStartEvent,
    MappingEndEvent,
    MappingStartEvent,
    ScalarEvent,
    SequenceEndEvent,
    SequenceStartEvent,
)
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from ..errors import ConfigError
from ..spec._text import escape_controls
from ._limits import DEFAULT_LIMITS, Limits, exceeded
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


class _Frame:
    """An open list or mapping while locating an event: which key or index of it is being read."""

    __slots__ = ("key", "mapping", "position")

    def __init__(self, mapping: bool) -> None:
        self.mapping = mapping
        self.key: str | int = 0
        """The current key (mapping) or item index (list)."""
        self.position = 0
        """Mapping: 0 before a key, 1 before its value. List: unused."""


def _path_at(text: str, stop: int) -> YamlPath:
    """The YAML path of event number ``stop`` (only computed for a message, so speed does not matter)."""
    scanner = _Loader(text)
    stack: list[_Frame] = []
    try:
        for _ in range(stop):
            event = scanner.get_event()
            if isinstance(event, CollectionStartEvent):
                stack.append(_Frame(isinstance(event, MappingStartEvent)))
                continue
            if isinstance(event, CollectionEndEvent):
                stack.pop()
            elif not isinstance(event, ScalarEvent | AliasEvent):
                continue
            if stack:  # a value ended: move its parent on
                parent = stack[-1]
                if not parent.mapping:
                    parent.key = int(parent.key) + 1
                else:
                    if parent.position == 0:
                        # A list or mapping used as a key: the schema rejects it.
                        parent.key = event.value if isinstance(event, ScalarEvent) else "?"
                    parent.position ^= 1
    finally:
        scanner.dispose()
    path: list[str | int] = []
    for frame in stack:
        if not frame.mapping or frame.position == 1:
            path.append(frame.key)
    return tuple(path)


def _scan(text: str, name: str | None, limits: Limits) -> None:
    """Enforce ``limits`` on the document's event stream; nothing is built, and memory stays small.

    The expanded size is counted exactly: every scalar, list and mapping counts 1, and an alias
    counts the expanded size of the value its anchor names. This loop runs for every document,
    so it only counts; the path for a message is found by a second pass when a limit is broken.
    Parse errors are left to the composer.

    Raises:
        ConfigError: Too deep, or too many values after alias expansion.
    """
    scanner = _Loader(text)
    sizes: dict[str | None, int] = {}
    open_: list[tuple[str | None, int]] = []  # (anchor, count when it opened) of each open collection
    total = 0
    index = 0
    max_values = limits.max_yaml_values
    max_depth = limits.max_depth
    problem = ""
    try:
        while scanner.check_event():
            event = scanner.get_event()
            index += 1
            kind = type(event)
            if kind is ScalarEvent:
                total += 1
                if event.anchor is not None:
                    sizes[event.anchor] = 1
            elif kind is AliasEvent:
                total += sizes.get(event.anchor, 1)  # an alias of a value still open is reported by `_record`
            elif kind is MappingStartEvent or kind is SequenceStartEvent:
                if len(open_) >= max_depth:  # reported at the list or mapping one level too deep
                    problem = (f"YAML lists and mappings nested more than {max_depth} deep "
                               f"{exceeded('max_depth', max_depth)}")
                    break
                open_.append((event.anchor, total))
                total += 1
            elif kind is MappingEndEvent or kind is SequenceEndEvent:
                anchor, start = open_.pop()
                if anchor is not None:
                    sizes[anchor] = total - start
            if total > max_values:
                problem = (f"the document holds more than {max_values} YAML values once its aliases are expanded "
                           f"{exceeded('max_yaml_values', max_values)}")
                break
    except yaml.YAMLError:
        return  # the composer reports it, with its line
    finally:
        scanner.dispose()
    if problem:
        mark = event.start_mark
        where = f"{name}:{mark.line + 1}: " if name and mark is not None else (f"{name}: " if name else "")
        path = format_path(_path_at(text, index - 1))
        msg = f"{where}{path + ': ' if path else ''}{problem}"
        raise ConfigError(msg)


def _check_size(text: str, name: str | None, limits: Limits) -> None:
    limit = limits.max_document_bytes
    if len(text) <= limit // 4:  # a UTF-8 character is at most 4 bytes
        return
    size = len(text) if not isinstance(text, str) or text.isascii() else len(text.encode("utf-8", "surrogatepass"))
    if size > limit:
        where = f"{name}: " if name else ""
        msg = f"{where}the YAML document is {size} bytes, more than {limit} {exceeded('max_document_bytes', limit)}"
        raise ConfigError(msg)


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


_QUOTED: Final = re.compile(r"'[^']*'")
"""A quoted piece of a parser message, matched left to right (``expected ',' or '}'`` is two)."""


def _redact(text: str) -> str:
    """A parser message without the document text it quotes (an alias name, a tag...).

    The file may be no YAML at all (a password file given as ``include``); a single quoted
    character (``found character '\t'``) is kept, escaped.
    """
    return escape_controls(_QUOTED.sub(lambda m: m[0] if len(m[0]) <= 3 else "'...'", text))


def _parse_failed(exc: yaml.YAMLError, name: str | None) -> ConfigError:
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    context = getattr(exc, "context", None)
    text = _redact(f"{context}, {problem}" if context else str(problem))
    if mark is None:
        return ConfigError(f"{name + ': ' if name else ''}YAML parse failed: {text}")
    where = f"{name}:{mark.line + 1}: " if name else ""
    return ConfigError(f"{where}YAML parse failed: {text} at line {mark.line + 1} column {mark.column + 1}")


def parse_document(text: str, name: str | None, limits: Limits = DEFAULT_LIMITS) -> tuple[object, Source]:
    """Parse one YAML document.

    Args:
        text: The YAML text.
        name: The file name shown in messages, or ``None``.
        limits: Its size, nesting and expanded size are checked against these first.

    Returns:
        The constructed data (``None`` for an empty document) and its ``Source`` line table.

    Raises:
        ConfigError: ``YAML parse failed: ...`` with line and column, a duplicate key, or a limit.
    """
    _check_size(text, name, limits)
    _scan(text, name, limits)
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
        msg = f"{name + ': ' if name else ''}YAML parse failed: {_redact(str(exc))}"
        raise ConfigError(msg) from None
    finally:
        loader.dispose()
    return data, source
