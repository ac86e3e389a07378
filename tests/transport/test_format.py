"""format_ansi against Perdix's GPU formatting, byte for byte (golden bytes written from the spec)."""

from __future__ import annotations

import pytest

from flowplex.errors import UsageError
from flowplex.transport import AgentType, Message, format_ansi

# Perdix v0.1.2 perdix_kernel.cu: colour SGR, label, reset; body; final reset (perdix-semantics 2.5, 3.4).
GOLDEN_PREFIXES = [
    (AgentType.SYSTEM, b"\x1b[34m[SYSTEM] \x1b[0m"),
    (AgentType.USER, b"\x1b[32m[USER] \x1b[0m"),
    (AgentType.ASSISTANT, b"\x1b[36m[ASSISTANT] \x1b[0m"),
    (AgentType.ERROR, b"\x1b[31m[ERROR] \x1b[0m"),
    (AgentType.WARNING, b"\x1b[33m[WARNING] \x1b[0m"),
    (AgentType.INFO, b"\x1b[37m[INFO] \x1b[0m"),
    (AgentType.DEBUG, b"\x1b[35m[DEBUG] \x1b[0m"),
    (AgentType.TRACE, b"\x1b[90m[TRACE] \x1b[0m"),
]


@pytest.mark.parametrize(("agent", "prefix"), GOLDEN_PREFIXES)
def test_each_agent_type_has_perdix_colour_and_label(agent: AgentType, prefix: bytes) -> None:
    assert format_ansi("hello", agent_type=agent) == prefix + b"hello\x1b[0m"


def test_assistant_prefix_is_21_bytes_as_in_perdix_budget_example() -> None:
    out = format_ansi("")
    assert out == b"\x1b[36m[ASSISTANT] \x1b[0m\x1b[0m"
    assert len(out) - 4 == 21


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (b"ERROR", b"\x1b[91mERROR\x1b[0m"),
        (b"WARNING", b"\x1b[93mWARNING\x1b[0m"),
        (b"SUCCESS", b"\x1b[92mSUCCESS\x1b[0m"),
        (b"an ERROR here", b"an \x1b[91mERROR\x1b[0m here"),
        (b"ERRORS", b"ERRORS"),  # not a whole word
        (b"XERROR", b"XERROR"),
        (b"ERROR1", b"ERROR1"),  # digits are word bytes
        (b"9WARNING", b"9WARNING"),
        (b"error Error", b"error Error"),  # case-sensitive
        (b"MY_ERROR", b"MY_\x1b[91mERROR\x1b[0m"),  # '_' is not an ASCII letter or digit
        (b"(SUCCESS)", b"(\x1b[92mSUCCESS\x1b[0m)"),
        (b"ERROR,WARNING", b"\x1b[91mERROR\x1b[0m,\x1b[93mWARNING\x1b[0m"),
        ("é ERROR".encode(), "é ".encode() + b"\x1b[91mERROR\x1b[0m"),
        (b"\xc3\xa9ERROR", b"\xc3\xa9\x1b[91mERROR\x1b[0m"),  # non-ASCII bytes are boundaries
    ],
)
def test_keywords_are_highlighted_as_whole_case_sensitive_words(body: bytes, expected: bytes) -> None:
    prefix = b"\x1b[36m[ASSISTANT] \x1b[0m"
    assert format_ansi(body) == prefix + expected + b"\x1b[0m"


def test_full_line_golden() -> None:
    msg = Message(b"deploy SUCCESS, 2 WARNING(s)", 0, 7, AgentType.INFO, 0, 0, 0)
    assert format_ansi(msg) == (
        b"\x1b[37m[INFO] \x1b[0mdeploy \x1b[92mSUCCESS\x1b[0m, 2 \x1b[93mWARNING\x1b[0m(s)\x1b[0m"
    )


def test_continuation_omits_final_reset_and_later_chunks_omit_the_label() -> None:
    assert format_ansi("part one ", continues=True) == b"\x1b[36m[ASSISTANT] \x1b[0mpart one "
    assert format_ansi("part two", prefix=False) == b"part two\x1b[0m"
    assert format_ansi("mid", prefix=False, continues=True) == b"mid"


def test_disabled_ansi_copies_the_text() -> None:
    assert format_ansi("an ERROR", enable_ansi=False) == b"an ERROR"


def test_no_truncation_unlike_perdix_budget() -> None:
    body = b"x" * 1000 + b" ERROR"
    out = format_ansi(body, agent_type=AgentType.ERROR)
    assert out == b"\x1b[31m[ERROR] \x1b[0m" + b"x" * 1000 + b" \x1b[91mERROR\x1b[0m\x1b[0m"


def test_message_agent_type_is_used_and_can_be_overridden() -> None:
    msg = Message(b"x", 0, 0, AgentType.DEBUG, 0, 0, 0)
    assert format_ansi(msg).startswith(b"\x1b[35m[DEBUG] ")
    assert format_ansi(msg, agent_type=AgentType.USER).startswith(b"\x1b[32m[USER] ")


@pytest.mark.parametrize("bad", [8, -1, 255])
def test_agent_type_out_of_range_raises_instead_of_reading_out_of_bounds(bad: int) -> None:
    with pytest.raises(UsageError, match=r"format_ansi\(agent_type=.*expected an AgentType \(0\.\.7\)"):
        format_ansi("x", agent_type=bad)


def test_other_message_types_are_refused() -> None:
    with pytest.raises(UsageError, match=r"format_ansi\(message=42\): expected a Message, str or bytes"):
        format_ansi(42)
