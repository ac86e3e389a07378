"""Log mode: whole labelled lines, never interleaved; progress in a status footer."""

from __future__ import annotations

import io
import itertools
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from flowplex.terminal import LogRenderer, TermCaps, Writer
from flowplex.transport import AgentType

from .conftest import FakeClock, Term, replay


class Chunks(io.RawIOBase):
    """A binary sink that remembers every write separately."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []

    def writable(self) -> bool:
        return True

    def write(self, b: object) -> int:
        data = bytes(b)  # type: ignore[call-overload]
        self.writes.append(data)
        return len(data)


def test_lines_never_interleave_and_each_write_holds_whole_lines() -> None:
    rnd = random.Random(3)
    sink = Chunks()
    display = LogRenderer(Writer(sink), TermCaps(is_tty=False))
    sent: dict[str, list[str]] = {"alpha": [], "beta": [], "gamma": []}
    streams = {}
    for i, name in enumerate(sent):
        lines = [name[0].upper() * rnd.randint(1, 60) + f" {name} {n}" for n in range(40)]
        sent[name] = lines
        streams[i] = "".join(line + "\n" for line in lines)
    with display:
        pos = dict.fromkeys(streams, 0)
        while any(pos[i] < len(streams[i]) for i in streams):
            i = rnd.choice([k for k in streams if pos[k] < len(streams[k])])
            step = rnd.randint(1, 25)
            display.feed(i, streams[i][pos[i] : pos[i] + step], name=list(sent)[i])
            pos[i] += step
    got: dict[str, list[str]] = {name: [] for name in sent}
    for write in sink.writes:
        assert write.endswith(b"\n"), write[-40:]
        for line in write.decode().splitlines():
            label, _, content = line.partition(" | ")
            got[label.strip()].append(content)
    assert got == sent
    assert b"\x1b" not in b"".join(sink.writes)


def test_colour_labels_and_agent_sgr_on_a_terminal() -> None:
    out = io.BytesIO()
    caps = TermCaps(is_tty=True, columns=80, rows=10, colour=True)
    with LogRenderer(Writer(out), caps) as display:
        display.feed(1, "plain and \x1b[31mred\x1b[0m text\n", name="coder", agent_type=AgentType.ASSISTANT)
        display.feed(2, "all good\n", name="ci", agent_type="error")
    data = out.getvalue()
    assert b"\x1b[36mcoder \xe2\x94\x82\x1b[0m plain and \x1b[31mred\x1b[0m text\x1b[0m\n" in data
    screen = replay(data, 80, 10)
    row = screen.buffer[0]
    assert screen.display[0].startswith("coder │ plain and red text")
    assert row[0].fg == "cyan" and row[18].fg == "red" and row[12].fg == "default"
    assert screen.display[1].startswith("ci    │ all good")
    assert screen.buffer[1][0].fg == "red"


def test_plain_output_has_no_escape_sequence_even_for_hostile_agents(plain_log: tuple[LogRenderer, Term]) -> None:
    display, term = plain_log
    display.start()
    display.feed(1, b"\x1b]52;c;aGVsbG8=\x07\x1b]0;title\x07\x1b[?1049h\x1b[2J\x1b[31mhi\x1b[0m\x07\n", name="m")
    display.stop()
    # The alternate screen is emulated (its clear, colour and bell act there): what is left on it is logged.
    assert term.data.decode() == "m | ── screen\nm | hi\n"
    assert display.stats().stripped == 3


def test_partial_line_flushed_after_the_time_limit_with_a_continuation_mark(clock: FakeClock) -> None:
    out = io.BytesIO()
    display = LogRenderer(Writer(out), TermCaps(is_tty=False), partial_flush_s=2.0, clock=clock)
    with display:
        display.feed(1, "thinking about", name="llm")
        assert display.flush()
        assert out.getvalue() == b""
        clock.advance(2.5)
        assert display.flush()
        assert out.getvalue() == b"llm | thinking about \xe2\x80\xa6\n"
        display.feed(1, " it some more\nnext line\n")
    assert out.getvalue().decode().splitlines() == [
        "llm | thinking about …",
        "llm | … it some more",
        "llm | next line",
    ]


def test_overlong_line_is_cut_with_marks() -> None:
    out = io.BytesIO()
    with LogRenderer(Writer(out), TermCaps(is_tty=False, unicode=False), max_line_chars=10) as display:
        display.feed(1, "x" * 25 + "\n", name="a")
    lines = out.getvalue().decode().splitlines()
    assert lines[0] == "a | " + "x" * 10 + " ..."
    assert lines[1] == "a | ... " + "x" * 10 + " ..."
    assert lines[-1].endswith("x" * 5)


def test_carriage_return_progress_goes_to_the_status_footer() -> None:
    out = io.BytesIO()
    caps = TermCaps(is_tty=True, columns=60, rows=12, colour=False)
    display = LogRenderer(Writer(out), caps)
    with display:
        display.feed(1, "starting\n", name="build")
        display.feed(2, "hello\n", name="chat")
        for pct in range(0, 60, 10):
            display.feed(1, f"\rcompiling {pct}%")
        assert display.flush()
        screen = replay(out.getvalue(), 60, 12)
        shown = [line.rstrip() for line in screen.display if line.strip()]
        assert shown == ["build | starting", "chat  | hello", "build | compiling 50%"]
        display.feed(2, "still talking\n")
        display.feed(1, "\rcompiling 100%\n")
    screen = replay(out.getvalue(), 60, 12)
    shown = [line.rstrip() for line in screen.display if line.strip()]
    assert shown == ["build | starting", "chat  | hello", "chat  | still talking", "build | compiling 100%"]
    assert b"compiling 10%" not in out.getvalue().split(b"\n")[0]
    assert display.stats().coalesced >= 4


def test_crlf_from_a_pty_is_a_plain_newline(plain_log: tuple[LogRenderer, Term]) -> None:
    display, term = plain_log
    display.start()
    display.feed(1, b"one\r", name="p")
    display.feed(1, b"\ntwo\r\n")
    display.stop()
    assert term.data == b"p | one\np | two\n"


def test_full_screen_program_becomes_a_status_line(plain_log: tuple[LogRenderer, Term]) -> None:
    display, term = plain_log
    display.start()
    display.feed(1, b"before\r\n", name="top")
    for i in range(5):
        display.feed(1, f"\x1b[H\x1b[2Jframe {i}\r\nload {i}\r\n".encode())
    display.stop()
    assert term.data == b"top | before\ntop | load 4\n"


def test_backlog_is_bounded_and_drops_are_counted() -> None:
    out = io.BytesIO()
    display = LogRenderer(Writer(out), TermCaps(is_tty=False), max_pending_lines=5)
    for i in range(20):
        display.feed(1, f"line {i}\n", name="fast")  # nothing drains before start
    with display:
        pass
    lines = out.getvalue().decode().splitlines()
    assert lines[0].startswith("[flowplex] 15 log lines dropped")
    assert lines[1:] == [f"fast | line {i}" for i in range(15, 20)]
    assert display.stats().dropped_lines == 15


def test_end_of_stream_and_leftovers(plain_log: tuple[LogRenderer, Term]) -> None:
    display, term = plain_log
    display.start()
    display.feed(1, "no newline at the end", name="cmd")
    display.end_stream(1, "exit 3", ok=False)
    display.feed(2, "left over", name="other")
    display.stop()
    assert term.data.decode().splitlines() == [  # labels line up with the agents known so far
        "cmd | no newline at the end",
        "cmd | ── exit 3",
        "other | left over",
    ]


@pytest.mark.parametrize("fps", [0, -1.0])
def test_bad_fps_is_refused(fps: float) -> None:
    with pytest.raises(ValueError, match="fps"):
        LogRenderer(Writer(io.BytesIO()), TermCaps(is_tty=False), fps=fps)


class SlowSink(Chunks):
    """A terminal that takes 20 ms per write."""

    def write(self, b: object) -> int:
        import time

        time.sleep(0.02)
        return super().write(b)


@pytest.mark.parametrize("overflow", ["drop", "block"])
def test_slow_terminal_drops_or_blocks_as_configured(overflow: str) -> None:
    import time

    sink = SlowSink()
    display = LogRenderer(Writer(sink), TermCaps(is_tty=False), max_pending_lines=10, overflow=overflow)
    start = time.monotonic()
    with display:
        for i in range(200):
            display.feed(1, f"line {i}\n", name="fast")
        fed = time.monotonic() - start
    lines = b"".join(sink.writes).decode().splitlines()
    st = display.stats()
    if overflow == "drop":
        assert st.dropped_lines > 0 and fed < 0.5  # the producer never waited for the screen
        assert lines[-1] == "fast | line 199"
    else:
        assert st.dropped_lines == 0
        assert [line for line in lines if not line.startswith("[")] == [f"fast | line {i}" for i in range(200)]
        assert fed > 0.1  # it waited for the terminal


def test_bad_overflow_is_refused() -> None:
    with pytest.raises(ValueError, match=r"LogRenderer\(overflow='wait'\): expected one of drop, block"):
        LogRenderer(Writer(io.BytesIO()), TermCaps(is_tty=False), overflow="wait")


# -- screen control inside an agent's output (see the rule in flowplex.terminal._logmode) --------


def clocked_log(clock: FakeClock, *, tty: bool = False) -> tuple[LogRenderer, io.BytesIO]:
    out = io.BytesIO()
    caps = TermCaps(is_tty=tty, columns=60, rows=12, colour=False)
    return LogRenderer(Writer(out), caps, clock=clock), out


def test_lines_after_a_clear_are_logged_once_no_redraw_follows(clock: FakeClock) -> None:
    display, out = clocked_log(clock)
    with display:
        display.feed(1, b"before\r\n\x1b[H\x1b[2J\x1b[3Jline 1\r\nline 2\r\n", name="sh")
        assert display.flush()
        assert out.getvalue() == b"sh | before\n"  # held back: is it a frame?
        clock.advance(1.5)
        assert display.flush()
        assert out.getvalue() == b"sh | before\nsh | line 1\nsh | line 2\n"
        display.feed(1, b"after\r\n")
    assert out.getvalue().decode().splitlines()[-1] == "sh | after"
    assert display.stats().dropped_lines == 0


def test_a_clear_then_the_end_of_the_stream_logs_every_line(plain_log: tuple[LogRenderer, Term]) -> None:
    display, term = plain_log
    display.start()
    display.feed(1, b"before\r\n\x1b[H\x1b[2Jmid line", name="sh")
    display.end_stream(1, "exit 0")
    display.stop()
    assert term.data.decode().splitlines() == ["sh | before", "sh | mid line", "sh | ── exit 0"]


def test_painting_goes_to_the_footer_then_back_to_the_log_when_quiet(clock: FakeClock) -> None:
    display, out = clocked_log(clock, tty=True)
    with display:
        display.feed(1, b"start\r\n", name="w")
        for i in range(5):
            display.feed(1, f"\x1b[H\x1b[2Jframe {i}\r\nrow {i}\r\n".encode())
            clock.advance(0.2)
        assert display.flush()
        shown = [line.rstrip() for line in replay(out.getvalue(), 60, 12).display if line.strip()]
        assert shown == ["w | start", "w | row 4"]  # the last line in the footer, no frame logged
        clock.advance(1.5)
        display.feed(1, b"done painting\r\n")
    log = out.getvalue()
    assert b"frame" not in log
    shown = [line.rstrip() for line in replay(log, 60, 12).display if line.strip()]
    assert shown == ["w | start", "w | done painting"]


def test_what_is_left_on_the_alternate_screen_is_logged_on_leaving_it(plain_log: tuple[LogRenderer, Term]) -> None:
    display, term = plain_log
    display.start()
    display.feed(1, b"$ less file\r\n\x1b[?1049h\x1b[Hpage 1\r\npage 2\r\n", name="sh")
    display.feed(1, b"\x1b[?1049l$ echo back\r\nback\r\n")
    display.stop()
    assert term.data.decode().splitlines() == ["sh | $ less file", "sh | ── screen", "sh | page 1", "sh | page 2",
                                               "sh | $ echo back", "sh | back"]


def test_painting_without_newlines_stays_bounded(plain_log: tuple[LogRenderer, Term]) -> None:
    display, term = plain_log
    display.feed(1, b"\x1b[?1049h", name="tui")
    for i in range(2000):
        display.feed(1, f"\x1b[{i % 20 + 1};1Hcell {i} ".encode() * 5)
    st = display._state[1]
    assert st.length == 0 and st.alt is not None and len(st.alt.vt.screen.buffer) <= 24  # one screen, no more
    display.end_stream(1, "exit 0")
    with display:
        pass
    lines = term.data.decode().splitlines()
    assert lines[0] == "tui | ── screen" and len(lines) == 22  # header, 20 rows, the end line
    assert lines[20] == "tui | cell 1999" and lines[1] == "tui | cell 1980"


# -- losses -----------------------------------------------------------------------------------------


def test_blocking_without_a_deadline_never_drops_even_a_huge_chunk() -> None:
    out = io.BytesIO()
    display = LogRenderer(Writer(out), TermCaps(is_tty=False), max_pending_lines=10, overflow="block",
                          block_timeout_s=None)
    with display:
        display.feed(1, "".join(f"{i}\n" for i in range(5000)), name="burst")  # one chunk, 500x the bound
        display.feed(1, "".join(f"{i}\n" for i in range(5000, 6000)))
    assert out.getvalue().decode().splitlines() == [f"burst | {i}" for i in range(6000)]
    assert display.stats().dropped_lines == 0


def test_a_live_terminal_that_does_not_keep_up_drops_after_the_timeout_and_says_so() -> None:
    sink = SlowSink()
    display = LogRenderer(Writer(sink), TermCaps(is_tty=False), max_pending_lines=10, overflow="block",
                          block_timeout_s=0.01)
    with display:
        for i in range(300):
            display.feed(1, f"line {i}\n", name="fast")
    lines = b"".join(sink.writes).decode().splitlines()
    dropped = display.stats().dropped_lines
    assert dropped > 0
    notices = [line for line in lines if line.startswith("[flowplex] ")]
    assert sum(int(n.split()[1]) for n in notices) == dropped
    assert lines[-1] == "fast | line 299" and len(lines) - len(notices) == 300 - dropped


def test_time_held_back_by_a_slow_writer_does_not_cut_a_line(clock: FakeClock) -> None:
    out = io.BytesIO()
    display = LogRenderer(Writer(out), TermCaps(is_tty=False), partial_flush_s=2.0, clock=clock,
                          max_pending_lines=1, overflow="block", block_timeout_s=None)
    with display:
        display.feed(1, "half a ", name="a")
        clock.advance(1.5)
        display._backpressure.held_at = clock()  # as a feed that came out of a wait for room does
        clock.advance(1.5)
        assert display.flush()
        assert out.getvalue() == b""  # 3 s since it began, but 1.5 s of it was ours
        display.feed(1, "line\n")
    assert out.getvalue() == b"a | half a line\n"


def test_never_cut_by_time_when_partial_flush_is_off(clock: FakeClock) -> None:
    out = io.BytesIO()
    display = LogRenderer(Writer(out), TermCaps(is_tty=False), partial_flush_s=None, clock=clock)
    with display:
        display.feed(1, "slow ", name="llm")
        clock.advance(60.0)
        assert display.flush()
        assert out.getvalue() == b""
        display.feed(1, "sentence\n")
    assert out.getvalue() == b"llm | slow sentence\n"


def test_a_notice_is_a_line_of_its_own(plain_log: tuple[LogRenderer, Term]) -> None:
    display, term = plain_log
    display.start()
    display.feed(1, b"half", name="a")
    display.notice("warning: \x1b[31mdisk\x07 full\n")
    display.feed(1, b" line\n")
    display.stop()
    assert term.data.decode().splitlines() == ["[flowplex] warning: [31mdisk full", "a | half line"]


_PIECES = st.sampled_from(["word", " ", "\t", "é中", "\x1b[31m", "\x1b[0m", "\r\n", "\n", "\x1b[H\x1b[2J", "\x1b[3A",
                           "\x1b]0;t\x07", "\x1b[?1049h", "\x1b[?1049l", "\r",
                           # unterminated strings and long runs (past the 4 KiB bound), other alternate screens
                           "\x1b]0;", "\x1bP", "y" * 1500, "\x1b[?47h", "\x1b[?1047l", "\x1b[2;5H",
                           "\x1b[" + "1;" * 700])


@given(st.lists(_PIECES, max_size=60), st.lists(st.integers(min_value=0, max_value=400), max_size=8))
def test_how_the_output_is_split_into_chunks_never_changes_the_log(pieces: list[str], cuts: list[int]) -> None:
    data = "".join(pieces).encode()

    def log(chunks: list[bytes]) -> bytes:
        out = io.BytesIO()
        display = LogRenderer(Writer(out), TermCaps(is_tty=False), clock=lambda: 0.0, overflow="block",
                              block_timeout_s=None)
        display.add_agent(1, "a")
        for chunk in chunks:
            display.feed(1, chunk, name="a")
        display.end_stream(1, "exit 0")
        with display:
            pass
        return out.getvalue()

    bounds = sorted({0, len(data), *(c for c in cuts if c < len(data))})
    assert log([data[a:b] for a, b in itertools.pairwise(bounds)]) == log([data])


@given(st.lists(st.text(alphabet=st.characters(blacklist_categories=("Cc", "Cs", "Cf")), max_size=30), max_size=40))
def test_without_screen_control_every_line_is_logged_whole_and_in_order(lines: list[str]) -> None:
    out = io.BytesIO()
    display = LogRenderer(Writer(out), TermCaps(is_tty=False), partial_flush_s=None, max_pending_lines=3,
                          overflow="block", block_timeout_s=None)
    with display:
        for line in lines:
            display.feed(1, (line + "\r\n").encode(), name="a", pty=True)
    assert out.getvalue().decode().split("\n") == [*(f"a | {line}" for line in lines), ""]


def test_a_settled_screen_is_logged_once_and_erasing_rows_of_it_is_nothing_new(clock: FakeClock) -> None:
    out = io.BytesIO()
    display = LogRenderer(Writer(out), TermCaps(is_tty=False), clock=clock)
    with display:
        display.feed(1, b"\x1b[?1049h\x1b[Hpage\x1b[24;1H:prompt", name="less", pty=True)
        clock.advance(0.5)
        assert display.flush()
        assert out.getvalue() == b""  # not settled yet
        clock.advance(1.0)
        assert display.flush()
        display.feed(1, b"\x1b[24;1H\r\x1b[K\x1b[?1049l")  # less erases its prompt as it quits
        display.feed(1, b"$ \r\n")
    lines = out.getvalue().decode().splitlines()
    assert lines == ["less | ── screen", "less | page", *["less | "] * 22, "less | :prompt", "less | $ "]
