"""Process executors: kernel callbacks in worker processes, the scheduler in the host."""

from ._pool import ProcessPoolExecutor as ProcessPoolExecutor

__all__ = ["ProcessPoolExecutor"]
