"""Text after a zero-width character survives in panes mode (issue 16, "Text that survives").

pyte 0.8's ``Screen.draw`` stopped at the first zero-width character that is not a combining
mark: ``print("\\u26a0\\ufe0f Warning: 3 tests failed")`` showed only the sign. The pane's screen
(``terminal._vt``) now draws the runs between such characters and folds each into the cell
before it. These tests read the real pyte screen's cells, as the renderer does.
"""

from __future__ import annotations

import unicodedata

from hypothesis import given
from hypothesis import strategies as st
from wcwidth import wcswidth

from flowplex.terminal._vt import VirtualTerminal

FAMILY = "\U0001F468\u200d\U0001F469\u200d\U0001F467"


def screen_lines(*lines: str, columns: int = 60) -> list[str]:
    """What a pane of ``columns`` shows for ``lines`` (each cell's text; wide stubs dropped)."""
    vt = VirtualTerminal(columns, len(lines) + 1, newline_mode=True)
    vt.feed("\n".join(lines).encode())
    return ["".join(cell.data for cell in vt.row(y)).rstrip(" ") for y in range(len(lines))]


def test_the_text_after_an_emoji_presentation_selector_is_kept_and_the_sign_is_wide() -> None:
    vt = VirtualTerminal(40, 2, newline_mode=True)
    vt.feed("\u26a0\ufe0f Warning: 3 tests failed".encode())
    cells = vt.row(0)
    assert cells[0].data == "\u26a0\ufe0f" and cells[1].data == ""  # two cells, as wcwidth says
    assert "".join(c.data for c in cells).rstrip() == "\u26a0\ufe0f Warning: 3 tests failed"


def test_zwj_sequences_are_one_wide_cell_and_invisible_format_characters_are_dropped() -> None:
    assert screen_lines(f"family {FAMILY} end", "zero\u200bwidth space", "caf\u0065\u0301 \u4e2d\u6587 ok") == [
        f"family {FAMILY} end", "zerowidth space", "caf\u00e9 \u4e2d\u6587 ok"]
    vt = VirtualTerminal(30, 2, newline_mode=True)
    vt.feed(f"{FAMILY}x".encode())
    cells = vt.row(0)
    assert (cells[0].data, cells[1].data, cells[2].data) == (FAMILY, "", "x")
    assert wcswidth(FAMILY) == 2


TOKENS = st.sampled_from([
    "word", "Tests", " ", "42", "\u4e2d", "\u6587", "\U0001F600", "\U0001F44D\ufe0f", "\u26a0\ufe0f", "\u2764\ufe0f",
    FAMILY, "\U0001F469\u200d\U0001F4BB", "e\u0301", "n\u0303", "\u200b", "\u2060",
])


@given(st.lists(TOKENS, min_size=1, max_size=12).map("".join))
def test_llm_like_text_keeps_every_visible_character_in_order(text: str) -> None:
    """Emoji (with selectors and joiners), CJK, combining marks and invisible format characters:
    the pane shows the text without the invisible ones, in order, every cell as wide as its text."""
    vt = VirtualTerminal(200, 2, newline_mode=True)
    vt.feed(text.encode())
    cells = vt.row(0)
    shown = "".join(c.data for c in cells).rstrip(" ")
    visible = "".join(ch for ch in text if ch not in "\u200b\u2060")
    assert unicodedata.normalize("NFC", shown) == unicodedata.normalize("NFC", visible.rstrip(" "))
    for i, cell in enumerate(cells):
        if cell.data and not cell.data.isascii():
            assert wcswidth(cell.data) in (1, 2)
            if wcswidth(cell.data) == 2:
                assert cells[i + 1].data == ""
