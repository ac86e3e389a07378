"""The API reference pages: one per public module, each name of its ``__all__`` by mkdocstrings.

The public modules are found, not listed: ``flowplex`` itself and every module or package
directly under it whose name has no leading underscore and that defines ``__all__``. Every name
of an ``__all__`` gets an entry, so a new public name is documented (or the build warns, see
``undocumented``) without editing any page.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

_KIND_TITLES = {"class": "Classes", "function": "Functions", "attribute": "Constants", "module": "Modules"}


@dataclass(frozen=True)
class ApiPage:
    """One generated page: the module it documents and where it lives under ``reference/api/``."""

    module: str
    path: str

    @property
    def title(self) -> str:
        return self.module


def public_modules(src: Path) -> list[str]:
    """``flowplex`` and its public submodules that declare ``__all__``, sorted (a public package's
    own public packages too: ``flowplex.executors.processes``)."""
    found = ["flowplex"]
    todo = [(src / "flowplex", "flowplex")]
    while todo:
        root, prefix = todo.pop(0)
        for entry in sorted(root.iterdir()):
            if entry.name.startswith(("_", ".")):
                continue
            if entry.is_dir() and (entry / "__init__.py").is_file():
                text = (entry / "__init__.py").read_text(encoding="utf-8")
                todo.append((entry, f"{prefix}.{entry.name}"))
            elif entry.suffix == ".py":
                text = entry.read_text(encoding="utf-8")
            else:
                continue
            if "\n__all__" in text:
                found.append(f"{prefix}.{entry.name.removesuffix('.py')}")
    return sorted(found, key=lambda m: (m != "flowplex", m))


def pages(src: Path) -> list[ApiPage]:
    """The pages to generate, the package itself first."""
    return [ApiPage(m, "index.md" if m == "flowplex" else m.removeprefix("flowplex.") + ".md")
            for m in public_modules(src)]


def load(src: Path) -> Any:
    """The ``flowplex`` package as griffe reads it (statically, from ``src``: what mkdocstrings shows)."""
    import griffe

    # No inspection: with flowplex imported, griffe would inspect the mypyc-compiled twin of a
    # module (no class docstrings) instead of reading its source.
    return griffe.load("flowplex", search_paths=[str(src)], resolve_aliases=False, resolve_external=False,
                       allow_inspection=False)


def _member(package: Any, module: str) -> Any:
    return package if module == "flowplex" else package[module.removeprefix("flowplex.")]


def _resolve(obj: Any, name: str) -> Any | None:
    """The object ``name`` is in ``obj`` (aliases followed), or ``None`` when griffe cannot see it."""
    try:
        target = obj[name]
        if getattr(target, "is_alias", False):
            target = target.final_target
    except Exception:  # griffe's KeyError / AliasResolutionError: a name made at run time
        return None
    return target


def undocumented(package: Any, modules: list[str]) -> list[str]:
    """Every public name (``module.name``) that has no docstring, or that griffe cannot find."""
    missing = []
    for module in modules:
        obj = _member(package, module)
        for name in obj.exports or []:
            target = _resolve(obj, name)
            if target is None:
                target = _resolve(package, name)  # a lazy name re-exported at the top is documented there
            if target is None or target.docstring is None or not target.docstring.value.strip():
                missing.append(f"{module}.{name}")
    return missing


def render(package: Any, page: ApiPage, all_pages: list[ApiPage]) -> str:
    """The Markdown of one API page: the module's docstring, then its names grouped by kind."""
    module = _member(package, page.module)
    parts = [f"# `{page.module}`\n"]
    parts.append(f"::: {page.module}\n    options:\n      members: false\n      show_root_heading: false\n")
    if page.module == "flowplex":
        others = ", ".join(f"[`{p.module}`]({p.path})" for p in all_pages if p.module != "flowplex")
        parts.append(f"The public subpackages and modules: {others}.\n")
    groups: dict[str, list[str]] = {}
    top = set(package.exports or []) if page.module != "flowplex" else set()
    for name in module.exports or []:
        target = _resolve(module, name)
        if name in top and target is not None and _same(target, _resolve(package, name)):
            # One entry per object: what the package re-exports is documented on the main page.
            groups.setdefault("Also exported here", []).append(
                f"- `{page.module}.{name}`{{ #{page.module}.{name} }}: the same object as "
                    f"[`flowplex.{name}`](index.md#flowplex.{name}).")
            continue
        if target is None:
            target = _resolve(package, name)
            if target is not None:
                # Made at run time in the subpackage (a lazy name); documented on the main page.
                groups.setdefault("Also exported here", []).append(
                    f"- `{page.module}.{name}`{{ #{page.module}.{name} }}: the same object as "
                    f"[`flowplex.{name}`](index.md#flowplex.{name}).")
                continue
            groups.setdefault("Also exported here", []).append(f"- `{page.module}.{name}`")
            continue
        kind = target.kind.value
        if kind == "module":
            summary = target.docstring.value.strip().split("\n", 1)[0] if target.docstring else ""
            entry = _module_entry(f"{page.module}.{name}", target.path, summary, all_pages)
            groups.setdefault(_KIND_TITLES[kind], []).append(entry)
            continue
        groups.setdefault(_KIND_TITLES.get(kind, "Other"), []).append(
            f"::: {page.module}.{name}\n    options:\n      heading_level: 3\n")
    for title in [*_KIND_TITLES.values(), "Other", "Also exported here"]:
        if title in groups:
            parts.append(f"## {title}\n")
            parts.extend(groups[title])
            parts.append("")
    return "\n".join(parts)


def _same(a: Any, b: Any | None) -> bool:
    return b is not None and a.path == b.path


def _module_entry(public: str, real: str, summary: str, all_pages: list[ApiPage]) -> str:
    """A heading (with the name as its anchor) and a link to the module's own page."""
    lines = [f"### `{public}` {{ #{public} }}\n", summary]
    for p in all_pages:
        if p.module in (public, real):
            lines.append(f"\nDocumented on [its own page]({p.path}).")
    return "\n".join(lines) + "\n"
