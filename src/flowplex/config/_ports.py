"""Port declarations: ``name``, ``TAG:name`` and ``TAG:index:name``.

Parsing is separate from the per-node rules (duplicates, contiguous indices), which the plan
checks on specs, so hand-built specs get the same checks as YAML ones.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Final

from ..spec._specs import PortSpec

__all__ = ["PortDeclError", "format_port_decl", "parse_port_decl", "port_specs"]

_INDEX: Final = re.compile(r"\+?[0-9]+")
"""What lm-flow's ``usize`` parser accepts: ASCII digits with an optional ``+``; no spaces."""


class PortDeclError(ValueError):
    """A declaration is malformed; the message is lm-flow's text, without the YAML path."""


def parse_port_decl(text: str) -> tuple[str, int | None, str]:
    """Split one declaration into ``(tag, index, name)``; ``index`` is ``None`` when not written.

    >>> parse_port_decl("IMG:0:frame")
    ('IMG', 0, 'frame')
    >>> parse_port_decl("frame")
    ('', None, 'frame')

    Raises:
        PortDeclError: More than 3 segments, a non-integer index or an empty name.
    """
    parts = text.split(":")
    if len(parts) > 3:
        msg = (
            f"port declaration `{text}` has an invalid number of segments "
            "(expected name / TAG:name / TAG:index:name)"
        )
        raise PortDeclError(msg)
    tag = parts[0] if len(parts) > 1 else ""
    index: int | None = None
    if len(parts) == 3:
        if _INDEX.fullmatch(parts[1]) is None:
            msg = f"port declaration `{text}`: index `{parts[1]}` is not a non-negative integer"
            raise PortDeclError(msg)
        index = int(parts[1])
    name = parts[-1]
    if not name:
        msg = f"port declaration `{text}` has an empty name"
        raise PortDeclError(msg)
    return tag, index, name


def format_port_decl(tag: str, index: int | None, name: str) -> str:
    """The inverse of ``parse_port_decl``."""
    if index is not None:
        return f"{tag}:{index}:{name}"
    return f"{tag}:{name}" if tag else name


def port_specs(
    decls: Sequence[str],
    rename: Callable[[str], str] | None = None,
    on_error: Callable[[int, str], Exception] | None = None,
) -> tuple[PortSpec, ...]:
    """Parse a port list, assigning automatic indices.

    An undeclared index is the number of automatically indexed ports seen so far in the same tag
    (lm-flow's rule: ``["T:1:a", "T:b"]`` gives ``b`` index 0).

    Args:
        decls: The declarations, in order.
        rename: Applied to each name (subgraph namespacing); tags are kept.
        on_error: Builds the exception for declaration ``i`` with lm-flow's message.

    Raises:
        PortDeclError: Or whatever ``on_error`` returns, for the first malformed declaration.
    """
    auto: dict[str, int] = {}
    out: list[PortSpec] = []
    for i, decl in enumerate(decls):
        try:
            tag, index, name = parse_port_decl(decl)
        except PortDeclError as exc:
            if on_error is None:
                raise
            raise on_error(i, str(exc)) from None
        if index is None:
            index = auto.get(tag, 0)
            auto[tag] = index + 1
        out.append(PortSpec(name=rename(name) if rename else name, tag=tag, index=index))
    return tuple(out)
