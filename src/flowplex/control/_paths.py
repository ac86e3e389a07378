"""Where live graphs keep their endpoints: one private runtime directory per user.

``$XDG_RUNTIME_DIR/flowplex`` when the session has one (systemd makes it per user, 0700), else
``flowplex-<uid>`` under the system temp dir. The directory is created 0700 and refused when
another user owns it or others may enter it: the sockets in it are the graphs' controls, and the
directory's mode is the first of the two locks on them (the peer's uid, checked on every
connection, is the second). A graph ``NAME`` owns ``NAME.sock``; a detached one also ``NAME.log``.
"""

from __future__ import annotations

import os
import re
import stat
import tempfile
from pathlib import Path
from typing import Final

from ..errors import ControlError

__all__ = ["NAME_RE", "check_name", "log_path", "runtime_dir", "socket_path"]

NAME_RE: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
"""A graph's control name: a letter or digit first, then letters, digits, ``.``, ``_``, ``-`` (64 at most)."""

RUNTIME_ENV: Final = "FLOWPLEX_RUNTIME_DIR"
"""Overrides the runtime directory (tests, several sandboxes on one machine)."""


def runtime_dir() -> Path:
    """The user's runtime directory, created 0700 when missing; ``ControlError`` when unsafe."""
    override = os.environ.get(RUNTIME_ENV)
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    if override:
        path = Path(override)
    elif xdg and os.path.isdir(xdg):
        path = Path(xdg) / "flowplex"
    else:
        path = Path(tempfile.gettempdir()) / f"flowplex-{os.getuid()}"
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = path.lstat()
    except OSError as exc:
        msg = f"cannot create the runtime directory {path}: {exc.strerror or exc}"
        raise ControlError(msg) from None
    if not stat.S_ISDIR(info.st_mode):
        msg = f"the runtime directory {path} is not a directory (a link or a file is there); remove it"
        raise ControlError(msg)
    if info.st_uid != os.getuid():
        msg = (f"the runtime directory {path} belongs to uid {info.st_uid}, not to you (uid {os.getuid()}); "
               f"set {RUNTIME_ENV} to a directory of yours")
        raise ControlError(msg)
    if info.st_mode & 0o077:
        os.chmod(path, 0o700)  # ours, but too open (an old umask): close it before any socket goes in
    return path


def check_name(name: str) -> str:
    """``name`` when it is a valid control name; ``ControlError`` saying what is allowed otherwise."""
    if not isinstance(name, str) or not NAME_RE.fullmatch(name):
        msg = (f"bad graph name {name!r}: use 1 to 64 letters, digits, '.', '_' or '-', "
               f"starting with a letter or digit")
        raise ControlError(msg)
    return name


def socket_path(name: str, directory: Path | None = None) -> Path:
    """The control socket of graph ``name``."""
    return (directory or runtime_dir()) / f"{check_name(name)}.sock"


def log_path(name: str, directory: Path | None = None) -> Path:
    """The output and log file of detached graph ``name``."""
    return (directory or runtime_dir()) / f"{check_name(name)}.log"


def default_name(stem: str) -> str:
    """A control name made from a file's stem: characters outside the allowed set become ``-``."""
    cleaned = re.sub(r"[^A-Za-z0-9._-]", "-", stem).lstrip("._-")[:64]
    return cleaned or "graph"
