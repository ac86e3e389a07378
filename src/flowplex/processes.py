"""The process pool's former import path: ``flowplex.executors.processes`` is its home now.

Kept so that code written for flowplex 0.2 (``from flowplex.processes import
ProcessPoolExecutor``) keeps working; new code imports from ``flowplex.executors.processes``.
"""

from .executors.processes import DEFAULT_ARENA_BYTES as DEFAULT_ARENA_BYTES
from .executors.processes import ProcessPoolExecutor as ProcessPoolExecutor

__all__ = ["DEFAULT_ARENA_BYTES", "ProcessPoolExecutor"]
