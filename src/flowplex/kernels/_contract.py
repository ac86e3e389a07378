"""``Contract``: what a kernel declares about its ports and side packets at graph build."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, cast, final

from .._suggest import did_you_mean
from ..errors import ConfigError
from ..spec._conditions import CONTRACT_WHERE, condition_problem, kind_problem
from ..spec._specs import ConditionKind, ConditionSpec
from ._ports import PortTable

__all__ = ["Contract"]

ANY_TYPE = 0

_CONDITION_FIELDS: Final[dict[str, tuple[str, ...]]] = {
    "periodic": ("period_ms",),
    "count": (),
    "boolean": ("name", "initial"),
    "event": ("name",),
}
"""The keys of each kind's YAML mapping (``count`` takes its value alone, as ``count: 10`` does)."""


@final
class Contract:
    """Handed to ``Kernel.get_contract`` while the graph is built; declares port types.

    Undeclared ports accept any type. Mistakes (an index out of range, an invalid type id, a
    duplicate side-packet name, an invalid condition) are collected, and the first one fails the
    build with a ``ConfigError`` that names the node.
    """

    __slots__ = ("_error", "_inputs", "_outputs", "conditions", "input_types", "output_types", "side_packets")

    def __init__(self, inputs: PortTable, outputs: PortTable) -> None:
        self._inputs = inputs
        self._outputs = outputs
        self.input_types: list[int] = [ANY_TYPE] * len(inputs)
        self.output_types: list[int] = [ANY_TYPE] * len(outputs)
        self.side_packets: list[str] = []
        self.conditions: list[ConditionSpec] = []
        """Conditions added with ``add_condition`` (``where="get_contract"``); the build merges them
        with the node's YAML ``conditions`` (``spec._plan.merge_conditions``)."""
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

    def add_condition(self, kind: str, value: object = None, /, **fields: object) -> None:
        """Add a condition to the node, as its YAML ``conditions`` would.

        The arguments mirror the YAML: ``add_condition("count", 5)``, ``add_condition("periodic",
        period_ms=10)``, ``add_condition("boolean", name="armed", initial=False)``,
        ``add_condition("event", name="go")``; ``value`` may also be the YAML mapping
        (``add_condition("periodic", {"period_ms": 10})``). The rules are the YAML's: a node has at
        most one condition of each kind (counting its YAML ones), ``count`` only without input ports,
        ``periodic`` not with ``rate``.
        """
        problem = kind_problem(kind)
        if problem is not None:
            self._fail(f"add_condition: {problem}")
            return
        label = f"add_condition({kind!r})"
        allowed = _CONDITION_FIELDS[kind]
        if kind == "count":
            if fields:
                self._fail(f"{label}: takes the count alone (`add_condition('count', 10)`), got keyword arguments")
                return
            given: dict[str, object] = {"count": value}
        elif value is None:
            given = dict(fields)
        elif isinstance(value, Mapping) and not fields:
            given = {str(key): item for key, item in value.items()}
        else:
            self._fail(f"{label}: give its fields by keyword ({', '.join(f'{f}=...' for f in allowed)})")
            return
        for key in given:
            if kind != "count" and key not in allowed:
                hint = did_you_mean(key, allowed)
                expected = ", ".join(f"`{f}`" for f in allowed)
                self._fail(f"{label}: unknown field `{key}`{hint} (expected {expected})")
                return
        spec = _condition(cast("ConditionKind", kind), given)  # one of CONDITION_KINDS: checked above
        if isinstance(spec, str):
            self._fail(f"{label}: {spec}")
            return
        alone = condition_problem(spec)
        if alone is not None:
            self._fail(f"{label}: {alone[1]}")
            return
        self.conditions.append(spec)

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


def _condition(kind: ConditionKind, given: dict[str, object]) -> ConditionSpec | str:
    """A condition from ``add_condition``'s fields, or the message for a value of the wrong type."""
    if kind == "periodic":
        period_ms = given.get("period_ms")
        if isinstance(period_ms, bool) or not isinstance(period_ms, int | float):
            return f"needs `period_ms`, a number of milliseconds (got {period_ms!r})"
        return ConditionSpec(kind, CONTRACT_WHERE, period_s=period_ms / 1e3)
    if kind == "count":
        count = given["count"]
        if isinstance(count, bool) or not isinstance(count, int):
            return f"count must be an integer (how many times the node runs), got {count!r}"
        return ConditionSpec(kind, CONTRACT_WHERE, count=count)
    name = given.get("name", "")
    if not isinstance(name, str):
        return f"name must be a string, got {name!r}"
    initial = given.get("initial", True)
    if not isinstance(initial, bool):
        return f"initial must be True or False, got {initial!r}"
    return ConditionSpec(kind, CONTRACT_WHERE, name=name, initial=initial)


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
