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


def waits_on(nodes: list[Node]) -> list[str]:
    """Joins holding packets for want of another input: ``node 'fuse' waits on input 'lidar' (...)``."""
    out = []
    for node in nodes:
        if node.closed or len(node.fwd) < 2 or not any(p.queue for p in node.fwd):
            continue
        head = min(p.queue[0]._ts for p in node.fwd if p.queue)
        for p in node.fwd:
            if not p.closed and not p.queue and p.bound <= head:
                limit = f"timeout {p.timeout_s * 1e3:g} ms" if p.timeout_s > 0 else "no timeout set"
                out.append(f"node '{node.name}' waits on input '{p.name}' ({limit})")
    return out


def held(nodes: list[Node]) -> list[str]:
    """Nodes that a condition holds: ``node 'tick' disabled by condition 'armed'``."""
    out = []
    for node in nodes:
        gate = node.gate
        if gate is not None and not node.closed:
            why = gate.holding()
            if why:
                out.append(f"node '{node.name}' {why}")
    return out


def stall_error(what: str, nodes: list[Node], blocking: Blocking) -> DeadlockError:
    """A ``DeadlockError`` naming unclosed nodes, starving ports, what they wait on and blocked producers."""
    unclosed = [n.name for n in nodes if not n.closed]
    ports = starving(nodes)
    reason = f"; starving ports: [{', '.join(ports)}]" if ports else ""
    waiting = waits_on(nodes) + held(nodes)
    if waiting:
        reason += f"; {'; '.join(waiting)}"
    if blocking.blocked:
        reason += (f"; producers blocked by full downstream queues: [{blocking.blocked_names()}] -- increase the "
                   "input_queues capacity, read the blocking pollers, or inspect downstream alignment")
    return DeadlockError(
        f"{what}: all inputs closed but the graph is idle and nodes are not closed: "
        f"[{', '.join(unclosed)}]{reason}. usually a kernel's close condition is unmet "
        "(a source that never calls source_done?)"
    )
