"""Whether a command waits for input: its PTY's foreground process, read from ``/proc``.

The foreground process group of the PTY (``tcgetpgrp`` on the master side) is what the user's
keys reach. It waits for input when its leader sleeps in ``read`` on the terminal, or in a
``select``/``poll`` family call while its standard input is that terminal (readline, a REPL, a
shell prompt, ``less``). ``/proc/PID/syscall`` says which call; where it cannot be read (another
kernel, no permission), the kernel's wait channel (``/proc/PID/wchan``) decides: ``n_tty_read``
and ``wait_woken`` are a terminal read. Linux only; elsewhere nothing is ever "waiting".
"""

from __future__ import annotations

import os
import platform
from typing import Final

__all__ = ["foreground_waiting"]

# Syscall numbers: the reads, and the calls that wait on several descriptors.
_SYSCALLS: Final = {
    "x86_64": ({0, 17, 19, 295}, {7, 23, 232, 270, 271, 281, 441}),
    "aarch64": ({63, 65, 67, 69}, {22, 72, 73, 441}),
}
_READ_CALLS, _POLL_CALLS = _SYSCALLS.get(platform.machine(), (set(), set()))
_TTY_WAITS: Final = ("n_tty_read", "wait_woken")


def foreground_waiting(master_fd: int) -> bool:
    """True when the foreground process of the PTY behind ``master_fd`` is blocked on its input."""
    try:
        pid = os.tcgetpgrp(master_fd)
    except OSError:
        return False
    stat = _read(f"/proc/{pid}/stat")
    if not stat or stat.rpartition(")")[2].split()[:1] != ["S"]:
        return False  # running, stopped, or a group whose leader has gone
    call = _read(f"/proc/{pid}/syscall").split()
    if call and call[0].isdigit():
        number = int(call[0])
        if number in _READ_CALLS and len(call) > 1:
            return _is_terminal(pid, int(call[1], 16))
        if number in _POLL_CALLS:
            return _is_terminal(pid, 0)
        return False
    return _read(f"/proc/{pid}/wchan").startswith(_TTY_WAITS)


def _is_terminal(pid: int, fd: int) -> bool:
    try:
        target = os.readlink(f"/proc/{pid}/fd/{fd}")
    except OSError:
        return False
    return target.startswith(("/dev/pts/", "/dev/tty"))


def _read(path: str) -> str:
    try:
        with open(path, encoding="ascii", errors="replace") as f:
            return f.read().strip()
    except OSError:
        return ""
