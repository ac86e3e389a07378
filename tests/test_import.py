"""`import flowplex` stays light: heavy dependencies load on first use, never with the package.

These run a fresh interpreter, since this test process has long imported everything.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

HEAVY = ("numpy", "pydantic", "yaml", "rich", "typer")


def _run(code: str, *flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *flags, "-c", code], capture_output=True, text=True, timeout=60,
                          check=True)


def test_import_flowplex_loads_no_heavy_dependency() -> None:
    # -X importtime lists every module the import loads, on stderr.
    result = _run("import flowplex", "-X", "importtime")
    loaded = {line.split("|")[-1].strip().split(".")[0] for line in result.stderr.splitlines() if "|" in line}
    assert "flowplex" in loaded
    assert sorted(loaded & set(HEAVY)) == []


def test_lmflow_alias_and_public_names_work_without_eager_imports() -> None:
    code = (
        "import sys\n"
        "import flowplex as lmflow\n"
        "names = [getattr(lmflow, n) for n in lmflow.__all__]\n"
        "assert 'InvertKernel' in lmflow.registered_kernels()\n"
        "print(sorted(m for m in ('numpy', 'pydantic', 'yaml') if m in sys.modules))\n"
    )
    assert _run(code).stdout.strip() == "[]"


def test_lazily_registered_builtin_names_stay_reserved() -> None:
    # The buffer kernels load on first use; their names are taken from the start all the same.
    code = (
        "import flowplex\n"
        "try:\n"
        "    @flowplex.kernel('InvertKernel')\n"
        "    class Mine(flowplex.Kernel):\n"
        "        pass\n"
        "except ValueError as exc:\n"
        "    print(exc)\n"
    )
    assert "kernel `InvertKernel` already registered" in _run(code).stdout


@pytest.mark.parametrize("kernel", ["InvertKernel", "CastKernel"])
def test_lazily_registered_builtin_runs_in_a_fresh_process(kernel: str) -> None:
    code = (
        "import numpy as np, flowplex\n"
        f"with flowplex.Graph.from_yaml('nodes: [{{name: k, kernel: {kernel}, input_ports: [x], "
        "output_ports: [y]}]\\ninput_ports: [x]\\noutput_ports: [y]') as g:\n"
        "    out = g.add_poller('y')\n"
        "    g.start()\n"
        "    g.send('x', np.zeros((2, 2), np.uint8), ts=1)\n"
        "    g.close_all_inputs()\n"
        "    print(out.next(timeout=10).type_name)\n"
        "    g.wait_done()\n"
    )
    assert _run(code).stdout.strip() == "Buffer"


def test_every_subpackage_imports_first() -> None:
    """Any subpackage may be the first import of a program (no order-dependent import cycle)."""
    import pkgutil

    import flowplex

    packages = ["flowplex"] + [m.name for m in pkgutil.walk_packages(flowplex.__path__, "flowplex.") if m.ispkg]
    packages += ["flowplex.cli", "flowplex.transport._kernels"]
    assert len(packages) >= 10
    failed = {}
    for name in packages:
        result = subprocess.run([sys.executable, "-c", f"import {name}"], capture_output=True, text=True, timeout=60)
        if result.returncode:
            failed[name] = result.stderr.strip().splitlines()[-1]
    assert failed == {}


def test_lazy_names_resolve_to_public_classes() -> None:
    code = (
        "import flowplex\n"
        "g = flowplex.Graph\n"
        "print(g.__module__, flowplex.DoneEvent.__module__, 'Graph' in dir(flowplex))\n"
    )
    assert _run(code).stdout.split() == ["flowplex", "flowplex", "True"]
