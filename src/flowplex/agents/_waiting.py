"""Whether a command waits for input: its PTY's foreground process, read from ``/proc``.

The foreground process group of the PTY (``tcgetpgrp`` on the master side) is what the user's
keys reach. ``/proc/PID/syscall`` says where its leader sleeps:

- ``"read"``: in ``read`` on the terminal (``input()``, ``cat``): it certainly waits for keys;
- ``"poll"``: in a ``select``/``poll``/``epoll`` family call that watches the terminal (readline,
  a REPL, a shell prompt, ``less``; for ``epoll`` the terminal must be registered, read from
  ``/proc/PID/fdinfo``). An event loop waiting for a socket with its standard input a terminal
  looks the same to ``select`` and ``poll``, so the display also asks for a prompt (see
  ``Display``);
- ``""``: anything else.

Where the syscall cannot be read (another kernel, no permission), the kernel's wait channel
(``/proc/PID/wchan``) decides: ``n_tty_read`` and ``wait_woken`` are a terminal read. Linux
only; elsewhere nothing is ever waiting.
"""

from __future__ import annotations

import os
import platform
from typing import Final

__all__ = ["EPOLL_WAITS", "foreground_waiting"]

# Syscall numbers: the reads, and the calls that wait on several descriptors.
_SYSCALLS: Final = {
    # reads; select and poll; epoll waits
    "x86_64": ({0, 17, 19, 295}, {7, 23, 270, 271}, {232, 281, 441}),
    "aarch64": ({63, 65, 67, 69}, {72, 73}, {22, 441}),
}
_READ_CALLS, _POLL_CALLS, EPOLL_WAITS = _SYSCALLS.get(platform.machine(), (set(), set(), set()))
_TTY_WAITS: Final = ("n_tty_read", "wait_woken")


def foreground_waiting(master_fd: int) -> str:
    """How the foreground process of the PTY behind ``master_fd`` waits: ``"read"``, ``"poll"`` or ``""``."""
    try:
        pid = os.tcgetpgrp(master_fd)
    except OSError:
        return ""
    stat = _read(f"/proc/{pid}/stat")
    if not stat or stat.rpartition(")")[2].split()[:1] != ["S"]:
        return ""  # running, stopped, or a group whose leader has gone
    call = _read(f"/proc/{pid}/syscall").split()
    if call and call[0].isdigit():
        number = int(call[0])
        if number in _READ_CALLS and len(call) > 1:
            return "read" if _is_terminal(pid, int(call[1], 16)) else ""
        if number in _POLL_CALLS:
            return "poll" if _is_terminal(pid, 0) else ""
        if number in EPOLL_WAITS and len(call) > 1:
            return "poll" if _epoll_watches_terminal(pid, int(call[1], 16)) else ""
        return ""
    return "read" if _read(f"/proc/{pid}/wchan").startswith(_TTY_WAITS) else ""


def _epoll_watches_terminal(pid: int, epfd: int) -> bool:
    """Whether the epoll instance ``epfd`` of ``pid`` has a terminal among its descriptors."""
    for line in _read(f"/proc/{pid}/fdinfo/{epfd}").splitlines():
        if line.startswith("tfd:"):
            fields = line.split()
            if len(fields) > 1 and fields[1].isdigit() and _is_terminal(pid, int(fields[1])):
                return True
    return False


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
