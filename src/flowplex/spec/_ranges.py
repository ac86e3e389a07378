"""The allowed range of every numeric setting, checked by the plan before anything is built.

A value outside these ranges fails the build with a ``ConfigError`` naming the field, the value
and the range, instead of failing later where it is used (a huge ``affinity`` id used to kill
its pool's worker thread; ``rate: 1e-300`` the shared timer thread; ``num_threads: 100000``
ran out of threads). The bounds are far above what any machine uses today, and fixed, so that
a graph checks the same everywhere; docs/limits.md lists them.
"""

from __future__ import annotations

from typing import Final

from .._timestamps import TS_MAX, TS_MIN

__all__ = [
    "MAX_BATCH",
    "MAX_BYTES",
    "MAX_CPU_ID",
    "MAX_DELAY_MS",
    "MAX_PACKETS",
    "MAX_RAY_AMOUNT",
    "MAX_RESTARTS",
    "MAX_TRACE_CAPACITY",
    "MAX_WORKERS",
    "RATE_MAX_HZ",
    "RATE_MIN_HZ",
    "TS_MAX",
    "TS_MIN",
]

MAX_WORKERS: Final = 1024
"""``num_threads``, ``num_processes`` and ``max_in_flight``."""
MAX_CPU_ID: Final = 8191
"""``affinity`` core ids: 0..8191, Linux's largest CPU count (``CONFIG_MAXSMP``). Pinning is best
effort: an id this machine lacks leaves the worker unpinned, so a graph written for a larger
machine still runs."""
MAX_PACKETS: Final = 1_000_000_000
"""Packet counts: queue capacities, ``input_policy.capacity``, ``max_queue_size``, ``max_queued_packets``."""
MAX_TRACE_CAPACITY: Final = 100_000_000
"""``trace_capacity`` (events kept in the trace ring)."""
MAX_DELAY_MS: Final = 86_400_000
"""Millisecond durations (``watchdog_ms``, ``max_batch_delay_ms``): one day."""
MAX_BYTES: Final = 1 << 40
"""Byte sizes (``arena_bytes``, ``buffer_pool_max_bytes``, a Ray ``memory`` request): 1 TiB."""
RATE_MIN_HZ: Final = 1e-6
"""The slowest source ``rate``: one invocation in about 11.6 days (timers take deadlines that far)."""
RATE_MAX_HZ: Final = 1e9
"""The fastest source ``rate`` (a period of 1 ns)."""
MAX_RAY_AMOUNT: Final = 1e6
"""Ray requests per actor: ``num_cpus``, ``num_gpus`` and each custom resource."""
MAX_BATCH: Final = 1_000_000
"""A Ray executor's ``max_batch``."""
MAX_RESTARTS: Final = 1_000_000
"""A Ray executor's ``max_restarts``."""
