"""``flowplex agents -d``: start the agents in a background server and return once it serves.

The server (:func:`flowplex.terminal._serve.serve`) is a new Python process in a session of its
own (``setsid``: no controlling terminal, so closing this terminal sends it no SIGHUP), its
standard input ``/dev/null`` and its standard output and error a log file in the runtime
directory. It claims its name itself (``agents``, ``agents-2``...: only the socket's bind is
atomic), so it starts with a temporary log, renames it ``<runtime>/NAME.log`` once it has the
name, and writes the name into a pipe when its agents run. This command prints that name and
exits 0; if the server ends before (a bad agents file, a name taken), it prints the log's tail
and exits with the server's status.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Final

from ..errors import ControlError, UsageError
from ._keys import typing_key_byte
from ._sanitize import visible_controls

__all__ = ["START_TIMEOUT_S", "start_detached"]

START_TIMEOUT_S: Final = 30.0
"""How long the server may take to serve its agents before this command gives up on it."""
LOG_TAIL_LINES: Final = 20
"""Lines of the server's log shown when it did not start."""
SERVER_CODE: Final = "from flowplex.terminal._serve import main; main()"


def start_detached(
    argv: list[str],
    *,
    name: str | None,
    file: str | None,
    ring: str | None,
    ring_producers: int,
    typing_key: str,
    bell: bool,
    record: str | None = None,
    record_input: bool = False,
) -> int:
    """Start ``flowplex agents`` ARGS in the background; print its name. Returns the exit code:
    0 once it serves, 2 for a usage error, else the failed server's status (1 at least)."""
    from ..control._paths import check_name, runtime_dir
    from ._commands import agent_entries

    if agent_entries(argv, file, ring) is None:  # the usage errors here, before any process starts
        return 2
    try:
        typing_key_byte(typing_key)
        if name is not None:
            check_name(name)
        directory = runtime_dir()
    except (UsageError, ControlError) as exc:
        _say(f"flowplex agents: {exc}")
        return 2
    fd, temp_log = tempfile.mkstemp(prefix=".agents-", suffix=".log", dir=directory)
    read_end, write_end = os.pipe()
    spec = {"argv": argv, "name": name or "agents", "exact": name is not None,
            "file": os.path.abspath(file) if file else None, "ring": ring, "ring_producers": ring_producers,
            "typing_key": typing_key, "bell": bell, "ready_fd": write_end, "log": temp_log,
            "record": os.path.abspath(record) if record else None, "record_input": record_input}
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    try:
        proc = subprocess.Popen(
            [sys.executable, "-P", "-c", SERVER_CODE, json.dumps(spec)], stdin=subprocess.DEVNULL, stdout=fd,
            stderr=fd, start_new_session=True, pass_fds=(write_end,), env=env, close_fds=True)
    except OSError as exc:
        _say(f"flowplex agents: cannot start the background server: {exc.strerror or exc}")
        return 1
    finally:
        os.close(fd)
        os.close(write_end)
    try:
        got = _wait_ready(read_end, proc)
    finally:
        os.close(read_end)
    if got:
        print(got, flush=True)
        return 0
    return _report_failure(proc, Path(temp_log), directory, spec)


def _wait_ready(fd: int, proc: subprocess.Popen[bytes]) -> str:
    """The name the server wrote once it serves, or ``""`` when it ended (or hung) before."""
    data = b""
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.1)
        if ready:
            chunk = os.read(fd, 256)
            if not chunk:  # the server closed the pipe (it ended) without a name
                return ""
            data += chunk
            if data.endswith(b"\n"):
                return data.decode(errors="replace").strip()
        elif proc.poll() is not None:
            return ""
    return ""


def _report_failure(proc: subprocess.Popen[bytes], temp_log: Path, directory: Path, spec: dict[str, object]) -> int:
    """The server ended (or hung) before it served: show why, leave no process behind."""
    code = proc.poll()
    if code is None:  # still starting after START_TIMEOUT_S: give up on it
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, 9)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(5.0)
        reason = f"did not serve within {START_TIMEOUT_S:.0f} s"
        code = 1
    else:
        reason = f"ended with status {code}"
    log = temp_log if temp_log.exists() else directory / f"{spec['name']}.log"
    try:
        lines = log.read_text(errors="replace").splitlines()[-LOG_TAIL_LINES:]
    except OSError:
        lines = []
    _say(f"flowplex agents: the background server {reason} before it served its agents"
         + (":" if lines else " (its log is empty)"))
    for line in lines:
        _say(f"  {line}")
    if log == temp_log:
        with contextlib.suppress(OSError):
            temp_log.unlink()
    return code if code > 0 else 1


def _say(text: str) -> None:
    print(visible_controls(text), file=sys.stderr)
