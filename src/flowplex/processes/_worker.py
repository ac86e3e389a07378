"""What a worker process runs: host nodes, then answer each invocation with its outcome.

The pool starts ``main`` in a fresh interpreter (``spawn``): multiprocessing gives it the host's
``sys.path`` and working directory, and imports the host's main module when that has a file
(as ``__mp_main__``), so a kernel class defined there is found too. Kernel code the host loaded
through ``imports:``, ``--import`` or an entry point is loaded again here, in the same order,
before the first recipe is decoded.

One thread runs every callback, in the order the messages arrive: invocations of one node
stay in order, and a node keeps its one kernel instance (and its state) for the worker's life.
The worker ignores SIGINT (the host handles Ctrl-C and stops its workers), exits when its pipe
closes or the host asks it to, and when the process that started it is gone.
"""

from __future__ import annotations

import importlib
import os
import pickle
import signal
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Final, final

from ..errors import ConfigError, UsageError
from ..executors import _codec as codec
from ..kernels._host import KernelHosts, failed_outcome
from ..kernels._loading import describe_exception, import_target
from ..packets._packet import set_buffer_allocator
from . import _transfer as transfer
from ._arena import Arena
from ._wire import HOST, HOSTED, MAGIC, STOP, HostReply, HostRequest, decode_recipe

if TYPE_CHECKING:
    from multiprocessing.connection import Connection

    from ..executors._invocation import Invocation, NodeRecipe
    from ..kernels._registry import Kernel
    from ..spec._specs import NodeSpec

__all__ = ["main"]

PARENT_CHECK_S: Final = 1.0
"""How often a worker checks that the process that started it still exists."""
EXIT_ORPHANED: Final = 70
"""The exit code of a worker whose host process went away (EX_SOFTWARE)."""
EXIT_PROTOCOL: Final = 71
"""The exit code of a worker that received a message it cannot read (a flowplex bug)."""


def main(conn: Connection, arena_name: str, slot: int) -> None:
    """Serve the pool on ``conn`` until it closes or says stop (the worker's entry point).

    The worker maps the pool's arena as ``slot``; its kernels' ``new_buffer`` allocates there,
    so that what they make reaches the host without a copy.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _watch_parent(os.getppid())
    worker = _Worker(conn, Arena.attach(arena_name, slot))
    set_buffer_allocator(worker._arena.new_array)
    try:
        worker.serve()
    finally:
        set_buffer_allocator(None)
        worker._arena.close(unlink=False)


def _watch_parent(parent: int) -> None:
    """Exit when the host process is gone, even while a kernel callback runs (a daemon thread)."""

    def watch() -> None:
        while True:
            time.sleep(PARENT_CHECK_S)
            if os.getppid() != parent:
                os._exit(EXIT_ORPHANED)

    threading.Thread(target=watch, name="flowplex-worker-parent", daemon=True).start()


def _follow(request: HostRequest) -> None:
    """Take the host's ``sys.path`` entries this process lacks, in the host's order, and its
    working directory (a warm worker outlives the state it was started with)."""
    missing = [entry for entry in request.sys_path if entry not in sys.path]
    if missing:
        sys.path[:0] = missing
        importlib.invalidate_caches()
    if request.cwd and request.cwd != os.getcwd() and os.path.isdir(request.cwd):
        os.chdir(request.cwd)


@final
class _Worker:
    """The nodes hosted in this process and the pipe to the pool."""

    def __init__(self, conn: Connection, arena: Arena) -> None:
        self._conn = conn
        self._arena = arena
        self._hosts = KernelHosts()
        self._loaded: set[tuple[str, str]] = set()
        self._route_classes: dict[int, tuple[NodeSpec, type[Kernel]]] = {}

    def serve(self) -> None:
        conn = self._conn
        while True:
            try:
                message = conn.recv_bytes()
            except (EOFError, OSError):
                return  # the host closed its end (or died)
            view = memoryview(message)
            if message.startswith(MAGIC):
                reply = self._invoke(view)
            elif message.startswith(HOST):
                reply = HOSTED + pickle.dumps(self._host(pickle.loads(view[1:])), codec.PROTOCOL)
            elif message == STOP:
                return
            else:
                os._exit(EXIT_PROTOCOL)
            del view, message  # the invocation's buffers: let go before waiting for the next
            try:
                conn.send_bytes(reply)
            except OSError:
                return

    # -- invocations ----------------------------------------------------------------------------

    def _invoke(self, frame: memoryview) -> bytes:
        """Run one invocation; its outcome as a frame (a failure of ours becomes the outcome)."""
        arena = self._arena
        invocation = transfer.decode_invocation(frame, arena)
        hosts = self._hosts
        try:
            outcome = hosts.run(invocation)
        except UsageError as exc:
            outcome = failed_outcome(invocation, exc, hosts.num_outputs(invocation.node))
        invocation.inputs = []  # let go of the inputs: a packet forwarded is then held by the outcome alone
        invocation.batch = None
        try:
            return transfer.encode_outcome(outcome, arena, 0)
        except UsageError as exc:
            return self._failed(invocation, exc)

    def _failed(self, invocation: Invocation, exc: Exception) -> bytes:
        outcome = failed_outcome(invocation, exc, self._hosts.num_outputs(invocation.node))
        return transfer.encode_outcome(outcome, self._arena, 0)

    # -- hosting ----------------------------------------------------------------------------------

    def _host(self, request: HostRequest) -> HostReply:
        """Load the host's kernel code, decode each recipe, then host them all (or none)."""
        if request.arena is not None:  # another pool's now: nothing of the last one stays
            self._hosts.clear()
            self._route_classes.clear()
            name, slot = request.arena
            old, self._arena = self._arena, Arena.attach(name, slot)
            set_buffer_allocator(self._arena.new_array)
            old.close(unlink=False)
        _follow(request)
        lost = self._replay(request.imports)
        failures: list[tuple[int, str]] = []
        recipes: list[NodeRecipe] = []
        for index, frame in request.recipes:
            try:
                recipes.append(decode_recipe(frame, self._route_classes))
            except Exception as exc:
                failures.append((index, describe_exception(exc)))
        if not failures:
            try:
                self._hosts.host(recipes)
            except (ConfigError, UsageError) as exc:
                failures.append((-1, str(exc)))
        return HostReply(failures, lost)

    def _replay(self, imports: tuple[tuple[str, str], ...]) -> list[tuple[str, str, str]]:
        """Load what the host loaded for kernels, each once; ``(kind, value, error)`` of each failure.

        A file that no longer exists is skipped: nothing could import it, here or there.
        """
        from ..kernels._registry import kernel_class

        lost: list[tuple[str, str, str]] = []
        for entry in imports:
            if entry in self._loaded:
                continue
            self._loaded.add(entry)
            kind, value = entry
            if kind == "file" and not os.path.isfile(value):
                continue
            try:
                if kind == "entry_point":
                    kernel_class(value, where="entry point")
                elif kind == "class":  # a `module:Class` kernel name: imports and registers it
                    kernel_class(value, where="kernel")
                else:
                    import_target(value, base=Path.cwd(), where=f"`{value}`")
            except Exception as exc:
                lost.append((kind, value, describe_exception(exc)))
        return lost
