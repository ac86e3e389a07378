"""The YAML reference page, written from ``flowplex.config.json_schema()``.

One table per object of the format, in the order a reader meets them from the top level down
(``executors[]``, ``nodes[]``, ``nodes[].input_policy``...), each key with its type, default and
the description the schema carries. The page can therefore never disagree with what the loader
accepts: both come from the same pydantic models.
"""

from __future__ import annotations

import json
from collections import deque
from typing import Any

SCHEMA_FILE = "flowplex-graph.schema.json"
"""The raw schema, published next to the page (``reference/flowplex-graph.schema.json``)."""

_INTRO = """\
# YAML format reference

This page is generated from the JSON Schema that `flowplex schema` prints, which is made from the
very models the loader validates with: a key that is not listed here is an error (`extra` keys are
rejected, with a suggestion when one is close), and values are checked strictly (`rate: "5"` is
not a number). Cross-field rules (a port with no producer, an unknown executor, a cycle without
a back edge...) are checked after parsing and reported with the YAML path of the mistake.

Point your editor at the schema for completion and checking as you type:
[`flowplex-graph.schema.json`]({schema_file}) (or `flowplex schema > flowplex-graph.schema.json`).
With the YAML language server, add this first line to a graph file:

```yaml
# yaml-language-server: $schema=flowplex-graph.schema.json
```
"""


def schema_files(schema: dict[str, Any]) -> dict[str, str]:
    """The page and the raw schema, as ``{path under reference/: text}``."""
    return {
        "yaml.md": render(schema),
        SCHEMA_FILE: json.dumps(schema, indent=2, sort_keys=False) + "\n",
    }


def render(schema: dict[str, Any]) -> str:
    """The Markdown page for ``schema`` (a JSON Schema with ``$defs``, as pydantic writes it)."""
    defs: dict[str, Any] = schema.get("$defs", {})
    parts = [_INTRO.format(schema_file=SCHEMA_FILE)]
    for path, name, obj in _objects(schema, defs):
        title = "Top level" if not path else f"`{path}`"
        parts.append(f"## {title} {{ #{_anchor(name)} }}\n")
        description = _clean(obj.get("description", ""))
        if description:
            parts.append(description + "\n")
        parts.append(_table(obj, defs))
    return "\n".join(parts)


def _objects(schema: dict[str, Any], defs: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    """Every object of the format once, breadth first from the top, with the path that leads to it."""
    found: list[tuple[str, str, dict[str, Any]]] = [("", "top-level", schema)]
    seen: set[str] = set()
    queue: deque[tuple[str, dict[str, Any]]] = deque([("", schema)])
    while queue:
        prefix, obj = queue.popleft()
        for key, prop in obj.get("properties", {}).items():
            for suffix, ref in _refs(prop):
                if ref in seen or ref not in defs:
                    continue
                seen.add(ref)
                path = f"{prefix}.{key}{suffix}" if prefix else f"{key}{suffix}"
                found.append((path, ref, defs[ref]))
                queue.append((path, defs[ref]))
    found.extend(("", name, defs[name]) for name in sorted(set(defs) - seen))  # unreachable: none today
    return found


def _refs(prop: dict[str, Any]) -> list[tuple[str, str]]:
    """The ``$defs`` names ``prop`` refers to, each with the path suffix that reaches it."""
    out: list[tuple[str, str]] = []
    if "$ref" in prop:
        out.append(("", prop["$ref"].rsplit("/", 1)[-1]))
    if isinstance(prop.get("items"), dict):
        out.extend(("[]" + s, r) for s, r in _refs(prop["items"]))
    if isinstance(prop.get("additionalProperties"), dict):
        out.extend((".<name>" + s, r) for s, r in _refs(prop["additionalProperties"]))
    for alt in prop.get("anyOf", []) + prop.get("oneOf", []) + prop.get("allOf", []):
        out.extend(_refs(alt))
    return out


def _table(obj: dict[str, Any], defs: dict[str, Any]) -> str:
    required = set(obj.get("required", []))
    rows = ["| key | type | default | description |", "|---|---|---|---|"]
    for key, prop in obj.get("properties", {}).items():
        default = "required" if key in required else _default(prop)
        notes = [_clean(prop.get("description", ""))]
        if "examples" in prop:
            examples = ", ".join(f"`{_json(e)}`" for e in prop["examples"])
            notes.append(f"Examples: {examples}.")
        cells = [f"`{key}`", _type(prop, defs), default, " ".join(n for n in notes if n)]
        rows.append("| " + " | ".join(c.replace("|", "\\|").replace("\n", " ") for c in cells) + " |")
    if obj.get("additionalProperties") is False:
        rows.append("")
        rows.append("No other keys are allowed.")
    return "\n".join(rows) + "\n"


def _type(prop: dict[str, Any], defs: dict[str, Any]) -> str:
    """A short reading of a property's JSON Schema type: ``list of string``, ``"off" | "basic"``..."""
    if "$ref" in prop:
        name = prop["$ref"].rsplit("/", 1)[-1]
        return f"[object](#{_anchor(name)})"
    if "enum" in prop:
        return " | ".join(f"`{_json(v)}`" for v in prop["enum"])  # escaped for the table by _table
    if "const" in prop:
        return f"`{_json(prop['const'])}`"
    alternatives = prop.get("anyOf") or prop.get("oneOf")
    if alternatives:
        return " or ".join(_type(alt, defs) for alt in alternatives)
    kind = prop.get("type")
    if kind == "array":
        items = prop.get("items")
        return "list of " + (_type(items, defs) if isinstance(items, dict) else "anything")
    if kind == "object" and isinstance(prop.get("additionalProperties"), dict):
        return "mapping of name to " + _type(prop["additionalProperties"], defs)
    if isinstance(kind, list):
        return " or ".join(str(k) for k in kind)
    if kind is None:
        return "anything"
    bounds = []
    if "minimum" in prop:
        bounds.append(f"≥ {prop['minimum']}")
    if "exclusiveMinimum" in prop:
        bounds.append(f"> {prop['exclusiveMinimum']}")
    if "maximum" in prop:
        bounds.append(f"≤ {prop['maximum']}")
    if "minLength" in prop:
        bounds.append(f"length ≥ {prop['minLength']}")
    return str(kind) + (f" ({', '.join(bounds)})" if bounds else "")


def _default(prop: dict[str, Any]) -> str:
    if "default" not in prop:
        return ""
    return f"`{_json(prop['default'])}`"


def _json(value: object) -> str:
    return json.dumps(value, ensure_ascii=False)


def _anchor(name: str) -> str:
    return name.removesuffix("Model").lower() if name != "top-level" else name


def _clean(text: str) -> str:
    """Descriptions use reST double backticks; Markdown reads them the same, single ones too."""
    return " ".join(text.split())
