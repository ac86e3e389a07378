"""Test helpers, public and shipped: script sources, run graphs, collect and compare outputs.

- ``ScriptedSource`` (kernel ``ScriptedSource``) plays a script of values, ``At(ts, value)``,
  ``Gap(seconds)``, ``Fail(message)`` and ``EndOfStream()``; ``scripted(name, items)`` makes
  its node dict. The script is plain YAML options, so the graph runs on a process pool too.
- ``run_graph(graph, inputs)`` builds, feeds, runs to the end and returns ``Outputs``: per
  output port, ``[(ts, value), ...]``.
- ``CollectSink`` (kernel ``CollectSink``) records what it receives (in-process executors).
- ``FakeClock`` for code that takes a clock (the terminal displays; the engine keeps its own).
- ``flowplex.testing.pytest_plugin``: the fixtures ``flowplex_graph`` and ``kernel_runner``.
- ``LoopbackExecutor``: an inline executor whose kernels run behind the process codec.

``default_executor(kind)`` places the default slot of every graph built inside the ``with``
block on another executor (``"inline"``, ``"threads"``, ``"delegating"``, ``"loopback"`` or
``"processes"``, a ``ProcessPoolExecutor`` of 2 workers; ``"ray"``, a ``RayExecutor``; or a
factory), so one suite checks that every executor gives the same results. On ``"processes"``
and ``"ray"`` kernels run in other processes, which import them by reference (no kernel
defined inside a test); they stay warm between graphs (``warm=True``).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from ..errors import EndOfStream as EndOfStream
from ..errors import UsageError
from ..executors import DelegatingExecutor, InlineExecutor, ThreadPoolExecutor
from ..executors._placement import ExecutorFactory, _default_factory
from ..executors.processes import ProcessPoolExecutor
from ._clock import FakeClock as FakeClock
from ._collect import CollectSink as CollectSink
from ._collect import Record as Record
from ._loopback import LoopbackExecutor as LoopbackExecutor
from ._run import Outputs as Outputs
from ._run import run_graph as run_graph
from ._script import At as At
from ._script import Fail as Fail
from ._script import Gap as Gap
from ._sources import ScriptedSource as ScriptedSource
from ._sources import scripted as scripted

__all__ = [
    "EXECUTOR_KINDS",
    "EXTRA_KINDS",
    "At",
    "CollectSink",
    "EndOfStream",
    "Fail",
    "FakeClock",
    "Gap",
    "LoopbackExecutor",
    "Outputs",
    "Record",
    "ScriptedSource",
    "default_executor",
    "run_graph",
    "scripted",
]

EXECUTOR_KINDS = ("inline", "threads", "delegating", "loopback", "processes")
"""The kinds engine suites run on, each a name ``default_executor`` accepts."""
EXTRA_KINDS = ("ray",)
"""Kinds ``default_executor`` accepts besides those: ``"ray"``, a ``RayExecutor`` on the Ray
instance this process uses (or a new local one), its actors kept warm between graphs; it needs
``pip install 'flowplex[ray]'``."""


def _factory(kind: str) -> ExecutorFactory:
    if kind == "inline":
        return InlineExecutor
    if kind == "threads":
        return lambda name: ThreadPoolExecutor(name, 2)
    if kind == "delegating":
        return DelegatingExecutor
    if kind == "loopback":
        return LoopbackExecutor
    if kind == "processes":
        return lambda name: ProcessPoolExecutor(name, 2, warm=True)
    if kind == "ray":
        from ..executors.ray import RayExecutor

        return lambda name: RayExecutor(name, num_cpus=0.1, max_batch=8, warm=True)
    kinds = ", ".join((*EXECUTOR_KINDS, *EXTRA_KINDS))
    msg = f"default_executor: unknown executor kind {kind!r}; expected one of {kinds}"
    raise UsageError(msg)


@contextmanager
def default_executor(kind: str | ExecutorFactory) -> Iterator[None]:
    """Build graphs inside the block with their default executor replaced by ``kind``."""
    factory = _factory(kind) if isinstance(kind, str) else kind
    token = _default_factory.set(factory)
    try:
        yield
    finally:
        _default_factory.reset(token)


