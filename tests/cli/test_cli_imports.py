"""Your own kernels from the command line: ``--import``, ``imports:`` and entry points, for real.

The CLI runs in a subprocess started with ``python -P``, so that, as with the installed
``flowplex`` script, the current directory is *not* on ``sys.path`` unless the CLI puts it there.
The environment is the test's own (``PYTHONPATH`` where it is set, an editable install in CI).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from .._cli import flowplex_commands as cli_commands

KERNELS = """
from pathlib import Path

import flowplex

with open(Path(__file__).with_suffix(".runs"), "a") as f:  # counts executions
    f.write("ran\\n")


@flowplex.kernel("{name}")
class Plus(flowplex.Kernel):
    def process(self, cc):
        cc.emit(0, cc.input(0).as_int() + {amount})
"""

GRAPH = """{head}
nodes:
  - {{ name: src, kernel: RangeSourceKernel, output_ports: [n], options: {{ count: 3 }} }}
  - {{ name: k, kernel: {kernel}, input_ports: [n], output_ports: [y] }}
output_ports: [y]
"""

PLUS_100 = ["y\tts=0\t100", "y\tts=1\t101", "y\tts=2\t102"]


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def kernels(path: Path, name: str, amount: int = 100) -> Path:
    return write(path, KERNELS.format(name=name, amount=amount))


def graph(path: Path, kernel: str, head: str = "") -> Path:
    return write(path, GRAPH.format(head=head, kernel=kernel))


def flowplex(*args: str | Path, cwd: Path, pythonpath: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    if pythonpath is not None:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(pythonpath), env.get("PYTHONPATH", "")) if p)
    argv = [sys.executable, "-P", "-c", "from flowplex.cli import main; main()", *map(str, args)]
    return subprocess.run(argv, capture_output=True, text=True, cwd=cwd, env=env, timeout=60, check=False)


def flowplex_commands(*commands: list[str | Path], cwd: Path) -> list[subprocess.CompletedProcess[str]]:
    """Each of ``commands`` run in turn by one interpreter (``python -P``), as if by ``flowplex``."""
    return cli_commands(*commands, cwd=cwd, isolated=True)


def one_error_line(result: subprocess.CompletedProcess[str], pattern: str) -> None:
    """Exit code 2 and exactly one ``flowplex: error:`` line on stderr, matching ``pattern``."""
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr, result.stderr
    assert re.fullmatch(f"flowplex: error: {pattern}\n", result.stderr), result.stderr


# -- finding the kernels --------------------------------------------------------------------------


def test_import_a_module_from_the_current_directory(tmp_path: Path) -> None:
    kernels(tmp_path / "my_kernels.py", "CliMine")
    graph(tmp_path / "g.yaml", "CliMine")
    result = flowplex("run", "g.yaml", "--import", "my_kernels", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == PLUS_100


def test_without_an_import_the_unknown_kernel_error_says_how(tmp_path: Path) -> None:
    kernels(tmp_path / "my_kernels.py", "CliMine")
    graph(tmp_path / "g.yaml", "CliMyne")
    # (the first imports nothing; the second imports the module last)
    result, suggested = flowplex_commands(["run", "g.yaml"], ["run", "g.yaml", "--import", "my_kernels"], cwd=tmp_path)
    one_error_line(result, r"g\.yaml: nodes\[1\]\.kernel: kernel `CliMyne` not registered\. registered: \[.*\]; "
                           r"to use your own kernels, name their module or `\.py` file in the graph's `imports:` "
                           r"or with `--import` on the command line")
    assert "kernel `CliMyne` not registered; did you mean `CliMine`?" in suggested.stderr


def test_import_a_py_file_by_path_from_elsewhere(tmp_path: Path) -> None:
    kernels(tmp_path / "code" / "k.py", "CliFile")
    graph(tmp_path / "graphs" / "g.yaml", "CliFile")
    work = tmp_path / "work"
    work.mkdir()
    result = flowplex("run", "../graphs/g.yaml", "--import", "../code/k.py", cwd=work)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == PLUS_100


def test_imports_key_is_relative_to_the_yaml_file_not_the_current_directory(tmp_path: Path) -> None:
    kernels(tmp_path / "kernels" / "my_kernels.py", "CliYaml")
    path = graph(tmp_path / "graphs" / "g.yaml", "CliYaml", "imports: [../kernels/my_kernels.py]")
    result = flowplex("run", path, cwd=Path(os.sep))
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == PLUS_100


def test_imports_key_module_names_are_found_from_the_current_directory(tmp_path: Path) -> None:
    kernels(tmp_path / "pkg" / "kernels.py", "CliPkg")
    write(tmp_path / "pkg" / "__init__.py", "")
    graph(tmp_path / "graphs" / "g.yaml", "CliPkg", "imports: [pkg.kernels]")
    result = flowplex("run", "graphs/g.yaml", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == PLUS_100


def test_an_included_files_imports_run_relative_to_it(tmp_path: Path) -> None:
    kernels(tmp_path / "lib" / "k.py", "CliInc", amount=1)
    write(tmp_path / "lib" / "lib.yaml", """imports: [k.py]
