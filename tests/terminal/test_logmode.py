"""Log mode: whole labelled lines, never interleaved; progress in a status footer."""

from __future__ import annotations

import io
import random

import pytest

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
    assert term.data == b"m | hi\n"
    assert display.stats().stripped == 5


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
