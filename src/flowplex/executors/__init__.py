"""Executors: where kernel callbacks run (inline on the caller, a thread pool, or the host)."""

from ._delegating import DelegatingExecutor as DelegatingExecutor
from ._inline import InlineExecutor as InlineExecutor
from ._protocol import Executor as Executor
from ._protocol import TaskStats as TaskStats
from ._threads import ThreadPoolExecutor as ThreadPoolExecutor

__all__ = ["DelegatingExecutor", "Executor", "InlineExecutor", "TaskStats", "ThreadPoolExecutor"]
