"""Which executor a graph's ``default`` slot gets: the inline one, unless a test placed another.

``flowplex.testing.default_executor`` sets the factory for the graphs built inside a ``with``
block, so one test suite can run every graph on inline, thread-pool, delegating and loopback
executors. Nodes the YAML pins to a named executor keep it.
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar

from ._inline import InlineExecutor
from ._protocol import Executor

ExecutorFactory = Callable[[str], Executor]
"""``factory(name) -> Executor``: builds the executor for the slot called ``name``."""

_default_factory: ContextVar[ExecutorFactory | None] = ContextVar("flowplex_default_executor", default=None)


def default_executor(name: str = "default") -> Executor:
    """A new executor for a graph's default slot (inline unless overridden)."""
    factory = _default_factory.get()
    return InlineExecutor(name) if factory is None else factory(name)
