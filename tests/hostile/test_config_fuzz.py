"""Fuzzing the loader: whatever the YAML, loading succeeds or raises one ``ConfigError`` line, quickly.

Two sources of documents: mutations of the shipped and tested graph files (text edits that
insert YAML syntax, aliases, tags, control characters and absurd numbers), and documents drawn
from the format's own JSON Schema (``flowplex.config.json_schema``), with names drawn mostly from
a few that refer to each other so that documents get past the schema into expansion and the plan.
Never another exception type, never a multi-line message, never a control character in it.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from flowplex.config import Limits, json_schema, load_yaml
from flowplex.errors import ConfigError

ROOT: Final = Path(__file__).resolve().parents[2]
SEEDS: Final = [
    (ROOT / name).read_text(encoding="utf-8")
    for name in ("examples/hello_world.yaml", "src/flowplex/_data/demo.yaml",
                 "tests/config/data/compact_example.yaml", "tests/diagnostics/data/golden.yaml")
] + [
    "subgraphs:\n  D:\n    input_ports: [i]\n    output_ports: [o]\n"
    "    nodes: [{name: a, kernel: PassThroughKernel, input_ports: [i], output_ports: [o]}]\n"
    "nodes:\n  - &src {name: s, kernel: RangeSourceKernel, output_ports: [x], options: &opt {count: 3}}\n"
    "  - {name: d, type: D, input_ports: [x], output_ports: [y]}\n"
    "  - {name: r, type: route, input_ports: [y], output_ports: [p, q], mode: all, unmatched: drop,\n"
    "     routes: [{to: p, when: &w {all: [{timestamp: {op: gt, value: 1}}, {not: {metadata: k, op: exists}}]}},\n"
    "              {to: q, when: {any: [*w, *w]}}, {to: q, default: true}]}\n"
    "output_ports: [p, q]\n",
]
SNIPPETS: Final = [
    "&a ", "*a", "&b [*a, *a, *a]", "<<: *a", "[", "]", "{", "}", ": ", "- ", "\n", "\n  ", "\t", "'", '"', "#",
    ",", "?", "|", ">", "!!int ", "!!float ", "!!binary ", "!!set ", "!!python/object:os.system ", "!custom ",
    "\x1b[2J", "\x00", "\x85", "\ufeff", "1e400", "-1", "0x", "99999999999999999999", ".nan", "-.inf",
    "nodes", "type: route", "include: [/dev/null]", "subgraphs: {X: {nodes: [{type: X}]}}", "~", "null", "---",
    "...", "%YAML 1.1\n", "rate: 1e-300", "num_threads: 100000", "affinity: [1e20]", "trace_capacity: 1e20",
]
MAX_SECONDS: Final = 5.0
"""Per document (they take milliseconds; the margin is for a loaded machine)."""
LIMITS: Final = Limits(max_nodes=2_000, max_yaml_values=20_000)
"""Smaller than the defaults, so that an example hitting a limit stays fast."""


def _assert_loads_or_one_line_error(text: str) -> None:
    start = time.perf_counter()
    try:
        load_yaml(text, limits=LIMITS)
    except ConfigError as exc:
        message = str(exc)
        assert message
        assert "\n" not in message, message
        assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]", message), repr(message)
    assert time.perf_counter() - start < MAX_SECONDS


@st.composite
def _mutants(draw: st.DrawFn) -> str:
    text = draw(st.sampled_from(SEEDS))
    for _ in range(draw(st.integers(1, 6))):
        at = draw(st.integers(0, len(text)))
        op = draw(st.sampled_from(["insert", "delete", "duplicate", "replace"]))
        if op == "insert":
            text = text[:at] + draw(st.sampled_from(SNIPPETS)) + text[at:]
        elif op == "delete":
            text = text[:at] + text[at + draw(st.integers(1, 40)):]
        elif op == "duplicate":
            lines = text.splitlines(keepends=True)
            if lines:
                k = draw(st.integers(0, len(lines) - 1))
                lines.insert(k, lines[k] * draw(st.integers(1, 3)))
                text = "".join(lines)
        else:
            text = text[:at] + draw(st.characters(codec="utf-8")) + text[at + 1:]
    return text


@settings(max_examples=120)
@given(_mutants())
def test_mutated_graph_files_load_or_fail_with_one_line(text: str) -> None:
    _assert_loads_or_one_line_error(text)


# -- documents from the JSON Schema ------------------------------------------------------------------------------

SCHEMA: Final = json_schema()
NAMES: Final = st.one_of(
    st.sampled_from(["x", "y", "s", "a", "p", "q", "default", "route", "D", "RangeSourceKernel",
                     "PassThroughKernel", "T:x", "T:0:y", "T:1:z", "d/a"]),
    st.text(alphabet="abxy01:/#._- \x1b\x00\x85", max_size=6),
)
SCALARS: Final = st.one_of(st.none(), st.booleans(), st.integers(-3, 10), st.floats(allow_nan=True),
                           st.integers(-(2**70), 2**70), NAMES)
ANY_VALUE: Final = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3)
                                | st.dictionaries(NAMES, inner, max_size=3), max_leaves=8)


def _resolve(node: Mapping[str, Any]) -> Mapping[str, Any]:
    ref = node.get("$ref")
    if ref is None:
        return node
    return SCHEMA["$defs"][ref.rsplit("/", 1)[-1]]  # type: ignore[no-any-return]


def _number(node: Mapping[str, Any], integer: bool) -> st.SearchStrategy[object]:
    low, high = node.get("minimum"), node.get("maximum")
    edges = [v for v in (low, high) if v is not None]
    near = st.sampled_from([*edges, *(e - 1 for e in edges), *(e + 1 for e in edges), 0, 1, 1024, 1025, 10**20])
    spread: st.SearchStrategy[object] = (st.integers(-10, 10**6) if integer
                                         else st.floats(allow_nan=True, allow_infinity=True))
    return st.one_of(near, spread)


def _from_schema(node: Mapping[str, Any], depth: int) -> st.SearchStrategy[object]:
    """Values the schema describes (and, now and then, values it does not), ``depth`` levels at most."""
    node = _resolve(node)
    if "enum" in node:
        return st.one_of(st.sampled_from(node["enum"]), NAMES) if depth % 3 == 0 else st.sampled_from(node["enum"])
    if "const" in node:
        return st.just(node["const"])
    for key in ("anyOf", "oneOf"):
        if key in node and "type" not in node and "properties" not in node:
            return st.one_of([_from_schema(option, depth) for option in node[key]])
    kind = node.get("type")
    if kind == "object" and depth > 0:
        properties: Mapping[str, Any] = node.get("properties", {})
        if not properties:
            extra = node.get("additionalProperties")
            value = _from_schema(extra, depth - 1) if isinstance(extra, Mapping) else ANY_VALUE
            return st.dictionaries(NAMES, value, max_size=3)
        fields = {name: _from_schema(spec, depth - 1) for name, spec in properties.items() if name != "imports"}
        return st.fixed_dictionaries({}, optional={**fields, "unknown_key": ANY_VALUE})
    if kind == "array" and depth > 0:
        return st.lists(_from_schema(node.get("items", {}), depth - 1), max_size=3)
    if kind in ("object", "array"):
        return st.just({} if kind == "object" else [])
    if kind == "string":
        return NAMES
    if kind == "integer":
        return _number(node, integer=True)
    if kind == "number":
        return _number(node, integer=False)
    if kind == "boolean":
        return st.booleans()
    if kind == "null":
        return st.none()
    return ANY_VALUE  # `options`: anything


@settings(max_examples=120)
@given(_from_schema(SCHEMA, depth=7))
def test_documents_from_the_json_schema_load_or_fail_with_one_line(document: object) -> None:
    _assert_loads_or_one_line_error(yaml.safe_dump(document, allow_unicode=True))
