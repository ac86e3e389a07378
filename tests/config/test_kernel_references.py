"""``kernel: module:Class`` in YAML: resolved while the document loads, each mistake one line with its path.

The kernels named here live in ``tests/kernels/_module_class_kernels.py``; running them is tested
in ``tests/kernels/test_module_class.py``.
"""

from __future__ import annotations

import re
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from flowplex.config import load_yaml, load_yaml_file
from flowplex.config._schema import json_schema
from flowplex.diagnostics import check_config
from flowplex.errors import ConfigError, UnknownKernelError
from tests.kernels import _module_class_kernels as kernels

MODULE = kernels.__name__
M = re.escape(MODULE)

GRAPH = """\
input_ports: [x]
nodes:
  - {{ name: k, kernel: "{kernel}", input_ports: [x], output_ports: [y] }}
output_ports: [y]
"""


def error_of(kernel: str) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        load_yaml(GRAPH.format(kernel=kernel), source="g.yaml")
    return info.value


def test_a_reference_loads_as_the_node_kernel_and_an_unknown_plain_name_still_waits_for_the_build() -> None:
    spec = load_yaml(GRAPH.format(kernel=f"{MODULE}:Outer.Times10"))
    assert spec.nodes[0].kernel == f"{MODULE}:Outer.Times10"
    assert load_yaml(GRAPH.format(kernel="NoSuchKernelAnywhere")).nodes[0].kernel == "NoSuchKernelAnywhere"


@pytest.mark.parametrize(
    ("kernel", "unknown", "pattern"),
    [
        (f"{MODULE}:", False, rf"kernel `{M}:` is not a `module:Class` reference: expected a dotted module path, "
                              r"a colon and a class name, like `mypkg\.vision:Features`"),
        ("a:b:c", False, r"kernel `a:b:c` is not a `module:Class` reference: expected .*"),
        ("my-pkg:K", False, r"kernel `my-pkg:K` is not a `module:Class` reference: expected .*"),
        ("../k.py:K", False, r"kernel `\.\./k\.py:K`: `\.\./k\.py` is a file, not a module path \(like "
                             r"`mypkg\.vision:Features`\); name the file in the graph's `imports:` and the kernel by "
                             r"its registered name"),
        ("tests.kernels._module_class_kernel:AddOne", True,
         r"kernel `tests\.kernels\._module_class_kernel:AddOne`: no module named `tests\.kernels\._module_class_kernel`"
         rf"; did you mean `{M}`\?"),
        ("mc_no_such_module_xyz.sub:K", True, r"kernel `mc_no_such_module_xyz\.sub:K`: no module named "
                                              r"`mc_no_such_module_xyz`; is it installed, or on PYTHONPATH\?"),
        (f"{MODULE}.sub:K", True, rf"no module named `{M}\.sub`; `{M}` is a module, not a package"),
        (f"{MODULE}:AddOn", True, rf"kernel `{M}:AddOn`: module `{M}` has no attribute `AddOn`; did you mean "
                                  r"`AddOne`\? \(kernel classes in it: AddOne, Probe\)"),
        (f"{MODULE}:Outer.Times1", True, rf"class `{M}:Outer` has no attribute `Times1`; did you mean `Times10`\? "
                                         r"\(kernel classes in it: Times10\)"),
        (f"{MODULE}:NotAKernel.X", True, rf"class `{M}:NotAKernel` has no attribute `X` \(it has no kernel classes\)"),
        (f"{MODULE}:helper", False, rf"kernel `{M}:helper` is a function, not a flowplex\.Kernel subclass"),
        (f"{MODULE}:NotAKernel", False, rf"kernel `{M}:NotAKernel` is a class \(`{M}\.NotAKernel`\) that does not "
                                        r"subclass flowplex\.Kernel"),
        (f"{MODULE}:instance", False, rf"is an instance of `{M}\.AddOne`, not a class; name its class"),
        (f"{MODULE}:os", False, r"is a module, not a class; name a class in it \(`os:Class`\)"),
        (f"{MODULE}:PROBE", False, r"is an object of type `str`, not a flowplex\.Kernel subclass"),
        ("flowplex:Kernel", False, r"kernel `flowplex:Kernel` is the flowplex\.Kernel base class itself; name a "
                                   r"subclass of it"),
    ],
)
def test_a_bad_reference_names_the_node_what_is_wrong_and_what_to_do(kernel: str, unknown: bool,
                                                                     pattern: str) -> None:
    error = error_of(kernel)
    message = str(error)
    assert re.fullmatch(rf"g\.yaml:3: nodes\[0\]\.kernel \(node `k`\): .*{pattern}", message), message
    assert isinstance(error, UnknownKernelError) is unknown
    assert "\n" not in message


@pytest.fixture
def raising_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    name = f"mc_raises_{uuid.uuid4().hex[:10]}"
    (tmp_path / f"{name}.py").write_text("import mc_missing_dependency_xyz\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name
    sys.modules.pop(name, None)


def test_a_module_that_fails_to_import_says_why_with_the_cause_chained(raising_module: str) -> None:
    error = error_of(f"{raising_module}:K")
    assert str(error) == (f"g.yaml:3: nodes[0].kernel (node `k`): kernel `{raising_module}:K`: cannot import module "
                          f"`{raising_module}`: ModuleNotFoundError: No module named 'mc_missing_dependency_xyz'")
    assert not isinstance(error, UnknownKernelError)  # the module exists: its own code is broken
    assert isinstance(error.__cause__, ModuleNotFoundError)


def test_a_reference_in_a_subgraph_names_the_expanded_node(tmp_path: Path) -> None:
    path = tmp_path / "g.yaml"
    path.write_text(f"""\
subgraphs:
  Pair:
    input_ports: [a]
    output_ports: [b]
    nodes:
      - {{ name: inner, kernel: "{MODULE}:AddOn", input_ports: [a], output_ports: [b] }}
input_ports: [x]
nodes:
  - {{ name: p, type: Pair, input_ports: [x], output_ports: [y] }}
output_ports: [y]
""")
    with pytest.raises(UnknownKernelError) as info:
        load_yaml_file(path)
    assert str(info.value).startswith(
        f"{path}:6: subgraphs.Pair.nodes[0].kernel (expanded node `p/inner`): kernel `{MODULE}:AddOn`: module ")


def test_check_reports_a_bad_reference_with_its_path_and_accepts_a_good_one(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(GRAPH.format(kernel=f"{MODULE}:helper"))
    report = check_config(bad)
    assert not report.ok and report.exit_code == 1
    assert report.to_text() == (f"check-config: {bad}:3: nodes[0].kernel (node `k`): kernel `{MODULE}:helper` "
                                "is a function, not a flowplex.Kernel subclass")
    good = tmp_path / "good.yaml"
    good.write_text(GRAPH.format(kernel=f"{MODULE}:AddOne"))
    report = check_config(good)
    assert report.ok and report.exit_code == 0, report.error
    assert report.to_json()["nodes"][0]["kernel"] == f"{MODULE}:AddOne"  # type: ignore[index]


def test_the_schema_documents_the_form() -> None:
    kernel = json_schema()["$defs"]["NodeModel"]["properties"]["kernel"]
    assert "`module:Class`" in kernel["description"]
    assert "mypkg.vision:Features" in kernel["examples"]
