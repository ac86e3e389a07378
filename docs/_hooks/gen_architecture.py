"""The architecture page's two pictures, drawn at build time from the code itself.

- **The parts**: every package and top-level module of ``src/flowplex``, in layers by what it
  imports at run time (read with ``ast``, as ``tests/test_layers.py`` reads it). A part sits above
  every part it imports; an arrow is drawn only where no longer path already implies it.
- **One packet's path**: the steps the page lists in its ``<!-- packet-path ... -->`` block, one
  ``dotted.name: what happens`` per line. Each name is resolved by importing it; a step whose
  function no longer exists is an error (``missing_steps``), so the picture cannot go stale.

Both pictures are SVG text (no Graphviz, no JavaScript): the site stays self-contained.
"""

from __future__ import annotations

import ast
import graphlib
import html
import importlib
import re
from dataclasses import dataclass
from pathlib import Path

LEAF_BOX = "leaf modules"
"""The one box that stands for every module importing nothing of flowplex."""

_BOX_W, _BOX_H, _GAP_X, _GAP_Y, _MARGIN = 150, 34, 18, 46, 12
_STEP_W, _STEP_H, _STEP_GAP = 420, 40, 16
_PATH_BLOCK = re.compile(r"<!-- packet-path\n(.*?)\n-->", re.S)


@dataclass(frozen=True)
class Step:
    """One step of the packet path: the function that does it and what it does."""

    name: str
    what: str


# -- the parts ----------------------------------------------------------------------------------


SUBPARTS = frozenset({"executors.hosted", "executors.processes", "executors.ray"})
"""Packages drawn as parts of their own (as ``tests/test_layers.py`` counts them)."""


def _part_of(module: str) -> str:
    parts = module.split(".")
    if ".".join(parts[1:3]) in SUBPARTS:
        return ".".join(parts[1:3])
    return parts[1] if len(parts) > 1 else parts[0]


def _runtime_imports(path: Path, package: str) -> set[str]:
    """The flowplex modules one file imports outside ``if TYPE_CHECKING:`` blocks."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    todo: list[ast.AST] = [tree]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            todo += node.orelse
            continue
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                module = ".".join([*base, node.module] if node.module else base)
            else:
                module = node.module or ""
            found |= {f"{module}.{a.name}" for a in node.names} if module == "flowplex" else {module}
        if isinstance(node, ast.stmt | ast.Module):
            todo += list(ast.iter_child_nodes(node))
    return {m for m in found if m == "flowplex" or m.startswith("flowplex.")}


def raw_part_imports(src: Path) -> dict[str, set[str]]:
    """Each part of ``src/flowplex`` -> the parts it imports at run time."""
    edges: dict[str, set[str]] = {}
    for path in sorted((src / "flowplex").rglob("*.py")):
        rel = path.relative_to(src).with_suffix("")
        name = ".".join(rel.parts).removesuffix(".__init__")
        package = name if rel.name == "__init__" else name.rpartition(".")[0]
        source = _part_of(name)
        if source in ("flowplex", "__main__"):
            continue  # the facade re-exports everything; ``python -m flowplex`` is the CLI
        targets = {_part_of(m) for m in _runtime_imports(path, package)} - {source, "flowplex"}
        edges.setdefault(source, set()).update(targets)
    return edges


def leaf_parts(src: Path) -> set[str]:
    """The parts that import nothing of flowplex (drawn as one box)."""
    return {part for part, targets in raw_part_imports(src).items() if not targets}


def part_imports(src: Path) -> dict[str, set[str]]:
    """Each part -> the parts it imports, the leaf modules merged into one box."""
    edges = raw_part_imports(src)
    leaves = {part for part, targets in edges.items() if not targets}
    merged: dict[str, set[str]] = {LEAF_BOX: set()}
    for part, targets in edges.items():
        if part not in leaves:
            merged[part] = {LEAF_BOX if t in leaves else t for t in targets}
    return merged


def _merge_cycles(edges: dict[str, set[str]]) -> dict[str, set[str]]:
    """Parts that import each other (above the engine: the agent terminal) drawn as one box."""
    while True:
        try:
            graphlib.TopologicalSorter(edges).prepare()
        except graphlib.CycleError as exc:
            cycle = set(exc.args[1])
        else:
            return edges
        name = " + ".join(sorted(cycle))
        merged = {name: set().union(*(edges[p] for p in cycle)) - cycle}
        for part, targets in edges.items():
            if part not in cycle:
                merged[part] = {name if t in cycle else t for t in targets}
        edges = merged


def _reduce(edges: dict[str, set[str]]) -> dict[str, set[str]]:
    """Drop ``a -> c`` where ``a`` reaches ``c`` through another part (fewer, clearer arrows)."""
    def reach(start: str, skip: str) -> set[str]:
        seen: set[str] = set()
        todo = [t for t in edges[start] if t != skip]
        while todo:
            node = todo.pop()
            if node not in seen:
                seen.add(node)
                todo += edges.get(node, set())
        return seen

    return {a: {c for c in targets if c not in reach(a, c)} for a, targets in edges.items()}


def _layers(edges: dict[str, set[str]]) -> list[list[str]]:
    """Parts by height: the leaf box at the bottom, each part one row above its highest import."""
    height: dict[str, int] = {}
    for part in graphlib.TopologicalSorter(edges).static_order():  # imports come first
        height[part] = 1 + max((height[t] for t in edges.get(part, ())), default=-1)
    rows: list[list[str]] = [[] for _ in range(max(height.values()) + 1)]
    for part in sorted(height):
        rows[height[part]].append(part)
    return rows[::-1]  # top row first


def parts_svg(src: Path) -> str:
    """The parts picture: boxes in layers, an arrow from each part to what it imports."""
    edges = _reduce(_merge_cycles(part_imports(src)))
    rows = _layers(edges)
    width = max(len(r) for r in rows) * (_BOX_W + _GAP_X) - _GAP_X + 2 * _MARGIN
    height = len(rows) * (_BOX_H + _GAP_Y) - _GAP_Y + 2 * _MARGIN
    at: dict[str, tuple[float, float]] = {}
    for y, row in enumerate(rows):
        row_w = len(row) * (_BOX_W + _GAP_X) - _GAP_X
        for x, part in enumerate(row):
            at[part] = ((width - row_w) / 2 + x * (_BOX_W + _GAP_X), _MARGIN + y * (_BOX_H + _GAP_Y))
    out = [_svg_open(width, height, "The parts of flowplex; an arrow points at what a part imports")]
    for part in sorted(edges):
        x1, y1 = at[part]
        for target in sorted(edges[part]):
            x2, y2 = at[target]
            out.append(f'<line x1="{x1 + _BOX_W / 2:.0f}" y1="{y1 + _BOX_H:.0f}" x2="{x2 + _BOX_W / 2:.0f}" '
                       f'y2="{y2:.0f}" class="edge" marker-end="url(#arrow)"/>')
    for part, (x, y) in sorted(at.items()):
        out.append(_box(x, y, _BOX_W, _BOX_H, part, "box engine" if part == "engine" else "box"))
    out.append("</svg>")
    return "\n".join(out)


# -- the packet path ----------------------------------------------------------------------------


def packet_path(markdown: str) -> list[Step]:
    """The steps the page's ``<!-- packet-path ... -->`` block lists, in order."""
    match = _PATH_BLOCK.search(markdown)
    if match is None:
        return []
    steps = []
    for line in match.group(1).splitlines():
        if line.strip():
            name, _, what = line.partition(":")
            steps.append(Step(name.strip(), what.strip()))
    return steps


