"""``RayExecutor``: the kernels of its nodes in Ray actors, the scheduler in this process.

Only kernel callbacks cross, as for the process pool: the engine hands the executor an
``Invocation`` and gets an ``Outcome`` back. Each node placed on it lives in a Ray actor of its
own (one per replica for a node with ``max_in_flight > 1``), which Ray schedules on a machine
that offers the CPUs, GPUs, memory and custom resources the executor asks for. Calls go to the
actors in batches (``_lanes``), frames by reference (``_frames``).
"""

from __future__ import annotations

import logging
import math
import os
import sys
import threading
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING, Final, final

from ...errors import BrokenError, ConfigError, UsageError
from ...kernels._context import PHASE_OPEN, PHASE_PROCESS
from ...kernels._host import failed_outcome
from ...kernels._loading import imports_so_far
from ...packets._buffers import _Buffer
from .. import TaskStats
from .._invocation import Outcome
from ..hosted._replicas import Gather, Replicas
from ..hosted._tasks import DispatchTasks, OnDispatcherTasks
from ..hosted._wire import HostRequest, wire_recipe
from ._connect import connect, disconnect, ray_module
from ._frames import encode, invocation_packets, keep_live_frames, put_frames
from ._lanes import MAX_BATCHES_IN_FLIGHT, Completions, Lane

if TYPE_CHECKING:
    from concurrent.futures import Future

    from ...packets import Packet
    from ...spec._specs import NodeSpec
    from .._invocation import Complete, Invocation, NodeRecipe, Spill
    from ..hosted._wire import HostReply

__all__ = ["DEFAULT_MAX_BATCH", "DEFAULT_MAX_BATCH_DELAY_MS", "RayExecutor"]

log = logging.getLogger(__name__)

DEFAULT_MAX_BATCH: Final = 256
DEFAULT_MAX_BATCH_DELAY_MS: Final = 2.0
HOST_TIMEOUT_S: Final = 60.0
"""How long ``host`` waits for Ray to place every actor and for them to build their kernels."""
_IDLE: Final[dict[tuple[object, ...], list[object]]] = {}
"""Idle actors of shut-down executors made with ``warm=True``, by Ray job and actor options."""
_IDLE_LOCK: Final = threading.Lock()


@final
class _Node:
    """The actors of one node (its replicas), with the recipe they host."""

    __slots__ = ("lanes", "name", "outputs", "recipe", "replicas")

    def __init__(self, recipe: NodeRecipe, lanes: list[Lane]) -> None:
        self.recipe = recipe
        self.lanes = lanes
        self.replicas = Replicas(tuple(range(len(lanes))))
        self.name = recipe.spec.name
        self.outputs = len(recipe.spec.output_ports)


