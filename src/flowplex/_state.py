"""``GraphState``: the graph's lifecycle states, spelled once (lm-flow's names and values).

A leaf module (stdlib only) so that the scheduler's compiled modules can derive their int
constants from it without an import cycle: the engine stores the state as a plain ``int``
(``engine._status.CREATED`` ... ``TERMINATED``, each ``int(GraphState.X)``), because an
``IntEnum`` compares more slowly than an int on the compiled hot paths. Everything else,
names in messages and stats included, comes from this enum.
"""

from __future__ import annotations

from enum import IntEnum

__all__ = ["GraphState"]


class GraphState(IntEnum):
    """A graph's lifecycle state (lm-flow's values).

    ``CREATED`` → ``INITIALIZED`` (built, not started; ``reset`` comes back here) →
    ``RUNNING`` (``start``) → ``DRAINING`` (every graph input closed) → ``TERMINATED``
    (every node closed).
    """

    CREATED = 0
    INITIALIZED = 1
    RUNNING = 2
    DRAINING = 3
    TERMINATED = 4
