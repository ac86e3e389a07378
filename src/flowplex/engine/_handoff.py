"""``HANDOFF``: how the engine hands a hosted node's claimed call to its executor's ``invoke``.

A node on an executor that ``hosts_kernels`` (the process pool, Ray, the loopback) needs no
engine task on an executor thread: its call only becomes a message (``Scheduler.run`` →
``invoke``). So the engine makes that call itself, on the thread that claimed the work, and
the executor's ``submit`` is never in the way (one seam crossing per call, not two).

A hand-off made while this thread is already handing one off (a call that failed at once and
completed on the spot, a loopback kernel completing inside ``invoke``) is queued and run by
the outer one when it returns, as the inline executor's trampoline does: a long chain or a
stream of failing calls never recurses.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import TYPE_CHECKING, Final, Protocol, final

if TYPE_CHECKING:
    from ..executors import Executor
    from ..executors._protocol import Task
    from ..kernels._context import Context

__all__ = ["HANDOFF", "Handoff"]


class _Owner(Protocol):
    """The node a claimed context belongs to (``_nodes.Node``), as far as the hand-off reads it."""

    @property
    def executor(self) -> Executor: ...


@final
class Handoff:
    """Runs hosted nodes' tasks at once on the calling thread, nested ones after the outer."""

    __slots__ = ("_local",)

    def __init__(self) -> None:
        self._local = threading.local()

    def submit(self, fn: Task, arg: object) -> None:
        """Run ``fn(arg)`` now, or after the hand-off this thread is making (see the module)."""
        local = self._local
        queue: deque[tuple[Task, object]] | None = getattr(local, "queue", None)
        if queue is not None:
            queue.append((fn, arg))
            return
        queue = deque()
        local.queue = queue
        try:
            fn(arg)
            while queue:
                task, targ = queue.popleft()
                task(targ)
        finally:
            local.queue = None
            # A task raised past the engine (the user's Ctrl-C): the calls it left behind go on
            # on their executors' dispatcher threads, or the graph would wait for them forever.
            while queue:
                task, targ = queue.popleft()
                self.submit_background(task, targ)

    def submit_background(self, fn: Task, arg: object) -> None:
        """Queue ``fn(arg)`` on the executor of the node it runs (its dispatcher thread): work
        that must not run on this thread (a start's, a cancel's)."""
        ctx: Context = arg  # type: ignore[assignment]
        owner: _Owner = ctx.owner  # type: ignore[assignment]
        owner.executor.submit_background(fn, arg)


HANDOFF: Final = Handoff()
"""The one hand-off: its queue is per thread, and each task carries its own graph."""
