"""While a display is live, print() becomes whole lines of a pseudo-agent."""

from __future__ import annotations

import sys

from flowplex.terminal import LogRenderer, redirect_std_streams

from .conftest import Term


def test_print_goes_through_the_display(plain_log: tuple[LogRenderer, Term]) -> None:
    display, term = plain_log
    with display, redirect_std_streams(display):
        print("hello", end="")
        print(" world")
        sys.stderr.write("oops\npartial")
    assert term.data.decode().splitlines() == ["stdout | hello world", "stderr | oops", "stderr | partial"]
    assert sys.stdout is sys.__stdout__ or sys.stdout.__class__.__name__ != "_LineProxy"
