"""A graph's ``imports:``: the user's kernel code, imported while the YAML loads.

These run in the test process: every test writes its kernels under names of its own (``tag``),
so the process-wide registry and ``sys.modules`` never see the same name twice.
"""

from __future__ import annotations

import dataclasses
import re
import sys
import uuid
from pathlib import Path

import pytest

import flowplex
from flowplex.config import json_schema, load_yaml, load_yaml_file
from flowplex.errors import ConfigError
from flowplex.kernels import kernel_class

from ._util import dedent

KERNELS = """
from __future__ import annotations

import dataclasses
import pickle
from pathlib import Path
from typing import ClassVar

import flowplex

# Every execution of this file leaves a line, so tests can count them.
with open(Path(__file__).with_suffix(".runs"), "a") as f:
    f.write("ran\\n")


@dataclasses.dataclass(frozen=True)
class Offset:
    amount: int
    unit: ClassVar[str] = "n"


@flowplex.kernel("{tag}")
class Add(flowplex.Kernel):
    def process(self, cc):
        offset = pickle.loads(pickle.dumps(Offset({amount})))  # needs the module in sys.modules
        cc.emit(0, cc.input(0).as_int() + offset.amount)
"""

GRAPH = """
{imports}
input_ports: [x]
nodes:
  - {{ name: k, kernel: {tag}, input_ports: [x], output_ports: [y] }}
output_ports: [y]
"""


@pytest.fixture
def tag() -> str:
    """A kernel (and module) name no other test uses."""
    return f"Imp{uuid.uuid4().hex[:10]}"


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(dedent(text))
    return path


def kernels(path: Path, tag: str, amount: int = 100) -> Path:
    return write(path, KERNELS.replace("{tag}", tag).replace("{amount}", str(amount)))


def graph(path: Path, tag: str, imports: str) -> Path:
    return write(path, GRAPH.format(imports=imports, tag=tag))


def runs(kernel_file: Path) -> int:
    """How many times the kernel file was executed."""
    marker = kernel_file.with_suffix(".runs")
    return len(marker.read_text().splitlines()) if marker.exists() else 0


def outputs(g: flowplex.Graph) -> list[int]:
    with g:
        out = g.add_poller("y")
        g.start()
        for ts, value in enumerate([1, 2]):
            g.send("x", value, ts=ts)
        g.close_all_inputs()
        values = [p.as_int() for p in out]
        g.wait_done(timeout=10)
    return values


def config_error(load: object, *args: object) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        load(*args)  # type: ignore[operator]
    return info.value


# -- what imports ------------------------------------------------------------------------------------


def test_a_file_path_is_relative_to_the_yaml_file(tmp_path: Path, tag: str) -> None:
    code = kernels(tmp_path / "kernels" / "mine.py", tag)
    path = graph(tmp_path / "graphs" / "g.yaml", tag, "imports: [../kernels/mine.py]")
    assert outputs(flowplex.Graph.from_yaml_file(path)) == [101, 102]
    assert load_yaml_file(path).imports == (str(code),)
    assert runs(code) == 1
    module = sys.modules[kernel_class(tag).__module__]
    assert module.__name__.startswith("flowplex_import_mine_") and module.__file__ == str(code)
    assert str(code.parent) not in sys.path  # the file's directory is not put on sys.path


