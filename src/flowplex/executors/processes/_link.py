"""``WorkerLink``: one worker process, the pipe to it, and the calls waiting on its answers.

The worker answers every message in the order it got them, so the calls waiting on it form one
FIFO: a message and its waiter are queued together, under one lock, and each answer completes
the oldest waiter. Two threads per worker keep the pool's own threads from ever blocking on a
pipe: a sender writes the queued messages (a large frame waits for the worker to read it), and
a receiver reads the answers and completes them (the engine's completion runs on it).

A worker that dies — killed, crashed in a C extension, ``os._exit`` — is seen by the receiver
at once (its pipe closes, or its process sentinel fires): each call in flight on it completes
with an error naming the node, the worker's pid and its signal or exit code, and every later
call fails the same way without being sent. Before that, the receiver tells the pool
(``on_lost``), which may start a replacement (``restart: on_failure``) and says so in a note
the errors carry.
"""

from __future__ import annotations

import contextlib
import logging
import os
import pickle
import signal
import socket
import struct
import sys
import threading
from collections import deque
from collections.abc import Callable
from multiprocessing.connection import wait
from typing import TYPE_CHECKING, Final, final

from ...errors import BrokenError
from .._invocation import Outcome
from ..hosted import _codec as codec
from ..hosted._wire import GO_ON, HOST, HOSTED, MAGIC, STOP, HostReply, HostRequest, main_path
from . import _transfer as transfer
from ._worker import main

if TYPE_CHECKING:
    from multiprocessing.context import ForkServerContext, ForkServerProcess, SpawnContext, SpawnProcess

    from ...packets import Packet
    from .._invocation import Complete, Spill
    from ._arena import Arena

__all__ = ["Hosting", "WorkerLink", "describe_exit"]

log = logging.getLogger(__name__)

_LENGTH: Final = struct.Struct("!i")
"""``Connection.send_bytes``'s length prefix."""
_DIRECT_MAX: Final = 16 * 1024
"""Frames up to this size may be written by the calling thread (``WorkerLink._write_now``)."""
EXIT_WAIT_S: Final = 1.0
"""How long a worker whose pipe closed may take to exit before it is killed."""
KILL_WAIT_S: Final = 2.0
"""How long to wait for a killed (SIGTERM, then SIGKILL) worker to be reaped."""


_main_lock: Final = threading.Lock()
"""Held while ``__main__.__file__`` is hidden (two pools starting workers at once)."""


def _start(process: SpawnProcess | ForkServerProcess) -> None:
    """``process.start()``, without the main module when the worker could not import it.

    multiprocessing re-runs the host's main module in the worker from its ``__file__``; for a
    program read from stdin that is ``<stdin>``, no file, and the worker would die at once. Its
    ``__file__`` is hidden while the worker starts (briefly, under a lock): the worker then runs
    without it, as for ``python -c``.
    """
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    if main is None or path is None or main_path() is not None or getattr(main, "__spec__", None) is not None:
        process.start()
        return
    with _main_lock:
        del main.__file__
        try:
            process.start()
        finally:
            main.__file__ = path


def describe_exit(exitcode: int | None) -> str:
    """``was killed by signal 9 (SIGKILL)`` or ``exited with code 3``.

    >>> describe_exit(-9), describe_exit(3)
    ('was killed by signal 9 (SIGKILL)', 'exited with code 3')
    """
    if exitcode is None:
        return "stopped answering"
    if exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = "unknown"
        return f"was killed by signal {-exitcode} ({name})"
    return f"exited with code {exitcode}"


