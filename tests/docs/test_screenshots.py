"""docs/screenshots/make_screenshots.py: tmux's screen replayed into pyte, and cells drawn to pixels."""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from pathlib import Path
from types import ModuleType

import pyte
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("PIL", reason="Pillow renders the screenshots; install it with pip install 'flowplex[docs]'")

SCRIPT = Path(__file__).resolve().parents[2] / "docs" / "screenshots" / "make_screenshots.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("make_screenshots", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


ms = _load()
try:
    FONTS = ms.Fonts.load()
except SystemExit as exc:  # no DejaVu Sans Mono nor Liberation Mono on this machine
    pytest.skip(str(exc), allow_module_level=True)


def screen_of(text: str, columns: int = 16, rows: int = 3) -> pyte.Screen:
    screen = ms.ReplayScreen(columns, rows)
    pyte.Stream(screen).feed(text)
    return screen


def pixel(image: object, x: int, y: int) -> tuple[int, int, int]:
    return image.getpixel((x, y))  # type: ignore[attr-defined, no-any-return]


def test_the_image_is_the_screen_in_cells_of_8_pixels() -> None:
    image = ms.render(screen_of("hi", 12, 3), FONTS)
    assert FONTS.cell_width == 8 and 14 <= FONTS.cell_height <= 18
    assert image.size == (12 * FONTS.cell_width, 3 * FONTS.cell_height)
    double = ms.Fonts.load(scale=2)
    assert double.cell_width == 16 and ms.render(screen_of("hi", 12, 3), double).size == (192, 3 * double.cell_height)