def test_a_module_name_is_found_on_sys_path(tmp_path: Path, tag: str, monkeypatch: pytest.MonkeyPatch) -> None:
    kernels(tmp_path / "pkg" / f"{tag.lower()}.py", tag)
    (tmp_path / "pkg" / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    spec = load_yaml(GRAPH.format(imports=f"imports: [pkg.{tag.lower()}]", tag=tag))
    assert spec.imports == (f"pkg.{tag.lower()}",)
    assert outputs(flowplex.Graph.from_spec(spec)) == [101, 102]


def test_yaml_text_without_a_file_resolves_paths_against_the_current_directory(
    tmp_path: Path, tag: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    code = kernels(tmp_path / "k.py", tag)
    monkeypatch.chdir(tmp_path)
    g = flowplex.Graph.from_yaml(GRAPH.format(imports="imports: [k.py]", tag=tag))
    assert g.plan.spec.imports == (str(code),)
    assert outputs(g) == [101, 102]


def test_an_included_files_imports_are_relative_to_it_and_run_too(tmp_path: Path, tag: str) -> None:
    main_code = kernels(tmp_path / "main_k.py", f"{tag}Main")
    lib_code = kernels(tmp_path / "lib" / "code" / "lib_k.py", tag, amount=7)
    write(tmp_path / "lib" / "lib.yaml", f"""
        imports: [code/lib_k.py]
        subgraphs:
          Inner:
            nodes: [{{name: k, kernel: {tag}, input_ports: [s], output_ports: [t]}}]
            input_ports: [s]
            output_ports: [t]
        """)
    path = write(tmp_path / "g.yaml", """
        imports: [main_k.py]
        include: [lib/lib.yaml]
        input_ports: [x]
        nodes: [{name: d, type: Inner, input_ports: [x], output_ports: [y]}]
        output_ports: [y]
        """)
    g = flowplex.Graph.from_yaml_file(path)
    assert g.plan.spec.imports == (str(main_code), str(lib_code))
    assert outputs(g) == [8, 9]


def test_the_same_file_is_executed_once_whoever_names_it(tmp_path: Path, tag: str) -> None:
    code = kernels(tmp_path / "k.py", tag)
    write(tmp_path / "lib.yaml", "imports: [./k.py]\n")
    first = graph(tmp_path / "a.yaml", tag, "imports: [k.py]\ninclude: [lib.yaml]")
    second = graph(tmp_path / "sub" / "b.yaml", tag, "imports: [../k.py, ../k.py]")
    assert outputs(flowplex.Graph.from_yaml_file(first)) == [101, 102]
    assert outputs(flowplex.Graph.from_yaml_file(second)) == [101, 102]
    assert load_yaml_file(second).imports == (str(code),)  # the duplicate entry is listed once
    assert runs(code) == 1


def test_a_file_and_its_module_name_are_one_module(tmp_path: Path, tag: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(tmp_path))
    by_name = tag.lower()
    code = kernels(tmp_path / f"{by_name}.py", tag)
    load_yaml(f"imports: [{by_name}]")
    load_yaml(f"imports: [{code}]")  # already imported by name: not run again
    assert runs(code) == 1

    other = f"{tag}B"
    code_b = kernels(tmp_path / f"{other.lower()}.py", other)
    load_yaml(f"imports: [{code_b}]")
    load_yaml(f"imports: [{other.lower()}]")  # imported by path first: the name aliases it
    assert runs(code_b) == 1
    assert sys.modules[other.lower()].__name__.startswith("flowplex_import_")


def test_from_spec_imports_what_the_spec_names(tmp_path: Path, tag: str) -> None:
    code = kernels(tmp_path / "k.py", tag)
    spec = dataclasses.replace(load_yaml(GRAPH.format(imports="", tag=tag)), imports=(str(code),))
    assert outputs(flowplex.Graph.from_spec(spec)) == [101, 102]


def test_the_json_schema_describes_imports() -> None:
    prop = json_schema()["properties"]["imports"]
    assert prop["type"] == "array"
    assert prop["items"] == {"type": "string", "minLength": 1}
    assert "relative to this file" in prop["description"]


# -- what goes wrong ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("imports", "pattern"),
    [
        ('imports: ["ok", ""]', r"^g\.yaml:1: imports\[1\]: expected a non-empty string, got string \"\"$"),
        ("imports: [5]", r"^g\.yaml:1: imports\[0\]: expected a string, got integer `5`$"),
        ("imports: mypkg", r"^g\.yaml:1: imports: expected a list, got string \"mypkg\"$"),
        (
            "imports: [my-kernels]",
            r"^g\.yaml:1: imports\[0\]: `my-kernels` is neither a module name \(like `mypkg\.kernels`\) "
            r"nor a path to a `\.py` file$",
        ),
    ],
)
def test_imports_are_validated(tmp_path: Path, imports: str, pattern: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    write(tmp_path / "g.yaml", imports + "\n")
    message = str(config_error(load_yaml_file, "g.yaml"))
    assert re.search(pattern, message), message


def test_a_missing_module_names_the_yaml_path_and_chains_the_cause(tmp_path: Path) -> None:
    path = write(tmp_path / "g.yaml", "nodes: []\nimports:\n  - json\n  - no_such_module_xyz.kernels\n")
    error = config_error(load_yaml_file, path)
    assert re.fullmatch(
        rf"{re.escape(str(path))}:4: imports\[1\]: cannot import module `no_such_module_xyz\.kernels`: "
        r"ModuleNotFoundError: No module named 'no_such_module_xyz'",
        str(error),
    ), error
    assert isinstance(error.__cause__, ModuleNotFoundError)


def test_a_module_that_raises(tmp_path: Path, tag: str, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path / f"{tag}.py", "raise RuntimeError('no GPU here\\nsecond line')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    error = config_error(load_yaml, f"imports: [{tag}]")
    assert str(error) == f"imports[0]: cannot import module `{tag}`: RuntimeError: no GPU here"
    assert isinstance(error.__cause__, RuntimeError)
    assert tag not in sys.modules


def test_a_file_that_raises_is_not_left_half_imported(tmp_path: Path) -> None:
    path = write(tmp_path / "broken.py", "import flowplex\nx = 1 / 0\n")
    error = config_error(load_yaml_file, graph(tmp_path / "g.yaml", "Nope", "imports: [broken.py]"))
    assert re.search(r"g\.yaml:1: imports\[0\]: cannot import file `broken\.py`: ZeroDivisionError: division by zero$",
                     str(error)), error
    assert isinstance(error.__cause__, ZeroDivisionError)
    assert not [m for m in sys.modules if m.startswith("flowplex_import_broken_")]
    assert path.exists()


def test_a_missing_file_or_a_directory(tmp_path: Path) -> None:
    (tmp_path / "pkg.py").mkdir()
    missing = config_error(load_yaml_file, write(tmp_path / "g.yaml", "imports: [../kernels/mine.py]\n"))
    assert re.fullmatch(
        r".*g\.yaml:1: imports\[0\]: cannot import file `\.\./kernels/mine\.py`: no such file "
        rf"\({re.escape(str(tmp_path.parent / 'kernels' / 'mine.py'))}\)",
        str(missing),
    ), missing
    directory = config_error(load_yaml_file, write(tmp_path / "h.yaml", "imports: [pkg.py]\n"))
    assert re.search(r"h\.yaml:1: imports\[0\]: cannot import file `pkg\.py`: is a directory, not a `\.py` file",
                     str(directory)), directory


def test_an_included_files_failing_import_names_that_file(tmp_path: Path) -> None:
    write(tmp_path / "lib" / "lib.yaml", "subgraphs: {}\nimports: [gone.py]\n")
    error = config_error(load_yaml_file, write(tmp_path / "g.yaml", "include: [lib/lib.yaml]\n"))
    assert re.search(r"lib/lib\.yaml:2: imports\[0\]: cannot import file `gone\.py`: no such file \(.*/lib/gone\.py\)$",
                     str(error)), error


def test_a_file_without_the_py_suffix(tmp_path: Path) -> None:
    write(tmp_path / "kernels" / "mine", "import flowplex\n")
    error = config_error(load_yaml_file, write(tmp_path / "g.yaml", "imports: [kernels/mine]\n"))
    assert re.search(r"g\.yaml:1: imports\[0\]: cannot import file `kernels/mine`: not a Python source file "
                     r"\(name it `\.py`\) \(.*/kernels/mine\)$", str(error)), error


def test_from_spec_reports_an_import_it_cannot_run(tmp_path: Path) -> None:
    spec = dataclasses.replace(load_yaml(GRAPH.format(imports="", tag="K")), imports=(str(tmp_path / "gone.py"),))
    error = config_error(flowplex.Graph.from_spec, spec)
    assert re.fullmatch(r"imports\[0\]: cannot import file `.*/gone\.py`: no such file \(.*/gone\.py\)", str(error))
