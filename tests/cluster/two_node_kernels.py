"""The kernel of the two-node Ray test: in a module, because Ray actors import it by reference
(the driver's ``sys.path`` travels with the hosting request)."""

from __future__ import annotations

import sys

import flowplex


def ray_node_id() -> str:
    """The id of the Ray node this process runs on ("" when it is not connected to Ray)."""
    ray = sys.modules.get("ray")
    if ray is None or not ray.is_initialized():
        return ""
    node_id: str = ray.get_runtime_context().get_node_id()
    return node_id


@flowplex.kernel("TwoNodeWhere")
class TwoNodeWhere(flowplex.Kernel):
    """Emits ``x * factor + offset`` on output 0 and, for the same packet, on output 1 the id of
    the Ray node it ran on ("" outside Ray), so that a graph's outputs tell where each node ran.

    Options: ``factor`` (int, default 1), ``offset`` (int, default 0).
    """

    def __init__(self) -> None:
        self._factor = 1
        self._offset = 0

    def open(self, cc: flowplex.Context) -> None:
        self._factor = cc.option_int("factor", 1)
        self._offset = cc.option_int("offset", 0)

    def process(self, cc: flowplex.Context) -> None:
        cc.emit(0, cc.input(0).as_int() * self._factor + self._offset)
        cc.emit(1, ray_node_id())
