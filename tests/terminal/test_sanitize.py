"""The log-mode sanitiser: only text and SGR survive, whatever the agent sends."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from flowplex.terminal._sanitize import (
    ALT_SCREEN,
    CR,
    MAIN_SCREEN,
    MAX_SEQUENCE,
    NEWLINE,
    SCREEN,
    TEXT,
    VERBATIM,
    LogSanitizer,
    safe_label,
)

HOSTILE = [
    b"\x1b]52;c;aGVsbG8gZnJvbSBtYWxsb3J5\x07",  # OSC 52: write the clipboard (BEL-terminated)
    b"\x1b]52;c;aGVsbG8gZnJvbSBtYWxsb3J5\x1b\\",  # OSC 52 with ST
    b"\x1b]0;pwned\x07",  # window title
    b"\x1b]2;pwned\x1b\\",
    b"\x1b[?1049h\x1b[?1049l",  # alternate screen, in and out
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
    ops = LogSanitizer().feed(b"\x1b[?1049hdrawn\x1b]0;t\x07\x1b[2J\x1b[?1049lback\x1b[5;1H\x1b[2A")
    # On the alternate screen the output is kept for an emulator (strings still removed).
    assert ops[:3] == [(ALT_SCREEN, ""), (VERBATIM, "drawn\x1b[2J"), (MAIN_SCREEN, "")]
    assert [k for k, _ in ops[3:]] == [TEXT, SCREEN, SCREEN]


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
        assert kind in (TEXT, NEWLINE, CR, SCREEN, ALT_SCREEN, MAIN_SCREEN, VERBATIM)
        if kind == VERBATIM:
            assert not re.search("\x1b[]PX^_]|[\x90\x98\x9b\x9d-\x9f]", text), repr(text)
            continue
        if kind != TEXT:
            assert text == ""
            continue
        without_sgr = re.sub("\x1b\\[[0-9;:]*m", "", text)
        assert not re.search("[\x00-\x1f\x7f-\x9f]", without_sgr), repr(text)


def test_safe_label() -> None:
    assert safe_label("ok\x1b[31m\x07name") == "ok[31mname"
    assert safe_label("x" * 100, 10) == "x" * 9 + "…"


# -- bounds: an escape sequence whose end never comes ----------------------------------------------

_STRINGS = [b"\x1b]0;", b"\x1b]52;c;", b"\x1bP", b"\x1b_", b"\x1b^", b"\x1bX", b"\xc2\x9d", b"\xc2\x90"]


@pytest.mark.parametrize("start", _STRINGS)
@pytest.mark.parametrize("verbatim", [False, True])
def test_an_unterminated_string_is_cut_at_the_bound_and_what_follows_is_text(start: bytes, verbatim: bool) -> None:
    s = LogSanitizer(verbatim=verbatim)
    body = b"y" * (MAX_SEQUENCE + 10)
    ops = s.feed(start + body) + s.feed(b"after\n")
    out = "".join(t for _, t in ops)
    assert out.endswith("after\n" if verbatim else "after")
    assert 0 < out.count("y") <= 10 + len(start)  # the bound is on the whole sequence, introducer included
    assert s.cut == 1 and s.stripped >= 1


@pytest.mark.parametrize("terminator", [b"\x07", b"\x1b\\", b"\xc2\x9c"])
def test_a_string_just_under_the_bound_is_removed_whole_with_any_terminator(terminator: bytes) -> None:
    s = LogSanitizer()
    data = b"\x1b]0;" + b"t" * (MAX_SEQUENCE - 8) + terminator + b"visible\n"
    for cut in (1, 2, len(data) // 2, len(data) - 9, len(data) - 8):
        s = LogSanitizer()
        assert text_of(s.feed(data[:cut]) + s.feed(data[cut:])) == "visible"
        assert s.cut == 0 and s.stripped == 1


def test_osc_with_utf8_inside_split_at_every_byte() -> None:
    data = "a\x1b]0;héllo 中文 😀\x1b\\b\x1b]2;ünïcode\x07c\n".encode()
    for cut in range(len(data) + 1):
        s = LogSanitizer()
        ops = s.feed(data[:cut]) + s.feed(data[cut:])
        assert text_of(ops) == "abc", cut
        assert s.stripped == 2 and s.cut == 0


def test_every_byte_split_of_an_overlong_osc_gives_the_same_text() -> None:
    data = b"x\x1b]0;" + b"z" * (MAX_SEQUENCE + 3) + b"\x07tail\n"
    whole = LogSanitizer().feed(data)
    assert text_of(whole) == "x" + "z" * 6 + "tail"  # 4097 characters went: ESC ] 0 ; and 4093 z
    for cut in [*range(12), *range(MAX_SEQUENCE - 4, MAX_SEQUENCE + 12), len(data) - 3]:
        s = LogSanitizer()
        assert text_of(s.feed(data[:cut]) + s.feed(data[cut:])) == text_of(whole), cut
        assert s.cut == 1


def test_esc_inside_a_string_aborts_it_and_begins_a_sequence() -> None:
    s = LogSanitizer()
    assert text_of(s.feed(b"\x1b]0;title\x1b[31mred\x1b[0m\n")) == "\x1b[31mred\x1b[0m"
    assert text_of(s.feed(b"\x1b]0;a\x18after can\x1b]0;b\x1aafter sub\n")) == "after canafter sub"


def test_runaway_csi_parameters_are_cut_and_a_long_but_bounded_list_is_one_sequence() -> None:
    s = LogSanitizer()
    ops = s.feed(b"\x1b[" + b"1;" * 1000 + b"mok\n")  # 2000 characters: complete, dropped (not an SGR we keep)
    assert text_of(ops) == "ok" and s.cut == 0
    ops = s.feed(b"\x1b[" + b"9" * (MAX_SEQUENCE + 50) + b"Hrest\n")
    assert text_of(ops) == "9" * 52 + "Hrest" and s.cut == 1
    ops = s.feed(b"\x1b" + b" " * (MAX_SEQUENCE + 5) + b"Bx\n")  # ESC with endless intermediates
    assert text_of(ops).endswith("Bx") and s.cut == 2


@pytest.mark.parametrize("mode", [b"?1049", b"?1047", b"?47", b"?1;1049", b"?47;25"])
def test_every_alternate_screen_mode_is_reported_and_what_is_on_it_is_verbatim(mode: bytes) -> None:
    s = LogSanitizer()
    ops = s.feed(b"main\n\x1b[" + mode + b"h\x1b[2;3Hon alt\x1b]0;t\x07\t.\x1b[" + mode + b"lback\n")
    assert ops == [(TEXT, "main"), (NEWLINE, ""), (ALT_SCREEN, ""), (VERBATIM, "\x1b[2;3Hon alt\t."),
                   (MAIN_SCREEN, ""), (TEXT, "back"), (NEWLINE, "")]


def test_other_private_modes_are_not_the_alternate_screen() -> None:
    ops = LogSanitizer().feed(b"\x1b[?1000h\x1b[?2004h\x1b[?25lx\x1b[1049h\n")  # 1049 without ? is no private mode
    assert ops == [(TEXT, "x"), (NEWLINE, "")]


def test_a_full_reset_and_a_restart_leave_the_alternate_screen() -> None:
    s = LogSanitizer()
    assert [k for k, _ in s.feed(b"\x1b[?1049hx\x1bcy\n")] == [ALT_SCREEN, VERBATIM, MAIN_SCREEN, TEXT, NEWLINE]
    s.feed(b"\x1b[?1049h\x1b]0;unfinished")
    s.restart()
    assert s.feed(b"fresh\n") == [(TEXT, "fresh"), (NEWLINE, "")]


def test_verbatim_output_keeps_controls_and_sequences_but_no_string() -> None:
    s = LogSanitizer(verbatim=True)
    data = b"a\tb\x08\r\n\x1b[?1049h\x1b(B\x1b#8\x1b7\xc2\x9b2J\x1b]52;c;eA==\x07\x1bP1$r\x1b\\z"
    assert s.feed(data) == [(VERBATIM, "a\tb\x08\r\n\x1b[?1049h\x1b(B\x1b#8\x1b7\x1b[2Jz")]
    assert s.stripped == 2
