"""Process executors: kernel callbacks in worker processes, the scheduler in the host."""

from ._arena import DEFAULT_ARENA_BYTES as DEFAULT_ARENA_BYTES
from ._pool import ProcessPoolExecutor as ProcessPoolExecutor

__all__ = ["DEFAULT_ARENA_BYTES", "ProcessPoolExecutor"]
