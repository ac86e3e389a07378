"""The engine's side of the executor seam: a claimed context as an ``Invocation``, an
``Outcome`` applied back to it.

In-process executors run the engine's own task on the engine's context (the context *is* the
invocation, at no cost). A node on an executor that ``hosts_kernels`` runs elsewhere: the loop
turns its context into plain data here, and writes what came back into the same context, so
that completing it is the same code for every executor.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ..errors import FlowplexError
from ..executors._invocation import Invocation, NodeRecipe, Outcome

if TYPE_CHECKING:
    from ..kernels._context import Context
    from ..packets import Packet
    from ._nodes import Node

log = logging.getLogger("flowplex.graph")


def invocation_of(node: Node, ctx: Context) -> Invocation:
    """The claimed callback in ``ctx`` as plain data; the context lets go of its inputs."""
    inputs: list[Packet | None] = list(ctx.in_packets)
    for i in range(len(ctx.in_packets)):
        ctx.in_packets[i] = None
    batch = ctx.batch
    ctx.batch = None
    return Invocation(node.index, ctx.seq, ctx.phase, ctx.ts, inputs, batch, ctx.in_done, ctx.close_reason)


def apply_outcome(node: Node, ctx: Context, outcome: Outcome) -> tuple[BaseException | None, str]:
    """Write a hosted callback's ``outcome`` into ``ctx`` (staging, requests) and its node's
    counters and log; returns the failure as ``(exception, text)`` (text "" when it succeeded)."""
    info = node.info
    for name, delta in outcome.counters:
        info.counter_add(name, delta)
    for level, message in outcome.logs:
        info.log(level, message)
    if outcome.ignored_emits:
        info.ignored_emits += outcome.ignored_emits
    if outcome.conditions:
        failure = _apply_conditions(node, outcome.conditions)
        if failure is not None and not outcome.error:  # as the call would have raised in this process
            return failure, f"{type(failure).__name__}: {failure}"
    if outcome.error:
        err = outcome.exception
        if err is not None and outcome.traceback:
            err.add_note(f"(raised in the kernel host of node `{node.name}`)\n{outcome.traceback}")
        return err, outcome.error
    outputs = outcome.outputs
    if len(outputs) != len(ctx.out_packets):
        msg = (f"the executor returned output for {len(outputs)} port(s); node `{node.name}` has "
               f"{len(ctx.out_packets)}")
        return None, msg
    stage_outputs(ctx, outputs)
    ctx.bounds = outcome.bounds
    ctx.source_finished = outcome.source_done
    ctx.yield_s = outcome.yield_s
    return None, ""


def _apply_conditions(node: Node, ops: list[tuple[str, str, bool]]) -> FlowplexError | None:
    """Apply a hosted kernel's ``cc.notify`` / ``cc.set_condition`` calls; the first bad one
    (an unknown name) stops them and is the callback's failure."""
    apply = node.info.conditions
    assert apply is not None  # (every node's info reaches the graph's conditions: ``_build``)
    for op, name, value in ops:
        try:
            apply(op, name, value)
        except FlowplexError as exc:
            return exc
    return None


def stage_outputs(ctx: Context, outputs: list[list[Packet]]) -> None:
    """Stage the packets a kernel host sent back (a whole outcome, or one slice of a long call)
    behind what ``ctx`` already holds, port by port, emptying ``outputs``."""
    for staged, packets in zip(ctx.out_packets, outputs, strict=True):
        for p in packets:
            p._owned = False
        staged.extend(packets)
        packets.clear()  # the context holds them now, alone: a consumer may find them exclusive


def recipe_of(node: Node, strict_ports: bool) -> NodeRecipe:
    """What a kernel host needs to build ``node``'s kernel on its own instance."""
    return NodeRecipe(node.index, node.spec, type(node.kernel), strict_ports, dict(node.info.side_packets))
