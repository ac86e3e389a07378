"""Why a graph cannot make progress: the text of ``DeadlockError``s (lock held to build one)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._timestamps import ts_name
from ..errors import DeadlockError

if TYPE_CHECKING:
    from ._blocking import Blocking
    from ._nodes import Node


def starving(nodes: list[Node]) -> list[str]:
    """Input ports that hold packets but cannot fire."""
    out = []
    for node in nodes:
        if node.closed:
            continue
        for p in node.inputs:
            state = "closed" if p.closed else f"open, bound {ts_name(p.bound)}"
            if p.queue:
                out.append(f"{node.name}.{p.name} ({len(p.queue)} queued, {state})")
    return out


def stall_error(what: str, nodes: list[Node], blocking: Blocking) -> DeadlockError:
    """A ``DeadlockError`` naming unclosed nodes, starving ports and blocked producers."""
    unclosed = [n.name for n in nodes if not n.closed]
    ports = starving(nodes)
    reason = f"; starving ports: [{', '.join(ports)}]" if ports else ""
    if blocking.blocked:
        reason += (f"; producers blocked by full downstream queues: [{blocking.blocked_names()}] -- increase the "
                   "input_queues capacity, read the blocking pollers, or inspect downstream alignment")
    return DeadlockError(
        f"{what}: all inputs closed but the graph is idle and nodes are not closed: "
        f"[{', '.join(unclosed)}]{reason}. usually a kernel's close condition is unmet "
        "(a source that never calls source_done?)"
    )
