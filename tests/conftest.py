"""Shared test configuration: hypothesis profiles, a clean environment, one run per executor kind.

The engine suites (``ACROSS_EXECUTORS``) run every test once per executor kind that
``flowplex.testing.EXECUTOR_KINDS`` names: the graphs a test builds get their default slot on
that kind (``flowplex.testing.default_executor``; nodes the YAML pins to a named executor keep
theirs), and the test id ends in the kind (``test_chain[threads]``). The autouse fixture
``executor_kind`` does the placing; a test may also take it as an argument to read the kind.

A test that is about some kinds only says so, with the reason (a mark without one, naming an
unknown kind, or used outside the suites is a usage error):

- ``@pytest.mark.executors("inline", ..., reason=...)``: only on the kinds listed (a test
  about one executor, or whose YAML pins every node, so that the kind would change nothing);
- a trait, ``@pytest.mark.<trait>(reason=...)``: only on the kinds whose executor has it (see
  ``TRAITS``; today's kinds in brackets):

  - ``self_running``: runs work with no host call [inline, threads, loopback, processes] (a
    test that starts a source and sleeps, or a graph nobody pumps);
  - ``on_caller``: a send has run the work it made ready when it returns [inline, loopback];
  - ``without_workers``: no worker threads of its own, so no two tasks race [inline,
    delegating, loopback];
  - ``local_kernels``: the kernels are the engine's own instances, fed the very packets it
    holds [inline, threads, delegating] (loopback runs copies behind the codec: no hop fast
    path, no zero copy);
  - ``in_process``: the kernels run in this interpreter [inline, threads, delegating,
    loopback], so a kernel class may be defined inside the test, what a kernel writes to a
    list or an Event is what the test reads, and a graph starts at no cost (a process pool
    imports kernels by reference in its workers, and each graph starts them: a test that
    starts dozens of graphs says so in its reason).

A new kind needs no change here: adding it to ``flowplex.testing.EXECUTOR_KINDS`` runs the
suites on it, and its traits are read from the executor's protocol attributes.
``--executors=inline,threads`` narrows a local run to some kinds.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Final

import pytest
from hypothesis import HealthCheck, settings

from flowplex import testing
from flowplex.executors import Executor, _placement
from flowplex.kernels import _registry

settings.register_profile(
    "ci",
    max_examples=60,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("dev", max_examples=300, deadline=None)
settings.load_profile(os.environ.get("FLOWPLEX_HYPOTHESIS_PROFILE", "ci"))


RUNTIME_DIR: Final = tempfile.mkdtemp(prefix="fpx-", dir="/tmp")
"""This test process's runtime directory for control sockets (short: a socket path has 107 bytes at most),
so that the graphs `flowplex run` starts in tests never meet the user's live graphs."""
atexit.register(shutil.rmtree, RUNTIME_DIR, True)


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Strip FLOWPLEX_* variables so a developer's shell cannot change test outcomes."""
    for key in list(os.environ):
        if key.startswith("FLOWPLEX_") and key != "FLOWPLEX_REQUIRE_EXTRAS":
            monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("FLOWPLEX_RUNTIME_DIR", RUNTIME_DIR)


# -- one run per executor kind ------------------------------------------------------------------

TESTS: Final = Path(__file__).parent
ACROSS_EXECUTORS: Final = tuple(TESTS / part for part in ("graph", "kernels", "property", "test_lmflow_compat.py"))
"""The suites whose every test runs once per executor kind (a directory or a module)."""
EXECUTOR_KINDS: Final[tuple[str, ...]] = testing.EXECUTOR_KINDS


def _probe(kind: str) -> Executor:
    """An executor of ``kind``, as a graph's default slot would get it (not started)."""
    with testing.default_executor(kind):
        return _placement.default_executor()


TRAITS: Final[dict[str, Callable[[Executor], bool]]] = {
    # Work submitted to it runs with no host call (it has no inbox for host threads to drain).
    "self_running": lambda ex: ex.inbox() is None,
    # Work runs on the thread whose action made it ready: a send has run it when it returns.
    "on_caller": lambda ex: ex.runs_on_caller,
    # No worker threads of its own: work runs, one task at a time, on threads that call in.
    "without_workers": lambda ex: ex.threads == 0,
    # The engine runs its own kernel instances on the packets it holds (no codec in between).
    "local_kernels": lambda ex: not ex.hosts_kernels,
    # Kernels run in this interpreter (an executor that runs them elsewhere says so).
    "in_process": lambda ex: ex.kernels_in_process,
}
"""Marks that select the kinds with a property, read from the executor itself (its protocol
attributes), so that a new kind needs no entry here."""
KINDS_WITH: Final = {trait: tuple(k for k in EXECUTOR_KINDS if has(_probe(k))) for trait, has in TRAITS.items()}
MARKS: Final = ("executors", *TRAITS)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--executors", default=",".join(EXECUTOR_KINDS), metavar="KINDS",
        help=f"engine suites: the executor kinds to run on, comma-separated (default: {','.join(EXECUTOR_KINDS)})",
    )


