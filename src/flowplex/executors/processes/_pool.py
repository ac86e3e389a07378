"""``ProcessPoolExecutor``: Python kernels in worker processes, the scheduler in this one.

Only kernel callbacks cross: the engine hands the pool an ``Invocation`` (plain data), the
pool encodes it with the codec and sends the frame over a pipe to the worker that hosts the
node, and the worker's ``Outcome`` comes back the same way (``_link``). Each node placed on the
pool lives in one worker, assigned round robin when the graph starts, with its own kernel
instance for the life of the graph (state kept, ``open``/``process``/``close`` all run there);
a node with ``max_in_flight: N`` lives in up to ``N`` workers at once, as replicas
(``_replicas``). With ``restart="on_failure"`` a worker that dies is replaced (``_restarts``).

Workers are fresh interpreters (``spawn``; ``forkserver`` on request), never a fork of this
process, whose engine threads a fork would copy mid-flight.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import signal
import sys
import threading
import time
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Final, final

from ..._reap import descendants, kill_processes
from ..._timestamps import TS_UNSTARTED
from ...errors import BrokenError, ConfigError, GraphCancelled, Timeout, UsageError
from ...kernels._context import PHASE_OPEN, PHASE_PROCESS
from ...kernels._host import failed_outcome
from ...kernels._loading import file_module_name, imports_so_far
from .. import TaskStats
from .._invocation import Invocation, Outcome
from ..hosted._replicas import Gather, Placement, Replicas
from ..hosted._tasks import DispatchTasks, OnDispatcherTasks
from ..hosted._wire import HostRequest, encode_recipe
from . import _transfer as transfer
from ._arena import DEFAULT_ARENA_BYTES, PAGE, Arena, ArenaStats, arena_size
from ._link import WorkerLink
from ._restarts import RESTART_POLICIES, Restarts

if TYPE_CHECKING:
    from multiprocessing.context import ForkServerContext, SpawnContext

    import numpy as np
    import numpy.typing as npt

    from ...packets._packet import BufferAllocator
    from .._invocation import Complete, NodeRecipe, Spill
    from ._link import Hosting

__all__ = ["ProcessPoolExecutor"]

log = logging.getLogger(__name__)

START_METHODS: Final = ("spawn", "forkserver")
"""How workers may start: a fresh interpreter each, or forked from a fresh server process."""
HOST_TIMEOUT_S: Final = 60.0
"""How long ``host`` waits for a worker to import and build its nodes' kernels."""
STOP_GRACE_S: Final = 1.0
"""How long ``shutdown`` lets workers exit on their own before terminating them."""
DISPATCH_THREADS: Final = 1
"""One dispatcher keeps tasks in submission order; its work is encoding, never waiting."""
_WARM: Final[dict[str, list[WorkerLink]]] = {}
"""Idle workers of shut-down pools made with ``warm=True``, by start method (test sessions)."""
_WARM_LOCK: Final = threading.Lock()
_LIVE: Final[weakref.WeakSet[ProcessPoolExecutor]] = weakref.WeakSet()
"""Pools with an arena or workers: what ``abandon_all`` cleans up before a hard exit."""
HOST_SLICE_S: Final = 0.05
"""How often ``host`` looks at the start's deadline and for a cancel while workers load kernels."""


def abandon_all() -> None:
    """Before this process ends with ``os._exit`` (``flowplex run --timeout``): remove every
    pool's arena from ``/dev/shm`` and kill its workers (SIGKILL), without waiting for any
    thread. Best effort, from any thread: a worker hung in an import or an ``open`` would
    otherwise outlive the run, and its arena would stay behind."""
    for pool in list(_LIVE):
        arena = pool._arena
        if arena is not None:
            with contextlib.suppress(Exception):
                # Only the name: mapped memory stays valid. ``Segment.unlink`` also tells the
                # resource tracker, which would otherwise warn about a "leak" as this process ends.
                arena._seg.unlink()
        for link in list(pool._links):
            with contextlib.suppress(Exception):
                os.kill(link.pid, signal.SIGKILL)