@final
class _Call:
    """An invocation sent to the worker, and the engine's completion for it.

    The call keeps the invocation's packets until it is answered: while the worker reads their
    memory, this process must see them held (another consumer may not write them in place).
    """

    __slots__ = ("complete", "inputs", "name", "node", "num_outputs", "seq", "spill", "spilled")

    def __init__(self, node: int, seq: int, name: str, num_outputs: int, complete: Complete,
                 inputs: object = None, spill: Spill | None = None) -> None:
        self.node = node
        self.seq = seq
        self.name = name
        self.num_outputs = num_outputs
        self.complete = complete
        self.inputs = inputs
        self.spill = spill
        """The engine's handler for this call's partial outcomes (None: keep them in ``spilled``)."""
        self.spilled: list[list[Packet]] | None = None
        """Partial outputs kept for the final outcome, per port, in order (no ``spill``)."""

    def take_slice(self, outputs: list[list[Packet]]) -> bool:
        """A partial outcome's ``outputs``: to the engine's ``spill``, or kept for the final
        outcome; whether the worker's next slice may come after ``SPILL_SLICE`` packets."""
        spill = self.spill
        if spill is not None:
            return spill(outputs)
        kept = self.spilled
        if kept is None:
            self.spilled = outputs
        else:
            for staged, packets in zip(kept, outputs, strict=True):
                staged.extend(packets)
        return False

    def final(self, outcome: Outcome) -> Outcome:
        """``outcome`` behind the slices kept in ``spilled`` (a failed call's are dropped)."""
        kept, self.spilled = self.spilled, None
        if kept is not None and not outcome.error and len(kept) == len(outcome.outputs):
            for staged, packets in zip(kept, outcome.outputs, strict=True):
                staged.extend(packets)
            outcome.outputs = kept
        return outcome

    def fail(self, text: str) -> None:
        """Complete with ``text`` as the node's error (a ``BrokenError``: the worker went away)."""
        self.complete(Outcome(self.node, self.seq, [[] for _ in range(self.num_outputs)],
                              error=f"BrokenError: {text}", exception=BrokenError(text)))


@final
class Hosting:
    """A hosting request sent to the worker; the thread in ``host`` waits for ``done``."""

    __slots__ = ("done", "reply")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.reply: HostReply | None = None
        """None when ``done`` was set because the worker went away."""


_Waiter = _Call | Hosting

LostHook = Callable[["WorkerLink", str], str]
"""``on_lost(link, how)``, called once on the receiver when the worker died while serving: the
pool's reaction, as a note for the errors (`` (restarted as worker process 123)``, or "")."""


