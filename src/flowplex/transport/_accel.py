"""The optional C hot paths (``_fastring``), and the switch that turns them off.

The extension is built by ``pip install`` where a C compiler is available (``setup.py``); the
pure-Python implementation is always there and behaves the same, so the extension is purely a
speed-up (about three times fewer nanoseconds per single-message ``send``/``recv``).  Set
``FLOWPLEX_PURE_PYTHON=1`` to use the pure-Python paths even when the extension is built (the
test-suite runs the transport both ways).
"""

from __future__ import annotations

import logging
import os
from types import ModuleType

from . import _fragment
from . import _layout as lay

log = logging.getLogger(__name__)


def layout_mismatches(module: ModuleType) -> list[str]:
    """The layout constants on which the extension disagrees with ``_layout`` (none, normally)."""
    expected = {
        "SLOT_SIZE": lay.SLOT_SIZE,
        "PAYLOAD_SIZE": lay.PAYLOAD_SIZE,
        "MAX_ESCAPE": _fragment.MAX_ESCAPE,
        "FLAG_CONTINUES": lay.FLAG_CONTINUES,
        "FLAG_FIRST": lay.FLAG_FIRST,
        "FLAG_TEXT": lay.FLAG_TEXT,
        "L_EXTRA_SLOTS": lay.L_EXTRA_SLOTS,
        "L_FRAGMENTED": lay.L_FRAGMENTED,
        "L_PRODUCER_HWM": lay.L_PRODUCER_HWM,
        "L_HEAD": lay.L_HEAD,
        "L_CONSUMER_EXTRA": lay.L_CONSUMER_EXTRA,
        "L_REASSEMBLED": lay.L_REASSEMBLED,
    }
    found = {k: getattr(module, k, None) for k in expected}
    return [f"{k}={found[k]} (expected {v})" for k, v in expected.items() if found[k] != v]


def _load() -> ModuleType | None:
    if os.environ.get("FLOWPLEX_PURE_PYTHON", "") not in ("", "0"):
        return None
    try:
        from . import _fastring
    except ImportError:  # built without a compiler: the pure-Python paths are complete
        return None
    wrong = layout_mismatches(_fastring)
    if wrong:  # a stale build left beside newer sources: never write a layout we do not read
        log.warning("flowplex.transport: ignoring the stale C extension (%s); reinstall to rebuild", ", ".join(wrong))
        return None
    return _fastring


fast: ModuleType | None = _load()
"""The ``_fastring`` module, or None; read when a producer or consumer is made."""


def _load_guard() -> ModuleType | None:
    # The fault guard is no hot path but a safety net, so FLOWPLEX_PURE_PYTHON does not turn it
    # off: the pure-Python paths read the same mapping and die of the same SIGBUS without it.
    try:
        from . import _fastring
    except ImportError:
        return None
    return _fastring if hasattr(_fastring, "guard_register") else None


guard: ModuleType | None = _load_guard()
"""The module with the SIGBUS guard (``guard_register``...), or None where the extension is not
built; then a truncated segment can still kill a process that touches a lost page before the
periodic size check (``RingCore.intact``) notices the truncation."""