def test_colours_reach_the_pixels() -> None:
    theme = ms.DARK
    cw, ch = FONTS.cell_width, FONTS.cell_height
    # red block, 256-colour block, truecolour background, reverse video of the default colours, blue twice
    screen = screen_of("\x1b[31m█\x1b[38;5;196m█\x1b[0;48;2;1;2;3m \x1b[0;7m \x1b[0;34m█\x1b[38;5;4m█", 8, 1)
    image = ms.render(screen, FONTS)
    mid = ch // 2
    assert pixel(image, cw // 2, mid) == theme.ansi[1]
    assert pixel(image, cw + cw // 2, mid) == (255, 0, 0)
    assert pixel(image, 2 * cw + cw // 2, mid) == (1, 2, 3)
    assert pixel(image, 3 * cw + cw // 2, mid) == theme.foreground
    assert pixel(image, 4 * cw + cw // 2, mid) == pixel(image, 5 * cw + cw // 2, mid) == theme.ansi[4]
    assert pixel(image, 7 * cw, mid) == theme.background


# Box-drawing characters with light arms to both sides, and to both ends.
ACROSS = [c for c in map(chr, range(0x2500, 0x2580))
          if (g := ms.box_glyph(c)) and not g.dashes and g.arms.get("L") == 1 and g.arms.get("R") == 1]
ALONG = [c for c in map(chr, range(0x2500, 0x2580))
         if (g := ms.box_glyph(c)) and not g.dashes and g.arms.get("U") == 1 and g.arms.get("D") == 1]


def test_box_drawing_is_read_from_unicode_names() -> None:
    assert ms.box_glyph("┏").arms == {"D": 2, "R": 2}
    assert ms.box_glyph("┽").arms == {"L": 2, "R": 1, "U": 1, "D": 1}
    assert ms.box_glyph("╒").arms == {"D": 1, "R": 3}
    assert ms.box_glyph("┄").dashes == 3 and ms.box_glyph("┄").arms == {"L": 1, "R": 1}
    assert ms.box_glyph("╭").arc and ms.box_glyph("\u2573").diagonal == "X"
    assert ms.box_glyph("a") is None and ms.box_glyph("█") is None
    assert {"─", "┬", "┴", "┼"} <= set(ACROSS) and {"│", "├", "┤", "┼"} <= set(ALONG)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.sampled_from(ACROSS), min_size=2, max_size=8),
       st.lists(st.sampled_from(ALONG), min_size=2, max_size=5))
def test_box_lines_connect_across_cells(row: list[str], column: list[str]) -> None:
    text = "".join(row) + "".join(f"\x1b[{y + 2};1H{c}" for y, c in enumerate(column))
    image = ms.render(screen_of(text, len(row), len(column) + 1), FONTS)
    fg, cw, ch = ms.DARK.foreground, FONTS.cell_width, FONTS.cell_height
    # one unbroken line through the middle of the row, from edge to edge
    assert {pixel(image, x, ch // 2) for x in range(len(row) * cw)} == {fg}
    # and down the middle of the column below it, from edge to edge
    assert {pixel(image, cw // 2, y) for y in range(ch, (len(column) + 1) * ch)} == {fg}


def test_a_frame_closes_at_its_corners() -> None:
    from PIL import ImageDraw  # after the importorskip above

    for frame in ("┌──┐\r\n│  │\r\n└──┘", "┏━━┓\r\n┃  ┃\r\n┗━━┛", "╔══╗\r\n║  ║\r\n╚══╝", "╭──╮\r\n│  │\r\n╰──╯"):
        image = ms.render(screen_of(frame, 4, 3), FONTS)
        # Flood the inside from the middle: it must not leak out to the image's corner.
        inside = (2 * FONTS.cell_width, FONTS.cell_height + FONTS.cell_height // 2)
        ImageDraw.floodfill(image, inside, (1, 254, 1))
        assert pixel(image, 0, 0) != (1, 254, 1), frame
        assert pixel(image, image.width - 1, image.height - 1) != (1, 254, 1), frame


def test_wide_and_zero_width_characters_keep_their_cells() -> None:
    screen = screen_of("中x\r\n\u26a0\ufe0f Warning: 3 tests failed\r\n👨\u200d👩\u200d👧 ok e\u0301", 30, 3)
    assert [screen.buffer[0][x].data for x in range(3)] == ["中", "", "x"]
    # pyte's own draw stops at U+FE0F and at a ZWJ; the replay keeps them with the cell before
    assert ms.screen_text(screen)[1] == "\u26a0\ufe0f Warning: 3 tests failed"
    assert ms.screen_text(screen)[2] == "👨\u200d👩\u200d👧 ok e\u0301"  # as tmux keeps them: not composed
    image = ms.render(screen, FONTS)  # glyphs the fonts lack are drawn as the font's box, no crash
    cw, ch = FONTS.cell_width, FONTS.cell_height
    ink = {x for x in range(4 * cw) for y in range(ch) if pixel(image, x, y) != ms.DARK.background}
    assert ink and max(ink) < 3 * cw  # 中 and x: three cells, nothing past them


def test_a_full_row_does_not_wrap_into_the_next_one() -> None:
    captured = "\x1b[32m" + "a" * 10 + "\nb\n\x1b[0mc"
    screen = ms.replay(captured, 10, 3)
    assert ms.screen_text(screen) == ["a" * 10, "b", "c"]
    assert screen.buffer[1][0].fg == "green" and screen.buffer[2][0].fg == "default"  # SGR carries over rows


def _cmdline(process: Path) -> bytes:
    try:
        return (process / "cmdline").read_bytes()
    except OSError:  # ended meanwhile, or not ours to read
        return b""


@pytest.fixture
def tmux_installed() -> None:
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed: the screenshots are taken from tmux's screen")


def test_a_shot_is_taken_from_tmux_and_the_server_is_gone(tmux_installed: None) -> None:
    program = "print('\\x1b[1;31mred\\x1b[0m 中 ┌─┐'); import time; time.sleep(20)"
    run = ms.Run(20, 4, (sys.executable, "-c", program),
                 (ms.Capture("t", lambda lines: "┐" in lines[0], 0.0),))
    screen = ms.take(run)["t"]
    assert ms.screen_text(screen) == ["red 中 ┌─┐", "", "", ""]
    assert (screen.buffer[0][0].fg, screen.buffer[0][0].bold) == ("red", True)
    assert screen.buffer[0][3].fg == "default" and screen.buffer[0][5].data == ""
    name = f"flowplex-shots-{os.getpid()}"
    servers = [p for p in Path("/proc").glob("[0-9]*") if name.encode() in _cmdline(p)]
    assert servers == []
    assert not (Path(os.environ.get("TMUX_TMPDIR", "/tmp")) / f"tmux-{os.getuid()}" / name).exists()


def test_a_screen_that_never_gets_ready_says_what_it_showed(tmux_installed: None) -> None:
    run = ms.Run(30, 3, (sys.executable, "-c", "print('Traceback: boom'); import time; time.sleep(20)"),
                 (ms.Capture("never", lambda lines: False, 0.0),))
    with pytest.raises(SystemExit, match=r"(?s)never: the screen was not ready after 1 s; it showed:\nTraceback: boom"):
        ms.take(run, timeout_s=1.0)


def test_shots_are_chosen_by_name() -> None:
    live = ms.Live(Path("/nonexistent/runtime"))  # nothing starts until a run's `around` is entered
    runs = [*ms.runs(6.0), *ms.live_runs(live)]
    chosen = ms.select(runs, ["zoom-160x50", "echo-100x16"])
    assert [[c.name for c in r.captures] for r in chosen] == [["zoom-160x50"], ["echo-100x16"]]
    assert chosen[1].around is not None and ("FLOWPLEX_RUNTIME_DIR", "/nonexistent/runtime") in chosen[1].env
    assert ms.select(runs, None) == runs
    with pytest.raises(SystemExit, match=r"no shot named nope \(the shots: panes-160x50, .*attach-120x36\)"):
        ms.select(runs, ["nope"])


def test_a_live_shot_stops_what_it_started(tmp_path: Path) -> None:
    if shutil.which("bash") is None:
        pytest.skip("bash is not installed: the live shots type their commands into bash")
    runtime = tmp_path / "rt"
    live = ms.Live(runtime)
    with live.graph():
        (info,) = live.live()
        assert info["name"] == "pipeline" and info["state"] == "RUNNING"
        assert (runtime / "shots.bashrc").is_file() and (runtime / "pipeline.sock").exists()
        assert live._ours(int(info["pid"])) and not live._ours(os.getpid())
    assert not ms._alive(int(info["pid"])) or _zombie(int(info["pid"]))
    assert not live._ours(int(info["pid"])) and not runtime.exists()


def _zombie(pid: int) -> bool:
    """Ended, and not yet reaped by its parent (a detached graph's parent is init)."""
    try:
        return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True
