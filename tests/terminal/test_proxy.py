"""While a display is live, print() becomes whole lines of a pseudo-agent."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

import pytest

from flowplex.terminal import LogRenderer, TermCaps, Writer, redirect_std_streams

from .conftest import Term


def test_print_goes_through_the_display(plain_log: tuple[LogRenderer, Term]) -> None:
    display, term = plain_log
    with display, redirect_std_streams(display):
        print("hello", end="")
        print(" world")
        sys.stderr.write("oops\npartial")
    assert term.data.decode().splitlines() == ["stdout | hello world", "stderr | oops", "stderr | partial"]
    assert sys.stdout is sys.__stdout__ or sys.stdout.__class__.__name__ != "_LineProxy"


def test_log_records_go_to_the_real_stderr_and_prints_to_the_agent(
        plain_log: tuple[LogRenderer, Term], capsys: pytest.CaptureFixture[str]) -> None:
    """Handlers that look ``sys.stderr`` up per record -- the standard library's last resort and
    the CLI's own -- write around the display; a print still becomes the pseudo-agent's line."""
    from flowplex.cli import _StderrLog

    display, term = plain_log
    record = logging.LogRecord("flowplex.graph", logging.WARNING, __file__, 1, "edge %s is slow", ("x",), None)
    with display, redirect_std_streams(display):
        assert logging.lastResort is not None
        logging.lastResort.handle(record)
        _StderrLog().handle(record)
        print("mine", file=sys.stderr)
    assert term.data.decode().splitlines() == ["stderr | mine"]
    assert capsys.readouterr().err == "edge x is slow\nflowplex: warning: edge x is slow\n"


def test_log_records_become_notices_when_stderr_is_where_the_log_goes(tmp_path: Path) -> None:
    """``2>&1``: writing around the display would cut its lines; the record is a notice line."""
    path = tmp_path / "log.txt"
    with path.open("wb") as f:
        display = LogRenderer(Writer(f.fileno()), TermCaps(is_tty=False))
        err = os.fdopen(os.dup(f.fileno()), "w")
        saved = sys.stderr
        sys.stderr = err
        try:
            with display, redirect_std_streams(display):
                display.feed(1, "agent line\n", name="a")
                assert logging.lastResort is not None
                logging.lastResort.handle(logging.LogRecord("flowplex", logging.WARNING, __file__, 1, "careful", (),
                                                            None))
        finally:
            sys.stderr = saved
            err.close()
    assert sorted(path.read_text().splitlines()) == ["[flowplex] careful", "a | agent line"]
