"""Several ``flowplex`` commands in one interpreter, for tests whose commands share only start-up.

Each command runs as the console script runs it (``main()``; what it raises is what the process
would exit with), one after the other. A failed import leaves nothing in ``sys.modules``, so a
command imports a graph's modules afresh, as a new process would. An exception other than
``SystemExit`` (which a process would die of) is reported as ``died of ...``, which matches no
exit code. The interpreter itself must say nothing more at exit.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

_DRIVER = r"""
import contextlib, io, json, sys
from flowplex.cli import main
done = []
for argv in json.loads(sys.argv.pop(1)):
    sys.argv = ["flowplex", *argv]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main()
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
        except BaseException as exc:
            code = f"died of {exc!r}"
    try:  # the bytes this process's own streams would have written (a write they refuse crashes)
        raw = [text.getvalue().encode(stream.encoding, stream.errors).decode("latin-1")
               for text, stream in ((out, sys.stdout), (err, sys.stderr))]
    except UnicodeEncodeError as exc:
        code, raw = f"died of {exc!r}", ["", ""]
    done.append({"returncode": code, "stdout": raw[0], "stderr": raw[1]})
sys.stdout.write(json.dumps(done) + "\n")
"""


def flowplex_commands_bytes(*commands: Sequence[str | Path], cwd: Path, env: Mapping[str, str] | None = None,
                            isolated: bool = False) -> list[subprocess.CompletedProcess[bytes]]:
    """Each of ``commands`` (argv lists) run in turn by one interpreter, as if by ``flowplex``.

    ``isolated`` runs it with ``python -P`` (no script directory on ``sys.path``).
    """
    argvs = [[str(arg) for arg in argv] for argv in commands]
    python = [sys.executable, "-P"] if isolated else [sys.executable]
    done = subprocess.run([*python, "-c", _DRIVER, json.dumps(argvs)], capture_output=True, cwd=cwd,
                          env=None if env is None else dict(env), timeout=60, check=False, stdin=subprocess.DEVNULL)
    assert done.returncode == 0 and done.stderr == b"", done  # and nothing more said at exit
    return [subprocess.CompletedProcess(["flowplex", *argv], r["returncode"], r["stdout"].encode("latin-1"),
                                        r["stderr"].encode("latin-1"))
            for argv, r in zip(argvs, json.loads(done.stdout.splitlines()[-1]), strict=True)]


def flowplex_commands(*commands: Sequence[str | Path], cwd: Path, env: Mapping[str, str] | None = None,
                      isolated: bool = False) -> list[subprocess.CompletedProcess[str]]:
    """``flowplex_commands_bytes`` with the output decoded (UTF-8, the streams' encoding here)."""
    return [subprocess.CompletedProcess(r.args, r.returncode, r.stdout.decode(), r.stderr.decode())
            for r in flowplex_commands_bytes(*commands, cwd=cwd, env=env, isolated=isolated)]
