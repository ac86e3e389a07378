"""``LoopbackExecutor``: the process-boundary seam, without the process, for tests.

It hosts kernels (``hosts_kernels`` is True) and sends every invocation through the same
codec a worker process will use: encode, frame, unframe, decode, run on its own kernel
instance, and the outcome back the same way. So a graph placed on it proves that everything
crossing the seam survives bytes, while running on the caller's thread like the inline
executor (whose scheduling it borrows for ``submit`` and the rest).

Recipes are not encoded (a pool pickles them; here kernels defined inside a test function work).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sized
from dataclasses import replace
from typing import final

from ..executors import InlineExecutor, TaskStats
from ..executors._invocation import Complete, Invocation, NodeRecipe, Outcome, Spill
from ..executors._protocol import FailureReport, Inbox, Task
from ..executors.hosted import _codec as codec
from ..executors.hosted._tasks import HostingDefaults
from ..kernels._host import KernelHosts, failed_outcome

__all__ = ["LoopbackExecutor"]

log = logging.getLogger(__name__)


@final
class LoopbackExecutor(HostingDefaults):
    """An inline executor whose kernels run behind the codec, on instances of its own.

    ``invoke`` runs on the calling thread and calls ``complete`` before it returns. The
    traffic counters (``invocations``, ``bytes_sent``, ``bytes_received``, ``buffers_sent``,
    ``buffers_received``) let a test prove that work really crossed the codec.
    """

    kind = "loopback"
    threads = 0
    runs_on_caller = True
    hosts_kernels = True
    kernels_in_process = True

    def __init__(self, name: str = "loopback") -> None:
        self.name = name
        self._inline = InlineExecutor(name)
        self._hosts = KernelHosts()
        self._lock = threading.Lock()  # the counters only
        self._invocations = 0
        self._bytes_sent = 0
        self._bytes_received = 0
        self._buffers_sent = 0
        self._buffers_received = 0

    # -- kernels, through the codec -------------------------------------------------------------

    def host(self, recipes: list[NodeRecipe]) -> None:
        """Build a kernel instance per recipe, keeping those of a restart (see ``KernelHosts.host``)."""
        self._hosts.host(recipes)

    def invoke(self, invocation: Invocation, complete: Complete, spill: Spill | None = None) -> None:
        """Encode ``invocation``, run it on the hosted kernel, and ``complete`` the decoded outcome.

        ``spill`` is not used: the call's output comes back whole, in one outcome.

        ``complete`` is called exactly once, on this thread, before ``invoke`` returns. When the
        codec or the host fails (a payload that does not pickle, a node not hosted here), the
        outcome reports that failure as the node's error. A ``BaseException`` from the kernel
        (``KeyboardInterrupt``) propagates and ``complete`` is not called.
        """
        try:
            outcome = self._round_trip(invocation)
        except Exception as exc:
            log.debug("loopback.invoke.failed node=%d seq=%d error=%r", invocation.node, invocation.seq, exc)
            outcome = failed_outcome(invocation, exc, self._hosts.num_outputs(invocation.node))
        complete(outcome)

    def _round_trip(self, invocation: Invocation) -> Outcome:
        sent = codec.encode_invocation(invocation)
        frame = codec.to_frame(sent)
        with self._lock:
            self._invocations += 1
            self._bytes_sent += len(frame)
            self._buffers_sent += len(sent.buffers)
        outcome = self._hosts.run(codec.decode_invocation(codec.from_frame(frame)))
        back = codec.encode_outcome(outcome)
        frame = codec.to_frame(back)
        with self._lock:
            self._bytes_received += len(frame)
            self._buffers_received += len(back.buffers)
        return codec.decode_outcome(codec.from_frame(frame))

    @property
    def invocations(self) -> int:
        """Invocations sent through the codec so far."""
        return self._invocations

    @property
    def bytes_sent(self) -> int:
        """Frame bytes of the invocations sent (headers and buffers)."""
        return self._bytes_sent

    @property
    def bytes_received(self) -> int:
        """Frame bytes of the outcomes received."""
        return self._bytes_received

    @property
    def buffers_sent(self) -> int:
        """Out-of-band buffers in the invocations sent."""
        return self._buffers_sent

    @property
    def buffers_received(self) -> int:
        """Out-of-band buffers in the outcomes received."""
        return self._buffers_received

    # -- tasks: the inline executor's --------------------------------------------------------------

    def submit(self, fn: Task, arg: object) -> None:
        """Run ``fn(arg)`` now on this thread, or after the task this thread is running."""
        self._inline.submit(fn, arg)

    def submit_background(self, fn: Task, arg: object) -> None:
        """Queue ``fn(arg)`` for the background thread (sources, wakes)."""
        self._inline.submit_background(fn, arg)

    def backlog(self) -> Sized | None:
        """The tasks waiting behind the one this thread runs now; None outside the run loop."""
        return self._inline.backlog()

    def inbox(self) -> Inbox | None:
        """None: it runs its tasks itself."""
        return None

    def set_on_submit(self, wake: Callable[[], None] | None) -> None:
        """Ignored: no host thread has to run its work."""

    def set_on_failure(self, report: FailureReport | None) -> None:
        """The inline executor's background thread reports what reaches it."""
        self._inline.set_on_failure(report)

    def stats(self) -> TaskStats:
        """The inline executor's snapshot, under this executor's kind."""
        return replace(self._inline.stats(), kind=self.kind)

    def start(self) -> None:
        """Nothing to start (the background thread starts with the first background task)."""
        self._inline.start()

    def shutdown(self) -> None:
        """Stop the background thread and drop the hosted kernels with their side packets
        (``Graph.close``: a graph never starts again after it; a restart after ``reset`` does
        not shut the executor down, and reuses them)."""
        self._inline.shutdown()
        self._hosts.clear()