@final
class ProcessPoolExecutor(OnDispatcherTasks):
    """Runs the kernels of its nodes in ``num_processes`` worker processes.

    The engine's tasks (``submit``) run on one dispatcher thread of the pool: each turns a
    claimed invocation into a frame and queues it for the node's worker, which runs the
    callbacks of its nodes one at a time, in the order sent. Outcomes are completed on the
    receiving thread of each worker (a downstream node on the inline executor runs there).

    Workers start at the first ``Graph.start`` (``host``): one per node up to
    ``num_processes``. ``shutdown`` (``Graph.close``) stops them all.

    Replicas: a node with ``max_in_flight: N`` (not a source: a source keeps one instance) runs
    as ``min(N, num_processes)`` replicas, each its own kernel instance with its own state, on
    distinct workers (the workers with the fewest replicas so far). Each ``process`` call goes
    to the replica with the fewest calls in flight (ties in turn); the calls of one replica run
    in the order sent, and the engine flushes their outputs in claim order. ``open`` and
    ``close`` run on every replica, and the engine sees one outcome: when any replica failed,
    the error of the first replica (by number) that did; otherwise the output of replica 0,
    the packets the others emitted being dropped with a warning in the node's log. Counters and
    logs of every replica count. With ``max_in_flight: 1`` a node keeps its one instance.

    A dead worker: the calls in flight on it (sent, or queued for it) complete with an error
    naming the node, the worker's pid and its signal or exit code, and the engine applies the
    node's ``on_error`` (``skip`` counts the lost call and goes on). With ``restart="never"``
    every later call of its nodes fails the same way. With ``restart="on_failure"`` a fresh
    worker takes its slot at once: it hosts the same nodes again (the recipes and side packets
    of the last ``host``) and runs their ``open`` (its output is dropped; its error fails every
    later call of the node); later calls go to it. A slot restarted ``RESTARTS_MAX`` times
    within ``RESTART_WINDOW_S`` is not restarted again: its nodes' later calls fail with an error
    that says so. Each restart is logged (``process.worker.restarted``).
    """

    kind = "processes"
    runs_on_caller = False
    hosts_kernels = True
    kernels_in_process = False
    """Its kernels run in other interpreters: they share no module state with this one."""
    threads = DISPATCH_THREADS

    def __init__(self, name: str, num_processes: int | None = None, *, start_method: str = "spawn",
                 arena_bytes: int = DEFAULT_ARENA_BYTES, restart: str = "never", warm: bool = False) -> None:
        """Describe the pool; no process starts before ``host``.

        Args:
            name: The executor's name (``executors[].name``).
            num_processes: Worker processes at most; None means one per CPU (``os.cpu_count()``).
                If in doubt, use the number of nodes doing heavy Python work.
            start_method: ``spawn`` (a fresh interpreter per worker) or ``forkserver`` (forked
                from one fresh server process: faster to start, same isolation).
            arena_bytes: The size of the shared memory that frames cross in (default 1 GiB,
                at most half of what ``/dev/shm`` has free). When it is full, whoever needs
                room waits for packets to be consumed.
            restart: ``never`` (a dead worker fails every later call of its nodes) or
                ``on_failure`` (a fresh worker replaces it and reopens its nodes' kernels; for
                kernels whose state may be rebuilt by ``open``).
            warm: At ``shutdown``, idle workers stay alive for the next pool made with
                ``warm=True`` in this process (which resets them), instead of exiting: for test
                sessions that build many graphs (``flowplex.testing``). They exit with this
                process. Modules their kernels imported stay imported.

        Raises:
            UsageError: ``num_processes`` is not a positive integer, ``start_method`` or
                ``restart`` is unknown, or ``arena_bytes`` is less than one page (64 KiB).
        """
        if num_processes is None:
            num_processes = os.cpu_count() or 1
        if type(num_processes) is not int or num_processes < 1:
            msg = f"ProcessPoolExecutor `{name}`: num_processes must be an integer >= 1, got {num_processes!r}"
            raise UsageError(msg)
        if start_method not in START_METHODS:
            msg = (f"ProcessPoolExecutor `{name}`: unknown start_method {start_method!r}; expected "
                   f"{' or '.join(START_METHODS)} (never fork: this process runs threads)")
            raise UsageError(msg)
        if type(arena_bytes) is not int or arena_bytes < PAGE:
            msg = (f"ProcessPoolExecutor `{name}`: arena_bytes must be an integer >= {PAGE} (64 KiB), "
                   f"got {arena_bytes!r}")
            raise UsageError(msg)
        if restart not in RESTART_POLICIES:
            msg = (f"ProcessPoolExecutor `{name}`: unknown restart {restart!r}; expected "
                   f"{' or '.join(RESTART_POLICIES)}")
            raise UsageError(msg)
        self.name = name
        self.num_processes = num_processes
        self.arena_bytes = arena_bytes
        self._warm = warm
        self._arena: Arena | None = None
        self.start_method = start_method
        self.restart = restart
        self._context: SpawnContext | ForkServerContext = multiprocessing.get_context(start_method)  # type: ignore[assignment]
        self._lock = threading.Lock()
        self._tasks = DispatchTasks(name)
        """Runs the engine's tasks (each ends in ``invoke``), on the caller or its dispatcher."""
        self._links: list[WorkerLink] = []
        """The workers, by slot (``_placement`` chooses the slots); a restart replaces one."""
        self._placement = Placement(num_processes)
        self._replicas: dict[int, Replicas] = {}
        """Node index → the slots of its replicas."""
        self._outputs: dict[int, int] = {}
        self._inputs: dict[int, int] = {}
        self._requests: dict[int, HostRequest] = {}
        """Slot → what its worker was asked to host last: sent again to a restarted worker."""
        self._restarts = Restarts(restart)
        self._serving = False
        """True from a successful ``host`` until the next ``host`` or ``shutdown``: a dead
        worker is replaced only then."""
        self._start_deadline: float | None = None
        self._start_stopped: Callable[[], bool] | None = None

    def bound_start(self, deadline: float | None, stopped: Callable[[], bool] | None) -> None:
        """Bound the next ``host``'s wait for workers loading kernels: ``Timeout`` at
        ``deadline`` (``time.monotonic()``), ``GraphCancelled`` once ``stopped()`` is true (the
        engine, before each start; ``Graph.start(timeout=...)`` and ``cancel()``)."""
        self._start_deadline = deadline
        self._start_stopped = stopped

    # -- kernels --------------------------------------------------------------------------------

    def host(self, recipes: list[NodeRecipe]) -> None:
        """Place each node on a worker and build its kernel there (``Graph.start``).

        Workers start here, as many as needed (one per replica, up to ``num_processes``). A
        node hosted already keeps its workers and its kernel instances (a restart after
        ``reset``). Blocks until every worker has loaded its nodes (at most ``HOST_TIMEOUT_S``).

        Raises:
            ConfigError: A kernel class the workers cannot import, a recipe that does not
                pickle, or a kernel whose construction failed in the worker; the message names
                the node and what to do.
            BrokenError: A worker died (now, or before and was not restarted).
        """
        frames = [(recipe, encode_recipe(recipe, self.name)) for recipe in recipes]  # before any process starts
        self._serving = False
        placed = self._place(recipes)
        imports = imports_so_far()
        sent: list[tuple[WorkerLink, Hosting]] = []
        for link in self._links:
            slot = link.slot
            mine = [(recipe.index, frame) for recipe, frame in frames if slot in placed[recipe.index].slots]
            link.nodes = {recipe.index: recipe.spec.name for recipe, _ in frames
                          if slot in placed[recipe.index].slots}
            moved = (link.arena.name, link.arena_slot) if link.moved else None
            link.moved = False
            request = HostRequest(imports, mine, moved, tuple(sys.path), os.getcwd())
            self._requests[slot] = request
            sent.append((link, link.send_hosting(request)))
        self._replicas = placed
        self._outputs = {recipe.index: len(recipe.spec.output_ports) for recipe in recipes}
        self._inputs = {recipe.index: len(recipe.spec.input_ports) for recipe in recipes}
        deadline = time.monotonic() + HOST_TIMEOUT_S
        failures: dict[int, str] = {}
        for link, hosting in sent:
            self._wait_hosting(link, hosting.done, deadline)
            reply = link.await_hosting(hosting, max(0.0, deadline - time.monotonic()))
            for kind, value, text in reply.lost_imports:
                log.warning("process.worker.import.failed executor=%r pid=%d %s=%r: %s", self.name, link.pid, kind,
                            value, text)
            for index, text in reply.failures:
                failures.setdefault(index, self._hosting_failure(recipes, index, text, link, reply.lost_imports))
        if failures:
            first = min(failures, key=lambda i: (i < 0, i))
            raise ConfigError(failures[first])
        self._serving = True

    def _wait_hosting(self, link: WorkerLink, done: threading.Event, deadline: float) -> None:
        """Wait for ``link``'s hosting reply until ``deadline`` (then ``await_hosting`` says it is
        late), in slices when the start is bounded (``bound_start``): ``Timeout`` or
        ``GraphCancelled`` name the worker and its nodes; the worker is killed then, so that a reused
        pool never takes its late reply for another start's."""
        bound, stopped = self._start_deadline, self._start_stopped
        if bound is None and stopped is None:
            return
        began = time.monotonic()
        limit = deadline if bound is None else min(deadline, bound)
        while not done.wait(max(0.0, min(HOST_SLICE_S, limit - time.monotonic()))):
            now = time.monotonic()
            where = (f"worker process {link.pid} of executor `{self.name}` is still loading the kernels of "
                     f"{', '.join(f'`{n}`' for n in link.nodes.values()) or 'its nodes'} (importing their "
                     f"modules, constructing them; for {now - began:.3g} s)")
            if stopped is not None and stopped():
                link.abandon()
                msg = f"start was cancelled: {where}"
                raise GraphCancelled(msg)
            if now >= limit:
                if bound is None or limit < bound:
                    return
                link.abandon()
                msg = f"start timed out: {where}"
                raise Timeout(msg)

    def _place(self, recipes: list[NodeRecipe]) -> dict[int, Replicas]:
        """The replicas of each node, their workers started (see ``Placement``)."""
        placed = {index: Replicas(slots) for index, slots in self._placement.place(recipes).items()}
        last = max((slot for replicas in placed.values() for slot in replicas.slots), default=-1)
        with self._lock:
            while len(self._links) <= last:
                self._links.append(self._new_link(len(self._links)))
        for link in self._links:
            if link.lost:
                msg = (f"worker process {link.pid} of executor `{self.name}` {link.lost}; it cannot host "
                       f"nodes again ({self._restarts.why_not(link.slot)}): build the graph again")
                raise BrokenError(msg)
        return placed

    def _open_arena(self) -> Arena:
        arena = self._arena
        if arena is None:
            arena = self._arena = Arena.create(arena_size(self.arena_bytes), self.num_processes + 1,
                                               owner=f"ProcessPoolExecutor `{self.name}`")
            _LIVE.add(self)
        return arena

    def buffer_allocator(self) -> BufferAllocator | None:
        """``new_buffer``'s allocator for nodes feeding this pool: its shared memory (None before
        the first start), so that frames made for its nodes reach them without a copy."""
        arena = self._arena
        return None if arena is None else arena.new_array

    def in_arena(self, array: npt.NDArray[np.generic]) -> bool:
        """Whether ``array``'s memory lies in this pool's shared-memory arena (diagnostics, tests)."""
        arena = self._arena
        return arena is not None and arena.locate_array(array) >= 0

    def arena_stats(self) -> ArenaStats | None:
        """What the host did with the shared-memory arena (None before the first start)."""
        arena = self._arena
        return None if arena is None else arena.stats()

    def _new_link(self, slot: int) -> WorkerLink:
        """Start the worker of ``slot`` (or take a warm one); the pool hears of its death when
        restarts are on."""
        on_lost = self._on_worker_lost if self._restarts.enabled else None
        while self._warm:
            with _WARM_LOCK:
                warm = _WARM.get(self.start_method)
                link = warm.pop() if warm else None
            if link is None:
                break
            if link.idle():
                link.adopt(self.name, slot, self._open_arena(), on_lost)
                return link
            link.stop()
            link.finish(STOP_GRACE_S)
        return WorkerLink(self.name, slot, self._context, self._open_arena(), on_lost)

    def _hosting_failure(self, recipes: list[NodeRecipe], index: int, text: str, link: WorkerLink,
                         lost: list[tuple[str, str, str]]) -> str:
        recipe = next((r for r in recipes if r.index == index), None)
        if recipe is None:
            return text  # a kernel constructor's error: it names the node already
        cls = recipe.kernel_cls
        module = cls.__module__
        for kind, value, why in lost:
            if (module == value or module.startswith(f"{value}.") if kind == "module"
                    else kind == "file" and module == file_module_name(value)):
                text += f" (loading `{value}` failed there too: {why})"
        return (f"{recipe.spec.label}: kernel class `{module}.{cls.__qualname__}` cannot be imported "
                f"in worker process {link.pid} of executor `{self.name}`: {text}; move the class into a module "
                "the workers can import (on sys.path), or name its file in the graph's `imports:`")

    def invoke(self, invocation: Invocation, complete: Complete, spill: Spill | None = None) -> None:
        """Send one callback to the worker hosting its node; ``complete`` runs when it answers.

        A ``process`` call that stages ``SPILL_SLICE`` packets on a port sends them ahead in a
        partial outcome and waits: ``spill`` (on the worker's receiving thread) delivers them
        and waits for room in the graph's budget, then the worker goes on. Without ``spill``
        the slices are kept here and come with the call's outcome.

        Returns at once (the frame is queued; a sender thread writes it). ``complete`` is called
        exactly once: on the worker's receiving thread with the outcome (of the last replica to
        answer, for an ``open`` or ``close`` of a node with replicas), or here, at once, when
        the invocation cannot be sent (a payload that does not pickle, a node not hosted here,
        a worker that is gone, a node that could not be reopened after a restart).
        """
        node = invocation.node
        replicas = self._replicas.get(node)
        outputs = self._outputs.get(node, 0)
        if replicas is None:
            msg = f"invoke: node {node} is not hosted on executor `{self.name}`"
            complete(failed_outcome(invocation, UsageError(msg), outputs))
            return
        self._send(replicas, invocation, outputs, complete, spill)

    def _send(self, replicas: Replicas, invocation: Invocation, outputs: int, complete: Complete,
              spill: Spill | None) -> None:
        """Queue ``invocation`` for the replica that runs it: one for ``process``, each for
        ``open`` and ``close`` (one outcome for the engine: see the class docstring)."""
        node, seq = invocation.node, invocation.seq
        if self._restarts.enabled:
            broken = self._restarts.broken.get(node)
            if broken:
                complete(failed_outcome(invocation, BrokenError(broken), outputs))
                return
            complete = self._unless_broken(node, seq, outputs, complete)
        links = self._links  # read once: ``shutdown`` swaps the list
        if len(replicas) == 1:
            self._call(links, replicas.slots[0], invocation, outputs, complete, spill)
        elif invocation.phase == PHASE_PROCESS:
            k = replicas.pick()
            self._call(links, replicas.slots[k], invocation, outputs, _releasing(replicas, k, complete), spill)
        else:
            name = links[replicas.slots[0]].nodes.get(node, f"#{node}") if links else f"#{node}"
            phase = "open" if invocation.phase == PHASE_OPEN else "close"
            gather = Gather(len(replicas), complete, f"[{name}] {phase}")
            for k, slot in enumerate(replicas.slots):
                self._call(links, slot, invocation, outputs, gather.part(k))

    def _call(self, links: list[WorkerLink], slot: int, invocation: Invocation, outputs: int,
              complete: Complete, spill: Spill | None = None) -> None:
        """``WorkerLink.call`` on the worker of ``slot`` (its replacement, when it died and restarts
        are on). The frame is encoded for that worker: its arena slot is credited with the blocks."""
        node, seq = invocation.node, invocation.seq
        if slot >= len(links):
            text = f"executor `{self.name}` is shut down; node #{node} cannot run"
            complete(Outcome(node, seq, [[] for _ in range(outputs)], error=f"BrokenError: {text}",
                             exception=BrokenError(text)))
            return
        link = links[slot]
        if link.lost and self._restarts.enabled:
            link = self._revive(link) or link
        try:
            frame = transfer.encode_invocation(invocation, link.arena, link.arena_slot)
        except UsageError as exc:
            complete(failed_outcome(invocation, exc, outputs))
            return
        link.call(link.new_call(node, seq, outputs, complete, (invocation.inputs, invocation.batch), spill), frame)

    def _unless_broken(self, node: int, seq: int, outputs: int, complete: Complete) -> Complete:
        """``complete``, with a failure instead of the outcome once the node could not be
        reopened after a restart (its calls queued behind that ``open`` ran on an unopened kernel)."""
        broken = self._restarts.broken

        def done(outcome: Outcome) -> None:
            text = broken.get(node)
            if text and not outcome.error:
                outcome = Outcome(node, seq, [[] for _ in range(outputs)], error=f"BrokenError: {text}",
                                  exception=BrokenError(text))
            complete(outcome)

        return done

    # -- restarts ---------------------------------------------------------------------------------

    def _on_worker_lost(self, dead: WorkerLink, how: str) -> str:
        """``WorkerLink``'s ``on_lost``: replace the worker; the note its failed calls carry."""
        link = self._revive(dead)
        if link is None:
            return f" (not restarted: {self._restarts.why_not(dead.slot)})"
        return f" (restarted as worker process {link.pid})"

    def _revive(self, dead: WorkerLink) -> WorkerLink | None:
        """The worker that replaces ``dead`` in its slot, started now unless it was already;
        None when none may (not serving a started graph, or too many restarts).

        The new worker's hosting request and the ``open`` of each of its nodes are queued
        before any other call can reach it (under the lock), so they run first.
        """
        slot = dead.slot
        with self._lock:
            links = self._links
            if slot >= len(links):
                return None
            current = links[slot]
            if current is not dead:
                return None if current.lost else current
            request = self._requests.get(slot)
            if not self._serving or request is None or not request.recipes or self._restarts.given_up(slot):
                return None
            number = self._restarts.allow(slot, time.monotonic())
            if not number:
                log.error("process.worker.restart.given_up executor=%r slot=%d pid=%d how=%r nodes=%r why=%r",
                          self.name, slot, dead.pid, dead.lost, sorted(dead.nodes.values()),
                          self._restarts.why_not(slot))
                return None
            try:
                link = self._new_link(slot)
            except OSError as exc:
                log.error("process.worker.restart.failed executor=%r slot=%d error=%r", self.name, slot, exc)
                return None
            link.nodes = dict(dead.nodes)
            links[slot] = link
            try:
                hosting = link.send_hosting(request)
            except BrokenError:
                return link  # dead already: its own ``on_lost`` takes over
            for index in link.nodes:
                self._reopen(link, index, hosting)
        log.warning("process.worker.restarted executor=%r slot=%d pid=%d old_pid=%d how=%r nodes=%r restart=%d",
                    self.name, slot, link.pid, dead.pid, dead.lost, sorted(link.nodes.values()), number)
        return link

    def _reopen(self, link: WorkerLink, index: int, hosting: Hosting) -> None:
        """Queue the ``open`` of node ``index`` on the restarted ``link``: its output is
        dropped, and its error fails every later call of the node (``Restarts.broken``)."""
        name = link.nodes[index]
        invocation = Invocation(index, -1, PHASE_OPEN, TS_UNSTARTED, [None] * self._inputs.get(index, 0))

        def reopened(outcome: Outcome) -> None:
            if not outcome.error:
                log.info("process.worker.reopened executor=%r pid=%d node=%r", self.name, link.pid, name)
                return
            if link.lost:
                return  # it died again: the next restart reopens the node, or gives up
            why = outcome.error
            reply = hosting.reply  # answered before this open (one FIFO per worker)
            if reply is not None:
                why = next((text for i, text in reply.failures if i in (index, -1)), why)
            text = (f"node `{name}` could not be opened again in worker process {link.pid} of executor "
                    f"`{self.name}` after a restart: {why}")
            self._restarts.broken[index] = text
            log.error("process.worker.reopen.failed executor=%r pid=%d node=%r error=%r", self.name, link.pid,
                      name, why)

        frame = transfer.encode_invocation(invocation, link.arena, link.arena_slot)
        link.call(link.new_call(index, -1, self._outputs.get(index, 0), reopened), frame)

    @property
    def pids(self) -> list[int]:
        """The process ids of the workers started so far (alive or not), by slot."""
        return [link.pid for link in self._links]

    # -- tasks ------------------------------------------------------------------------------------

    def stats(self) -> TaskStats:
        """Tasks waiting for the dispatcher (``queued``), invocations in workers (``running``)."""
        queued = self._tasks.queued
        with self._lock:
            links = list(self._links)
        running = sum(link.in_flight for link in links)
        return TaskStats(self.kind, self.threads, queued, running, self.num_processes)

    def shutdown(self) -> None:
        """Stop the dispatcher and every worker, and reap them (idempotent).

        Workers exit after what they were sent, within ``STOP_GRACE_S``; then they are
        terminated (SIGTERM, then SIGKILL). Queued tasks and invocations in flight are dropped.
        Each worker kills what its kernels started as it exits; what a worker could not (it was
        SIGKILLed first) is killed here, from a snapshot of its descendants taken before it was
        stopped, and so is what the kernels of a worker kept warm started.
        """
        self._tasks.dispatcher.shutdown()
        with self._lock:
            links, self._links = self._links, []
            self._serving = False
        self._replicas = {}
        self._outputs = {}
        self._inputs = {}
        self._requests = {}
        self._placement.clear()
        self._restarts.clear()
        # Taken before any worker stops: the orphans a worker adopted (a subreaper) leave its
        # tree once it is dead, and a SIGKILLed worker cannot end them itself.
        strays = [proc for link in links if not link.lost for proc in descendants(link.pid)]
        if self._warm:  # idle workers wait for the next pool (its hosting request resets them)
            keep = [link for link in links if link.idle()]
            with _WARM_LOCK:
                _WARM.setdefault(self.start_method, []).extend(keep)
            links = [link for link in links if link not in keep]
        for link in links:
            link.stop()
        deadline = time.monotonic() + STOP_GRACE_S
        for link in links:
            link.finish(max(0.0, deadline - time.monotonic()))
        killed = kill_processes(strays)  # those still the ones found (a pid may be recycled)
        if killed:
            log.info("process.shutdown.strays executor=%r killed=%d", self.name, killed)
        arena, self._arena = self._arena, None
        if arena is not None:
            arena.close(unlink=True)
        _LIVE.discard(self)


def _releasing(replicas: Replicas, k: int, complete: Complete) -> Complete:
    """``complete``, after counting the call done on replica ``k``."""

    def done(outcome: Outcome) -> None:
        replicas.done(k)
        complete(outcome)

    return done
