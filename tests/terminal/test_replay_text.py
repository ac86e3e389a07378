"""Real LLM-style text in both modes: every pane shows exactly what log mode prints.

Three agents stream text with emoji (presentation selectors, ZWJ families, flags, skin tones),
CJK, combining marks and right-to-left words, in chunks cut at arbitrary points (inside a UTF-8
sequence too). Panes mode's output is replayed into a pyte screen (a real terminal emulator;
pyte 0.8's own ``draw`` stops at zero-width characters, so the replay uses the pane's fixed
screen class, as a modern terminal would draw them) and each pane's text is compared line by
line with the log mode lines of the same agent. Invisible format characters (U+200B, the
joiners inside a ZWJ emoji) are left out of the comparison: panes fold or drop them, log mode
passes them through, and neither shows them.
"""

from __future__ import annotations

import io
import itertools
import unicodedata

import pyte
from hypothesis import given, settings
from hypothesis import strategies as st

from flowplex.terminal import LogRenderer, PaneRenderer, TermCaps, Writer
from flowplex.terminal._vt import _FastScreen

TRANSCRIPTS = {
    1: [
        "\u26a0\ufe0f Warning: 3 tests failed",
        "✅ fixed test_layout — rerunning…",
        "Family: \U0001F468\u200d\U0001F469\u200d\U0001F467 and a flag \U0001F1EB\U0001F1F7",
        "Thumbs \U0001F44D\U0001F3FD from the reviewer",
        "zero\u200bwidth space kept the words apart",
    ],
    2: [
        "日本語のテキスト: 数字は１２３",
        "中文\uff1a流式输出不撕裂",  # a full-width colon
        "한국어 문장도 넓은 셀이다",
        "mixed 漢字 and ascii in one line",
    ],
    3: [
        "Cafe\u0301 and nai\u0308ve, with combining marks",
        "Zalgo-ish: a\u0300\u0301\u0302 o\u0303\u0304",
        "Arabic مرحبا and Hebrew שלום stay in order",
        "Devanagari: नमस्ते दुनिया",
    ],
}
NAMES = {1: "planner", 2: "translator", 3: "linguist"}


def visible(lines: dict[int, list[str]]) -> dict[int, list[str]]:
    """The text without invisible format characters (category Cf), in NFC (pyte composes a letter
    and its combining mark into one cell's text: the same glyph)."""
    return {sid: [unicodedata.normalize("NFC", "".join(ch for ch in line if unicodedata.category(ch) != "Cf"))
                  for line in text]
            for sid, text in lines.items()}


def _chunks(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    return [data[a:b] for a, b in itertools.pairwise(points) if b > a]


def _log_lines(cuts: list[int]) -> dict[int, list[str]]:
    out = io.BytesIO()
    with LogRenderer(Writer(out), TermCaps(is_tty=False)) as display:
        for sid, lines in TRANSCRIPTS.items():
            for chunk in _chunks("".join(line + "\n" for line in lines).encode(), cuts):
                display.feed(sid, chunk, name=NAMES[sid])
    got: dict[int, list[str]] = {sid: [] for sid in TRANSCRIPTS}
    by_name = {name: sid for sid, name in NAMES.items()}
    for line in out.getvalue().decode().splitlines():
        name, sep, text = line.partition(" | ")
        if sep and name.strip() in by_name:
            got[by_name[name.strip()]].append(text)
    return got


def _pane_lines(cuts: list[int]) -> dict[int, list[str]]:
    out = io.BytesIO()
    caps = TermCaps(is_tty=True, columns=150, rows=20, colour=True)
    display = PaneRenderer(Writer(out), caps, keys=False)
    with display:
        for sid, lines in TRANSCRIPTS.items():
            for chunk in _chunks("".join(line + "\n" for line in lines).encode(), cuts):
                display.feed(sid, chunk, name=NAMES[sid])
        display.flush()
        rects = display.pane_rects()
        assert rects is not None
    data = out.getvalue()
    screen = _FastScreen(caps.columns, caps.rows)
    pyte.ByteStream(screen).feed(data[:data.rfind(b"\x1b[?1049l")])
    got: dict[int, list[str]] = {}
    for sid, r in rects.items():
        rows = []
        for y in range(r.y, r.y + r.h):
            line = screen.buffer[y]
            rows.append("".join(line[x].data for x in range(r.x, r.x + r.w)).rstrip(" "))
        got[sid] = [row for row in rows if row]
    return got


def test_every_pane_shows_what_log_mode_prints() -> None:
    logged = _log_lines([])
    assert logged == TRANSCRIPTS  # log mode keeps every character
    assert visible(_pane_lines([])) == visible(logged)


@settings(max_examples=15, deadline=None)
@given(cuts=st.lists(st.integers(0, 2000), max_size=12))
def test_chunk_boundaries_change_nothing(cuts: list[int]) -> None:
    """Chunks cut anywhere (inside a UTF-8 sequence, between a letter and its mark) read the same."""
    logged = _log_lines(cuts)
    assert logged == TRANSCRIPTS
    assert visible(_pane_lines(cuts)) == visible(logged)
