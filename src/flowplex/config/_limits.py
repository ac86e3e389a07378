"""``Limits``: what loading one YAML graph may cost, so a small hostile file cannot exhaust the host.

A 1 KB file of YAML aliases expands to billions of values, a 2 KB file of nested subgraph
instances to a million nodes, and an ``include`` can name ``/dev/zero``. Each limit is checked
before the work it bounds (the alias expansion is counted from the parser's events, before any
object is built) and breaking one is a one-line ``ConfigError`` naming the limit and how to
raise it. The defaults are far above any hand-written graph; raise them with
``Limits(max_nodes=...)`` on the loading functions or with ``FLOWPLEX_MAX_NODES=...`` in the
environment (which is how the CLI is configured).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, final

from ..errors import ConfigError, UsageError

__all__ = ["DEFAULT_LIMITS", "MAX_DEPTH_CAP", "Limits", "exceeded", "resolve_limits"]

_ENV_PREFIX: Final = "FLOWPLEX_"

MAX_DEPTH_CAP: Final = 256
"""The largest ``max_depth`` accepted."""


@final
@dataclass(frozen=True, slots=True)
class Limits:
    """Bounds on one graph load; every field is a positive integer.

    >>> Limits().max_nodes
    10000
    >>> Limits(max_nodes=50_000).max_nodes
    50000
    """

    max_document_bytes: int = 1 << 20
    """Size of one YAML file or text, in bytes (1 MiB); an ``include`` file larger is refused unread."""
    max_yaml_values: int = 100_000
    """Scalars, lists and mappings in one document *after* alias expansion (``*a`` counts as the
    whole value ``&a`` names, every time it is used)."""
    max_depth: int = 64
    """Nesting of lists and mappings in one document, and nesting of subgraph instances; at most
    ``MAX_DEPTH_CAP`` (256), so that the recursive steps after it stay far from Python's recursion limit."""
    max_include_depth: int = 16
    """Length of an ``include`` chain (a file that includes a file that includes ...)."""
    max_nodes: int = 10_000
    """Nodes and subgraph instances after subgraph expansion."""

    def __post_init__(self) -> None:
        for spec in dataclasses.fields(self):
            value = getattr(self, spec.name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                msg = f"Limits({spec.name}=...): expected a positive integer, got {value!r}"
                raise UsageError(msg)
        if self.max_depth > MAX_DEPTH_CAP:
            msg = f"Limits(max_depth={self.max_depth}): at most {MAX_DEPTH_CAP}"
            raise UsageError(msg)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Limits:
        """The defaults, with each ``FLOWPLEX_<FIELD>`` variable that is set taking its field's place.

        Raises:
            ConfigError: A variable that is not a positive integer.
        """
        env = os.environ if environ is None else environ
        values: dict[str, int] = {}
        for spec in dataclasses.fields(cls):
            var = _ENV_PREFIX + spec.name.upper()
            text = env.get(var)
            if text is None or not text.strip():
                continue
            try:
                number = int(text.strip(), 10)
            except ValueError:
                number = 0
            if number < 1 or (spec.name == "max_depth" and number > MAX_DEPTH_CAP):
                bound = f" of at most {MAX_DEPTH_CAP}" if spec.name == "max_depth" else ""
                msg = f"{var}={text!r}: expected a positive integer{bound} (the limit `{spec.name}`)"
                raise ConfigError(msg) from None
            values[spec.name] = number
        return cls(**values)


DEFAULT_LIMITS: Final = Limits()


def resolve_limits(limits: Limits | None) -> Limits:
    """``limits`` as given, or the environment's (``Limits.from_env``) when ``None``."""
    if limits is None:
        return Limits.from_env()
    if not isinstance(limits, Limits):
        msg = f"limits: expected a flowplex.config.Limits, got {type(limits).__name__}"
        raise UsageError(msg)
    return limits


def exceeded(name: str, limit: int) -> str:
    """The end of a limit's message: ``(limit max_nodes=10000; raise it with ... or FLOWPLEX_MAX_NODES)``."""
    return f"(limit {name}={limit}; raise it with Limits({name}=...) or {_ENV_PREFIX}{name.upper()})"
