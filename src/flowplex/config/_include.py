"""``include``: merge subgraph libraries from other files.

Only the ``subgraphs`` and ``imports`` of an included file are used (its nodes, ports and
executors are ignored, as in lm-flow); its imports run when it is read, relative to it. Paths
are relative to the including file; included files may include others. The same file reached
twice (a diamond or a cycle) is read once, by canonical path. A subgraph name defined in two
files is an error naming both.

Only regular files are read, up to ``Limits.max_document_bytes``: a device (``/dev/zero``),
a FIFO (which would block forever) or a directory is refused from the opened descriptor's
``fstat``, so what is checked is what is read. Chains are at most ``Limits.max_include_depth``
files long.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from .._types import PathLike
from ..errors import ConfigError
from ..spec._text import escape_controls
from ._imports import run_imports
from ._limits import DEFAULT_LIMITS, Limits, exceeded
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


_OPEN_FLAGS: Final = (os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
                      | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0))
"""Non-blocking so that opening a FIFO returns at once (and is then refused as not a regular file)."""


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def read_text(path: PathLike, what: str, max_bytes: int = DEFAULT_LIMITS.max_document_bytes) -> str:
    """Read a UTF-8 YAML file, mapping I/O problems to one ``ConfigError`` line.

    The file is opened once, non-blocking; the opened descriptor must be a regular file of at
    most ``max_bytes`` bytes (checked with ``fstat``, then again by reading at most one byte more).

    Args:
        path: The file.
        what: How to name it in the message (``graph file `g.yaml```...).
        max_bytes: The size limit (``Limits.max_document_bytes``).
    """
    name = os.fspath(path)
    what = escape_controls(what)  # the path as the user gave it; keep the message one safe line
    if "\0" in str(name):
        msg = f"{what} cannot be read: the path contains a NUL byte"
        raise ConfigError(msg)
    try:
        fd = os.open(name, _OPEN_FLAGS)
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        msg = f"{what} cannot be read: {reason} ({escape_controls(str(name))})"
        raise ConfigError(msg) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            msg = f"{what} is {_kind(info.st_mode)}, not a regular file ({escape_controls(str(name))})"
            raise ConfigError(msg)
        if info.st_size > max_bytes:
            msg = f"{what} is {info.st_size} bytes, more than {max_bytes} {exceeded('max_document_bytes', max_bytes)}"
            raise ConfigError(msg)
        chunks: list[bytes] = []
        left = max_bytes + 1  # one more: a file that grew since fstat is still caught
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 16))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        msg = f"{what} cannot be read: {reason} ({escape_controls(str(name))})"
        raise ConfigError(msg) from None
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > max_bytes:
        msg = f"{what} is more than {max_bytes} bytes {exceeded('max_document_bytes', max_bytes)}"
        raise ConfigError(msg)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        msg = f"{what} is not UTF-8 text ({exc.reason} at byte {exc.start})"
        raise ConfigError(msg) from None


def collect_subgraphs(
    model: GraphModel, source: Source, file: Path | None, limits: Limits = DEFAULT_LIMITS
) -> Library:
    """Every subgraph visible from the main document (its own, then included ones, depth first),
    running the included files' ``imports`` on the way.

    Args:
        model: The main document.
        source: Its line table.
        file: The main file, or ``None`` when loading from text (then ``include`` is an error).
        limits: Each included file's size and the chain's length.

    Raises:
        ConfigError: ``include`` without a file, an unreadable or invalid included file, a
            subgraph defined more than once, an included file's import failing, or a limit.
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
    # Iterative, so that a long chain meets the depth limit, not the interpreter's recursion limit.
    visited = {os.path.realpath(file)}
    pending: list[tuple[GraphModel, Source, Path, int, int]] = [(model, source, file, 0, 1)]
    while pending:
        current, at, where, k, depth = pending.pop()
        if k >= len(current.include):
            continue
        pending.append((current, at, where, k + 1, depth))  # the next entry, after this one's subtree
        step = _follow(current, at, where, k, depth, library, imports, visited, limits)
        if step is not None:
            pending.append((*step, 0, depth + 1))
    return Library(library, tuple(imports))


def _follow(
    model: GraphModel,
    source: Source,
    file: Path,
    k: int,
    depth: int,
    library: dict[str, SubgraphEntry],
    imports: list[str],
    visited: set[str],
    limits: Limits,
) -> tuple[GraphModel, Source, Path] | None:
    """Read ``model.include[k]`` (unless already read); returns what it includes in turn."""
    entry = model.include[k]
    if "\0" in entry:
        msg = f"{source.prefix(('include', k))}include[{k}]: the path contains a NUL byte"
        raise ConfigError(msg)
    target = file.parent / entry
    canonical = os.path.realpath(target)
    if canonical in visited:
        return None
    if depth > limits.max_include_depth:
        msg = (f"{source.prefix(('include', k))}include[{k}]: `include` chain longer than "
               f"{limits.max_include_depth} files {exceeded('max_include_depth', limits.max_include_depth)}")
        raise ConfigError(msg)
    visited.add(canonical)
    shown = os.path.normpath(os.path.join(os.path.dirname(source.name or ""), entry))
    try:
        text = read_text(target, f"include `{entry}`", limits.max_document_bytes)
    except ConfigError as exc:
        msg = f"{source.prefix(('include', k))}include[{k}]: {exc}"
        raise ConfigError(msg) from None
    data, included = parse_document(text, shown, limits)
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
    return library_model, included, target
