"""The compiled scheduler (mypyc) and its Python sources: which one loads, and both work.

The rest of the suite runs on whatever this install loads (the compiled modules where the
build had a C compiler). ``test_engine_tests_pass_on_the_sources`` reruns the engine's tests
on the Python sources, so both stay covered by one CI run.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import flowplex
from flowplex import _native
from flowplex.testing import EXECUTOR_KINDS

PACKAGE = Path(_native.__file__).parent
COMPILED_HERE = (PACKAGE / _native.STAMP).exists()
REPO = Path(__file__).parents[1]


def _probe(env: dict[str, str] | None = None, path: str | None = None) -> dict[str, object]:
    """Import flowplex in a fresh interpreter; report the mode and where each module came from."""
    code = (
        "import json, importlib, flowplex, flowplex._native as n\n"
        "files = {m: importlib.import_module(m).__file__ for m in n.COMPILED}\n"
        "print(json.dumps({'mode': n.mode, 'files': files}))\n"
    )
    full_env = {**os.environ, **(env or {})}
    if path is not None:
        full_env["PYTHONPATH"] = path
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=full_env,
                            check=True)
    report: dict[str, object] = json.loads(result.stdout.splitlines()[-1])
    report["stderr"] = result.stderr
    return report


def test_the_compiled_group_is_the_whole_scheduler_core() -> None:
    # Every listed module exists as a source, and every per-packet part of the engine is listed:
    # each part the scheduler loop holds is compiled with it (calls between them stay native).
    for module in _native.COMPILED:
        assert (PACKAGE.joinpath(*module.split(".")[1:]).with_suffix(".py")).is_file(), module
    from flowplex.engine._loop import Scheduler

    scheduler = flowplex.Graph.from_yaml(
        "nodes: [{ name: a, kernel: ScaleKernel, input_ports: [x], output_ports: [y] }]\n"
        "input_ports: [x]\noutput_ports: [y]\n")._engine.scheduler
    assert isinstance(scheduler, Scheduler)
    names = ("status", "budget", "blocking", "claims", "delivery", "closing", "sources")
    parts = {type(getattr(scheduler, name)).__module__ for name in names}
    assert parts | {Scheduler.__module__} <= set(_native.COMPILED), parts - set(_native.COMPILED)


@pytest.mark.skipif(not COMPILED_HERE, reason="this install did not compile the scheduler (no C compiler or "
                    "mypyc at build time); the suite runs on the Python sources")
def test_a_compiled_install_loads_the_compiled_modules() -> None:
    report = _probe()
    assert report["mode"] == "compiled"
    files: dict[str, str] = report["files"]  # type: ignore[assignment]
    assert all(not f.endswith(".py") for f in files.values()), files


def test_pure_python_switch_loads_every_source() -> None:
    report = _probe({"FLOWPLEX_PURE_PYTHON": "1"})
    assert report["mode"] == "source: FLOWPLEX_PURE_PYTHON is set"
    files: dict[str, str] = report["files"]  # type: ignore[assignment]
    assert all(f.endswith(".py") for f in files.values()), files


def test_stale_detection_compares_each_source_with_the_build(tmp_path: Path) -> None:
    package = str(tmp_path)
    sources = {m: _native.source_path(m, package) for m in _native.COMPILED}
    for module, path in sources.items():
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(f"# {module}\n")
    _native.write_stamp(package, sources)
    assert _native.read_stamp(package) == {m: _native.source_hash(p) for m, p in sources.items()}
    assert _native.stale(package) == []

    engine = Path(sources["flowplex.engine._loop"])
    engine.write_text(engine.read_text() + "x = 1\n")
    Path(sources["flowplex.kernels._context"]).unlink()  # a deleted source cannot be stale
    assert _native.stale(package) == ["flowplex.engine._loop"]

    del sources["flowplex.engine._nodes"]  # a build from before this module was compiled
    del sources["flowplex.kernels._context"]
    _native.write_stamp(package, sources)
    assert _native.stale(package) == ["flowplex.engine._nodes", "flowplex.kernels._context"]


@pytest.mark.skipif(not COMPILED_HERE, reason="needs a compiled install to make stale")
def test_an_edited_source_replaces_its_stale_compiled_twin(tmp_path: Path) -> None:
    # A copy of this install where one compiled module's source was edited after the build.
    shutil.copytree(PACKAGE, tmp_path / "flowplex", ignore=shutil.ignore_patterns("__pycache__"))
    spec = importlib.util.find_spec(f"{_native.GROUP}__mypyc")
    assert spec is not None and spec.origin is not None
    shutil.copy(spec.origin, tmp_path)
    edited = tmp_path / "flowplex" / "engine" / "_nodes.py"
    edited.write_text(edited.read_text() + "\nEDITED_AFTER_THE_BUILD = True\n")

    report = _probe(path=str(tmp_path))
    assert report["mode"] == ("source: edited since the build (flowplex.engine._nodes); reinstall to recompile")
    files: dict[str, str] = report["files"]  # type: ignore[assignment]
    assert all(f.endswith(".py") and f.startswith(str(tmp_path)) for f in files.values()), files
    assert "using the Python sources of the scheduler" in str(report["stderr"])


# The kinds whose executors run the compiled modules' Python twins (inline, delegating) and the
# thread pool. The loopback and the process pool run the same engine code through the seam's
# codec, which is never compiled: the main run covers them, and here they would add about half a
# minute each.
SOURCE_KINDS = [kind for kind in EXECUTOR_KINDS if kind not in ("processes", "loopback")]
GRAPH_SOURCE_KINDS = ["inline", "delegating"]
"""The graph suite runs again on the executors that are themselves compiled; on the thread pool
(plain Python, over the same engine paths as inline) the other suites' run covers it."""


