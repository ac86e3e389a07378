"""``Contract``: what a kernel declares about its ports and side packets at graph build."""

from __future__ import annotations

from typing import final

from ..errors import ConfigError
from ._ports import PortTable

__all__ = ["Contract"]

ANY_TYPE = 0


@final
class Contract:
    """Handed to ``Kernel.get_contract`` while the graph is built; declares port types.

    Undeclared ports accept any type. Mistakes (an index out of range, an invalid type id, a
    duplicate side-packet name) are collected, and the first one fails the build with a
    ``ConfigError`` that names the node.
    """

    __slots__ = ("_error", "_inputs", "_outputs", "input_types", "output_types", "side_packets")

    def __init__(self, inputs: PortTable, outputs: PortTable) -> None:
        self._inputs = inputs
        self._outputs = outputs
        self.input_types: list[int] = [ANY_TYPE] * len(inputs)
        self.output_types: list[int] = [ANY_TYPE] * len(outputs)
        self.side_packets: list[str] = []
        self._error: str | None = None

    @property
    def num_inputs(self) -> int:
        """Number of input ports declared in the YAML."""
        return len(self._inputs)

    @property
    def num_outputs(self) -> int:
        """Number of output ports declared in the YAML."""
        return len(self._outputs)

    def input_id(self, tag: str, index: int = 0) -> int:
        """Flat input index of ``(tag, index)``, or ``INVALID_ID``."""
        return self._inputs.id(tag, index)

    def output_id(self, tag: str, index: int = 0) -> int:
        """Flat output index of ``(tag, index)``, or ``INVALID_ID``."""
        return self._outputs.id(tag, index)

    def input_index(self, name: str) -> int:
        """Flat input index of the port bound to edge ``name``, or ``INVALID_ID``."""
        return self._inputs.index(name)

    def output_index(self, name: str) -> int:
        """Flat output index of the port bound to edge ``name``, or ``INVALID_ID``."""
        return self._outputs.index(name)

    def input_name(self, index: int) -> str:
        """Edge name of input ``index`` (``""`` when out of range)."""
        return self._inputs.name(index)

    def output_name(self, index: int) -> str:
        """Edge name of output ``index`` (``""`` when out of range)."""
        return self._outputs.name(index)

    def input_set_any(self, index: int) -> None:
        """Accept any packet type on input ``index`` (the default)."""
        self._set(self.input_types, index, ANY_TYPE, "input")

    def output_set_any(self, index: int) -> None:
        """Allow any packet type on output ``index`` (the default)."""
        self._set(self.output_types, index, ANY_TYPE, "output")

    def input_set_type(self, index: int, type_id: int) -> None:
        """Require packets of ``type_id`` on input ``index`` (checked per packet at runtime)."""
        self._set(self.input_types, index, type_id, "input")

    def output_set_type(self, index: int, type_id: int) -> None:
        """Promise packets of ``type_id`` on output ``index`` (checked at build and runtime)."""
        self._set(self.output_types, index, type_id, "output")

    def require_side_packet(self, name: str) -> None:
        """Declare a side packet that must be set with ``Graph.set_side_packet`` before start."""
        if not isinstance(name, str) or not name:
            self._fail("required side packet name must be a non-empty string")
        elif name in self.side_packets:
            self._fail(f"side packet `{name}` is required more than once")
        else:
            self.side_packets.append(name)

    def first_error(self) -> str | None:
        """The first mistake recorded by the kernel's ``get_contract``, if any."""
        return self._error

    def _set(self, table: list[int], index: int, type_id: int, side: str) -> None:
        if not isinstance(index, int) or not 0 <= index < len(table):
            count = "num_inputs" if side == "input" else "num_outputs"
            self._fail(f"{side} port index {index} is out of range ({count}={len(table)})")
            return
        if type_id != ANY_TYPE:
            from ..packets import validate_type_id

            try:
                validate_type_id(type_id)
            except ValueError as exc:
                self._fail(f"{side} port {index}: {exc}")
                return
        table[index] = type_id

    def _fail(self, message: str) -> None:
        if self._error is None:
            self._error = message


def declare_contract(cls: type, inputs: PortTable, outputs: PortTable, where: str) -> Contract:
    """Run ``cls.get_contract`` (if any) on a fresh contract; ``ConfigError`` prefixed ``where``."""
    contract = Contract(inputs, outputs)
    get_contract = getattr(cls, "get_contract", None)
    if get_contract is not None:
        try:
            get_contract(contract)
        except Exception as exc:
            msg = f"{where}: get_contract failed: {type(exc).__name__}: {exc}"
            raise ConfigError(msg) from exc
    problem = contract.first_error()
    if problem is not None:
        msg = f"{where}: {problem}"
        raise ConfigError(msg)
    return contract
