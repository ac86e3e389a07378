"""The engine's packages import each other one way only: a table of layers, checked against the sources.

The imports are read with ``ast`` (static: a lazy import inside a function is a dependency too, only
later), and each package is also imported alone in a fresh interpreter to see what it really loads.
A new import that goes against the table, or a new package that is not in it, fails here: place it in
``MAY_IMPORT`` (and keep the table free of cycles) rather than dodging a cycle with a lazy import.
"""

from __future__ import annotations

import ast
import graphlib
import subprocess
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

import flowplex

SRC = Path(flowplex.__file__).parent

LEAVES = frozenset({"errors", "_types", "_timestamps", "_log", "_native", "_suggest", "_state", "_snapshot", "_reap"})
"""Modules that import nothing of flowplex: anything may import them."""

MAY_IMPORT: dict[str, frozenset[str]] = {
    **{leaf: frozenset() for leaf in LEAVES},
    "_shm": frozenset({"errors"}),  # named shared-memory segments: the ring's and the process pool's arena
    "packets": LEAVES,
    "executors": LEAVES,
    "spec": LEAVES,  # the specs and the plan: a leaf package, so config, kernels and graph can all read it
    "_events": LEAVES | {"packets"},
    "kernels": LEAVES | {"packets", "spec", "executors"},  # the kernel host builds the seam's Outcome
    "transport": LEAVES | {"_shm", "packets", "executors", "spec", "kernels"},  # the ring and its SIGBUS guard
    # the executors that host kernels elsewhere share one layer: wire format, hosting, caller tasks, replicas
    "executors.hosted": LEAVES | {"packets", "executors", "spec", "kernels"},
    # kernel hosts in worker processes; the arena shares the ring's SIGBUS guard
    "executors.processes": LEAVES | {"packets", "executors", "executors.hosted", "spec", "kernels", "_shm",
                                     "transport"},
    # kernel hosts in Ray actors
    "executors.ray": LEAVES | {"packets", "executors", "executors.hosted", "spec", "kernels"},
    "processes": frozenset({"executors", "executors.processes"}),  # the former import paths, kept for 0.2 code
    "cluster": frozenset({"executors", "executors.ray"}),
    "media": LEAVES | {"packets", "spec", "executors", "kernels"},  # media kernels (extra): above the kernel API
    "config": LEAVES | {"spec", "kernels"},  # YAML -> specs; `imports:` loads kernel code
    "diagnostics": LEAVES | {"spec", "config"},  # the engine's own types only under TYPE_CHECKING
    # the scheduler's parts; the hosted executors: the executor kinds a spec may name
    "engine": LEAVES | {"packets", "executors", "executors.hosted", "spec", "kernels", "executors.processes",
                        "executors.ray"},
    # a live graph's control socket: serves the graph's snapshots, taps its edges (the graph only as a type)
    "control": LEAVES | {"packets", "recording"},  # `record` writes a running graph's streams with the recorder
    "recording": LEAVES | {"packets"},  # MCAP recordings: the format, the recorder, the reader
    # the public facade over the engine; config and diagnostics for from_yaml and stats; control for start(control=)
    "graph": LEAVES | {"packets", "executors", "spec", "kernels", "config", "diagnostics", "_events", "engine",
                       "executors.hosted", "executors.processes", "executors.ray", "control"},
    "testing": LEAVES | {"packets", "executors", "executors.hosted", "spec", "kernels", "config", "graph", "engine",
                         "executors.processes", "executors.ray"},
}
"""Part of flowplex -> the parts it may import at run time (module level or lazily in a function)."""

UNCHECKED = frozenset({"flowplex", "agents", "terminal", "cli", "_deadline", "__main__", "_data", "_launch"})
"""Parts above the engine (and the package facade), not in the table; the engine never imports them."""


@dataclass(frozen=True)
class Import:
    """One import of a flowplex module, as written in a source file."""

    source: str  # the importing part
    target: str  # the imported part
    where: str  # file:line
    type_checking: bool  # under `if TYPE_CHECKING:` (never runs)


