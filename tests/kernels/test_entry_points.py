"""The ``flowplex.kernels`` entry-point group: installed distributions' kernels, found by name.

Each test installs a real (if minimal) distribution: a directory on ``sys.path`` holding
``<name>-0.1.dist-info/{METADATA,entry_points.txt}`` next to its code, which is what
``importlib.metadata`` reads for any installed package. Names carry a per-test ``tag`` because
the registry is process-wide.
"""

from __future__ import annotations

import re
import sys
import uuid
from pathlib import Path

import pytest

import flowplex
from flowplex.errors import ConfigError, UnknownKernelError
from flowplex.kernels import kernel_class

from .conftest import NO_GRAPH, run_once

KERNEL = """
import flowplex

class {cls}(flowplex.Kernel):
    def process(self, cc):
        cc.emit(0, cc.input(0).as_int() * {factor})
"""


@pytest.fixture
def tag() -> str:
    return f"Ep{uuid.uuid4().hex[:10]}"


def install(site: Path, dist: str, entries: dict[str, str], modules: dict[str, str]) -> None:
    """A distribution ``dist`` 0.1 with ``[flowplex.kernels]`` ``entries`` and its ``modules``."""
    info = site / f"{dist}-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n")
    lines = "".join(f"{name} = {value}\n" for name, value in entries.items())
    (info / "entry_points.txt").write_text(f"[flowplex.kernels]\n{lines}")
    for module, text in modules.items():
        (site / f"{module}.py").write_text(text)


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def double(kernel: str) -> int | None:
    """What ``kernel`` makes of 21 (run by ``KernelRunner``, which resolves it by name too)."""
    [[packet]] = run_once(kernel, {0: 21})
    return packet.as_int()


@NO_GRAPH
def test_an_entry_point_to_a_module_that_registers_the_kernel(site: Path, tag: str) -> None:
    module = f"{tag.lower()}_kernels"
    code = KERNEL.format(cls="K", factor=2) + f"\nflowplex.kernel({tag!r})(K)\n"
    install(site, f"{tag}dist", {tag: module}, {module: code})
    assert module not in sys.modules
    assert double(tag) == 42
    assert kernel_class(tag).__module__ == module


@NO_GRAPH
def test_an_entry_point_to_an_unregistered_class_registers_it_under_its_name(site: Path, tag: str) -> None:
    module = f"{tag.lower()}_cls"
    install(site, f"{tag}dist", {tag: f"{module}:Triple"}, {module: KERNEL.format(cls="Triple", factor=3)})
    assert double(tag) == 63
    assert kernel_class(tag).__name__ == "Triple"
    assert tag in flowplex.registered_kernels()


def test_a_graph_finds_an_entry_point_kernel_without_imports(site: Path, tag: str) -> None:
    module = f"{tag.lower()}_g"
    install(site, f"{tag}dist", {tag: f"{module}:K"}, {module: KERNEL.format(cls="K", factor=5)})
    with flowplex.Graph.from_yaml(
        f"nodes: [{{name: k, kernel: {tag}, input_ports: [x], output_ports: [y]}}]\n"
        "input_ports: [x]\noutput_ports: [y]\n"
    ) as g:
        out = g.add_poller("y")
        g.start()
        g.send("x", 2, ts=0)
        g.close_all_inputs()
        assert [p.as_int() for p in out] == [10]
        g.wait_done(timeout=10)


@NO_GRAPH
def test_a_failing_entry_point_names_the_distribution_and_chains_the_cause(site: Path, tag: str) -> None:
    module = f"{tag.lower()}_bad"
    install(site, f"{tag}dist", {tag: module}, {module: "import no_such_dependency_xyz\n"})
    with pytest.raises(ConfigError) as info:
        kernel_class(tag, where="nodes[0].kernel")
    assert str(info.value) == (
        f"nodes[0].kernel: kernel `{tag}`: entry point `{tag} = {module}` (flowplex.kernels) of distribution "
        f"`{tag}dist 0.1` failed to load: ModuleNotFoundError: No module named 'no_such_dependency_xyz'"
    )
    assert isinstance(info.value.__cause__, ModuleNotFoundError)


@NO_GRAPH
def test_an_entry_point_that_provides_no_kernel(site: Path, tag: str) -> None:
    module = f"{tag.lower()}_none"
    install(site, f"{tag}dist", {tag: f"{module}:VALUE"}, {module: "VALUE = 3\n"})
    with pytest.raises(ConfigError, match=(
        rf"^kernel: entry point `{tag} = {module}:VALUE` \(flowplex\.kernels\) of distribution `{tag}dist 0\.1` "
        rf"loaded 3, which registers no kernel `{tag}`; point it at a flowplex\.Kernel subclass, or at a module "
        rf"that registers `{tag}` with @flowplex\.kernel$"
    )):
        kernel_class(tag)


@NO_GRAPH
def test_a_kernel_declared_by_two_distributions_is_an_error(site: Path, tag: str) -> None:
    module = f"{tag.lower()}_two"
    install(site, f"{tag}a", {tag: f"{module}:K"}, {module: KERNEL.format(cls="K", factor=1)})
    install(site, f"{tag}b", {tag: f"{module}:K"}, {})
    with pytest.raises(ConfigError, match=(
        rf"^kernel: kernel `{tag}` is declared by more than one installed distribution \(entry point "
        rf"`{tag} = {module}:K` \(flowplex\.kernels\) of distribution `{tag}[ab] 0\.1`; entry point .*\); "
        r"uninstall one$"
    )):
        kernel_class(tag)
    assert module not in sys.modules


@NO_GRAPH
def test_an_unknown_kernel_suggests_entry_points_and_names_imports(site: Path, tag: str) -> None:
    install(site, f"{tag}dist", {f"{tag}Denoise": "nowhere"}, {})
    with pytest.raises(UnknownKernelError) as info:
        kernel_class(f"{tag}Denoize", where="nodes[1].kernel")
    message = str(info.value)
    assert re.match(rf"^nodes\[1\]\.kernel: kernel `{tag}Denoize` not registered; did you mean `{tag}Denoise`\?\. "
                    r"registered: \[.*\]; to use your own kernels, name their module or `\.py` file in the graph's "
                    r"`imports:` or with `--import` on the command line$", message), message
    assert isinstance(info.value, KeyError)
