"""The engine's shape, checked against its sources: small parts that call one way.

Issue 13's limits: no engine class over 25 methods or 600 lines, no function over 80 lines, no
``NotImplementedError`` stubs, and the parts of ``flowplex.engine`` (and of the facade,
``flowplex.graph``) import each other in one direction only (``PARTS``, lowest first). Read
with ``ast``: a lazy import counts too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import flowplex.engine
import flowplex.graph

ENGINE = Path(flowplex.engine.__file__).parent
GRAPH = Path(flowplex.graph.__file__).parent

PARTS = {
    ENGINE: (
        "_engine_common", "_handoff", "_budget", "_nodes", "_clock", "_timers", "_watchdog", "_status",
        "_blocking", "_claims", "_delivery", "_closing", "_sources", "_conditions", "_seam", "_spill", "_loop",
        "_pump", "_stalls", "_admission", "_waiting", "_snapshot", "_engine", "_build", "__init__",
    ),
    GRAPH: ("_args", "_io", "_async", "_graph", "__init__"),
}
"""Every module of ``flowplex.engine`` and of ``flowplex.graph``, lowest first: a module imports only
modules of its package before it (the facade imports the engine, never the other way)."""

TYPE_ONLY_UPWARD: set[tuple[Path, str, str]] = set()
"""Type hints that name a higher module (never imported at run time): none, and keep it so
(``tests/test_layers.py`` also checks that no module cycle closes through a type hint)."""

MODULES = [pytest.param(package, name, id=f"{package.name}.{name}")
           for package, names in PARTS.items() for name in names]


FACADES = {"Graph"}
"""Public classes whose size is lm-flow's API, not engine logic (they only delegate)."""


def _tree(package: Path, name: str) -> ast.Module:
    return ast.parse((package / f"{name}.py").read_text())


def _imports(tree: ast.Module) -> list[tuple[str, bool, int]]:
    """``(module, type_only, line)`` of each relative import inside the package."""
    found: list[tuple[str, bool, int]] = []
    todo: list[tuple[ast.AST, bool]] = [(tree, False)]
    while todo:
        node, guarded = todo.pop()
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            if node.module:
                found.append((node.module, guarded, node.lineno))
            else:
                found += [(alias.name, guarded, node.lineno) for alias in node.names]
        elif isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            todo += [(stmt, True) for stmt in node.body] + [(stmt, guarded) for stmt in node.orelse]
            continue
        todo += [(child, guarded) for child in ast.iter_child_nodes(node)]
    return found


@pytest.mark.parametrize("package", PARTS, ids=lambda p: p.name)
def test_every_module_has_a_place_in_the_order(package: Path) -> None:
    on_disk = {p.stem for p in package.glob("*.py")}
    parts = set(PARTS[package])
    assert on_disk == parts, f"add to PARTS: {sorted(on_disk - parts)}; gone: {sorted(parts - on_disk)}"


@pytest.mark.parametrize(("package", "name"), MODULES)
def test_a_part_imports_only_parts_below_it(package: Path, name: str) -> None:
    parts = PARTS[package]
    rank = parts.index(name)
    wrong = [
        f"{name}.py:{line} imports {module}{' (type only)' if type_only else ''}"
        for module, type_only, line in _imports(_tree(package, name))
        if parts.index(module) >= rank and not (type_only and (package, name, module) in TYPE_ONLY_UPWARD)
    ]
    assert not wrong, wrong


@pytest.mark.parametrize(("package", "name"), MODULES)
def test_classes_and_functions_stay_small(package: Path, name: str) -> None:
    tree = _tree(package, name)
    too_big: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name not in FACADES:
            methods = [n for n in node.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
            lines = (node.end_lineno or node.lineno) - node.lineno + 1
            if len(methods) > 25 or lines > 600:
                too_big.append(f"class {node.name}: {len(methods)} methods, {lines} lines")
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            lines = (node.end_lineno or node.lineno) - node.lineno + 1
            if lines > 80:
                too_big.append(f"def {node.name}: {lines} lines")
    assert not too_big, too_big


@pytest.mark.parametrize(("package", "name"), MODULES)
def test_no_stubs_and_no_executor_kind_tests(package: Path, name: str) -> None:
    source = (package / f"{name}.py").read_text()
    assert "NotImplementedError" not in source
    # The engine reads what the Executor protocol declares, never an executor's kind or class.
    for needle in ('.kind ==', '.kind !=', 'isinstance(ex', 'InlineExecutor)', 'DelegatingExecutor)'):
        assert needle not in source, f"{name}.py tests an executor's kind or type: {needle!r}"


def test_the_facade_holds_no_engine_state() -> None:
    # Graph keeps its plan, counters, handles and pollers; every lock and queue is the engine's.
    source = (GRAPH / "_graph.py").read_text()
    for needle in ("status.lock", ".queue", "busy", "force_close", "take_held", "record_error"):
        assert needle not in source, needle
