"""Fixtures for the terminal tests: displays on the real Writer, replayed into a pyte screen."""

from __future__ import annotations

import io
from collections.abc import Iterator
from dataclasses import dataclass

import pyte
import pytest

from flowplex.terminal import LogRenderer, PaneRenderer, TermCaps, Writer
from flowplex.testing import FakeClock

SYNC_BEGIN = b"\x1b[?2026h"
SYNC_END = b"\x1b[?2026l"


def replay(data: bytes, columns: int, rows: int, screen: pyte.Screen | None = None) -> pyte.Screen:
    """Feed captured terminal output into a pyte screen.

    Output captured to a file gets no newline-to-CR/LF translation, so LNM is set (a real tty's
    ONLCR would have turned "\\n" into "\\r\\n").
    """
    if screen is None:
        screen = pyte.Screen(columns, rows)
        screen.set_mode(pyte.modes.LNM)
    pyte.ByteStream(screen).feed(data)
    return screen


def until_exit(data: bytes) -> bytes:
    """What was on the alternate screen: the output up to the last ``ESC[?1049l``."""
    cut = data.rfind(b"\x1b[?1049l")
    return data[:cut] if cut >= 0 else data


@dataclass
class Term:
    """A display's output: the bytes written, and the screen they make."""

    out: io.BytesIO
    caps: TermCaps

    @property
    def data(self) -> bytes:
        return self.out.getvalue()

    def screen(self, data: bytes | None = None) -> pyte.Screen:
        return replay(until_exit(self.data if data is None else data), self.caps.columns, self.caps.rows)

    def lines(self) -> list[str]:
        return self.screen().display


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(100.0)


@pytest.fixture
def panes() -> Iterator[tuple[PaneRenderer, Term]]:
    """A 100x30 panes display writing through the real Writer into memory (no keys)."""
    out = io.BytesIO()
    caps = TermCaps(is_tty=True, columns=100, rows=30, colour=True)
    display = PaneRenderer(Writer(out), caps, keys=False)
    try:
        yield display, Term(out, caps)
    finally:
        display.stop()


@pytest.fixture
def plain_log() -> Iterator[tuple[LogRenderer, Term]]:
    """A log display on a pipe-like output: no TTY, no colour."""
    out = io.BytesIO()
    caps = TermCaps(is_tty=False, columns=100, rows=30)
    display = LogRenderer(Writer(out), caps)
    try:
        yield display, Term(out, caps)
    finally:
        display.stop()