SUBPARTS = frozenset({"executors.hosted", "executors.processes", "executors.ray"})
"""Packages inside a part that are parts of their own (the executors wing: one folder, three layers)."""


def _part(module: str) -> str:
    """``flowplex.engine._engine`` -> ``engine``; ``flowplex.executors.ray._actor`` -> ``executors.ray``;
    ``flowplex`` -> ``flowplex``."""
    parts = module.split(".")
    if ".".join(parts[1:3]) in SUBPARTS:
        return ".".join(parts[1:3])
    return parts[1] if len(parts) > 1 else parts[0]


def _module_name(path: Path) -> tuple[str, str]:
    """The module name of a source file and the package its relative imports start from."""
    rel = path.relative_to(SRC.parent).with_suffix("")
    name = ".".join(rel.parts)
    if rel.name == "__init__":
        name = name.removesuffix(".__init__")
        return name, name
    return name, name.rpartition(".")[0]


def _import_statements(tree: ast.Module) -> list[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Every import statement, with whether it sits under ``if TYPE_CHECKING:``."""
    found: list[tuple[ast.Import | ast.ImportFrom, bool]] = []
    todo: list[tuple[ast.AST, bool]] = [(tree, False)]
    while todo:
        node, guarded = todo.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.append((node, guarded))
        elif isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            todo += [(stmt, True) for stmt in node.body] + [(stmt, guarded) for stmt in node.orelse]
        elif isinstance(node, ast.stmt | ast.Module):  # imports are statements: no need to enter expressions
            todo += [(child, guarded) for child in ast.iter_child_nodes(node)]
    return found


def _imports_of(path: Path) -> list[Import]:
    name, package = _module_name(path)
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    found = []
    for node, guarded in _import_statements(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif node.level:
            base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
            module = ".".join([*base, node.module] if node.module else base)
            # `from . import errors` in the top-level package names a module.
            targets = [f"{module}.{alias.name}" for alias in node.names] if module == "flowplex" else [module]
        else:
            module = node.module or ""
            targets = [f"{module}.{alias.name}" for alias in node.names] if module == "flowplex" else [module]
        for target in targets:
            if target == "flowplex" or target.startswith("flowplex."):
                where = f"{path.relative_to(SRC.parent)}:{node.lineno}"
                found.append(Import(_part(name), _part(target), where, guarded))
    return found


@cache
def _all_imports() -> tuple[Import, ...]:
    return tuple(imp for path in sorted(SRC.rglob("*.py")) for imp in _imports_of(path))


def _parts_in_source() -> set[str]:
    parts = {p.name for p in SRC.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    parts |= {p.stem for p in SRC.glob("*.py") if p.stem != "__init__"}
    return parts | {s for s in SUBPARTS if (SRC / s.replace(".", "/") / "__init__.py").exists()}


def _closure(part: str) -> set[str]:
    seen: set[str] = set()
    todo = [part]
    while todo:
        for dep in MAY_IMPORT[todo.pop()]:
            if dep not in seen:
                seen.add(dep)
                todo.append(dep)
    return seen


def test_every_part_has_a_place() -> None:
    """A new package or top-level module must be placed in the table (or declared above the engine)."""
    assert sorted(_parts_in_source() - set(MAY_IMPORT) - UNCHECKED) == []
    assert sorted((set(MAY_IMPORT) | UNCHECKED) - _parts_in_source() - {"flowplex"}) == []


def test_the_table_has_no_cycle() -> None:
    graphlib.TopologicalSorter(MAY_IMPORT).prepare()  # raises CycleError naming the cycle


def test_the_reader_sees_lazy_and_type_checking_imports() -> None:
    """Guards the reader itself: known imports of each kind are found."""
    imports = {(i.source, i.target, i.type_checking) for i in _all_imports()}
    assert ("graph", "config", False) in imports  # lazy, inside Graph.from_yaml
    assert ("graph", "spec", False) in imports
    assert ("diagnostics", "graph", True) in imports
    assert ("config", "spec", False) in imports


@pytest.mark.parametrize("part", sorted(MAY_IMPORT))
def test_imports_follow_the_layers(part: str) -> None:
    wrong = [
        f"{i.where}: {i.source} imports {i.target}"
        for i in _all_imports()
        if i.source == part and i.target != part and not i.type_checking and i.target not in MAY_IMPORT[part]
    ]
    assert wrong == [], f"{part} may import only {sorted(MAY_IMPORT[part])}"


def test_the_spec_package_is_a_leaf_even_for_type_hints() -> None:
    wrong = [f"{i.where}: imports {i.target}" for i in _all_imports()
             if i.source == "spec" and i.target not in LEAVES | {"spec"}]
    assert wrong == []


def test_config_and_kernels_do_not_import_the_engine() -> None:
    """The two cycles the spec package removed: config <-> graph and kernels <-> graph (and kernels -> config).

    The engine counts too, even for type hints: ``Context`` is the kernel's view, never the engine's.
    """
    wrong = [f"{i.where}: {i.source} imports {i.target}" for i in _all_imports()
             if (i.source, i.target) in {("config", "graph"), ("kernels", "graph"), ("kernels", "config"),
                                         ("config", "engine"), ("kernels", "engine")}]
    assert wrong == []


def _module_graph(packages: tuple[str, ...]) -> dict[str, set[str]]:
    """Module -> the modules of ``packages`` it imports, type hints and lazy imports included."""
    files = {_module_name(path)[0]: path for package in packages for path in sorted((SRC / package).glob("*.py"))}
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        package = _module_name(path)[1]
        deps: set[str] = set()
        for node, _guarded in _import_statements(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                candidates = [alias.name for alias in node.names]
            else:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)] if node.level else []
                module = ".".join([*base, node.module] if node.module else base) if node.level else node.module or ""
                candidates = [module, *(f"{module}.{alias.name}" for alias in node.names)]
            deps |= {c for c in candidates if c in files and c != name}
        graph[name] = deps
    return graph


def test_the_module_graph_reader_sees_type_only_imports() -> None:
    """Guards the reader: a known type-only import (the pollers' queues in a node's edges) is an edge."""
    graph = _module_graph(("engine", "graph"))
    assert "flowplex.engine._budget" in graph["flowplex.engine._nodes"]  # under TYPE_CHECKING there
    assert "flowplex.engine._engine" in graph["flowplex.graph._graph"]
    with pytest.raises(graphlib.CycleError):
        graphlib.TopologicalSorter({"a": {"b"}, "b": {"a"}}).prepare()


def test_no_module_cycle_in_the_engine_and_the_facade_even_through_type_hints() -> None:
    """``flowplex.engine`` and ``flowplex.graph``: modules import one way, ``TYPE_CHECKING`` included."""
    graphlib.TopologicalSorter(_module_graph(("engine", "graph"))).prepare()  # raises CycleError naming it


@cache
def _loaded_parts(statement: str) -> frozenset[str]:
    code = f"import sys\n{statement}\nprint(' '.join(sorted(m for m in sys.modules if m.startswith('flowplex.'))))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    return frozenset(_part(module) for module in result.stdout.split())


@pytest.mark.parametrize("part", sorted(set(MAY_IMPORT) - LEAVES))
def test_a_package_imported_alone_loads_only_its_layers(part: str) -> None:
    """In a fresh interpreter, ``import flowplex.<part>`` loads nothing above it in the table."""
    facade = _loaded_parts("import flowplex")
    assert facade <= LEAVES  # `import flowplex` itself is lazy (PEP 562)
    loaded = _loaded_parts(f"import flowplex.{part}") - facade - {part}
    assert sorted(loaded - _closure(part)) == []
