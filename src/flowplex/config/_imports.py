"""A document's ``imports``: the kernel modules and ``.py`` files to import before kernels resolve.

Each entry is a module name (found on ``sys.path``) or a path to a ``.py`` file, relative to the
YAML file that names it (to the current directory for YAML text without a file). Imports run
while the document loads, in the order written, each target at most once per process
(``flowplex.kernels._loading``); an included file's imports run when it is read.

An import runs the user's code and may never return (a module waiting on a device or a
server): ``importing_now`` says which entry each thread is importing, so that a deadline
watching from another thread (``flowplex run --timeout``) can name it.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Final

from ..kernels._loading import import_target
from ._paths import Source
from ._schema import GraphModel

__all__ = ["importing_now", "run_imports"]

_now: Final[dict[int, str]] = {}
"""Thread id -> the entry it is importing (``g.yaml:3: imports[0] (`mypkg`)``); one writer per key."""


def run_imports(model: GraphModel, source: Source, base: Path) -> tuple[str, ...]:
    """Import every ``imports`` entry of one document.

    Args:
        model: The document.
        source: Its line table (for ``file:LINE: imports[i]`` in messages).
        base: The directory relative file paths are resolved against.

    Returns:
        The targets as module names and absolute file paths (``GraphSpec.imports``).

    Raises:
        ConfigError: An entry cannot be imported (the cause chained).
    """
    me = threading.get_ident()
    outer = _now.get(me)  # an imported file may load a graph of its own
    done: list[str] = []
    try:
        for i, target in enumerate(model.imports):
            where = f"{source.prefix(('imports', i))}imports[{i}]"
            _now[me] = f"{where} (`{target}`)"
            done.append(import_target(target, base=base, where=where))
    finally:
        if outer is None:
            _now.pop(me, None)
        else:
            _now[me] = outer
    return tuple(done)


def importing_now(thread_id: int) -> str | None:
    """The ``imports`` entry thread ``thread_id`` is importing now, or None (any thread may ask)."""
    return _now.get(thread_id)
