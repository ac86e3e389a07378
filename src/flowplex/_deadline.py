"""What the CLI's ``--timeout`` watch needs from inside the library, kept out of ``flowplex.cli``.

The command-line layer reads only the public facade and snapshots (``tests/diagnostics``
checks it); the deadline watch is the one place that must name the import or kernel that a
thread is stuck in, take a lock with a timeout and end the process without clean-up.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import IO, NoReturn


def doing_now(thread_id: int) -> str | None:
    """The import or kernel construction that thread ``thread_id`` is in, for the message."""
    from .config._imports import importing_now
    from .engine._build import building_now

    importing = importing_now(thread_id)
    if importing is not None:
        return f"importing {importing}"
    building = building_now(thread_id)
    if building is not None:
        return f"creating the kernel of {building}"
    return None


def locked_flush(lock: threading.Lock, sink: IO[str]) -> Callable[[], None]:
    """A flush of ``sink`` that gives up after 0.5 s when a writer holds ``lock`` (stuck mid-line)."""

    def flush() -> None:
        if lock.acquire(timeout=0.5):
            try:
                sink.flush()
            finally:
                lock.release()

    return flush


def exit_now(code: int) -> NoReturn:
    """End the process at once: a hung import or kernel cannot hold it (no clean-up runs)."""
    os._exit(code)
