"""A document's ``imports``: the kernel modules and ``.py`` files to import before kernels resolve.

Each entry is a module name (found on ``sys.path``) or a path to a ``.py`` file, relative to the
YAML file that names it (to the current directory for YAML text without a file). Imports run
while the document loads, in the order written, each target at most once per process
(``flowplex.kernels._loading``); an included file's imports run when it is read.
"""

from __future__ import annotations

from pathlib import Path

from ..kernels._loading import import_target
from ._paths import Source
from ._schema import GraphModel

__all__ = ["run_imports"]


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
    return tuple(
        import_target(target, base=base, where=f"{source.prefix(('imports', i))}imports[{i}]")
        for i, target in enumerate(model.imports)
    )
