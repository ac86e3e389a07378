"""``NodeActor``: the Ray actor that hosts one replica of a node's kernel and runs its batches.

Ray starts it in a worker process of whatever machine offers the resources the node asked for.
Its constructor hosts the node (the host's ``sys.path``, working directory and kernel code
first); ``run`` takes a batch of invocations in claim order and answers their outcomes in the
same order, one Ray call for the lot. When Ray restarts a dead actor (``max_restarts``), the
constructor runs again with the same request and reopens the node's kernel itself: the engine
sees no second ``open``, and a reopen that fails fails every later call of the node.

This module is imported by Ray's worker processes; the Ray executor wraps the class with
``ray.remote`` (Ray itself is imported lazily, as everywhere in flowplex).
"""

from __future__ import annotations

import os
import pickle
import warnings
from typing import TYPE_CHECKING, final

from ..._timestamps import TS_UNSTARTED
from ...errors import BrokenError
from ...kernels._context import PHASE_OPEN
from ...kernels._host import failed_outcome
from .._invocation import Invocation
from ..hosted._hosting import NodeHosting
from ..hosted._wire import HostReply, recipe_from_wire
from ._frames import decode, encode, outcome_packets, put_frames

if TYPE_CHECKING:
    from ...kernels._registry import Kernel
    from ...spec._specs import NodeSpec
    from .._invocation import NodeRecipe, Outcome

__all__ = ["NodeActor", "decode_cloud_recipe"]


def decode_cloud_recipe(frame: bytes, route_classes: dict[int, tuple[NodeSpec, type[Kernel]]]) -> NodeRecipe:
    """A recipe the executor pickled with Ray's cloudpickle (a class from ``__main__`` or a
    function travels by value; an importable one by reference)."""
    return recipe_from_wire(pickle.loads(frame), route_classes)


@final
class NodeActor:
    """Hosts the nodes of one ``HostRequest`` (one node, or one replica of it) in this Ray worker."""

    def __init__(self, executor: str, request: bytes) -> None:
        import ray

        self._ray = ray
        self._executor = executor
        self._hosting = NodeHosting(decode_cloud_recipe)
        self._reply = self._hosting.host(pickle.loads(request))
        self._broken: dict[int, str] = {}
        """Node index → why it could not be reopened after a restart (its calls fail)."""
        with warnings.catch_warnings():  # deprecated without a replacement that says the same
            warnings.simplefilter("ignore", DeprecationWarning)
            self.restarted = bool(ray.get_runtime_context().was_current_actor_reconstructed)
        if self.restarted and not self._reply.failures:
            self._reopen()

    def hosted(self) -> tuple[HostReply, int, str, str]:
        """What hosting did, this worker's pid, its machine's IP address and its Ray node id."""
        ray = self._ray
        return self._reply, os.getpid(), ray.util.get_node_ip_address(), ray.get_runtime_context().get_node_id()

    def adopt(self, request: bytes) -> tuple[HostReply, int, str, str]:
        """Forget every node of the graph this idle actor served, host the request's (a warm
        executor's new graph); answers as ``hosted``."""
        self._hosting.forget()
        self._broken = {}
        self._reply = self._hosting.host(pickle.loads(request))
        return self.hosted()

    def host(self, request: bytes) -> HostReply:
        """Host the request's nodes again (a later ``Graph.start``: same recipes keep their
        instances, side packets are replaced)."""
        self._reply = self._hosting.host(pickle.loads(request))
        return self._reply

    def run(self, data: bytes, refs: list[object]) -> tuple[bytes, list[object]]:
        """Run a batch in order (``_frames.encode`` of its invocations); its outcomes, in the
        same order, encoded the same way."""
        ray = self._ray
        batch: list[Invocation] = decode(data, refs, ray.get(refs) if refs else None)
        del data
        hosting = self._hosting
        broken = self._broken
        outcomes: list[Outcome] = []
        batch.reverse()
        while batch:
            invocation = batch.pop()  # its inputs are then held by the call alone, until it ends
            why = broken.get(invocation.node) if broken else None
            if why:
                outcomes.append(failed_outcome(invocation, BrokenError(why),
                                               hosting.hosts.num_outputs(invocation.node)))
            else:
                outcomes.append(hosting.run(invocation))
            del invocation
        put_frames(ray, outcome_packets(outcomes))
        for outcome in outcomes:
            if outcome.exception is not None:
                _keep_if_picklable(outcome)
        return encode(outcomes)

    def _reopen(self) -> None:
        """Run ``open`` of every hosted node again (this actor was restarted); output dropped."""
        for index, recipe in self._hosting.recipes.items():
            inputs: list[object] = [None] * len(recipe.spec.input_ports)
            outcome = self._hosting.run(Invocation(index, -1, PHASE_OPEN, TS_UNSTARTED, inputs))  # type: ignore[arg-type]
            if outcome.error:
                self._broken[index] = (f"node `{recipe.spec.name}` could not be opened again in its Ray actor "
                                       f"(executor `{self._executor}`) after a restart: {outcome.error}")


def _keep_if_picklable(outcome: Outcome) -> None:
    """Drop the outcome's exception object when it does not pickle (its text still tells)."""
    try:
        pickle.loads(pickle.dumps(outcome.exception, pickle.HIGHEST_PROTOCOL))
    except Exception:
        outcome.exception = None
