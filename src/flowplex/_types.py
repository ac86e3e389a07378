"""Type aliases shared across flowplex modules."""

from __future__ import annotations

import os
from typing import TypeAlias

Timestamp: TypeAlias = int
"""A signed 64-bit timestamp; see ``flowplex._timestamps`` for the sentinels."""

PathLike: TypeAlias = str | os.PathLike[str]
"""A filesystem path as users pass it."""

OptionValue: TypeAlias = bool | int | float | str | list["OptionValue"] | dict[str, "OptionValue"] | None
"""A node's ``options`` subtree, as parsed from YAML."""

MetadataValue: TypeAlias = bool | int | float | str
"""The four value types a packet's metadata map may hold."""
