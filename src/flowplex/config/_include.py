"""``include``: merge subgraph libraries from other files.

Only the ``subgraphs`` and ``imports`` of an included file are used (its nodes, ports and
executors are ignored, as in lm-flow); its imports run when it is read, relative to it. Paths
are relative to the including file; included files may include others. The same file reached
twice (a diamond or a cycle) is read once, by canonical path. A subgraph name defined in two
files is an error naming both.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ..errors import ConfigError
from ._imports import run_imports
from ._marks import parse_document
from ._paths import Source
from ._schema import GraphModel, SubgraphModel
from ._validation import validate_document

__all__ = ["Library", "SubgraphEntry", "collect_subgraphs", "read_text"]


@dataclass(frozen=True, slots=True)
class SubgraphEntry:
    """A subgraph definition and the document it was written in."""

    model: SubgraphModel
    source: Source


@dataclass(frozen=True, slots=True)
class Library:
    """What the included files contribute."""

    subgraphs: dict[str, SubgraphEntry]
    """Every subgraph visible from the main document: its own, then included ones."""
    imports: tuple[str, ...] = ()
    """The included files' imports, resolved, in the order they ran."""


def read_text(path: Path, what: str) -> str:
    """Read a UTF-8 YAML file, mapping I/O problems to one ``ConfigError`` line.

    Args:
        path: The file.
        what: How to name it in the message (``graph file `g.yaml```...).
    """
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        msg = f"{what} is not UTF-8 text ({exc.reason} at byte {exc.start})"
        raise ConfigError(msg) from None
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        msg = f"{what} cannot be read: {reason} ({path})"
        raise ConfigError(msg) from None


def collect_subgraphs(model: GraphModel, source: Source, file: Path | None) -> Library:
    """Every subgraph visible from the main document (its own, then included ones, depth first),
    running the included files' ``imports`` on the way.

    Args:
        model: The main document.
        source: Its line table.
        file: The main file, or ``None`` when loading from text (then ``include`` is an error).

    Raises:
        ConfigError: ``include`` without a file, an unreadable or invalid included file, a
            subgraph defined more than once, or an included file's import failing.
    """
    library = {name: SubgraphEntry(sub, source) for name, sub in model.subgraphs.items()}
    if not model.include:
        return Library(library)
    if file is None:
        msg = (
            f"{source.prefix(('include',))}include: `include` is only supported when loading from a file "
            "(load_yaml_file / Graph.from_yaml_file); relative paths cannot be resolved from a text string"
        )
        raise ConfigError(msg)
    imports: list[str] = []
    _follow(model, source, file, library, imports, {os.path.realpath(file)})
    return Library(library, tuple(imports))


def _follow(
    model: GraphModel,
    source: Source,
    file: Path,
    library: dict[str, SubgraphEntry],
    imports: list[str],
    visited: set[str],
) -> None:
    for k, entry in enumerate(model.include):
        target = file.parent / entry
        canonical = os.path.realpath(target)
        if canonical in visited:
            continue
        visited.add(canonical)
        shown = os.path.normpath(os.path.join(os.path.dirname(source.name or ""), entry))
        try:
            text = read_text(target, f"include `{entry}`")
        except ConfigError as exc:
            msg = f"{source.prefix(('include', k))}include[{k}]: {exc}"
            raise ConfigError(msg) from None
        data, included = parse_document(text, shown)
        library_model = validate_document(data, included)
        imports.extend(run_imports(library_model, included, target.parent))
        for name, sub in library_model.subgraphs.items():
            first = library.get(name)
            if first is not None:
                msg = (
                    f"{included.prefix(('subgraphs', name))}subgraphs.{name}: subgraph `{name}` defined "
                    f"more than once (in `{first.source.name}` and `{shown}`)"
                )
                raise ConfigError(msg)
            library[name] = SubgraphEntry(sub, included)
        _follow(library_model, included, target, library, imports, visited)
