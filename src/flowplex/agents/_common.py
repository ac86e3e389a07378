"""What every agent source shares: its identity options and its packet timestamps."""

from __future__ import annotations

import time
from dataclasses import dataclass

from ..errors import ConfigError, UsageError
from ..kernels import Context
from ..terminal._display import agent_type_of
from ..transport import AgentType

__all__ = ["Identity", "Stamper", "draining", "option_error", "read_identity"]

BOUND_POLL_S = 0.1
"""Longest wait of a source bound to a display, so that it notices ``draining`` quickly."""


def option_error(cc: Context, key: str, problem: str) -> ConfigError:
    """``node 'x' (Kernel): options.key: problem`` -- the form every option error takes."""
    return ConfigError(f"node '{cc.node_name}' ({cc.kernel_name}): options.{key}: {problem}")


@dataclass(frozen=True, slots=True)
class Identity:
    """Who an agent source speaks as."""

    name: str
    stream_id: int | None
    agent_type: AgentType


def read_identity(cc: Context, default_name: str, default_type: AgentType) -> Identity:
    """Read the ``name``, ``stream_id`` and ``agent_type`` options (defaults: the node name for
    the label, no stream id, ``default_type``).

    Raises:
        ConfigError: ``stream_id`` is not a u32 or ``agent_type`` is not an agent type.
    """
    name = cc.option_str("name", "") or default_name or cc.node_name
    stream_id: int | None = None
    if cc.has_option("stream_id"):
        sid = cc.option_int("stream_id", -1)
        if not 0 <= sid <= 0xFFFFFFFF:
            raise option_error(cc, "stream_id", "expected an integer in 0..4294967295")
        stream_id = sid
    kind = default_type
    if cc.has_option("agent_type"):
        raw: object = cc.option_str("agent_type", "") or cc.option_int("agent_type", -1)
        try:
            kind = agent_type_of(raw, where="agent_type")
        except UsageError as exc:
            raise option_error(cc, "agent_type", str(exc).split(": ", 1)[-1]) from None
    return Identity(name, stream_id, kind)


class Stamper:
    """Strictly increasing packet timestamps: microseconds since the source opened."""

    __slots__ = ("_last", "_t0")

    def __init__(self) -> None:
        self._t0 = time.monotonic_ns()
        self._last = -1

    def now(self) -> int:
        """Microseconds since the source opened, in the clock of its timestamps; nothing is taken
        (any thread: what a key typed now would be stamped with, for a recording of the input)."""
        return (time.monotonic_ns() - self._t0) // 1000

    def next(self, at_us: int | None = None) -> int:
        """The next timestamp: ``at_us`` (or now) unless that would not increase."""
        ts = (time.monotonic_ns() - self._t0) // 1000 if at_us is None else int(at_us)
        ts = max(ts, self._last + 1)
        self._last = ts
        return ts


def draining(display_name: str) -> bool:
    """Whether the display registered as ``display_name`` asks its sources to finish."""
    if not display_name:
        return False
    from ..terminal import get_display

    display = get_display(display_name)
    return display is not None and display.draining.is_set()
