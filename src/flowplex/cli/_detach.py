"""``flowplex run -d``: the same command again, in the background, detached from the terminal.

The parent starts ``python -m flowplex run ...`` (its own arguments less ``-d``) in a new session
(``setsid``: no controlling terminal, so a closing terminal's SIGHUP never reaches it), with
stdin from /dev/null and stdout and stderr into a log file, and waits on a pipe. The child,
once its graph started and serves its control socket, renames the log to ``NAME.log`` and writes
``NAME`` into the pipe; the parent prints it and exits 0. When the child ends first (a bad graph,
a kernel that fails to open), the parent prints its log and exits with the child's status.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Final

import typer

from flowplex.terminal._sanitize import visible_controls as shown

READY_FD_ENV: Final = "FLOWPLEX_READY_FD"
LOG_ENV: Final = "FLOWPLEX_DETACHED_LOG"


def detach_run(graph: Path, name: str | None) -> int:
    """Start the detached child and wait until its graph runs; the exit code of ``run -d``."""
    from flowplex.control._paths import runtime_dir

    directory = runtime_dir()
    log = directory / f".starting-{uuid.uuid4().hex[:12]}.log"
    args = [a for a in sys.argv[1:] if a not in ("-d", "--detach")]
    read_fd, write_fd = os.pipe()
    env = {**os.environ, READY_FD_ENV: str(write_fd), LOG_ENV: str(log)}
    with log.open("ab") as out:
        child = subprocess.Popen([sys.executable, "-m", "flowplex", *args], stdin=subprocess.DEVNULL, stdout=out,
                                 stderr=subprocess.STDOUT, env=env, pass_fds=(write_fd,), start_new_session=True)
    os.close(write_fd)
    try:
        reported = _read_name(read_fd, child)
    except KeyboardInterrupt:
        child.kill()
        child.wait()
        with contextlib.suppress(OSError):
            log.unlink()
        return 130
    finally:
        os.close(read_fd)
    if reported:
        typer.echo(reported)
        return 0
    code = child.wait()
    with contextlib.suppress(OSError):
        sys.stderr.write(shown(log.read_text(encoding="utf-8", errors="replace")))
        log.unlink()
    if code == 0:  # it ran to the end before it could report (a graph that finished at once)
        typer.echo(f"flowplex: {graph} finished before it could be detached", err=True)
    return code


def _read_name(fd: int, child: subprocess.Popen[bytes]) -> str:
    """The name the child reports, or "" when it ended (closing the pipe) before it did."""
    data = b""
    while b"\n" not in data:
        ready, _, _ = select.select([fd], [], [], 0.5)
        if not ready:
            if child.poll() is not None:
                return ""
            continue
        chunk = os.read(fd, 256)
        if not chunk:
            return ""
        data += chunk
    return data.split(b"\n", 1)[0].decode()


def report_ready(name: str | None) -> None:
    """In the detached child, once the graph runs: take the log's name and tell the parent ``name``."""
    fd = os.environ.pop(READY_FD_ENV, None)
    log = os.environ.pop(LOG_ENV, None)
    if fd is None or name is None:
        return
    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # no terminal to lose, and none to follow
    if log is not None:
        from flowplex.control._paths import log_path

        with contextlib.suppress(OSError):
            os.replace(log, log_path(name))
    with contextlib.suppress(OSError):
        os.write(int(fd), name.encode() + b"\n")
        os.close(int(fd))
