"""Keys: decoding, and a real PTY in cbreak mode that is restored afterwards."""

from __future__ import annotations

import os
import termios
import threading

from flowplex.terminal._keys import KeyReader, decode_keys


def test_decode_keys() -> None:
    assert decode_keys(b"\t\x1b[Z\r1zq") == ["tab", "btab", "enter", "1", "z", "q"]
    assert decode_keys(b"\x1b[A\x1bOB\x1b[C\x1b[D") == ["up", "down", "right", "left"]
    assert decode_keys(b"\x1b") == ["esc"]
    assert decode_keys(b"\x1b[1;5Px") == ["x"]  # an unknown sequence is skipped whole


def test_key_reader_on_a_real_pty() -> None:
    master, slave = os.openpty()
    before = termios.tcgetattr(slave)
    got: list[str] = []
    done = threading.Event()

    def on_key(key: str) -> None:
        got.append(key)
        if key == "q":
            done.set()

    reader = KeyReader(slave, on_key)
    try:
        assert reader.start()
        mode = termios.tcgetattr(slave)
        assert not mode[3] & termios.ICANON and not mode[3] & termios.ECHO
        os.write(master, b"\t2z\x1b[Zq")
        assert done.wait(5)
    finally:
        reader.stop()
        assert termios.tcgetattr(slave) == before
        os.close(master)
        os.close(slave)
    assert got == ["tab", "2", "z", "btab", "q"]


def test_key_reader_refuses_a_non_terminal() -> None:
    r, w = os.pipe()
    try:
        assert KeyReader(r, lambda key: None).start() is False
    finally:
        os.close(r)
        os.close(w)