@pytest.mark.skipif(not COMPILED_HERE, reason="the whole suite already runs on the Python sources")
@pytest.mark.timeout(400)  # it runs the engine suites again (10 to 20 s here, more on a busy machine)
@pytest.mark.parametrize(
    ("suites", "kinds"),
    # In parts of 10 to 20 s here (the graph suite, per kind, is most of it), so
    # that the two test workers share them and none is left running alone at the end.
    [*((["tests/graph"], [kind]) for kind in GRAPH_SOURCE_KINDS),
     (["tests/engine", "tests/kernels", "tests/property", "tests/test_lmflow_compat.py"], SOURCE_KINDS)],
    ids=[*(f"graph-{kind}" for kind in GRAPH_SOURCE_KINDS), "engine-kernels-property-compat"],
)
def test_engine_tests_pass_on_the_sources(suites: list[str], kinds: list[str]) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "-p", "no:randomly",
         f"--executors={','.join(kinds)}", *suites],
        cwd=REPO, capture_output=True, text=True, timeout=380, env={**os.environ, "FLOWPLEX_PURE_PYTHON": "1"},
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert " passed" in result.stdout.splitlines()[-1]


def test_flowplex_info_reports_what_loads() -> None:
    def info(env: dict[str, str]) -> list[str]:
        result = subprocess.run([sys.executable, "-c", "from flowplex.cli import main; main()", "info"],
                                capture_output=True, text=True, timeout=60, env={**os.environ, **env}, check=True)
        return result.stdout.splitlines()

    lines = info({"FLOWPLEX_PURE_PYTHON": "1"})
    assert lines[0].startswith("flowplex 0.")
    assert lines[1:3] == ["scheduler: source: FLOWPLEX_PURE_PYTHON is set", "ring transport: source (pure Python)"]
    assert lines[3].startswith("ray: ") and len(lines) == 4  # the Ray line: tests/cluster/test_config.py
    expected = "scheduler: compiled" if COMPILED_HERE else "scheduler: source: not compiled in this install"
    assert info({"FLOWPLEX_PURE_PYTHON": "0"})[1] == expected
