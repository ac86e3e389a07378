"""Getting a command's graph: running ``--import``, then building the graph from its YAML file
with ``--set`` and ``--default-executor`` applied; a failure is one line, exit 2."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from ._app import fail, fail_at, usage
from ._overrides import apply_overrides
from ._watch import Deadline, cancelled_import, interrupted_import


def import_kernels(targets: list[str], deadline: Deadline | None = None) -> None:
    """Put the current directory on ``sys.path`` (as ``python -m`` does), then run each ``--import``.

    The directory is added even without ``--import``, so that a graph's ``imports:`` finds
    modules next to where the command runs, as ``--import`` does. A failure exits 2 with one
    line (``SystemExit`` and a ``KeyboardInterrupt`` the module raised itself too).
    """
    from flowplex.errors import ConfigError
    from flowplex.kernels._loading import import_target

    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    for target in targets:
        if deadline is not None:
            deadline.step = f"importing `{target}` (--import {target})"
        try:
            with imports_interrupted():
                import_target(target, base=Path(cwd), where=f"--import {target}")
        except ConfigError as exc:
            raise fail(exc, 2) from None


@contextlib.contextmanager
def imports_interrupted() -> Iterator[None]:
    """Turn a ``KeyboardInterrupt`` raised by imported code into one line, exit 2; the user's
    Ctrl-C exits 130 with one line saying what it interrupted."""
    try:
        yield
    except KeyboardInterrupt as exc:
        text = interrupted_import(exc)
        if text is not None:
            raise usage(text) from None
        raise cancelled_import(exc) from None


def load_graph(graph: Path, overrides: list[str], default_executor: str | None = None,
               transform: Callable[[Any], Any] | None = None) -> Any:
    """Build the graph (exit 2 with one line on a configuration error or a failing import).

    ``transform`` rewrites the graph's spec (a ``GraphSpec``) after the overrides, before the
    build: how ``replay --graph`` puts recorded streams in place of nodes.
    """
    with imports_interrupted():
        return _build_graph(graph, overrides, default_executor, transform)


def _build_graph(graph: Path, overrides: list[str], default_executor: str | None,
                 transform: Callable[[Any], Any] | None = None) -> Any:
    import flowplex
    from flowplex.config._load import load_plan_file
    from flowplex.errors import ConfigError

    try:
        if not overrides and default_executor is None and transform is None:
            return flowplex.Graph.from_yaml_file(graph)
        if default_executor is not None:
            _check_default_executor(default_executor, [ex.name for ex in load_plan_file(graph).executors])
        spec = load_plan_file(graph, default_executor=default_executor).spec
        try:
            spec = apply_overrides(spec, overrides)
            if transform is not None:
                spec = transform(spec)
        except ValueError as exc:
            raise usage(str(exc)) from None
        return flowplex.Graph.from_spec(spec)
    except (ConfigError, KeyError, OSError) as exc:
        raise fail_at(graph, exc, 2) from None


def _check_default_executor(name: str, declared: list[str]) -> None:
    """``--default-executor NAME`` must name an executor of the graph (exit 2 otherwise)."""
    if name not in declared:
        from flowplex._suggest import did_you_mean

        msg = (f"--default-executor {name}: the graph has no executor `{name}`{did_you_mean(name, declared)} "
               f"(executors: {', '.join(f'`{n}`' for n in declared)})")
        raise usage(msg)
