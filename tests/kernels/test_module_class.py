"""``kernel: module:Class``: a node names its kernel class by module path, with no registration.

The classes live in ``_module_class_kernels`` (registered by no name of their own). Modules that
a test must see imported for the first time are written under ``tmp_path`` with a per-test name,
because the registry and ``sys.modules`` are process-wide.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import re
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

import flowplex
from flowplex.config import load_yaml
from flowplex.errors import UnknownKernelError
from flowplex.kernels import kernel_class

from . import _module_class_kernels as kernels
from .conftest import NO_GRAPH, GraphFactory, run_graph

MODULE = kernels.__name__

GRAPH = """
nodes:
  - {{ name: k, kernel: "{kernel}", input_ports: [x], output_ports: [y]{extra} }}
input_ports: [x]
output_ports: [y]
"""


def graph(kernel: str, extra: str = "") -> str:
    return GRAPH.format(kernel=kernel, extra=extra)


def outputs(g: flowplex.Graph, values: list[int]) -> list[object]:
    result = run_graph(g, [("x", v, ts) for ts, v in enumerate(values)], ["y"])
    return [p.payload for p in result["y"]]


@pytest.mark.parametrize(
    ("reference", "expected"),
    [(f"{MODULE}:AddOne", [2, 3, 4]), (f"{MODULE}:Outer.Times10", [10, 20, 30])],
    ids=["class", "nested class"],
)
def test_a_node_runs_the_class_its_reference_names(make_graph: GraphFactory, reference: str,
                                                   expected: list[int]) -> None:
    assert outputs(make_graph(graph(reference)), [1, 2, 3]) == expected


@pytest.fixture
def fresh_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The name of a kernel module on ``sys.path`` that nothing imported yet (class ``Triple``)."""
    name = f"mc_fresh_{uuid.uuid4().hex[:10]}"
    (tmp_path / f"{name}.py").write_text(
        "import flowplex\n\n"
        "class Triple(flowplex.Kernel):\n"
        "    def process(self, cc):\n"
        "        cc.emit(0, cc.input(0).as_int() * 3)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name
    sys.modules.pop(name, None)


def test_the_module_is_imported_when_the_graph_loads_and_the_class_registered_under_the_reference(
        make_graph: GraphFactory, fresh_module: str) -> None:
    reference = f"{fresh_module}:Triple"
    assert fresh_module not in sys.modules and reference not in flowplex.registered_kernels()
    load_yaml(graph(reference))
    triple = sys.modules[fresh_module].Triple
    assert reference in flowplex.registered_kernels()
    assert kernel_class(reference) is triple
    assert outputs(make_graph(graph(reference)), [1, 2]) == [3, 6]


def test_a_graph_built_twice_and_the_runner_reuse_the_registered_class(make_graph: GraphFactory) -> None:
    reference = f"{MODULE}:AddOne"
    assert outputs(make_graph(graph(reference)), [1]) == [2]
    assert outputs(make_graph(graph(reference)), [5]) == [6]
    with flowplex.KernelRunner(reference) as r:
        r.add_input(0, 41)
        r.process(0)
        assert r.try_next().as_int() == 42
    assert kernel_class(reference) is kernels.AddOne


def test_a_graph_spec_from_the_python_api_resolves_a_reference_when_built(fresh_module: str) -> None:
    spec = load_yaml(graph("ScaleKernel"))
    node = dataclasses.replace(spec.nodes[0], kernel=f"{fresh_module}:Triple")
    with flowplex.Graph.from_spec(dataclasses.replace(spec, nodes=(node,))) as g:
        assert outputs(g, [2]) == [6]
    missing = dataclasses.replace(spec.nodes[0], kernel=f"{fresh_module}:Tripel")
    with pytest.raises(UnknownKernelError) as info:
        flowplex.Graph.from_spec(dataclasses.replace(spec, nodes=(missing,)))
    assert str(info.value) == (f"nodes[0].kernel: kernel `{fresh_module}:Tripel`: module `{fresh_module}` has no "
                               "attribute `Tripel`; did you mean `Triple`? (kernel classes in it: Triple)")


@pytest.mark.executors("inline", reason="the YAML places the node on a process pool, whatever the default slot")
def test_a_process_pool_worker_loads_the_reference_as_the_host_did(make_graph: GraphFactory,
                                                                    caplog: pytest.LogCaptureFixture) -> None:
    text = ("executors: [{ name: pool, type: ProcessPoolExecutor, num_processes: 1 }]\n"
            + graph(kernels.PROBE, ", executor: pool"))
    with caplog.at_level(logging.WARNING, logger="flowplex"):
        got = outputs(make_graph(text), [1, 2])
    assert len(got) == 2 and len(set(got)) == 1, got
    pid, registered = str(got[0]).split()
    assert int(pid) != os.getpid()
    assert registered == "True"  # the worker replayed the reference, so its registry knows it too
    # Earlier tests' references to modules now gone fail there (the history is process-wide): not this one.
    lost = [m for m in caplog.messages if "process.worker.import.failed" in m and kernels.PROBE in m]
    assert lost == []


@NO_GRAPH
def test_an_unknown_reference_is_an_unknown_kernel_error_naming_the_node() -> None:
    with pytest.raises(UnknownKernelError) as info:
        flowplex.Graph.from_yaml(graph(f"{MODULE}:AddOn"))
    assert isinstance(info.value, KeyError)
    assert re.fullmatch(rf"nodes\[0\]\.kernel \(node `k`\): kernel `{re.escape(MODULE)}:AddOn`: module "
                        rf"`{re.escape(MODULE)}` has no attribute `AddOn`; did you mean `AddOne`\? \(kernel "
                        r"classes in it: AddOne, Probe\)", str(info.value)), str(info.value)
