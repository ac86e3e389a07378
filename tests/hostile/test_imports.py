"""A module named by ``--import`` or ``imports:`` that fails, whatever it raises, is one line.

Before: an ``imports:`` file doing ``sys.exit(0)`` passed ``flowplex check`` (exit 0, no
output: an invalid graph reported valid), ``SystemExit(5)`` exited 5 and a ``KeyboardInterrupt``
raised by the module 130, all silent; a symlink loop, a FIFO and ``/dev/zero`` were reported as
"no such file" (and nothing promised that a FIFO would not block the import). The user's own
Ctrl-C still exits 130, with one line saying which import it interrupted.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from .._cli import flowplex_commands as cli_commands
from .conftest import CLI

ROOT = Path(__file__).resolve().parents[2]
GRAPH = """{imports}nodes:
  - {{ name: s, kernel: ScaleKernel, input_ports: [x], output_ports: [y] }}
input_ports: [x]
output_ports: [y]
"""
RAISES = {
    "exit0": ("import sys\nsys.exit(0)\n", "SystemExit: 0"),
    "exit5": ("raise SystemExit(5)\n", "SystemExit: 5"),
    "interrupt": ("raise KeyboardInterrupt\n", r"KeyboardInterrupt \(raised by the imported code, not by Ctrl-C\)"),
    "generator": ("raise GeneratorExit\n", "GeneratorExit"),
}


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")])
    return env


def _cli(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, cwd=cwd, env=_env(), timeout=60,
                          check=False, stdin=subprocess.DEVNULL)


@pytest.mark.parametrize("raised", sorted(RAISES))
@pytest.mark.parametrize("by", ["file", "module"])
def test_a_module_that_exits_or_interrupts_at_import_fails_run_and_check_with_one_line(
        tmp_path: Path, raised: str, by: str) -> None:
    body, shown = RAISES[raised]
    (tmp_path / "quits.py").write_text(body)
    target, kind = ("quits.py", "file") if by == "file" else ("quits", "module")
    (tmp_path / "g.yaml").write_text(GRAPH.format(imports=f"imports: [{target}]\n"))
    # Four commands, one interpreter: each imports the module afresh (see ``tests/_cli``).
    run, check, *flags = cli_commands(["run", "g.yaml"], ["check", "g.yaml"], ["run", "--import", target, "g.yaml"],
                                      ["check", "--import", target, "g.yaml"], cwd=tmp_path, env=_env())
    assert run.returncode == 2, run
    assert re.fullmatch(rf"flowplex: error: g\.yaml:1: imports\[0\]: cannot import {kind} `{target}`: {shown}\n",
                        run.stderr), run.stderr
    assert check.returncode == 1, check  # a failing imports: entry is a finding of check (exit 1)
    assert re.fullmatch(rf"check-config: g\.yaml:1: imports\[0\]: cannot import {kind} `{target}`: {shown}\n",
                        check.stderr), check.stderr
    for flag in flags:
        assert flag.returncode == 2, flag
        assert re.fullmatch(rf"flowplex: error: --import {target}: cannot import {kind} `{target}`: {shown}\n",
                            flag.stderr), flag.stderr


def _special(tmp_path: Path, what: str) -> tuple[str, str]:
    if what == "fifo":
        os.mkfifo(tmp_path / "k.py")
        return "k.py", "not a regular file: a FIFO"
    if what == "loop":
        (tmp_path / "a.py").symlink_to(tmp_path / "b.py")
        (tmp_path / "b.py").symlink_to(tmp_path / "a.py")
        return "a.py", "a symlink loop"
    return "/dev/zero", "not a regular file: a device"


@pytest.mark.parametrize("what", ["fifo", "loop", "device"])
def test_a_fifo_a_symlink_loop_or_a_device_is_named_for_what_it_is_and_never_blocks(tmp_path: Path,
                                                                                     what: str) -> None:
    target, said = _special(tmp_path, what)
    (tmp_path / "g.yaml").write_text(GRAPH.format(imports=""))
    shown = target if target.startswith("/") else str(tmp_path / target)
    done = subprocess.run([*CLI, "run", "--import", shown, str(tmp_path / "g.yaml")], capture_output=True,
                          text=True, env=_env(), timeout=20, check=False)  # a blocked open would time out
    assert done.returncode == 2, done
    assert done.stderr == (f"flowplex: error: --import {shown}: cannot import file `{shown}`: {said} "
                           f"({os.path.abspath(shown)})\n")


@pytest.mark.parametrize("command", ["run", "check"])
def test_the_users_ctrl_c_during_an_import_exits_130_naming_it(tmp_path: Path, command: str) -> None:
    (tmp_path / "slow.py").write_text("import sys, time\nprint('importing', flush=True)\ntime.sleep(30)\n")
    (tmp_path / "g.yaml").write_text(GRAPH.format(imports="imports: [slow.py]\n"))
    with subprocess.Popen([*CLI, command, "g.yaml"], cwd=tmp_path, env=_env(), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True) as proc:
        try:
            assert proc.stdout is not None
            assert proc.stdout.readline() == "importing\n"
            time.sleep(0.1)
            proc.send_signal(signal.SIGINT)
            _, err = proc.communicate(timeout=20)
        finally:
            proc.kill()
    assert proc.returncode == 130, err
    assert err == "flowplex: cancelled (Ctrl-C) while importing: g.yaml:1: imports[0]: file `slow.py`\n"
