"""YAML paths (``nodes[0].input_ports[1]``) and the source lines they came from.

Every config error starts with the path of the offending value; when the YAML came from a file,
the path is preceded by ``file.yaml:LINE:`` so editors can jump to it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TypeAlias

from ..spec._text import escape_controls

__all__ = ["Source", "YamlPath", "format_path", "node_context"]

YamlPath: TypeAlias = tuple[str | int, ...]
"""Keys and list indices from the document root, e.g. ``("nodes", 0, "input_ports", 1)``."""


def format_path(path: Iterable[str | int]) -> str:
    """Render a path the way lm-flow prints it.

    >>> format_path(("nodes", 0, "input_queues", "ports", "x"))
    'nodes[0].input_queues.ports.x'
    """
    out: list[str] = []
    for part in path:
        if isinstance(part, int):
            out.append(f"[{part}]")
        else:
            out.append(f".{part}" if out else part)
    return escape_controls("".join(out))


def node_context(name: str, *, expanded: bool = False) -> str:
    """The `` (node `a`)`` suffix that names the node an error is about."""
    if not name:
        return ""
    name = escape_controls(name)
    return f" (expanded node `{name}`)" if expanded else f" (node `{name}`)"


@dataclass(frozen=True, slots=True)
class Source:
    """Where a document came from: a display name and the line of every YAML path in it."""

    name: str | None
    """The file name as the user gave it (``None`` for text without a ``source``)."""
    lines: dict[YamlPath, int] = field(default_factory=dict)
    """1-based line of each mapping key and sequence item, by path."""

    def line_of(self, path: YamlPath) -> int | None:
        """The line of ``path``, or of its closest ancestor that has one."""
        for end in range(len(path), 0, -1):
            line = self.lines.get(path[:end])
            if line is not None:
                return line
        return self.lines.get(())

    def prefix(self, path: YamlPath) -> str:
        """``"file.yaml:LINE: "`` for ``path``, or ``""`` when the document has no file name."""
        if self.name is None:
            return ""
        line = self.line_of(path)
        return f"{self.name}: " if line is None else f"{self.name}:{line}: "
