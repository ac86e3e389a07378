"""Diagnostics format snapshots: a guard that they never peek into the engine again.

Every diagnostic gets an ``EngineSnapshot`` (taken by ``flowplex.engine._snapshot.take_snapshot``)
or a ``GraphStats`` made from one. The sources of ``flowplex.diagnostics`` and of the CLI are
read with ``ast``: a reference to an engine, its lock, a node's queue, a private attribute of
another object, or an import of the engine's private modules fails here. The checker itself is
tested on a planted sample first, so that the guard can fail.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import flowplex

SRC = Path(flowplex.__file__).parent
GUARDED = [*sorted((SRC / "diagnostics").glob("*.py")), *sorted((SRC / "cli").glob("*.py"))]

FORBIDDEN_NAMES = frozenset({"engine", "_engine", "Engine"})
"""Identifiers that mean the code holds the engine itself."""
FORBIDDEN_ATTRIBUTES = frozenset({"engine", "lock", "queue", "acquire"})
"""``x.lock``, ``x.queue``...: engine-side state (the snapshot has ``queued`` counts instead)."""
FORBIDDEN_MODULES = ("flowplex.graph._", "flowplex.engine", "flowplex.executors")
"""The engine and private facade modules: not even for type hints (the public ``flowplex.graph.Graph`` is fine)."""


def _module_of(node: ast.ImportFrom, package: str) -> str:
    if not node.level:
        return node.module or ""
    base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def peeks(source: str, where: str, package: str) -> list[str]:
    """Every place in ``source`` that reaches into the engine rather than a snapshot."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source, where)):
        line = f"{where}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Name) and node.id in FORBIDDEN_NAMES:
            found.append(f"{line}: name `{node.id}`")
        elif isinstance(node, ast.Attribute):
            private = node.attr.startswith("_") and not node.attr.startswith("__")
            own = isinstance(node.value, ast.Name) and node.value.id in {"self", "cls"}
            if node.attr in FORBIDDEN_NAMES | FORBIDDEN_ATTRIBUTES:
                found.append(f"{line}: attribute `.{node.attr}`")
            elif private and not own:
                found.append(f"{line}: private attribute `{ast.unparse(node)}`")
        elif isinstance(node, ast.ImportFrom | ast.Import):
            modules = [_module_of(node, package)] if isinstance(node, ast.ImportFrom) else [
                alias.name for alias in node.names]
            if isinstance(node, ast.ImportFrom) and modules[0] == "flowplex.graph":
                modules = [f"flowplex.graph.{alias.name}" for alias in node.names]
            found += [f"{line}: imports `{m}`" for m in modules if m.startswith(FORBIDDEN_MODULES)]
    return found


def _package_of(path: Path) -> str:
    rel = path.relative_to(SRC.parent).with_suffix("")
    return ".".join(rel.parts[:-1])


def test_the_checker_finds_each_kind_of_peek() -> None:
    planted = '''
from ..graph._engine import Engine
from ..graph import _nodes
from ..engine._loop import Scheduler
import flowplex.executors._threads

def f(graph, node, ex, stats):
    engine = graph._engine
    with engine.lock:
        depth = len(node.inputs[0].queue)
    busy = ex._running
    return stats.nodes, self_like._x
'''
    found = peeks(planted, "planted.py", "flowplex.diagnostics")
    text = "\n".join(found)
    for needle in ("imports `flowplex.graph._engine`", "imports `flowplex.graph._nodes`",
                   "imports `flowplex.engine._loop`", "imports `flowplex.executors._threads`", "name `engine`",
                   "attribute `._engine`", "attribute `.lock`", "attribute `.queue`",
                   "private attribute `ex._running`", "private attribute `self_like._x`"):
        assert needle in text, f"{needle} not found in:\n{text}"


def test_the_checker_allows_own_state_and_the_public_facade() -> None:
    clean = '''
from typing import TYPE_CHECKING
if TYPE_CHECKING:
    from ..graph import Graph
    from .._snapshot import EngineSnapshot

class Collector:
    def __init__(self, graph: Graph) -> None:
        self._graph = graph
        self.__secret = 1

    def collect(self) -> int:
        return len(self._graph.stats().nodes)
'''
    assert peeks(clean, "clean.py", "flowplex.diagnostics") == []


def test_the_guard_covers_every_module_of_the_cli() -> None:
    names = {p.relative_to(SRC).as_posix() for p in GUARDED}
    assert {"cli/__init__.py", "cli/_app.py", "cli/_run.py", "cli/_watch.py", "cli/_loading.py"} <= names


@pytest.mark.parametrize("path", GUARDED, ids=lambda p: p.relative_to(SRC).as_posix())
def test_diagnostics_do_not_peek_into_the_engine(path: Path) -> None:
    found = peeks(path.read_text(encoding="utf-8"), str(path.relative_to(SRC.parent)), _package_of(path))
    assert found == [], "format an EngineSnapshot (flowplex.engine._snapshot.take_snapshot) instead"
