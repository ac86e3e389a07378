"""``ProcessPoolExecutor``: Python kernels in worker processes, the scheduler in this one.

Only kernel callbacks cross: the engine hands the pool an ``Invocation`` (plain data), the
pool encodes it with the codec and sends the frame over a pipe to the worker that hosts the
node, and the worker's ``Outcome`` comes back the same way (``_link``). Each node placed on the
pool lives in one worker, assigned round robin when the graph starts, with its own kernel
instance for the life of the graph (state kept, ``open``/``process``/``close`` all run there).

Workers are fresh interpreters (``spawn``; ``forkserver`` on request), never a fork of this
process, whose engine threads a fork would copy mid-flight.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import threading
import time
from collections.abc import Callable, Sized
from typing import TYPE_CHECKING, Final, final

from ..errors import BrokenError, ConfigError, UsageError
from ..executors import TaskStats, ThreadPoolExecutor
from ..executors._protocol import Inbox, Task
from ..kernels._host import failed_outcome
from ..kernels._loading import file_module_name, imports_so_far
from . import _transfer as transfer
from ._arena import DEFAULT_ARENA_BYTES, PAGE, Arena, ArenaStats, arena_size
from ._link import WorkerLink
from ._wire import HostRequest, encode_recipe

if TYPE_CHECKING:
    from multiprocessing.context import ForkServerContext, SpawnContext

    import numpy as np
    import numpy.typing as npt

    from ..executors._invocation import Complete, Invocation, NodeRecipe
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


@final
class ProcessPoolExecutor:
    """Runs the kernels of its nodes in ``num_processes`` worker processes.

    The engine's tasks (``submit``) run on one dispatcher thread of the pool: each turns a
    claimed invocation into a frame and queues it for the node's worker, which runs the
    callbacks of its nodes one at a time, in the order sent. Outcomes are completed on the
    receiving thread of each worker (a downstream node on the inline executor runs there).

    Workers start at the first ``Graph.start`` (``host``): one per node up to
    ``num_processes``. A worker that dies fails the invocations in flight on it, and any later
    ones, with an error naming the node, the worker's pid and its signal or exit code; it is
    not restarted. ``shutdown`` (``Graph.close``) stops them all.
    """

    kind = "processes"
    runs_on_caller = False
    hosts_kernels = True
    threads = DISPATCH_THREADS

    def __init__(self, name: str, num_processes: int | None = None, *, start_method: str = "spawn",
                 arena_bytes: int = DEFAULT_ARENA_BYTES) -> None:
        """Describe the pool; no process starts before ``host``.

        Args:
            name: The executor's name (``executors[].name``).
            num_processes: Worker processes at most; None means one per CPU (``os.cpu_count()``).
                If in doubt, use the number of nodes doing heavy Python work.
            start_method: ``spawn`` (a fresh interpreter per worker) or ``forkserver`` (forked
                from one fresh server process: faster to start, same isolation).
            arena_bytes: The size of the shared memory that frames cross in (default 256 MiB,
                at most half of what ``/dev/shm`` has free). When it is full, whoever needs
                room waits for packets to be consumed.

        Raises:
            UsageError: ``num_processes`` is not a positive integer, ``start_method`` is
                unknown, or ``arena_bytes`` is less than one page (64 KiB).
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
        self.name = name
        self.num_processes = num_processes
        self.arena_bytes = arena_bytes
        self._arena: Arena | None = None
        self.start_method = start_method
        self._context: SpawnContext | ForkServerContext = multiprocessing.get_context(start_method)  # type: ignore[assignment]
        self._lock = threading.Lock()
        self._dispatcher = ThreadPoolExecutor(f"{name}-dispatch", self.threads)
        """Runs the engine's tasks (each ends in ``invoke``): a thread pool's FIFO, reused."""
        self._links: list[WorkerLink] = []
        """The workers, by slot; nodes are placed on slot ``k % num_processes``, in order."""
        self._placed: dict[int, WorkerLink] = {}
        self._outputs: dict[int, int] = {}
        self._placements = 0

    # -- kernels --------------------------------------------------------------------------------

    def host(self, recipes: list[NodeRecipe]) -> None:
        """Place each node on a worker and build its kernel there (``Graph.start``).

        Workers start here, as many as needed. A node hosted already keeps its worker and its
        kernel instance (a restart after ``reset``). Blocks until every worker has loaded its
        nodes (at most ``HOST_TIMEOUT_S``).

        Raises:
            ConfigError: A kernel class the workers cannot import, a recipe that does not
                pickle, or a kernel whose construction failed in the worker; the message names
                the node and what to do.
            BrokenError: A worker died (now or before: workers are not restarted).
        """
        frames = [(recipe, encode_recipe(recipe, self.name)) for recipe in recipes]  # before any process starts
        placed = self._place(recipes)
        imports = imports_so_far()
        sent: list[tuple[WorkerLink, Hosting]] = []
        for link in self._links:
            mine = [(recipe.index, frame) for recipe, frame in frames if placed[recipe.index] is link]
            link.nodes = {recipe.index: recipe.spec.name for recipe, _ in frames if placed[recipe.index] is link}
            sent.append((link, link.send_hosting(HostRequest(imports, mine))))
        self._placed = placed
        self._outputs = {recipe.index: len(recipe.spec.output_ports) for recipe in recipes}
        deadline = time.monotonic() + HOST_TIMEOUT_S
        failures: dict[int, str] = {}
        for link, hosting in sent:
            reply = link.await_hosting(hosting, max(0.0, deadline - time.monotonic()))
            for kind, value, text in reply.lost_imports:
                log.warning("process.worker.import.failed executor=%r pid=%d %s=%r: %s", self.name, link.pid, kind,
                            value, text)
            for index, text in reply.failures:
                failures.setdefault(index, self._hosting_failure(recipes, index, text, link, reply.lost_imports))
        if failures:
            first = min(failures, key=lambda i: (i < 0, i))
            raise ConfigError(failures[first])

    def _place(self, recipes: list[NodeRecipe]) -> dict[int, WorkerLink]:
        """The worker of each node: the one it had, else the next slot round robin."""
        placed: dict[int, WorkerLink] = {}
        for recipe in recipes:
            link = self._placed.get(recipe.index)
            if link is None:
                slot = self._placements % self.num_processes
                self._placements += 1
                while len(self._links) <= slot:
                    self._links.append(WorkerLink(self.name, len(self._links), self._context, self._open_arena()))
                link = self._links[slot]
            placed[recipe.index] = link
        for link in self._links:
            if link.lost:
                msg = (f"worker process {link.pid} of executor `{self.name}` {link.lost}; it cannot host "
                       "nodes again (workers are not restarted): build the graph again")
                raise BrokenError(msg)
        return placed

    def _open_arena(self) -> Arena:
        arena = self._arena
        if arena is None:
            arena = self._arena = Arena.create(arena_size(self.arena_bytes), self.num_processes + 1)
        return arena

    def buffer_allocator(self) -> Callable[[tuple[int, ...], np.dtype[np.generic]], npt.NDArray[np.generic]] | None:
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

    def invoke(self, invocation: Invocation, complete: Complete) -> None:
        """Send one callback to the worker hosting its node; ``complete`` runs when it answers.

        Returns at once (the frame is queued; a sender thread writes it). ``complete`` is called
        exactly once: on the worker's receiving thread with the outcome, or here, at once, when
        the invocation cannot be sent (a payload that does not pickle, a node not hosted here,
        a worker that is gone).
        """
        node = invocation.node
        link = self._placed.get(node)
        outputs = self._outputs.get(node, 0)
        if link is None:
            msg = f"invoke: node {node} is not hosted on executor `{self.name}`"
            complete(failed_outcome(invocation, UsageError(msg), outputs))
            return
        try:
            frame = transfer.encode_invocation(invocation, link.arena, link.arena_slot)
        except UsageError as exc:
            complete(failed_outcome(invocation, exc, outputs))
            return
        link.call(link.new_call(node, invocation.seq, outputs, complete), frame)

    @property
    def pids(self) -> list[int]:
        """The process ids of the workers started so far (alive or not), by slot."""
        return [link.pid for link in self._links]

    # -- tasks ------------------------------------------------------------------------------------

    def submit(self, fn: Task, arg: object) -> None:
        """Queue ``fn(arg)`` for the dispatcher thread."""
        self._dispatcher.submit(fn, arg)

    submit_background = submit

    def backlog(self) -> Sized | None:
        """None: the dispatcher has no caller-thread loop."""
        return None

    def inbox(self) -> Inbox | None:
        """None: the dispatcher runs the tasks."""
        return None

    def set_on_submit(self, wake: Callable[[], None] | None) -> None:
        """Ignored: no host thread has to run its work."""

    def stats(self) -> TaskStats:
        """Tasks waiting for the dispatcher (``queued``), invocations in workers (``running``)."""
        queued = self._dispatcher.stats().queued
        with self._lock:
            links = list(self._links)
        running = sum(link.in_flight for link in links)
        return TaskStats(self.kind, self.threads, queued, running, self.num_processes)

    def start(self) -> None:
        """Start the dispatcher thread (idempotent; workers start in ``host``)."""
        self._dispatcher.start()

    def shutdown(self) -> None:
        """Stop the dispatcher and every worker, and reap them (idempotent).

        Workers exit after what they were sent, within ``STOP_GRACE_S``; then they are
        terminated (SIGTERM, then SIGKILL). Queued tasks and invocations in flight are dropped.
        """
        self._dispatcher.shutdown()
        with self._lock:
            links, self._links = self._links, []
        self._placed = {}
        self._outputs = {}
        self._placements = 0
        for link in links:
            link.stop()
        deadline = time.monotonic() + STOP_GRACE_S
        for link in links:
            link.finish(max(0.0, deadline - time.monotonic()))
        arena, self._arena = self._arena, None
        if arena is not None:
            arena.close(unlink=True)