def _selected(config: pytest.Config) -> list[str]:
    chosen = [k.strip() for k in str(config.getoption("--executors")).split(",") if k.strip()]
    unknown = [k for k in chosen if k not in EXECUTOR_KINDS]
    if unknown or not chosen:
        msg = f"--executors={','.join(chosen)}: unknown or no kinds; expected some of {', '.join(EXECUTOR_KINDS)}"
        raise pytest.UsageError(msg)
    return chosen


def _kinds_for(definition: pytest.Function) -> list[str]:
    """The kinds one test runs on: all of them, narrowed by each of its executor marks."""
    kinds = list(EXECUTOR_KINDS)
    for mark in definition.iter_markers():
        if mark.name not in MARKS:
            continue
        if not mark.kwargs.get("reason"):
            msg = f"{definition.nodeid}: @pytest.mark.{mark.name} needs reason=... (why the other kinds do not apply)"
            raise pytest.UsageError(msg)
        allowed: tuple[str, ...] = mark.args if mark.name == "executors" else KINDS_WITH[mark.name]
        unknown = [k for k in allowed if k not in EXECUTOR_KINDS]
        if not allowed or unknown:
            msg = (f"{definition.nodeid}: @pytest.mark.executors{allowed!r}: unknown or no kinds; "
                   f"expected some of {', '.join(EXECUTOR_KINDS)}")
            raise pytest.UsageError(msg)
        kinds = [k for k in kinds if k in allowed]
    if not kinds:
        msg = f"{definition.nodeid}: its executor marks leave no kind to run on"
        raise pytest.UsageError(msg)
    return kinds


def _across_executors(path: Path) -> bool:
    return any(path == part or part in path.parents for part in ACROSS_EXECUTORS)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrise the engine suites over the executor kinds (see the module docstring)."""
    definition = metafunc.definition
    if not _across_executors(definition.path):
        if any(m.name in MARKS for m in definition.iter_markers()):
            msg = f"{definition.nodeid}: executor marks apply only in {', '.join(map(str, ACROSS_EXECUTORS))}"
            raise pytest.UsageError(msg)
        return
    kinds = _kinds_for(definition)
    metafunc.parametrize("executor_kind", kinds, indirect=True, ids=kinds)


def _kind(item: pytest.Item) -> str | None:
    params = getattr(getattr(item, "callspec", None), "params", {})
    return params.get("executor_kind")


TESTS = Path(__file__).resolve().parent
SHARED_SHM = ("transport", "hostile/test_ring_", "hostile/test_startup_deadlines.py", "hostile/test_arena_full.py")
"""Tests that make fixed segment names, scan ``/dev/shm`` or clean it: one worker runs them in turn."""


def _xdist_group(path: Path) -> str | None:
    """The pytest-xdist worker group of a test file (``--dist loadgroup``), None for any worker.

    The Ray tests share one local Ray instance, so they run on one worker; so do the tests that
    share ``/dev/shm`` names (``SHARED_SHM``). The rest spread over the workers test by test.
    """
    resolved = path.resolve()
    rel = resolved.relative_to(TESTS).as_posix() if resolved.is_relative_to(TESTS) else ""
    if rel.startswith("cluster/"):
        return "ray"
    if rel.startswith(SHARED_SHM):
        return "shm"
    return None


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's own, which reads the group marks added here
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Check that every item of the engine suites is parametrised, and apply ``--executors``.

    A unittest-style ``TestCase`` (a hypothesis state machine's) would run once, unplaced:
    wrap it in a test function. ``--executors`` deselects the other kinds (never a skip).
    """
    for item in items:
        group = _xdist_group(item.path)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
    missed = [item.nodeid for item in items if _across_executors(item.path) and _kind(item) is None]
    if missed:
        msg = f"not parametrised over the executor kinds (see tests/conftest.py): {', '.join(missed)}"
        raise pytest.UsageError(msg)
    selected = _selected(config)
    if len(selected) == len(EXECUTOR_KINDS):
        return
    keep = [item for item in items if _kind(item) in (None, *selected)]
    if len(keep) < len(items):
        config.hook.pytest_deselected(items=[item for item in items if item not in keep])
        items[:] = keep


@pytest.fixture(autouse=True)
def executor_kind(request: pytest.FixtureRequest) -> Iterator[str | None]:
    """The executor kind this test's graphs are placed on (None outside ``ACROSS_EXECUTORS``).

    Graphs built while the test runs, on this thread (in the test or in its fixtures), get
    their default slot on this kind. A thread the test starts begins with a fresh context:
    graphs it builds stay inline.
    """
    kind: str | None = getattr(request, "param", None)
    if kind is None:
        yield None
        return
    before = set(_registry._registry)
    try:
        with testing.default_executor(kind):
            yield kind
    finally:
        _forget_kernels_defined_in(request.function, before)


def _forget_kernels_defined_in(test: object, before: set[str]) -> None:
    """Unregister the kernels that ``test`` defined in its own body, so that its run on the next
    kind can define them again (the registry is process-wide and refuses a second class).

    Only classes made inside the test function itself (``test_x.<locals>.K``) are dropped: a
    kernel that a helper registers once for the session stays registered.
    """
    prefix = f"{getattr(test, '__qualname__', '')}.<locals>."
    with _registry._lock:
        for name in set(_registry._registry) - before:
            if _registry._registry[name].__qualname__.startswith(prefix):
                del _registry._registry[name]
