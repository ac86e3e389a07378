"""Which modules the install compiles with mypyc, and the switch back to their Python sources.

The scheduler's per-packet path is plain typed Python that ``setup.py`` also compiles with
mypyc where it can: the same code, about twice as fast per packet. The sources are always
installed beside the compiled modules and are loaded instead when:

- ``FLOWPLEX_PURE_PYTHON=1`` is set (also turns off the transport's C paths), or
- a source differs from the one that was compiled (an editable install edited since its
  build): the compiled twin is stale, so all of the group is loaded from source, with a warning.

``flowplex/__init__`` calls :func:`use_sources_if_needed` before any of these modules loads.
This module imports nothing heavy: it runs on every ``import flowplex``.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from importlib.machinery import ModuleSpec
    from types import ModuleType

COMPILED: Final = (
    "flowplex.engine._engine_common",
    "flowplex.engine._nodes",
    "flowplex.engine._status",
    "flowplex.engine._budget",
    "flowplex.engine._blocking",
    "flowplex.engine._claims",
    "flowplex.engine._delivery",
    "flowplex.engine._closing",
    "flowplex.engine._sources",
    "flowplex.engine._loop",
    "flowplex.engine._pump",
    "flowplex.engine._admission",
    "flowplex.kernels._context",
    "flowplex.executors._inline",
    "flowplex.executors._delegating",
)
"""Compiled as one group (one shared runtime library): the engine's per-packet parts."""
GROUP: Final = "flowplex"
"""mypyc's group name: the shared library is the top-level module ``flowplex__mypyc``."""
STAMP: Final = "_native.stamp"
"""Written beside this module by a successful build: ``<checksum> <module>`` per compiled source."""

_PACKAGE = os.path.dirname(os.path.abspath(__file__))
mode = "source"
"""``compiled``, or ``source`` with the reason after a colon (``flowplex info`` prints it)."""


def source_hash(path: str) -> str:
    """The checksum a build records for one source file (CRC-32: it detects edits, cheaply)."""
    import zlib  # stdlib, C, loads in microseconds (hashlib would add ~5 ms to every import)

    with open(path, "rb") as f:
        return f"{zlib.crc32(f.read()):08x}"


def source_path(module: str, package: str | None = None) -> str:
    """The ``.py`` file of ``module`` (``flowplex.x.y``) inside the package directory."""
    return os.path.join(package or _PACKAGE, *module.split(".")[1:]) + ".py"


def read_stamp(package: str | None = None) -> dict[str, str]:
    """The checksums a build recorded: module -> checksum."""
    with open(os.path.join(package or _PACKAGE, STAMP), encoding="utf-8") as f:
        return {module: checksum for checksum, module in (line.split() for line in f if line.strip())}


def write_stamp(directory: str, sources: dict[str, str]) -> None:
    """Record the checksum of each compiled module's source (``setup.py`` after a build)."""
    lines = [f"{source_hash(path)} {module}\n" for module, path in sorted(sources.items())]
    with open(os.path.join(directory, STAMP), "w", encoding="utf-8") as f:
        f.writelines(lines)


def stale(package: str | None = None) -> list[str]:
    """Compiled modules whose source changed since the build (a deleted source counts as fresh)."""
    recorded = read_stamp(package)
    found = []
    for module in COMPILED:
        path = source_path(module, package)
        if module not in recorded or (os.path.exists(path) and source_hash(path) != recorded[module]):
            found.append(module)
    return found


class _SourceFinder:
    """A meta path finder: the compiled modules' ``.py`` sources ahead of their compiled twins."""

    def find_spec(self, fullname: str, path: object = None, target: ModuleType | None = None) -> ModuleSpec | None:
        if fullname not in COMPILED:
            return None
        import importlib.util

        return importlib.util.spec_from_file_location(fullname, source_path(fullname))


def use_sources_if_needed() -> None:
    """Decide, once, whether the compiled modules or their sources load; sets :data:`mode`."""
    global mode
    if any(isinstance(f, _SourceFinder) for f in sys.meta_path):
        return
    if os.environ.get("FLOWPLEX_PURE_PYTHON", "") not in ("", "0"):
        mode = "source: FLOWPLEX_PURE_PYTHON is set"
    elif not os.path.exists(os.path.join(_PACKAGE, STAMP)):
        mode = "source: not compiled in this install"
        return  # nothing compiled: the sources are all there is
    else:
        edited = stale()
        if not edited:
            mode = "compiled"
            return
        mode = f"source: edited since the build ({', '.join(edited)}); reinstall to recompile"
        import logging

        logging.getLogger("flowplex").warning("flowplex: using the Python sources of the scheduler: %s",
                                              mode.split(": ", 1)[1])
    sys.meta_path.insert(0, _SourceFinder())