def replace_path_block(markdown: str, text: str) -> str:
    """The page with its ``<!-- packet-path ... -->`` block replaced by ``text``."""
    return _PATH_BLOCK.sub(lambda _: text, markdown, count=1)


def resolve(name: str) -> object | None:
    """The object a dotted name stands for (module, then attributes), or None when it is gone."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            if not hasattr(obj, attr):
                return None
            obj = getattr(obj, attr)
        return obj
    return None


def missing_steps(steps: list[Step]) -> list[str]:
    """The steps whose function no longer exists in the code."""
    return [s.name for s in steps if resolve(s.name) is None]


def path_svg(steps: list[Step]) -> str:
    """The packet path: one box per step, top to bottom, the function's name and what it does."""
    height = len(steps) * (_STEP_H + _STEP_GAP) - _STEP_GAP + 2 * _MARGIN
    width = _STEP_W + 2 * _MARGIN
    out = [_svg_open(width, height, "One packet's path through the engine")]
    for i, step in enumerate(steps):
        y = _MARGIN + i * (_STEP_H + _STEP_GAP)
        if i:
            out.append(f'<line x1="{width / 2:.0f}" y1="{y - _STEP_GAP}" x2="{width / 2:.0f}" y2="{y}" '
                       'class="edge" marker-end="url(#arrow)"/>')
        short = ".".join(step.name.split(".")[-2:])
        tap = " tap" if "tap" in step.what.lower() else ""
        out.append(f'<rect x="{_MARGIN}" y="{y}" width="{_STEP_W}" height="{_STEP_H}" rx="6" class="box{tap}"/>')
        out.append(f'<text x="{width / 2:.0f}" y="{y + 16}" class="name">{html.escape(short)}</text>')
        out.append(f'<text x="{width / 2:.0f}" y="{y + 32}" class="what">{html.escape(step.what)}</text>')
    out.append("</svg>")
    return "\n".join(out)


# -- drawing ------------------------------------------------------------------------------------


def _svg_open(width: float, height: float, title: str) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width:.0f} {height:.0f}" '
        f'width="{width:.0f}" height="{height:.0f}" role="img" aria-label="{html.escape(title)}">\n'
        f"<title>{html.escape(title)}</title>\n"
        "<style>.box{fill:#eef2fb;stroke:#3f51b5;stroke-width:1.2}.engine{fill:#dfe6fb}"
        ".tap{fill:#fff3d6;stroke:#c77d00}.edge{stroke:#7a7a8c;stroke-width:1}"
        "text{font:12px sans-serif;text-anchor:middle;fill:#1b1b29}.name{font-weight:bold}"
        ".what{font-size:11px}</style>\n"
        '<defs><marker id="arrow" viewBox="0 0 8 8" refX="8" refY="4" markerWidth="7" markerHeight="7" '
        'orient="auto"><path d="M0,0 L8,4 L0,8 z" fill="#7a7a8c"/></marker></defs>'
    )


def _box(x: float, y: float, w: float, h: float, label: str, cls: str) -> str:
    return (f'<rect x="{x:.0f}" y="{y:.0f}" width="{w}" height="{h}" rx="5" class="{cls}"/>'
            f'<text x="{x + w / 2:.0f}" y="{y + h / 2 + 4:.0f}">{html.escape(label)}</text>')
