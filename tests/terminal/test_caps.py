"""TermCaps: detected once from the descriptor and the environment; injectable."""

from __future__ import annotations

import fcntl
import os
import struct
import termios

from flowplex.terminal import TermCaps, resolve_mode


def test_a_pipe_is_not_a_terminal() -> None:
    r, w = os.pipe()
    try:
        caps = TermCaps.detect(w, env={"TERM": "xterm-256color", "COLUMNS": "132", "LINES": "40"})
    finally:
        os.close(r)
        os.close(w)
    assert not caps.is_tty and not caps.colour
    assert (caps.columns, caps.rows) == (132, 40)
    assert resolve_mode("auto", caps) == "log" and resolve_mode("panes", caps) == "log"


def test_a_pty_is_a_terminal_with_its_size() -> None:
    master, slave = os.openpty()
    try:
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 33, 111, 0, 0))
        caps = TermCaps.detect(slave, env={"TERM": "xterm", "LANG": "C.UTF-8"})
        no_colour = TermCaps.detect(slave, env={"TERM": "xterm", "NO_COLOR": "1"})
        dumb = TermCaps.detect(slave, env={"TERM": "dumb"})
    finally:
        os.close(master)
        os.close(slave)
    assert caps.is_tty and caps.colour and (caps.columns, caps.rows) == (111, 33)
    assert resolve_mode("auto", caps) == "panes"
    assert no_colour.is_tty and not no_colour.colour
    assert not dumb.is_tty
    assert resolve_mode("auto", caps.with_size(30, 8)) == "log"


def test_unknown_mode_is_refused() -> None:
    import pytest

    with pytest.raises(ValueError, match="mode 'tabs': expected one of auto, panes, log"):
        resolve_mode("tabs", TermCaps(is_tty=True))