@final
class RayExecutor(OnDispatcherTasks):
    """Runs the kernels of its nodes in Ray actors, on a local Ray instance or a cluster.

    Calls of one actor run one at a time in claim order, so a node keeps its one kernel
    instance and its state, as on any executor. The engine may claim up to ``max_batch`` calls
    of a node (per replica) before the first is answered; the actor runs them in order and the
    engine flushes their outputs in order, so outputs are those of any other executor.

    A dead actor: the calls of its batches in flight fail with an error naming the node, and
    the engine applies the node's ``on_error``. With ``max_restarts: 0`` every later call of
    the node fails the same way; with ``max_restarts: N`` Ray starts the actor again (up to N
    times), it hosts the node again and reopens its kernel, and later calls go to it.
    """

    kind = "ray"
    runs_on_caller = False
    hosts_kernels = True
    kernels_in_process = False
    """Its kernels run in Ray worker processes: they share no module state with this one."""
    threads = 1

    def __init__(self, name: str, address: str | None = None, *, num_cpus: float = 1.0, num_gpus: float = 0.0,
                 memory: int = 0, resources: dict[str, float] | None = None, max_batch: int = DEFAULT_MAX_BATCH,
                 max_batch_delay_ms: float = DEFAULT_MAX_BATCH_DELAY_MS, max_restarts: int = 0,
                 warm: bool = False) -> None:
        """Describe the executor; nothing connects to Ray before ``host`` (``Graph.start``).

        Args:
            name: The executor's name (``executors[].name``).
            address: The cluster: None (the Ray instance this process uses already, or a new
                local one), ``"auto"`` (the cluster running on this machine), ``"ray://host:10001"``
                (Ray Client) or ``"IP:port"`` of a head node.
            num_cpus: CPUs each actor (one per node, or per replica) asks Ray for.
            num_gpus: GPUs each actor asks for (fractions share a GPU).
            memory: Bytes of memory each actor asks for (0: no request).
            resources: Custom resources each actor asks for (``{"camera": 1}``): they pin the
                nodes to the machines that offer them.
            max_batch: Invocations per actor call at most, and calls of a node (per replica)
                in flight at most. Lower it for large frames: each call in flight holds one.
            max_batch_delay_ms: How long a call waits for others to fill a batch while its
                actor is busy.
            max_restarts: How many times Ray restarts a dead actor (0: never).
            warm: At ``shutdown``, actors stay alive for the next executor made with
                ``warm=True`` and the same requests in this process (which hosts its own nodes
                on them), instead of being killed: for test sessions that build many graphs
                (``flowplex.testing``). Not with ``max_restarts`` (a restarted actor would host
                its first graph again).

        Raises:
            UsageError: A value out of range.
        """
        _check_number(name, "num_cpus", num_cpus)
        _check_number(name, "num_gpus", num_gpus)
        _check_number(name, "max_batch_delay_ms", max_batch_delay_ms)
        for what, value in (("memory", memory), ("max_restarts", max_restarts)):
            if type(value) is not int or value < 0:
                msg = f"RayExecutor `{name}`: {what} must be an integer >= 0, got {value!r}"
                raise UsageError(msg)
        if type(max_batch) is not int or max_batch < 1:
            msg = f"RayExecutor `{name}`: max_batch must be an integer >= 1, got {max_batch!r}"
            raise UsageError(msg)
        resources = dict(resources or {})
        for key, amount in resources.items():
            if not isinstance(key, str) or not key:
                msg = f"RayExecutor `{name}`: resource names must be non-empty strings, got {key!r}"
                raise UsageError(msg)
            _check_number(name, f"resources.{key}", amount)
        if warm and max_restarts:
            msg = f"RayExecutor `{name}`: warm=True cannot be combined with max_restarts"
            raise UsageError(msg)
        if address is not None and (not isinstance(address, str) or not address.strip()):
            msg = f"RayExecutor `{name}`: address must be a non-empty string or None, got {address!r}"
            raise UsageError(msg)
        self.name = name
        self.address = address
        self.num_cpus = float(num_cpus)
        self.num_gpus = float(num_gpus)
        self.memory = memory
        self.resources = resources
        self.max_batch = max_batch
        self.max_batch_delay_ms = float(max_batch_delay_ms)
        self.max_restarts = max_restarts
        self._warm = warm
        self._tasks = DispatchTasks(name)
        self._ray: ModuleType | None = None
        self._actor_class: object = None
        self._nodes: dict[int, _Node] = {}
        self._completions = Completions(name, max_batch, max_batch_delay_ms / 1000.0, self._send, self._failed)

    def watch(self, stopped: Callable[[], bool]) -> None:
        """The engine's "stopped for good" test (failed or cancelled; not paused): ``process``
        calls not sent yet are dropped once it is true, so that an abort or a cancel waits only
        for the batches already in the actors."""
        self._completions.stopped = stopped

    def calls_in_flight(self, spec: NodeSpec) -> int:
        """How many calls of a node the engine may claim before the first is answered: a batch
        per replica (a source: one call at a time, its end is known only from its answer)."""
        if spec.is_source:
            return 1
        return self.max_batch * max(1, spec.max_in_flight)

    # -- kernels --------------------------------------------------------------------------------

    def host(self, recipes: list[NodeRecipe]) -> None:
        """Start (or keep) the actors of these nodes and build their kernels there (``Graph.start``).

        Connects to Ray first. Blocks until every actor has hosted its node (at most
        ``HOST_TIMEOUT_S``).

        Raises:
            ConfigError: Ray is not installed, the cluster cannot offer what a node asks for, or
                a kernel could not be built in its actor (the message names the node).
            BrokenError: The cluster cannot be reached, or an actor died while starting.
        """
        if not recipes and not self._nodes:
            return  # no node of this graph is placed here: nothing to connect for
        ray = self._connect(recipes)
        import ray.cloudpickle as cloudpickle

        self._check_resources(ray, recipes)
        imports = imports_so_far()
        wanted = {recipe.index: recipe for recipe in recipes}
        for index in [i for i in self._nodes if i not in wanted]:
            self._kill(self._nodes.pop(index))
        try:
            waits = self._start_actors(ray, cloudpickle, recipes, imports)
        except (ConfigError, BrokenError):
            raise
        except Exception as exc:  # Ray refused a call (a stale handle, a bad option): one line, not its traceback
            msg = f"executor `{self.name}`: Ray could not start the graph's actors: {_first_line(exc)}"
            raise BrokenError(msg) from None
        self._await_hosting(ray, waits)
        self._completions.start()

    def _start_actors(self, ray: ModuleType, cloudpickle: ModuleType, recipes: list[NodeRecipe],
                      imports: tuple[tuple[str, str], ...]) -> list[tuple[_Node, int, object]]:
        """Create (or reuse) the actors of ``recipes`` and ask each to host its node; the answers
        to wait for."""
        waits: list[tuple[_Node, int, object]] = []
        for recipe in recipes:
            request = HostRequest(imports, [(recipe.index, cloudpickle.dumps(wire_recipe(recipe)))], None,
                                  tuple(sys.path), os.getcwd())
            frame = cloudpickle.dumps(request)
            node = self._nodes.get(recipe.index)
            if node is not None and node.recipe.spec == recipe.spec and node.recipe.kernel_cls is recipe.kernel_cls:
                for k, lane in enumerate(node.lanes):
                    waits.append((node, k, lane.actor.host.remote(frame)))  # type: ignore[attr-defined]
                node.recipe = recipe
                continue
            if node is not None:
                self._kill(node)
            lanes: list[Lane] = []
            node = self._nodes[recipe.index] = _Node(recipe, lanes)
            for k in range(_replicas(recipe.spec)):
                actor = self._idle_actor(ray)
                if actor is not None:
                    answer = actor.adopt.remote(frame)  # type: ignore[attr-defined]
                else:
                    actor = self._new_actor(ray, frame)
                    answer = actor.hosted.remote()  # type: ignore[attr-defined]
                lanes.append(Lane(actor, recipe.index, k))
                waits.append((node, k, answer))
            node.replicas = Replicas(tuple(range(len(lanes))))
        return waits

    def _connect(self, recipes: list[NodeRecipe]) -> ModuleType:
        ray = self._ray
        if ray is None:
            cpus = sum(self.num_cpus * _replicas(r.spec) for r in recipes)
            ray = self._ray = connect(self.name, self.address, math.ceil(cpus))
            from ._actor import NodeActor

            self._actor_class = ray.remote(NodeActor)
        return ray

    def _warm_key(self, ray: ModuleType) -> tuple[object, ...]:
        context = ray.get_runtime_context()
        return (context.gcs_address, context.get_job_id(), self.num_cpus, self.num_gpus, self.memory,
                tuple(sorted(self.resources.items())))

    def _idle_actor(self, ray: ModuleType) -> object | None:
        """An idle actor a warm executor left with the same requests, in this Ray job; or None."""
        if not self._warm:
            return None
        with _IDLE_LOCK:
            idle = _IDLE.get(self._warm_key(ray))
            return idle.pop() if idle else None

    def _new_actor(self, ray: ModuleType, frame: bytes) -> object:
        options: dict[str, object] = {"num_cpus": self.num_cpus, "max_restarts": self.max_restarts,
                                      "max_task_retries": 0, "max_concurrency": 1}
        if self.num_gpus:
            options["num_gpus"] = self.num_gpus
        if self.memory:
            options["memory"] = self.memory
        if self.resources:
            options["resources"] = dict(self.resources)
        return self._actor_class.options(**options).remote(self.name, frame)  # type: ignore[attr-defined]

    def _check_resources(self, ray: ModuleType, recipes: list[NodeRecipe]) -> None:
        """Fail now, naming what is missing, when no machine of the cluster could ever place the
        actors (Ray would keep them pending for ever)."""
        new = [r for r in recipes if r.index not in self._nodes]
        if not new:
            return
        have = ray.cluster_resources()
        per_actor = {"CPU": self.num_cpus, "GPU": self.num_gpus, **self.resources}
        if self.memory:
            per_actor["memory"] = float(self.memory)
        for key, amount in per_actor.items():
            if amount and have.get(key, 0.0) < amount:
                label = new[0].spec.label
                offered = ", ".join(f"{k}: {_amount(k, v)}" for k, v in sorted(have.items())
                                    if not k.startswith(("node:", "object_store")))
                flag = {"CPU": "--num-cpus N", "GPU": "--num-gpus N", "memory": "--memory BYTES"}.get(
                    key, f"--resources '{{\"{key}\": 1}}'")
                msg = (f"{label}: executor `{self.name}` asks Ray for {key}: {_amount(key, amount)} per actor, but "
                       f"the cluster does not have that much (it has {offered or 'nothing'}); lower the request "
                       f"or start a Ray node that offers it (`ray start {flag}`)")
                raise ConfigError(msg)

    def _await_hosting(self, ray: ModuleType, waits: list[tuple[_Node, int, object]]) -> None:
        refs = [ref for _, _, ref in waits]
        _, not_ready = ray.wait(refs, num_returns=len(refs), timeout=HOST_TIMEOUT_S)
        if not_ready:
            late = sorted({node.name for node, _, ref in waits if ref in not_ready})
            msg = (f"executor `{self.name}`: Ray did not start the actors of node(s) {', '.join(map(repr, late))} "
                   f"within {HOST_TIMEOUT_S:.0f} s; the cluster may be short of the CPUs or resources they ask for "
                   "(`ray status` tells)")
            raise BrokenError(msg)
        failures: list[str] = []
        for node, k, ref in waits:
            try:
                answer = ray.get(ref)
            except Exception as exc:
                msg = (f"{node.recipe.spec.label}: its Ray actor (executor `{self.name}`) failed to start: "
                       f"{_first_line(exc)}")
                raise BrokenError(msg) from None
            reply: HostReply = answer[0] if isinstance(answer, tuple) else answer
            if isinstance(answer, tuple):
                lane = node.lanes[k]
                lane.placed = (answer[1], answer[2], answer[3])
                lane.where = f"pid {answer[1]} on {answer[2]}"
            for kind, value, text in reply.lost_imports:
                log.warning("ray.actor.import.failed executor=%r node=%r %s=%r: %s", self.name, node.name, kind,
                            value, text)
            for _, text in reply.failures:
                failures.append(f"{node.recipe.spec.label}: cannot be hosted in its Ray actor (executor "
                                f"`{self.name}`): {text}" if not text.startswith(node.recipe.spec.path) else text)
        if failures:
            raise ConfigError(failures[0])

    def invoke(self, invocation: Invocation, complete: Complete, spill: Spill | None = None) -> None:
        """Queue one callback for the actor of its node; ``complete`` runs when its batch is
        answered (on the completion thread), or at once when it cannot be sent.

        ``spill`` is not used: one call's output comes back whole, in its batch's answer, so a
        ``process`` call that emits millions of packets holds them all in the actor and then
        here (the process pool delivers them in slices). The actor has no channel back but
        the answer of ``run``: slicing would need ``run`` to be a streaming generator
        (``num_returns="streaming"``, held back by Ray while this process has not consumed its
        last slice) with the kernel on a thread of its own in the actor (``emit`` cannot yield
        from inside ``process``), and lanes that read a batch as a stream of slices and
        outcomes. Their one ``Completions`` thread serves every actor of the executor, so it
        must not wait for the budget on one node's behalf: each streaming lane would need a
        thread of its own for that wait. Left for later (issue 25).
        """
        node = self._nodes.get(invocation.node)
        if node is None:
            msg = f"invoke: node {invocation.node} is not hosted on executor `{self.name}`"
            complete(failed_outcome(invocation, UsageError(msg)))
            return
        ray = self._ray
        if ray is not None and (invocation.batch is not None or _any_buffer(invocation.inputs)):
            try:
                put_frames(ray, invocation_packets((invocation,)))
            except Exception as exc:
                complete(failed_outcome(invocation, UsageError(f"cannot put a frame in Ray's object store: {exc}"),
                                        node.outputs))
                return
        lanes = node.lanes
        add = self._completions.add
        if len(lanes) == 1:
            add(lanes[0], invocation, complete)
        elif invocation.phase == PHASE_PROCESS:
            k = node.replicas.pick()
            add(lanes[k], invocation, _releasing(node.replicas, k, complete))
        else:
            phase = "open" if invocation.phase == PHASE_OPEN else "close"
            gather = Gather(len(lanes), complete, f"[{node.name}] {phase}")
            for k, lane in enumerate(lanes):
                add(lane, invocation, gather.part(k))

    def _send(self, lane: Lane, invocations: list[Invocation]) -> Future[tuple[bytes, list[object]]]:
        data, refs = encode(invocations)
        future: Future[tuple[bytes, list[object]]] = lane.actor.run.remote(data, refs).future()  # type: ignore[attr-defined]
        return future

    def _failed(self, lane: Lane, exc: BaseException | None, calls: list[tuple[Invocation, Complete]]) -> None:
        """Complete ``calls`` of a batch that failed as a whole: its actor died (or Ray could
        not run the call); without restarts, nothing more goes to that actor. ``exc`` None:
        the calls were dropped unsent because the graph stopped (no output, no error: the
        engine claims nothing more and only waits for them)."""
        node = self._nodes.get(lane.node)
        name = node.name if node is not None else f"#{lane.node}"
        outputs = node.outputs if node is not None else 0
        if exc is None:
            for invocation, complete in calls:
                complete(Outcome(invocation.node, invocation.seq, [[] for _ in range(outputs)]))
            return
        ray = self._ray
        errors = ray.exceptions if ray is not None else None
        where = f" ({lane.where})" if lane.where else ""
        if errors is not None and isinstance(exc, errors.ActorUnavailableError):
            # Unreachable for now (a network hiccup, or its machine going away): these calls are
            # lost, later ones go on; if it is dead, Ray says so with ActorDiedError next.
            text = (f"the Ray actor of node `{name}`{where}, executor `{self.name}`, is unreachable: "
                    f"{_first_line(exc)} (this call is lost)")
        elif errors is not None and isinstance(exc, errors.RayActorError):
            text = f"the Ray actor of node `{name}`{where}, executor `{self.name}`, died: {_first_line(exc)}"
            lane.dead = True
            if self.max_restarts:
                text += f" (Ray restarts it up to {self.max_restarts} time(s); this call is lost)"
            else:
                calls.extend(self._completions.close(lane, text))
        elif isinstance(exc, BrokenError | UsageError):
            text = str(exc)
        else:
            text = f"node `{name}`{where}, executor `{self.name}`: the Ray call failed: {_first_line(exc)}"
        kind = UsageError if isinstance(exc, UsageError) else BrokenError
        for invocation, complete in calls:
            complete(failed_outcome(invocation, kind(text), outputs))  # one each: the engine adds notes

    # -- tasks ------------------------------------------------------------------------------------

    def stats(self) -> TaskStats:
        """Calls waiting to be sent (``queued``, with tasks for the dispatcher) and sent (``running``)."""
        queued, running = self._tasks.queued, 0
        lanes = [lane for node in list(self._nodes.values()) for lane in node.lanes]
        for lane in lanes:
            waiting, flying = self._completions.waiting(lane)
            queued += waiting
            running += flying
        return TaskStats(self.kind, self.threads, queued, running, len(lanes) * MAX_BATCHES_IN_FLIGHT)

    @property
    def actors(self) -> dict[str, list[object]]:
        """The actor handles of each hosted node, by node name (replica order)."""
        return {node.name: [lane.actor for lane in node.lanes] for node in self._nodes.values()}

    @property
    def placement(self) -> dict[str, list[tuple[int, str, str]]]:
        """Where each hosted node's actors run: ``(pid, IP address, Ray node id)`` per replica."""
        return {node.name: [lane.placed for lane in node.lanes] for node in self._nodes.values()}

    @property
    def batches(self) -> int:
        """Actor calls sent so far; each carried a batch of invocations (diagnostics, tests)."""
        return self._completions.batches

    def shutdown(self) -> None:
        """Kill the graph's actors; leave a cluster running, shut down a local instance flowplex
        started (when no other Ray executor of this process uses it). Idempotent.

        Frames the host still holds and has not read are copied here first: the objects their
        actors own go with them.
        """
        self._tasks.dispatcher.shutdown()
        self._completions.stop()
        nodes, self._nodes = self._nodes, {}
        ray, self._ray = self._ray, None
        if ray is None:
            return
        if self._warm:  # their actors stay, and so do the frames they own
            key = self._warm_key(ray)
            for node in nodes.values():
                for lane in node.lanes:
                    self._completions.close(lane, f"executor `{self.name}` is shut down")
                    if not lane.dead:
                        with _IDLE_LOCK:
                            _IDLE.setdefault(key, []).append(lane.actor)
                    else:
                        self._kill_lane(ray, node, lane)
            disconnect()
            if not ray.is_initialized():  # the instance went with the last executor: so did its actors
                with _IDLE_LOCK:
                    _IDLE.clear()
            return
        keep_live_frames(self._completions.live)
        for node in nodes.values():
            self._kill(node)
        disconnect()

    def _kill(self, node: _Node) -> None:
        ray = ray_module(self.name)
        for lane in node.lanes:
            self._completions.close(lane, f"executor `{self.name}` is shut down")
            self._kill_lane(ray, node, lane)

    @staticmethod
    def _kill_lane(ray: ModuleType, node: _Node, lane: Lane) -> None:
        try:
            ray.kill(lane.actor, no_restart=True)
        except Exception as exc:  # gone already
            log.debug("ray.actor.kill.failed node=%r error=%r", node.name, exc)