@final
class WorkerLink:
    """One worker process of a pool and the calls in flight on it."""

    def __init__(self, executor: str, slot: int, context: SpawnContext | ForkServerContext, arena: Arena,
                 on_lost: LostHook | None = None) -> None:
        """Start the worker process and the two threads that talk to it.

        The worker maps ``arena`` as slot ``slot + 1`` (the host is slot 0). ``on_lost`` runs
        when the worker dies while serving (not after ``stop``), on the receiver, before the
        calls in flight fail.

        Raises:
            OSError: The process could not be started.
        """
        self.executor = executor
        self.arena = arena
        self.arena_slot = slot + 1
        self.slot = slot
        self.nodes: dict[int, str] = {}
        """Index → name of the nodes hosted on this worker."""
        parent, child = context.Pipe()
        self._process: SpawnProcess | ForkServerProcess = context.Process(
            target=main, args=(child, arena.name, slot + 1), name=f"flowplex-{executor}-{slot}", daemon=True)
        try:
            _start(self._process)
        except BaseException:
            parent.close()
            raise
        finally:
            child.close()  # the worker holds the only other end: its death closes the pipe
        self.pid: int = self._process.pid or 0
        self._conn = parent
        self._socket = socket.socket(fileno=os.dup(parent.fileno()))
        """The same socket as ``_conn``, for writes that must not block (``_write_now``)."""
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._reap = threading.RLock()
        """Held around every wait for, signal to and status read of the process: one thread reaps."""
        self._pending: deque[_Waiter] = deque()
        self._out: deque[bytes] = deque()
        self._partial = b""
        """The rest of a message a caller began writing (``_write_now``): the sender's, first."""
        self._sending = False
        """The sender thread is writing a message, outside the lock."""
        self._lost = ""
        """How the worker went away ("" while it serves)."""
        self._on_lost = on_lost
        self.moved = False
        """Taken over by another pool since its last hosting request (``adopt``)."""
        self.note = ""
        """What ``on_lost`` said, appended to the errors of the calls it fails."""
        self._stopping = False
        self._sender = threading.Thread(target=self._send_loop, name=f"{executor}-{slot}-send", daemon=True)
        self._receiver = threading.Thread(target=self._receive_loop, name=f"{executor}-{slot}-recv", daemon=True)
        self._sender.start()
        self._receiver.start()

    # -- calls ------------------------------------------------------------------------------------

    @property
    def lost(self) -> str:
        """How the worker went away (``was killed by signal 9 (SIGKILL)``), or "" while it serves."""
        return self._lost

    @property
    def in_flight(self) -> int:
        """Invocations sent and not answered yet."""
        with self._lock:
            return sum(1 for w in self._pending if type(w) is _Call)

    def call(self, call: _Call, frame: bytes) -> None:
        """Queue ``frame`` (an invocation) for the worker; ``call`` completes with its answer.

        Never blocks on the worker. When the worker is gone, ``call`` fails at once, here.
        """
        with self._lock:
            if not self._lost and not self._stopping:
                self._pending.append(call)
                if self._out or self._sending or self._partial or not self._write_now(frame):
                    self._out.append(frame)
                    self._wake.notify()
                return
            text = self._gone(call.name)
        call.fail(text)

    def _write_now(self, frame: bytes) -> bool:
        """Write ``frame`` on the calling thread as far as the socket takes it without blocking
        (under the lock, nothing else being written); the sender writes any rest. False: none of
        it was written (the caller queues it).

        A thread hop per call is most of a small invocation's cost; a socket with room takes a
        small frame at once. The wire format is ``Connection.send_bytes``'s: a 4-byte
        big-endian length, then the bytes.
        """
        if len(frame) > _DIRECT_MAX:
            return False
        message = _LENGTH.pack(len(frame)) + frame
        try:
            sent = self._socket.send(message, socket.MSG_DONTWAIT)
        except (BlockingIOError, InterruptedError):
            return False
        except OSError:
            return False  # the sender finds out, and the receiver says how
        if sent < len(message):
            self._partial = message[sent:]
            self._wake.notify()
        return True

    def new_call(self, node: int, seq: int, num_outputs: int, complete: Complete, inputs: object = None,
                 spill: Spill | None = None) -> _Call:
        """The waiter for one invocation of hosted node ``node``, keeping ``inputs`` (its packets);
        ``spill`` takes its partial outcomes (``ProcessPoolExecutor.invoke``)."""
        return _Call(node, seq, self.nodes.get(node, f"#{node}"), num_outputs, complete, inputs, spill)

    def send_hosting(self, request: HostRequest) -> Hosting:
        """Queue a hosting request; ``await_hosting`` waits for its reply (send to every
        worker first, so that they load their kernels at the same time).

        Raises:
            BrokenError: The worker is gone.
        """
        hosting = Hosting()
        message = HOST + pickle.dumps(request, codec.PROTOCOL)
        with self._lock:
            if self._lost or self._stopping:
                raise BrokenError(self._gone_hosting())
            self._pending.append(hosting)
            self._out.append(message)
            self._wake.notify()
        return hosting

    def await_hosting(self, hosting: Hosting, timeout_s: float) -> HostReply:
        """The reply to ``hosting``.

        Raises:
            BrokenError: The worker went away first, or did not answer within ``timeout_s``
                (it is then killed).
        """
        if not hosting.done.wait(timeout_s):
            self._kill()
            msg = (f"worker process {self.pid} of executor `{self.executor}` did not finish loading its nodes' "
                   f"kernels within {timeout_s:.0f} s; it was killed")
            raise BrokenError(msg)
        if hosting.reply is None:
            raise BrokenError(self._gone_hosting())
        return hosting.reply

    def _gone(self, name: str) -> str:
        if self._stopping and not self._lost:
            return f"executor `{self.executor}` is shut down; node `{name}` cannot run"
        return (f"worker process {self.pid} of executor `{self.executor}` {self._lost}; node `{name}` "
                f"cannot run on it{self.note}")

    def _gone_hosting(self) -> str:
        return (f"worker process {self.pid} of executor `{self.executor}` {self._lost or 'is shut down'} "
                "before it loaded its nodes' kernels (if the program's main module starts graphs when "
                "imported, guard that code with `if __name__ == \"__main__\":`)")

    # -- the two threads ------------------------------------------------------------------------

    def _send_loop(self) -> None:
        """Write queued messages in order until the worker is lost or told to stop."""
        conn = self._conn
        out = self._out
        while True:
            with self._lock:
                self._sending = False
                while not out and not self._partial and not self._lost:
                    self._wake.wait()
                if self._lost:
                    out.clear()
                    return
                rest, self._partial = self._partial, b""
                message = b"" if rest else out.popleft()
                self._sending = True
            try:
                if rest:
                    self._socket.sendall(rest)
                else:
                    conn.send_bytes(message)
            except (OSError, ValueError):
                # The worker closed its end or died: the receiver reports how. Make sure it dies.
                self._kill()
                return
            if message == STOP:
                return

    def _receive_loop(self) -> None:
        """Read answers and complete their waiters until the worker's pipe closes or it dies."""
        conn = self._conn
        sentinel = self._process.sentinel
        how = ""
        try:
            while True:
                ready = wait([conn, sentinel])
                if conn not in ready and not conn.poll():
                    break  # dead, and nothing left to read
                self._answer(conn.recv_bytes())
        except (EOFError, OSError):
            pass
        except _ProtocolError as exc:
            self._kill()
            how = f"sent an answer flowplex cannot read ({exc}; this is a flowplex bug, please report it)"
        self._lose(how)
        self._sender.join(KILL_WAIT_S)  # it stops writing once the worker is lost
        self._socket.close()

    def _answer(self, message: bytes) -> None:
        view = memoryview(message)
        with self._lock:
            waiter = self._pending.popleft() if self._pending else None
        if message.startswith(MAGIC) and type(waiter) is _Call:
            partial = transfer.is_partial(view)
            if partial:
                with self._lock:
                    self._pending.appendleft(waiter)  # still running (its inputs held): a ``_lose`` fails it
            else:
                waiter.inputs = None  # the worker is done with them: a frame it hands back is not ours twice
            outcome = transfer.decode_outcome(view, self.arena)
            if (outcome.node, outcome.seq, outcome.partial) != (waiter.node, waiter.seq, partial):
                if not partial:
                    waiter.fail("answered another invocation")
                msg = f"outcome of node {outcome.node} seq {outcome.seq} for node {waiter.node} seq {waiter.seq}"
                raise _ProtocolError(msg)
            if partial:
                del view, message
                self._go_on(waiter, outcome)
                return
            try:
                waiter.complete(waiter.final(outcome))
            except Exception:  # the engine's completion never raises; keep serving if it does
                log.exception("process.complete.failed node=%r seq=%d", waiter.name, waiter.seq)
        elif message.startswith(HOSTED) and type(waiter) is Hosting:
            waiter.reply = pickle.loads(view[1:])
            waiter.done.set()
        else:
            if waiter is not None:
                with self._lock:
                    self._pending.appendleft(waiter)
            msg = f"a message starting {message[:4]!r} while waiting for {type(waiter).__name__}"
            raise _ProtocolError(msg)

    def _go_on(self, call: _Call, outcome: Outcome) -> None:
        """A partial outcome of ``call``: hand its slice on (the engine may wait for room in
        the graph's budget meanwhile, the worker waiting too), then send the go-ahead."""
        outputs = outcome.outputs
        outcome.outputs = []
        try:
            again = call.take_slice(outputs)
        except Exception:  # the engine's spill never raises; the worker must go on if it does
            log.exception("process.spill.failed node=%r seq=%d", call.name, call.seq)
            again = False
        del outputs
        frame = GO_ON + (b"\x01" if again else b"\x00")
        with self._lock:
            if self._lost or self._stopping:
                return  # (a stopping worker gets STOP, which ends the call there)
            if self._out or self._sending or self._partial or not self._write_now(frame):
                self._out.append(frame)
                self._wake.notify()

    def _lose(self, how: str) -> None:
        """The worker is gone: say how, and fail (or drop, when stopping) every waiter."""
        if not how:
            process = self._process
            with self._reap:
                process.join(EXIT_WAIT_S)
                if process.exitcode is None:
                    self._kill()
                how = describe_exit(process.exitcode)
        with self._lock:
            first = not self._lost
            if first:
                self._lost = how
                self.arena.clear_slot(self.arena_slot)  # the blocks it held, and those sent to it
            waiters = list(self._pending)
            self._pending.clear()
            stopping = self._stopping
            self._wake.notify_all()
        if first and not stopping and self._on_lost is not None:
            try:
                self.note = self._on_lost(self, how)
            except Exception:  # the pool's reaction must not keep the waiters from failing
                log.exception("process.worker.on_lost.failed executor=%r pid=%d", self.executor, self.pid)
        if not stopping and waiters:
            log.error("process.worker.lost executor=%r pid=%d how=%r in_flight=%d", self.executor, self.pid,
                      self._lost, len(waiters))
        for waiter in waiters:
            if type(waiter) is Hosting:
                waiter.done.set()
            elif not stopping:
                waiter.fail(f"worker process {self.pid} of executor `{self.executor}` {self._lost} while running "
                            f"node `{waiter.name}`{self.note}")

    # -- stopping -------------------------------------------------------------------------------

    def idle(self) -> bool:
        """Whether the worker serves and nothing is in flight or queued on it (it may be reused)."""
        with self._lock:
            return not self._lost and not self._stopping and not self._pending and not self._out \
                and not self._partial and not self._sending

    def adopt(self, executor: str, slot: int, arena: Arena, on_lost: LostHook | None) -> None:
        """Serve another pool (a warm worker, ``idle``): its name, slot, arena and death hook.
        The next hosting request tells the worker (``HostRequest.arena``)."""
        with self._lock:
            self.executor = executor
            self.slot = slot
            self.arena = arena
            self.arena_slot = slot + 1
            self.nodes = {}
            self._on_lost = on_lost
            self.note = ""
            self.moved = True

    def stop(self) -> None:
        """Ask the worker to exit after what it was sent; calls still in flight are dropped."""
        with self._lock:
            self._stopping = True
            if not self._lost:
                self._out.append(STOP)
                self._wake.notify()

    def finish(self, grace_s: float) -> None:
        """Wait up to ``grace_s`` for the worker to exit (after ``stop``), then kill it; reap it,
        join both threads and close the pipe. Idempotent."""
        receiver = self._receiver
        me = threading.current_thread()
        if receiver is not me:
            receiver.join(grace_s)  # it returns once the worker has exited and been reaped
            if receiver.is_alive():
                self._kill()
                receiver.join(KILL_WAIT_S)
        if self._sender is not me:
            self._sender.join(KILL_WAIT_S)
        self._conn.close()
        self._socket.close()
        with self._reap, contextlib.suppress(ValueError):  # ValueError: closed already
            if not receiver.is_alive() and self._process.exitcode is not None:
                self._process.close()

    def abandon(self) -> None:
        """Kill a worker whose hosting the caller gave up waiting for (a start that timed out or
        was cancelled): its late reply must never answer a later request on a reused pool."""
        self._kill()

    def _kill(self) -> None:
        """Terminate the worker (SIGTERM, then SIGKILL if it lingers) and reap it."""
        process = self._process
        with self._reap:
            try:
                if process.exitcode is None:
                    process.terminate()
                    process.join(KILL_WAIT_S / 2)
                if process.exitcode is None:
                    process.kill()
                    process.join(KILL_WAIT_S / 2)
            except ValueError:  # closed by ``finish``: reaped long ago
                pass

class _ProtocolError(Exception):
    """An answer that does not fit the oldest waiter (a flowplex bug)."""
