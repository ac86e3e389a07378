"""What a worker process runs: host nodes, then answer each invocation with its outcome.

The pool starts ``main`` in a fresh interpreter (``spawn``): multiprocessing gives it the host's
``sys.path`` and working directory, and imports the host's main module when that has a file
(as ``__mp_main__``), so a kernel class defined there is found too. Kernel code the host loaded
through ``imports:``, ``--import`` or an entry point is loaded again here, in the same order,
before the first recipe is decoded.

One thread runs every callback, in the order the messages arrive: invocations of one node
stay in order, and a node keeps its one kernel instance (and its state) for the worker's life.
A ``process`` call that stages ``SPILL_SLICE`` packets on a port sends them ahead as a partial
outcome and waits for the host's go-ahead (``GO_ON``) before the kernel goes on, so that one
call's output is held by the graph's budget as it is in the host's process; messages that come
meanwhile wait their turn.
The worker ignores SIGINT (the host handles Ctrl-C and stops its workers), exits when its pipe
closes or the host asks it to, and when the process that started it is gone.

Nothing a kernel started outlives its worker: the worker is a child subreaper (Linux), so the
orphans of its kernels' processes (a double-forked, ``setsid`` daemon) are re-parented to it, and
each way out (a stop, its pipe closing, the host gone, SIGTERM) SIGKILLs and reaps every
descendant first (``flowplex._reap``). What a worker killed by SIGKILL leaves, the pool's
``shutdown`` kills from a snapshot taken before it stopped the worker.
"""

from __future__ import annotations

import os
import pickle
import signal
import threading
import time
from collections import deque
from typing import TYPE_CHECKING, Final, final

from ..._reap import become_subreaper, kill_tree
from ...errors import UsageError
from ...kernels._context import PHASE_PROCESS, SPILL_NEVER, SPILL_SLICE
from ...kernels._host import failed_outcome
from ...packets._packet import set_buffer_allocator
from .._invocation import Outcome
from ..hosted import _codec as codec
from ..hosted._hosting import NodeHosting
from ..hosted._wire import GO_ON, HOST, HOSTED, MAGIC, STOP, HostReply, HostRequest
from . import _transfer as transfer
from ._arena import Arena

if TYPE_CHECKING:
    from multiprocessing.connection import Connection

    from ...kernels._context import Context
    from ...kernels._host import KernelHost


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
    become_subreaper()
    signal.signal(signal.SIGTERM, _terminated)
    _watch_parent(os.getppid())
    worker = _Worker(conn, Arena.attach(arena_name, slot))
    set_buffer_allocator(worker._arena.new_array)
    try:
        worker.serve()
    finally:
        kill_tree()
        set_buffer_allocator(None)
        worker._arena.close(unlink=False)


def _terminated(signum: int, frame: object) -> None:
    """SIGTERM (the host's ``_kill``, or anyone's): end every descendant, then die of SIGTERM as
    the host expects (``describe_exit`` reports the signal).

    A Python handler, so it runs between two bytecodes of the main thread: a kernel stuck in C
    code delays it, and the host's SIGKILL follows; the pool's snapshot covers that case.
    """
    kill_tree()
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGTERM)


def _watch_parent(parent: int) -> None:
    """Exit when the host process is gone, even while a kernel callback runs (a daemon thread)."""

    def watch() -> None:
        while True:
            time.sleep(PARENT_CHECK_S)
            if os.getppid() != parent:
                kill_tree()  # the host is gone: nobody else will end what the kernels started
                os._exit(EXIT_ORPHANED)

    threading.Thread(target=watch, name="flowplex-worker-parent", daemon=True).start()