def _amount(key: str, value: float) -> str:
    """A resource amount as people write it (memory in GiB)."""
    return f"{value / 2**30:.2f} GiB" if key == "memory" else f"{value:g}"


def _any_buffer(packets: list[Packet | None]) -> bool:
    """Whether a buffer is among ``packets`` (a loop: cheaper than ``any`` on a generator, per call)."""
    for p in packets:  # noqa: SIM110
        if p is not None and type(p._value) is _Buffer:
            return True
    return False


def _replicas(spec: NodeSpec) -> int:
    """Actors of a node: one per invocation it may run at once (a source: one)."""
    return 1 if spec.is_source else max(1, spec.max_in_flight)


def _check_number(name: str, what: str, value: object) -> None:
    if not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value) or value < 0:
        msg = f"RayExecutor `{name}`: {what} must be a number >= 0, got {value!r}"
        raise UsageError(msg)


def _first_line(exc: BaseException) -> str:
    """Ray's errors carry long tracebacks: the type and the first lines that say what happened."""
    text = str(exc).strip()
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return f"{type(exc).__name__}: {' '.join(lines[:3])[:500]}" if lines else type(exc).__name__


def _releasing(replicas: Replicas, k: int, complete: Complete) -> Complete:
    def done(outcome: Outcome) -> None:
        replicas.done(k)
        complete(outcome)

    return done