subgraphs:
  Inc:
    nodes: [{name: k, kernel: CliInc, input_ports: [s], output_ports: [t]}]
    input_ports: [s]
    output_ports: [t]
""")
    write(tmp_path / "g.yaml", """include: [lib/lib.yaml]
nodes:
  - { name: src, kernel: RangeSourceKernel, output_ports: [n], options: { count: 2 } }
  - { name: d, type: Inc, input_ports: [n], output_ports: [y] }
output_ports: [y]
""")
    result = flowplex("run", "g.yaml", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["y\tts=0\t1", "y\tts=1\t2"]


def test_one_file_named_three_ways_runs_once(tmp_path: Path) -> None:
    code = kernels(tmp_path / "k.py", "CliOnce")
    write(tmp_path / "lib.yaml", "imports: [./k.py]\n")
    graph(tmp_path / "g.yaml", "CliOnce", "imports: [k.py]\ninclude: [lib.yaml]")
    result = flowplex("run", "g.yaml", "--import", "k", "--import", str(code), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == PLUS_100
    assert code.with_suffix(".runs").read_text() == "ran\n"


def test_an_installed_distributions_entry_point_needs_no_import(tmp_path: Path) -> None:
    site = tmp_path / "site"
    kernels(site / "mydist_kernels.py", "CliEntry")
    write(site / "mydist-0.1.dist-info" / "METADATA", "Metadata-Version: 2.1\nName: mydist\nVersion: 0.1\n")
    write(site / "mydist-0.1.dist-info" / "entry_points.txt", "[flowplex.kernels]\nCliEntry = mydist_kernels\n")
    graph(tmp_path / "g.yaml", "CliEntry")
    result = flowplex("run", "g.yaml", cwd=tmp_path, pythonpath=site)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == PLUS_100


def test_a_broken_entry_point_is_one_line_naming_the_distribution(tmp_path: Path) -> None:
    site = tmp_path / "site"
    write(site / "mydist_broken.py", "raise ImportError('libfoo.so: cannot open shared object file')\n")
    write(site / "mydist-0.1.dist-info" / "METADATA", "Metadata-Version: 2.1\nName: mydist\nVersion: 0.1\n")
    write(site / "mydist-0.1.dist-info" / "entry_points.txt", "[flowplex.kernels]\nCliBroken = mydist_broken\n")
    graph(tmp_path / "g.yaml", "CliBroken")
    result = flowplex("run", "g.yaml", cwd=tmp_path, pythonpath=site)
    one_error_line(result, r"g\.yaml: nodes\[1\]\.kernel: kernel `CliBroken`: entry point `CliBroken = mydist_broken` "
                           r"\(flowplex\.kernels\) of distribution `mydist 0\.1` failed to load: ImportError: "
                           r"libfoo\.so: cannot open shared object file")


def test_check_and_dot_take_import_too(tmp_path: Path) -> None:
    kernels(tmp_path / "k.py", "CliCheck")
    graph(tmp_path / "g.yaml", "CliCheck")
    for command in ("check", "check-config"):
        checked = flowplex(command, "--json", "g.yaml", "--import", "k.py", cwd=tmp_path)
        assert checked.returncode == 0, checked.stderr
        assert json.loads(checked.stdout)["nodes"][1]["kernel"] == "CliCheck"
    assert (tmp_path / "k.runs").read_text() == "ran\nran\n"  # one run per process
    dot = flowplex("dot", "g.yaml", "--import", "k", cwd=tmp_path)
    assert dot.returncode == 0, dot.stderr
    assert "CliCheck" in dot.stdout


def test_the_schema_has_imports(tmp_path: Path) -> None:
    result = flowplex("schema", cwd=tmp_path)
    assert result.returncode == 0
    assert json.loads(result.stdout)["properties"]["imports"]["items"] == {"type": "string", "minLength": 1}


# -- failing imports: exit 2, one line ------------------------------------------------------------


def test_a_missing_module_from_the_command_line(tmp_path: Path) -> None:
    graph(tmp_path / "g.yaml", "X")
    commands = [[command, "g.yaml", "--import", "mypkg.kernels"] for command in ("run", "check", "dot")]
    for result in flowplex_commands(*commands, cwd=tmp_path):
        one_error_line(result, r"--import mypkg\.kernels: cannot import module `mypkg\.kernels`: "
                               r"ModuleNotFoundError: No module named 'mypkg'")


def test_a_module_that_raises_and_debug_shows_the_chained_cause(tmp_path: Path) -> None:
    write(tmp_path / "bad.py", "import flowplex\nraise RuntimeError('no camera attached')\n")
    graph(tmp_path / "g.yaml", "X")
    result, debug = flowplex_commands(["run", "g.yaml", "--import", "bad"],
                                      ["--debug", "run", "g.yaml", "--import", "bad"], cwd=tmp_path)
    one_error_line(result, r"--import bad: cannot import module `bad`: RuntimeError: no camera attached")
    assert debug.returncode == 2
    assert "RuntimeError: no camera attached" in debug.stderr
    assert "The above exception was the direct cause of the following exception" in debug.stderr


def test_a_missing_file_from_the_command_line(tmp_path: Path) -> None:
    graph(tmp_path / "g.yaml", "X")
    result = flowplex("run", "g.yaml", "--import", "kernels/nope.py", cwd=tmp_path)
    one_error_line(result, rf"--import kernels/nope\.py: cannot import file `kernels/nope\.py`: no such file "
                           rf"\({re.escape(str(tmp_path.resolve() / 'kernels' / 'nope.py'))}\)")


def test_a_failing_yaml_import_names_the_file_and_the_yaml_path(tmp_path: Path) -> None:
    graph(tmp_path / "g.yaml", "X", "imports:\n  - json\n  - mypkg.kernels")
    write(tmp_path / "raises.py", "raise ValueError('bad config')\n")
    graph(tmp_path / "h.yaml", "X", "imports: [raises.py]")
    result, raised = flowplex_commands(["run", "g.yaml"], ["dot", "h.yaml"], cwd=tmp_path)
    one_error_line(result, r"g\.yaml:3: imports\[1\]: cannot import module `mypkg\.kernels`: "
                           r"ModuleNotFoundError: No module named 'mypkg'")
    one_error_line(raised, r"h\.yaml:1: imports\[0\]: cannot import file `raises\.py`: ValueError: bad config")


def test_check_reports_a_failing_yaml_import(tmp_path: Path) -> None:
    graph(tmp_path / "g.yaml", "X", "imports: [missing.py]")
    result = flowplex("check", "--json", "g.yaml", cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    report = json.loads(result.stdout)
    assert report["ok"] is False
    assert re.fullmatch(r"g\.yaml:1: imports\[0\]: cannot import file `missing\.py`: no such file \(.*missing\.py\)",
                        report["diagnostics"][0]["message"])


def test_a_module_class_kernel_needs_no_import_and_a_bad_one_is_one_line_in_run_and_check(tmp_path: Path) -> None:
    kernels(tmp_path / "my_kernels.py", "CliByClass")
    graph(tmp_path / "g.yaml", "my_kernels:Plus")
    result = flowplex("run", "g.yaml", cwd=tmp_path)  # the module is found in the current directory
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == PLUS_100
    graph(tmp_path / "bad.yaml", "my_kernels:Pluss")
    message = (r"bad\.yaml:4: nodes\[1\]\.kernel \(node `k`\): kernel `my_kernels:Pluss`: module `my_kernels` has no "
               r"attribute `Pluss`; did you mean `Plus`\? \(kernel classes in it: Plus\)")
    one_error_line(flowplex("run", "bad.yaml", cwd=tmp_path), message)
    checked = flowplex("check", "bad.yaml", cwd=tmp_path)
    assert checked.returncode == 1, checked.stderr
    assert re.fullmatch(f"check-config: {message}\n", checked.stderr), checked.stderr