@final
class _Worker:
    """The nodes hosted in this process and the pipe to the pool."""

    def __init__(self, conn: Connection, arena: Arena) -> None:
        self._conn = conn
        self._arena = arena
        self._hosting = NodeHosting(spill=self._spill)
        self._backlog: deque[bytes] = deque()
        """Messages that came while a call waited for its go-ahead: served next, in order."""
        self._stopping = False
        """The host said stop, or went away, while a call waited for its go-ahead."""

    def serve(self) -> None:
        conn = self._conn
        backlog = self._backlog
        while True:
            if backlog:
                message = backlog.popleft()
            else:
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
                kill_tree()
                os._exit(EXIT_PROTOCOL)
            del view, message  # the invocation's buffers: let go before waiting for the next
            try:
                conn.send_bytes(reply)
            except OSError:
                return
            if self._stopping:
                return

    # -- invocations ----------------------------------------------------------------------------

    def _invoke(self, frame: memoryview) -> bytes:
        """Run one invocation; its outcome as a frame (a failure of ours becomes the outcome)."""
        arena = self._arena
        invocation = transfer.decode_invocation(frame, arena)
        outcome = self._hosting.run(invocation)
        try:
            return transfer.encode_outcome(outcome, arena, 0)
        except UsageError as exc:
            outcome = failed_outcome(invocation, exc, self._hosting.hosts.num_outputs(invocation.node))
            return transfer.encode_outcome(outcome, arena, 0)

    def _spill(self, ctx: Context) -> None:
        """``NodeInfo.spill`` of every context here: send what a ``process`` call staged so far
        as a partial outcome (its buffers in the arena, as an outcome's), then wait for the
        host's go-ahead, which says when the next slice comes (``Spills.spill``'s rule).

        A payload that does not pickle stays staged, and the slices come at twice the count:
        the call's outcome reports it, as it would without slices.

        Raises:
            _Stopped: The host stopped the pool or went away meanwhile: the call ends here.
        """
        if self._stopping:
            raise _Stopped
        if ctx.phase != PHASE_PROCESS:
            ctx.spill_at = min(ctx.spill_at * 2, SPILL_NEVER)
            return
        host: KernelHost = ctx.owner  # type: ignore[assignment]
        outputs = ctx.out_packets
        # The outcome holds them alone (``_reducers`` counts references; ``emit``'s frame still
        # holds the last packet, which therefore crosses as shared: a copy if written later).
        ctx.out_packets = [[] for _ in outputs]
        outcome = Outcome(host.index, ctx.seq, outputs, partial=True)
        del outputs
        try:
            frame = transfer.encode_outcome(outcome, self._arena, 0)
        except UsageError:
            ctx.out_packets = outcome.outputs
            ctx.spill_at = min(ctx.spill_at * 2, SPILL_NEVER)
            return
        del outcome
        try:
            self._conn.send_bytes(frame)
        except OSError:
            self._stopping = True
            raise _Stopped from None
        del frame
        again = self._await_go_on()
        ctx.spill_at = SPILL_SLICE if again else min(ctx.spill_at * 2, SPILL_NEVER)

    def _await_go_on(self) -> bool:
        """The host's go-ahead for the partial outcome just sent: whether the next slice comes
        after ``SPILL_SLICE`` packets. Other messages wait in the backlog."""
        conn = self._conn
        while True:
            try:
                message = conn.recv_bytes()
            except (EOFError, OSError):
                self._stopping = True
                raise _Stopped from None
            if message.startswith(GO_ON):
                return message[1:2] == b"\x01"
            if message == STOP:
                self._stopping = True
                raise _Stopped
            self._backlog.append(message)

    # -- hosting ----------------------------------------------------------------------------------

    def _host(self, request: HostRequest) -> HostReply:
        """Host the request's nodes; a warm worker taken over by another pool first forgets
        every node of the last one and maps the new arena."""
        if request.arena is not None:
            self._hosting.forget()
            name, slot = request.arena
            old, self._arena = self._arena, Arena.attach(name, slot)
            set_buffer_allocator(self._arena.new_array)
            old.close(unlink=False)
        return self._hosting.host(request)


class _Stopped(BaseException):
    """Raised in a kernel's ``emit`` when the pool stops (or its host goes away) while the call
    waits for its go-ahead: it ends the call (a kernel's ``except Exception`` does not catch
    it; ``KernelHost.run`` reports it as the call's error), and the worker then exits."""

    def __init__(self) -> None:
        super().__init__("the process pool stopped while this call waited to deliver its output")
