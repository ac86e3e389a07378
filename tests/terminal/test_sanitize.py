"""The log-mode sanitiser: only text and SGR survive, whatever the agent sends."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from flowplex.terminal._sanitize import ALT_SCREEN, CR, MAIN_SCREEN, NEWLINE, SCREEN, TEXT, LogSanitizer, safe_label

HOSTILE = [
    b"\x1b]52;c;aGVsbG8gZnJvbSBtYWxsb3J5\x07",  # OSC 52: write the clipboard (BEL-terminated)
    b"\x1b]52;c;aGVsbG8gZnJvbSBtYWxsb3J5\x1b\\",  # OSC 52 with ST
    b"\x1b]0;pwned\x07",  # window title
    b"\x1b]2;pwned\x1b\\",
    b"\x1b[?1049h",  # alternate screen
    b"\x1b[?1000h",  # mouse reporting
    b"\x1b[?25l",  # hide the cursor
    b"\x1b[2J",  # clear the screen
    b"\x1b[10;20H",  # cursor move
    b"\x1b[5A",  # cursor up
    b"\x1bc",  # full reset
    b"\x1b7\x1b8",  # save/restore cursor
    b"\x1bP+q544e\x1b\\",  # DCS (XTGETTCAP)
    b"\x1b_apc payload\x1b\\",
    b"\x9b2J",  # 8-bit CSI
    b"\xc2\x9b2J",  # CSI as a UTF-8 encoded C1 control
    b"\x1b[6n",  # cursor position report (would make the terminal type into stdin)
    b"\x05",  # ENQ (answerback)
]


def text_of(ops: list[tuple[int, str]]) -> str:
    return "".join(t for kind, t in ops if kind == TEXT)


@pytest.mark.parametrize("attack", HOSTILE)
def test_control_sequences_are_removed_and_counted(attack: bytes) -> None:
    s = LogSanitizer()
    ops = s.feed(b"before " + attack + b"after\n")
    text = text_of(ops)
    visible = re.sub("\x1b\\[[0-9;]*m", "", text).replace(" ", "")
    # A raw 0x9b byte is not UTF-8: it becomes U+FFFD and its "2J" is harmless text.
    assert visible in ("beforeafter", "before2Jafter", "before\ufffd2Jafter")
    assert "\x1b" not in text and "\x9b" not in text and "\x07" not in text
    assert s.stripped >= 1 or attack == b"\x9b2J"
    assert ops[-1] == (NEWLINE, "")


def test_sgr_survives_other_csi_does_not() -> None:
    ops = LogSanitizer().feed(b"\x1b[1;31mred\x1b[0m \x1b[38;5;208morange\x1b[m\x1b[3Cx")
    assert text_of(ops) == "\x1b[1;31mred\x1b[0m \x1b[38;5;208morange\x1b[mx"


@pytest.mark.parametrize("cut", range(1, 30))
def test_sequences_split_across_chunks(cut: int) -> None:
    data = "héllo \x1b]0;title\x07wörld \x1b[32mgreen\x1b[0m!\n".encode()
    s = LogSanitizer()
    ops = s.feed(data[:cut]) + s.feed(data[cut:])
    assert text_of(ops) == "héllo wörld \x1b[32mgreen\x1b[0m!"


def test_newline_carriage_return_and_tab() -> None:
    ops = LogSanitizer().feed(b"a\tb\r\nc\rd")
    assert ops == [(TEXT, "a       b"), (CR, ""), (NEWLINE, ""), (TEXT, "c"), (CR, ""), (TEXT, "d")]


def test_tabs_stop_at_every_eighth_cell_of_the_line() -> None:
    """As on a terminal: a tab moves to the next multiple of 8 cells (wide characters count
    two, colour sequences none), and the count starts again with each line."""
    s = LogSanitizer()
    ops = s.feed("12345678\tx\tyz\n\x1b[31m\u4e2d\u6587\x1b[0m\tw\n\tq".encode())
    texts = [t for k, t in ops if k == TEXT]
    assert texts == ["12345678        x       yz", "\x1b[31m\u4e2d\u6587\x1b[0m    w", "        q"]
    assert s.feed(b"\nab") == [(NEWLINE, ""), (TEXT, "ab")]
    assert s.feed(b"\tc") == [(TEXT, "      c")]  # the column carries across chunks


def test_screen_addressing_is_reported() -> None:
    ops = LogSanitizer().feed(b"x\x1b[H\x1b[2Jy")
    assert [k for k, _ in ops] == [TEXT, SCREEN, SCREEN, TEXT]


def test_alternate_screen_enter_and_leave_are_reported() -> None:
    ops = LogSanitizer().feed(b"\x1b[?1049hdrawn\x1b[2J\x1b[?1049lback\x1b[5;1H\x1b[2A")
    assert [k for k, _ in ops] == [ALT_SCREEN, TEXT, SCREEN, MAIN_SCREEN, TEXT, SCREEN, SCREEN]


def test_erase_in_line_and_horizontal_moves_are_not_screen_ops() -> None:
    s = LogSanitizer()
    assert s.feed(b"a\x1b[2K\x1b[10Gb\x1b[3C\n") == [(TEXT, "ab"), (NEWLINE, "")]
    assert s.stripped == 3


def test_bidi_overrides_and_invalid_utf8() -> None:
    ops = LogSanitizer().feed("abc\u202edcba\u2066x".encode() + b"\xff!")
    assert text_of(ops) == "abcdcbax\ufffd!"


@given(st.binary(max_size=300), st.integers(min_value=0, max_value=300))
def test_nothing_but_sgr_ever_comes_out(data: bytes, cut: int) -> None:
    s = LogSanitizer()
    ops = s.feed(data[:cut]) + s.feed(data[cut:])
    for kind, text in ops:
        assert kind in (TEXT, NEWLINE, CR, SCREEN, ALT_SCREEN, MAIN_SCREEN)
        if kind != TEXT:
            assert text == ""
            continue
        without_sgr = re.sub("\x1b\\[[0-9;:]*m", "", text)
        assert not re.search("[\x00-\x1f\x7f-\x9f]", without_sgr), repr(text)


def test_safe_label() -> None:
    assert safe_label("ok\x1b[31m\x07name") == "ok[31mname"
    assert safe_label("x" * 100, 10) == "x" * 9 + "…"
