"""The one seam every executor implements."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

Task = Callable[[object], None]
"""An engine callback applied to one argument (an invocation context)."""


class Executor(Protocol):
    """Runs engine tasks. Tasks never raise: the engine records failures itself."""

    name: str
    kind: str
    """``inline``, ``threads`` or ``delegating``."""
    threads: int
    """Worker threads it owns (0 for inline and delegating)."""

    def submit(self, fn: Task, arg: object) -> None:
        """Run ``fn(arg)`` soon; never blocks on the task itself."""

    def submit_background(self, fn: Task, arg: object) -> None:
        """Like ``submit`` for work nobody is waiting on (sources, timer wakes)."""

    def start(self) -> None:
        """Start threads, if any (called at ``Graph.start`` when a node uses the executor)."""

    def shutdown(self) -> None:
        """Stop and join threads; queued tasks are dropped."""
