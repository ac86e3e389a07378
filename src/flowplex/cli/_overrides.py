"""``--set NODE.OPTION=VALUE``: parsing an override and applying overrides to a graph's spec."""

from __future__ import annotations

from typing import Any

from flowplex.errors import UsageError


def parse_override(text: str, node_names: list[str]) -> tuple[str, tuple[str, ...], object]:
    """``NODE.OPTION[.SUB]=VALUE`` -> (node, option path, YAML-typed value).

    Node names may contain dots and slashes: the longest node name followed by ``.`` wins.
    Raises ``UsageError`` (a ``ValueError``) with a one-line message (did-you-mean for unknown nodes).
    """
    import yaml

    from flowplex._suggest import did_you_mean

    key, sep, raw = text.partition("=")
    if not sep or "." not in key:
        msg = f"--set {text!r}: expected NODE.OPTION=VALUE"
        raise UsageError(msg)
    node = max((n for n in node_names if key.startswith(n + ".")), key=len, default=None)
    if node is None:
        guess = key.rsplit(".", 1)[0]
        msg = f"--set {text!r}: no node named `{guess}`{did_you_mean(guess, node_names)}"
        raise UsageError(msg)
    path = tuple(key[len(node) + 1:].split("."))
    if not all(path):
        msg = f"--set {text!r}: empty option name"
        raise UsageError(msg)
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError as exc:
        problem = str(getattr(exc, "problem", None) or exc).splitlines()[0]
        msg = f"--set {text!r}: value is not valid YAML ({problem})"
        raise UsageError(msg) from None
    if not _is_option_value(value):
        msg = f"--set {text!r}: value must be a number, bool, string, list or mapping, got {type(value).__name__}"
        raise UsageError(msg)
    return node, path, value


def _is_option_value(value: object) -> bool:
    if value is None or isinstance(value, bool | int | float | str):
        return True
    if isinstance(value, list):
        return all(_is_option_value(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _is_option_value(v) for k, v in value.items())
    return False


def apply_overrides(spec: Any, overrides: list[str]) -> Any:
    """A copy of ``spec`` (a ``GraphSpec``) with ``--set`` overrides applied to node options."""
    import copy
    import dataclasses

    names = [n.name for n in spec.nodes]
    options: dict[str, Any] = {}
    for text in overrides:
        node, path, value = parse_override(text, names)
        current = options.get(node, copy.deepcopy(spec.nodes[names.index(node)].options))
        if current is None:
            current = {}
        if not isinstance(current, dict):
            msg = f"--set {text!r}: the options of node `{node}` are not a mapping"
            raise UsageError(msg)
        target = current
        for part in path[:-1]:
            inner = target.setdefault(part, {})
            if not isinstance(inner, dict):
                msg = f"--set {text!r}: option `{part}` of node `{node}` is not a mapping"
                raise UsageError(msg)
            target = inner
        target[path[-1]] = value
        options[node] = current
    nodes = tuple(dataclasses.replace(n, options=options[n.name]) if n.name in options else n for n in spec.nodes)
    return dataclasses.replace(spec, nodes=nodes)
