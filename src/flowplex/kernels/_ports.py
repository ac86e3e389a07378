"""Port tables: flat port indices by declaration order, looked up by tag/index or by name."""

from __future__ import annotations

from typing import TYPE_CHECKING, final

from .._timestamps import INVALID_ID

if TYPE_CHECKING:  # annotations only: importing flowplex.graph here would be circular
    from ..spec._specs import PortSpec


@final
class PortTable:
    """The ports of one side (inputs or outputs) of a node, in declaration order.

    The flat index of a port is its position in the YAML list (lm-flow's rule: not grouped by
    tag), so ``input_id("", k)`` finds the k-th untagged port.
    """

    __slots__ = ("_by_name", "_by_tag", "names", "ports")

    def __init__(self, ports: tuple[PortSpec, ...]) -> None:
        self.ports = ports
        self.names: tuple[str, ...] = tuple(p.name for p in ports)
        self._by_tag = {(p.tag, p.index): i for i, p in enumerate(ports)}
        self._by_name = {p.name: i for i, p in enumerate(ports)}

    def __len__(self) -> int:
        return len(self.ports)

    def id(self, tag: str, index: int = 0) -> int:
        """Flat index of port ``(tag, index)``, or ``INVALID_ID``."""
        return self._by_tag.get((tag, index), INVALID_ID)

    def index(self, name: str) -> int:
        """Flat index of the port bound to edge ``name``, or ``INVALID_ID``."""
        return self._by_name.get(name, INVALID_ID)

    def name(self, index: int) -> str:
        """Edge name of port ``index``; ``""`` when out of range."""
        if 0 <= index < len(self.names):
            return self.names[index]
        return ""
