#!/usr/bin/env python3
"""Screenshots of flowplex's agent terminal and live-graph commands for the docs, taken from a
real terminal's screen.

Each shot runs a program (``flowplex demo``, or a shell that types ``flowplex top``, ``echo`` or
``attach``, from this checkout's ``src/``) inside tmux on a private socket, waits for the screen
to be ready, and reads tmux's screen back with
``capture-pane -e`` (cells with their colours and attributes). The captured rows are replayed
into a ``pyte`` screen of the same size and its cells are drawn to a PNG with Pillow, cell by
cell: glyphs from a monospace TTF, box drawing and block elements drawn as lines and rectangles
so that borders connect, wide characters over two cells.

    python docs/screenshots/make_screenshots.py [--out docs/screenshots] [--scale 2] [--only NAME]...

The live shots (``top-100x16``, ``echo-100x16``, ``attach-120x36``) first start a detached graph
or a background agents server in a private runtime directory (``FLOWPLEX_RUNTIME_DIR``), and
stop everything in it, and remove it, once the shot is taken.

Needs tmux, bash, pyte and Pillow (``pip install 'flowplex[docs]'``). A docs tool, not part of the package.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unicodedata
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path
from typing import Any, Final

import pyte
from wcwidth import wcwidth

try:
    from PIL import Image, ImageDraw, ImageFont
except ImportError as exc:  # a docs-only dependency: say how to get it
    _msg = "make_screenshots.py needs Pillow: pip install 'flowplex[docs]' (or pip install pillow)"
    raise SystemExit(_msg) from exc

RGB = tuple[int, int, int]
Font = ImageFont.FreeTypeFont

HERE: Final = Path(__file__).resolve().parent
REPO: Final = HERE.parents[1]
CLI: Final = ("-c", "from flowplex.cli import main; main()")  # the package has no __main__ module
FONT_DIRS: Final = (Path("/usr/share/fonts"), Path("/usr/local/share/fonts"), Path.home() / ".fonts",
                    Path.home() / ".local/share/fonts", Path("/Library/Fonts"), Path("/System/Library/Fonts"))
# Monospace families in order of preference: file names of the regular, bold, italic and bold italic faces.
MONO_FAMILIES: Final = (
    ("DejaVuSansMono.ttf", "DejaVuSansMono-Bold.ttf", "DejaVuSansMono-Oblique.ttf", "DejaVuSansMono-BoldOblique.ttf"),
    ("LiberationMono-Regular.ttf", "LiberationMono-Bold.ttf", "LiberationMono-Italic.ttf",
     "LiberationMono-BoldItalic.ttf"),
)
# Fonts asked for a glyph the monospace face lacks (CJK, symbols, emoji outlines), where installed.
FALLBACK_FONTS: Final = ("DejaVuSans.ttf", "NotoSansMonoCJKsc-Regular.otf", "NotoSansCJK-Regular.ttc",
                         "wqy-zenhei.ttc", "DroidSansFallbackFull.ttf", "NotoSansSymbols2-Regular.ttf", "Symbola.ttf")


# --------------------------------------------------------------------------------------------
# Theme


@dataclass(frozen=True)
class Theme:
    """Default colours and the 16 ANSI colours; the 256-colour cube and truecolour come from pyte as hex."""

    background: RGB
    foreground: RGB
    ansi: tuple[RGB, ...]


def _hex(value: str) -> RGB:
    return int(value[0:2], 16), int(value[2:4], 16), int(value[4:6], 16)


_XTERM: Final = tuple(pyte.graphics.FG_BG_256)  # what pyte gives ``38;5;N``, as six hex digits
# xterm's 16 colours, except blue: xterm's 0000ee is hard to read on a dark background.
DARK: Final = Theme(
    background=(0x16, 0x16, 0x16),
    foreground=(0xE5, 0xE5, 0xE5),
    ansi=tuple((0x3B, 0x6E, 0xF5) if i == 4 else _hex(v) for i, v in enumerate(_XTERM[:16])),
)
_ANSI_NAMES: Final = ("black", "red", "green", "brown", "blue", "magenta", "cyan", "white")
_NAMED: Final = {
    **{name: i for i, name in enumerate(_ANSI_NAMES)},
    **{"bright" + name: i + 8 for i, name in enumerate(_ANSI_NAMES)},
    "yellow": 3, "brightyellow": 11,  # newer pyte names
    # ``38;5;0`` .. ``38;5;15`` reach us as xterm's hex values: map them back to the theme, so a
    # colour looks the same whichever way a program asked for it (not the values the cube shares).
    **{value: i for i, value in enumerate(_XTERM[:16]) if value not in _XTERM[16:]},
}


def resolve(value: str, default: RGB, theme: Theme) -> RGB:
    """pyte's colour (``default``, an ANSI name such as ``brightred``, or six hex digits) as RGB.

    >>> resolve("brightred", (0, 0, 0), DARK), resolve("0a0b0c", (0, 0, 0), DARK), resolve("default", (1, 2, 3), DARK)
    ((255, 0, 0), (10, 11, 12), (1, 2, 3))
    """
    index = _NAMED.get(value)
    if index is not None:
        return theme.ansi[index]
    if len(value) == 6:
        try:
            return _hex(value)
        except ValueError:
            pass
    return default


# --------------------------------------------------------------------------------------------
# Fonts


def find_font(name: str) -> Path | None:
    """The first file called ``name`` under the usual font folders, or None."""
    for folder in FONT_DIRS:
        if folder.is_dir():
            for path in sorted(folder.rglob(name)):
                return path
    return None


@dataclass
class Fonts:
    """The faces one rendering uses, the cell size they give, and which face draws each character."""

    faces: dict[tuple[bool, bool], Font]  # (bold, italic) -> face
    fallbacks: list[Font]
    cell_width: int
    cell_height: int
    ascent: int
    _choice: dict[tuple[str, bool, bool], Font] = field(default_factory=dict)

    @classmethod
    def load(cls, *, scale: int = 1, font: Path | None = None) -> Fonts:
        """Load a monospace family sized for 8 px wide cells (times ``scale``); ``font`` overrides the family."""
        if font is not None:
            paths: list[Path | None] = [font, None, None, None]
        else:
            for family in MONO_FAMILIES:
                paths = [find_font(name) for name in family]
                if paths[0] is not None:
                    break
            else:
                looked, under = ", ".join(f[0] for f in MONO_FAMILIES), ", ".join(map(str, FONT_DIRS))
                msg = f"no monospace font found (looked for {looked} under {under}); pass --font"
                raise SystemExit(msg)
        regular = paths[0]
        assert regular is not None
        # Size the font so one advance is 8 px per scale: 13.3 pt for DejaVu Sans Mono.
        probe = ImageFont.truetype(str(regular), 100)
        size = 8 * scale * 100 / probe.getlength("M")
        base = ImageFont.truetype(str(regular), size)

        def face(path: Path | None, fallback: Font) -> Font:
            return ImageFont.truetype(str(path), size) if path is not None else fallback

        bold = face(paths[1], base)
        faces = {(False, False): base, (True, False): bold, (False, True): face(paths[2], base),
                 (True, True): face(paths[3], bold)}
        fallbacks = [ImageFont.truetype(str(p), size) for p in map(find_font, FALLBACK_FONTS) if p is not None]
        ascent, descent = base.getmetrics()
        return cls(faces, fallbacks, round(base.getlength("M")), ascent + descent, ascent)

    def face_for(self, text: str, bold: bool, italic: bool) -> Font:
        """The styled face if it has the glyph, else the first fallback that has it, else the styled face (tofu)."""
        key = (text, bold, italic)
        chosen = self._choice.get(key)
        if chosen is None:
            styled = self.faces[bold, italic]
            chosen = next((f for f in (styled, *self.fallbacks) if has_glyph(f, text[0])), styled)
            self._choice[key] = chosen
        return chosen


def has_glyph(font: Font, ch: str) -> bool:
    """Whether ``font`` draws ``ch`` as something other than its 'missing glyph' box.

    Pillow has no cmap lookup, so the glyph is compared with what the font draws for a code
    point no font maps (the last private-use one).
    """
    if ch.isspace():
        return True
    return _bitmap(font, ch) != _bitmap(font, "\U0010fffd")


@cache
def _bitmap(font: Font, ch: str) -> tuple[tuple[int, int], bytes]:
    mask = font.getmask(ch)
    return mask.size, bytes(mask)


# --------------------------------------------------------------------------------------------
# Box drawing and block elements, drawn as shapes so that neighbouring cells connect exactly

_WEIGHTS: Final = {"LIGHT": 1, "SINGLE": 1, "HEAVY": 2, "DOUBLE": 3}
_ARMS: Final = {"UP": "U", "DOWN": "D", "LEFT": "L", "RIGHT": "R", "VERTICAL": "UD", "HORIZONTAL": "LR"}
_DASHES: Final = (("DOUBLE DASH ", 2), ("TRIPLE DASH ", 3), ("QUADRUPLE DASH ", 4))


@dataclass(frozen=True)
class BoxGlyph:
    """A box-drawing character as arms from the cell's centre: weight 1 light, 2 heavy, 3 double."""

    arms: dict[str, int]
    dashes: int = 0
    arc: bool = False
    diagonal: str = ""  # "/", "\\" or "X"


@cache
def box_glyph(ch: str) -> BoxGlyph | None:
    """U+2500..U+257F read from the character's Unicode name (``BOX DRAWINGS DOWN LIGHT AND RIGHT HEAVY``)."""
    name = unicodedata.name(ch, "")
    if not name.startswith("BOX DRAWINGS "):
        return None
    words = name.removeprefix("BOX DRAWINGS ")
    if "DIAGONAL" in words:
        kind = "X" if "CROSS" in words else ("/" if "UPPER RIGHT" in words else "\\")
        return BoxGlyph({}, diagonal=kind)
    dashes = 0
    for phrase, count in _DASHES:  # before the weights: "DOUBLE DASH" is not a double line
        if phrase in words:
            dashes, words = count, words.replace(phrase, "")
    arc = "ARC " in words
    parts: list[tuple[str, int | None]] = []
    for part in words.replace("ARC ", "").split(" AND "):
        tokens = part.split()
        weight = next((_WEIGHTS[t] for t in tokens if t in _WEIGHTS), None)
        parts.append(("".join(_ARMS[t] for t in tokens if t in _ARMS), weight))
    # "LIGHT DOWN AND RIGHT": a part without its own weight takes the one given elsewhere.
    default = next((w for _, w in parts if w is not None), 1)
    arms = {arm: (w if w is not None else default) for arms, w in parts for arm in arms}
    return BoxGlyph(arms, dashes, arc)


_OPPOSITE: Final = {"U": "D", "D": "U", "L": "R", "R": "L"}
_ACROSS: Final = {"U": ("L", "R"), "D": ("L", "R"), "L": ("U", "D"), "R": ("U", "D")}


@dataclass(frozen=True)
class _Cell:
    """One cell's box on the image, with the stroke widths for its size."""

    x0: int
    y0: int
    width: int
    height: int

    @property
    def cx(self) -> int:
        return self.x0 + self.width // 2

    @property
    def cy(self) -> int:
        return self.y0 + self.height // 2

    @property
    def light(self) -> int:
        return max(1, round(self.width / 8))

    @property
    def heavy(self) -> int:
        return max(self.light + 1, round(self.width / 4))

    @property
    def gap(self) -> int:
        """Offset of each line of a double line from the centre."""
        return self.light + max(1, self.light // 2)


def _band(draw: ImageDraw.ImageDraw, cell: _Cell, arm: str, across: int, thickness: int, colour: RGB, *,
          reach: int = 0, cover: int = 1) -> None:
    """A stroke from the centre to the edge on ``arm``'s side, ``across`` px off the centre line.

    At the centre end it covers a crossing stroke ``cover`` px thick that lies ``reach`` px past
    the centre towards the arm (negative: behind it), so corners and junctions close exactly.
    """
    half = thickness // 2
    # For "L" and "U", measured the other way, the crossing stroke's far edge is its last pixel.
    begin = reach - cover // 2 if arm in "RD" else -reach - cover // 2 + cover - 1
    if arm in "LR":
        x_from = cell.cx + begin
        x_to = cell.x0 + cell.width - 1 if arm == "R" else cell.x0
        y = cell.cy + across - half
        draw.rectangle((min(x_from, x_to), y, max(x_from, x_to), y + thickness - 1), fill=colour)
    else:
        y_from = cell.cy + begin
        y_to = cell.y0 + cell.height - 1 if arm == "D" else cell.y0
        x = cell.cx + across - half
        draw.rectangle((x, min(y_from, y_to), x + thickness - 1, max(y_from, y_to)), fill=colour)


def draw_box(draw: ImageDraw.ImageDraw, cell: _Cell, glyph: BoxGlyph, colour: RGB) -> None:
    """Draw one box-drawing character into ``cell``."""
    if glyph.diagonal:
        x1, y1 = cell.x0 + cell.width - 1, cell.y0 + cell.height - 1
        if glyph.diagonal in "/X":
            draw.line((cell.x0, y1, x1, cell.y0), fill=colour, width=cell.light)
        if glyph.diagonal in "\\X":
            draw.line((cell.x0, cell.y0, x1, y1), fill=colour, width=cell.light)
        return
    if glyph.dashes:
        _draw_dashed(draw, cell, glyph, colour)
        return
    if glyph.arc:
        _draw_arc(draw, cell, "".join(glyph.arms), colour)
        return
    arms, g, light = glyph.arms, cell.gap, cell.light

    def width(weight: int) -> int:
        return cell.light if weight in (1, 3) else cell.heavy

    for arm, weight in arms.items():
        side_a, side_b = _ACROSS[arm]  # the crossing arms, the one on the negative side first
        crossing = (arms.get(side_a, 0), arms.get(side_b, 0))
        opposite = arms.get(_OPPOSITE[arm], 0)
        if weight < 3:
            if 3 in crossing:
                # Meets a double line: cross both of its lines where the stroke goes on (or the
                # double line turns here), else stop at its near line.
                reach = -g if opposite or crossing.count(3) == 1 else g
                _band(draw, cell, arm, 0, width(weight), colour, reach=reach, cover=light)
            else:
                cover = max((width(w) for w in crossing if w), default=width(weight) if not opposite else 1)
                _band(draw, cell, arm, 0, width(weight), colour, cover=cover)
            continue
        for sign, near, far in ((-1, side_a, side_b), (1, side_b, side_a)):
            if arms.get(near, 0) == 3:
                reach, cover = g, light  # inner line: ends on the crossing double's near line
            elif arms.get(near, 0):
                reach, cover = 0, width(arms[near])  # runs into a single crossing line
            elif opposite:
                reach, cover = 0, 1  # runs on into the opposite arm
            elif arms.get(far, 0) == 3:
                reach, cover = -g, light  # outer line of a double corner: ends on the far line
            else:
                reach, cover = 0, width(arms.get(far, 0) or 1)
            _band(draw, cell, arm, sign * g, light, colour, reach=reach, cover=cover)


def _draw_dashed(draw: ImageDraw.ImageDraw, cell: _Cell, glyph: BoxGlyph, colour: RGB) -> None:
    weight = max(glyph.arms.values())
    thickness = cell.light if weight == 1 else cell.heavy
    horizontal = "L" in glyph.arms
    length = cell.width if horizontal else cell.height
    step = length / glyph.dashes
    for i in range(glyph.dashes):
        a, b = round(i * step), round((i + 0.6) * step)
        if horizontal:
            y = cell.cy - thickness // 2
            draw.rectangle((cell.x0 + a, y, cell.x0 + b - 1, y + thickness - 1), fill=colour)
        else:
            x = cell.cx - thickness // 2
            draw.rectangle((x, cell.y0 + a, x + thickness - 1, cell.y0 + b - 1), fill=colour)


def _draw_arc(draw: ImageDraw.ImageDraw, cell: _Cell, arms: str, colour: RGB) -> None:
    """A rounded corner (``╭╮╯╰``): a quarter circle joined to the two edges by straight strokes."""
    r = min(cell.width, cell.height) // 2
    t = cell.light
    dx = r if "R" in arms else -r
    dy = r if "D" in arms else -r
    ox, oy = cell.cx + dx, cell.cy + dy  # the circle's centre, in the corner the arms point to
    angles = {(1, 1): (180, 270), (-1, 1): (270, 360), (-1, -1): (0, 90), (1, -1): (90, 180)}
    start, end = angles[(1 if dx > 0 else -1, 1 if dy > 0 else -1)]
    half = t // 2
    draw.arc((ox - r - half, oy - r - half, ox + r - half + t - 1, oy + r - half + t - 1), start, end,
             fill=colour, width=t)
    _band(draw, cell, "R" if dx > 0 else "L", 0, t, colour, reach=r)
    _band(draw, cell, "D" if dy > 0 else "U", 0, t, colour, reach=r)


_QUADRANTS: Final = {  # U+2596..U+259F: upper-left, upper-right, lower-left, lower-right
    "▖": "0010", "▗": "0001", "▘": "1000", "▙": "1011", "▚": "1001",
    "▛": "1110", "▜": "1101", "▝": "0100", "▞": "0110", "▟": "0111",
}


def _blend(fg: RGB, bg: RGB, alpha: float) -> RGB:
    r, g, b = (round(f * alpha + k * (1 - alpha)) for f, k in zip(fg, bg, strict=True))
    return r, g, b


def draw_block(draw: ImageDraw.ImageDraw, cell: _Cell, ch: str, fg: RGB, bg: RGB) -> bool:
    """Draw a block element (U+2580..U+259F) exactly on the cell's pixels; False when ``ch`` is not one."""
    cp = ord(ch)
    x0, y0, w, h = cell.x0, cell.y0, cell.width, cell.height
    x1, y1 = x0 + w, y0 + h  # exclusive

    def fill(left: int, top: int, right: int, bottom: int, colour: RGB = fg) -> None:
        if right > left and bottom > top:
            draw.rectangle((left, top, right - 1, bottom - 1), fill=colour)

    if cp == 0x2580:
        fill(x0, y0, x1, y0 + h // 2)
    elif 0x2581 <= cp <= 0x2588:  # lower one eighth .. full block
        fill(x0, y1 - round(h * (cp - 0x2580) / 8), x1, y1)
    elif 0x2589 <= cp <= 0x258F:  # left seven eighths .. left one eighth
        fill(x0, y0, x0 + round(w * (0x2590 - cp) / 8), y1)
    elif cp == 0x2590:
        fill(x0 + w // 2, y0, x1, y1)
    elif 0x2591 <= cp <= 0x2593:  # light, medium, dark shade: the colours mixed
        fill(x0, y0, x1, y1, _blend(fg, bg, (cp - 0x2590) / 4))
    elif cp == 0x2594:
        fill(x0, y0, x1, y0 + round(h / 8))
    elif cp == 0x2595:
        fill(x1 - round(w / 8), y0, x1, y1)
    elif ch in _QUADRANTS:
        mx, my = x0 + w // 2, y0 + h // 2
        boxes = ((x0, y0, mx, my), (mx, y0, x1, my), (x0, my, mx, y1), (mx, my, x1, y1))
        for on, box in zip(_QUADRANTS[ch], boxes, strict=True):
            if on == "1":
                fill(*box)
    else:
        return False
    return True


# --------------------------------------------------------------------------------------------
# Cells -> PNG


def render(screen: pyte.Screen, fonts: Fonts, theme: Theme = DARK) -> Image.Image:
    """The screen's cells as an RGB image of ``columns x cell_width`` by ``lines x cell_height`` pixels."""
    cw, chh = fonts.cell_width, fonts.cell_height
    image = Image.new("RGB", (screen.columns * cw, screen.lines * chh), theme.background)
    draw = ImageDraw.Draw(image)
    masks: dict[tuple[str, bool, bool, int], Image.Image] = {}
    for y in range(screen.lines):
        line = screen.buffer[y]
        x = 0
        while x < screen.columns:
            char: Any = line[x]
            text: str = char.data
            span = 2 if text and wcwidth(text[0]) == 2 and x + 1 < screen.columns else 1
            fg = resolve(char.fg, theme.foreground, theme)
            bg = resolve(char.bg, theme.background, theme)
            if char.reverse:
                fg, bg = bg, fg
            cell = _Cell(x * cw, y * chh, span * cw, chh)
            if bg != theme.background:
                draw.rectangle((cell.x0, cell.y0, cell.x0 + cell.width - 1, cell.y0 + chh - 1), fill=bg)
            if text and not text.isspace():
                glyph = box_glyph(text) if len(text) == 1 else None
                if glyph is not None:
                    draw_box(draw, cell, glyph, fg)
                elif not (len(text) == 1 and draw_block(draw, cell, text, fg, bg)):
                    key = (text, bool(char.bold), bool(char.italics), span)
                    mask = masks.get(key)
                    if mask is None:
                        mask = masks[key] = _glyph_mask(text, fonts, key[1], key[2], cell.width)
                    image.paste(fg, (cell.x0, cell.y0, cell.x0 + cell.width, cell.y0 + chh), mask)
            if char.underscore:
                _rule(draw, cell, min(chh - 1, fonts.ascent + 1), fg)
            if char.strikethrough:
                _rule(draw, cell, chh // 2, fg)
            x += span
    return image


def _rule(draw: ImageDraw.ImageDraw, cell: _Cell, y: int, colour: RGB) -> None:
    """A line across the whole cell ``y`` px below its top (underline, strikethrough)."""
    top = cell.y0 + y
    draw.rectangle((cell.x0, top, cell.x0 + cell.width - 1, top + cell.light - 1), fill=colour)


def _glyph_mask(text: str, fonts: Fonts, bold: bool, italic: bool, width: int) -> Image.Image:
    """The text's coverage in a cell-sized mask, on the primary face's baseline, clipped to the cell."""
    font = fonts.face_for(text, bold, italic)
    advance = font.getlength(text)
    if advance > width * 1.15:  # a fallback face wider than the cells: shrink to fit, as terminals do
        font = font.font_variant(size=font.size * width / advance)
        advance = font.getlength(text)
    mask = Image.new("L", (width, fonts.cell_height), 0)
    ImageDraw.Draw(mask).text(((width - advance) / 2, fonts.ascent), text, font=font, fill=255, anchor="ls")
    return mask


# --------------------------------------------------------------------------------------------
# tmux -> cells


class ReplayScreen(pyte.Screen):
    """A pyte screen that keeps zero-width code points (U+FE0F, ZWJ, U+200B) with the previous cell.

    pyte 0.8's ``draw`` stops at any zero-width character that is not a combining mark, which
    would drop the rest of the row; tmux keeps them with the previous cell, and so do we.
    """

    def draw(self, data: str) -> None:
        run: list[str] = []
        for ch in data:
            if wcwidth(ch) > 0:
                run.append(ch)
                continue
            if run:
                super().draw("".join(run))
                run.clear()
            if wcwidth(ch) == 0:
                self._join(ch)
        if run:
            super().draw("".join(run))

    def _join(self, ch: str) -> None:
        x, y = self.cursor.x, self.cursor.y
        if x == 0:
            if y == 0:
                return
            x, y = self.columns, y - 1
        line = self.buffer[y]
        x -= 1
        if x > 0 and line[x].data == "":  # the right half of a wide character
            x -= 1
        line[x] = line[x]._replace(data=line[x].data + ch)


def replay(captured: str, columns: int, rows: int) -> ReplayScreen:
    """``capture-pane -p -e -N`` output (one line per row, SGR escapes) as a pyte screen of that size.

    Each row is addressed with a cursor move, so a row as wide as the screen never wraps into
    the next; the SGR state carries over from row to row, as it does when tmux writes it out.
    """
    screen = ReplayScreen(columns, rows)
    stream = pyte.Stream(screen)
    for y, row in enumerate(captured.split("\n")[:rows]):
        stream.feed(f"\x1b[{y + 1};1H{row}")
    return screen


def screen_text(screen: pyte.Screen) -> list[str]:
    """The screen's rows as plain text (trailing spaces dropped)."""
    return ["".join(screen.buffer[y][x].data for x in range(screen.columns)).rstrip() for y in range(screen.lines)]


@dataclass(frozen=True)
class Capture:
    """One screenshot in a run: wait for ``before`` (if any), send keys, then wait for ``ready``
    and ``after_s``."""

    name: str
    ready: Callable[[list[str]], bool]
    after_s: float
    keys: tuple[str, ...] = ()
    before: Callable[[list[str]], bool] | None = None


@dataclass(frozen=True)
class Run:
    """One program (its full argv) in one terminal size, and the shots taken from it in order."""

    columns: int
    rows: int
    argv: tuple[str, ...]
    captures: tuple[Capture, ...]
    env: tuple[tuple[str, str], ...] = ()
    """Variables the program gets besides the terminal's and ``PYTHONPATH``."""
    around: Callable[[], AbstractContextManager[object]] | None = None
    """What must run beside the program (a live graph): entered before the run, left after it."""


class Tmux:
    """A tmux server on a private socket, with one session; ``close`` kills the server."""

    def __init__(self, socket: str) -> None:
        self.base = ["tmux", "-u", "-L", socket, "-f", "/dev/null"]
        self.socket_path: Path | None = None
        self.server_pid = 0
        self.env = {k: v for k, v in os.environ.items() if k != "TMUX"}  # may run inside the user's tmux

    def __call__(self, *args: str) -> str:
        proc = subprocess.run([*self.base, *args], capture_output=True, text=True, timeout=15, env=self.env)
        if proc.returncode != 0:
            msg = f"tmux {' '.join(args[:1])} failed ({proc.returncode}): {proc.stderr.strip()}"
            raise RuntimeError(msg)
        return proc.stdout

    def start(self, columns: int, rows: int, command: str) -> None:
        # Options before the session exists, so the program sees its full size from its first byte:
        # no status line (the whole window is the program's), and the pane kept if it exits early.
        self("start-server", ";", "set-option", "-g", "status", "off", ";", "set-option", "-g",
             "remain-on-exit", "on", ";", "new-session", "-d", "-x", str(columns), "-y", str(rows),
             "-s", "shots", command)
        path, pid = self("display-message", "-p", "#{socket_path} #{pid}").rsplit(maxsplit=1)
        self.socket_path, self.server_pid = Path(path), int(pid)

    def text(self) -> list[str]:
        return self("capture-pane", "-p", "-t", "shots").split("\n")

    def cells(self) -> str:
        return self("capture-pane", "-p", "-e", "-N", "-t", "shots")

    def close(self) -> None:
        subprocess.run([*self.base, "kill-server"], capture_output=True, timeout=15, env=self.env)
        deadline = time.monotonic() + 5
        while self.server_pid and _alive(self.server_pid) and time.monotonic() < deadline:
            time.sleep(0.02)
        # tmux 3.3 leaves its socket file behind; remove it once the server is gone (not before:
        # a server without its socket could no longer be reached, nor killed by name).
        if self.socket_path is not None and not (self.server_pid and _alive(self.server_pid)):
            self.socket_path.unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _pythonpath() -> str:
    """``PYTHONPATH`` with this checkout's ``src/`` first."""
    return os.pathsep.join(p for p in (str(REPO / "src"), os.environ.get("PYTHONPATH", "")) if p)


def pane_command(argv: Sequence[str], env: Iterable[tuple[str, str]] = ()) -> str:
    """The shell command tmux runs: ``argv`` in a UTF-8 xterm, importing this checkout's flowplex."""
    assignments = ["env", "-u", "NO_COLOR", "TERM=xterm-256color", "LANG=C.UTF-8", "LC_ALL=C.UTF-8",
                   "COLORTERM=truecolor", f"PYTHONPATH={_pythonpath()}", *(f"{k}={v}" for k, v in env)]
    return shlex.join([*assignments, *argv])


def take(run: Run, *, timeout_s: float = 30.0) -> dict[str, ReplayScreen]:
    """Run ``run.argv`` in tmux and return each capture's screen, by name."""
    if shutil.which("tmux") is None:
        msg = "tmux is not installed: the screenshots are taken from tmux's screen (apt-get install tmux)"
        raise SystemExit(msg)
    tmux = Tmux(f"flowplex-shots-{os.getpid()}")
    shots: dict[str, ReplayScreen] = {}
    try:
        tmux.start(run.columns, run.rows, pane_command(run.argv, run.env))
        for capture in run.captures:
            if capture.before is not None:
                _wait(tmux, capture.name, capture.before, timeout_s)
            for key in capture.keys:
                tmux("send-keys", "-t", "shots", key)
            start = time.monotonic()
            lines = tmux.text()
            while not (capture.ready(lines) and time.monotonic() - start >= capture.after_s):
                if time.monotonic() - start > timeout_s:
                    screen = "\n".join(lines).rstrip()
                    msg = f"{capture.name}: the screen was not ready after {timeout_s:.0f} s; it showed:\n{screen}"
                    raise SystemExit(msg)
                time.sleep(0.1)
                lines = tmux.text()
            shots[capture.name] = replay(tmux.cells(), run.columns, run.rows)
    finally:
        tmux.close()
    return shots


def _wait(tmux: Tmux, name: str, ready: Callable[[list[str]], bool], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not ready(tmux.text()):
        if time.monotonic() > deadline:
            screen = "\n".join(tmux.text()).rstrip()
            msg = f"{name}: the screen was not ready after {timeout_s:.0f} s; it showed:\n{screen}"
            raise SystemExit(msg)
        time.sleep(0.1)


def _shows(*, status: Sequence[str], top: str = "") -> Callable[[list[str]], bool]:
    """Ready when the status line (the last non-empty row) shows each word and the top row shows ``top``."""

    def ready(lines: list[str]) -> bool:
        rows = [line for line in lines if line.strip()]
        return bool(rows) and all(word in rows[-1] for word in status) and top in rows[0]

    return ready


# --------------------------------------------------------------------------------------------
# Live graphs and background agents, for the shots of flowplex top, echo and attach

LIVE_GRAPH: Final = """\
# pipeline.yaml (docs/operating.md): a source paced at 200 packets/s, a scale, a text, a sink.
nodes:
  - { name: count, kernel: RangeSourceKernel, output_ports: [a], rate: 200, options: { count: 300000 } }
  - { name: scale, kernel: ScaleKernel, input_ports: [a], output_ports: [b], options: { factor: 3 } }
  - { name: text, kernel: StringifyKernel, input_ports: [b], output_ports: [c] }
  - { name: sink, kernel: SinkKernel, input_ports: [c] }
output_ports: [c]
"""
TICKER: Final = 'i=0; while :; do i=$((i+1)); echo "tick $i"; sleep 1; done'


class Live:
    """A private flowplex runtime directory (``FLOWPLEX_RUNTIME_DIR``) for the live shots.

    ``graph()`` and ``agents()`` start a detached graph or a background agents server in it and,
    on the way out, stop everything live there (SIGKILL where a stop does not end it in time)
    and remove the directory with its logs: the user's own live graphs are never touched.
    """

    def __init__(self, runtime: Path) -> None:
        self.runtime = runtime
        self.pids: list[int] = []
        self.env = {**{k: v for k, v in os.environ.items() if k not in ("TMUX", "NO_COLOR")},
                    "PYTHONPATH": _pythonpath(), "FLOWPLEX_RUNTIME_DIR": str(runtime), "HISTFILE": "/dev/null"}

    @property
    def pane_env(self) -> tuple[tuple[str, str], ...]:
        """What the shell in tmux needs to reach the shots' graphs."""
        return ("FLOWPLEX_RUNTIME_DIR", str(self.runtime)), ("HISTFILE", "/dev/null")

    def shell(self) -> tuple[str, ...]:
        """An interactive bash with the prompt ``$ `` in which ``flowplex`` is this checkout's CLI."""
        return "bash", "--rcfile", str(self.runtime / "shots.bashrc"), "-i"

    def flowplex(self, *args: str, timeout_s: float = 60.0) -> subprocess.CompletedProcess[str]:
        """``flowplex ARGS`` in the private runtime directory."""
        return subprocess.run([sys.executable, *CLI, *args], capture_output=True, text=True, timeout=timeout_s,
                              env=self.env, check=False)

    def start(self, *args: str) -> str:
        """``flowplex ARGS`` that starts something in the background (``run -d``, ``agents -d``): its name."""
        proc = self.flowplex(*args)
        if proc.returncode != 0 or not proc.stdout.strip():
            msg = f"flowplex {shlex.join(args)} failed ({proc.returncode}): {proc.stderr.strip()}"
            raise SystemExit(msg)
        name = proc.stdout.split()[-1]
        self.pids += [int(i["pid"]) for i in self.live() if i["name"] == name]
        return name

    def live(self) -> list[dict[str, Any]]:
        """``flowplex ps --json``: what is live in the runtime directory."""
        proc = self.flowplex("ps", "--json", timeout_s=30.0)
        return list(json.loads(proc.stdout)) if proc.returncode == 0 and proc.stdout.strip() else []

    @contextlib.contextmanager
    def _session(self) -> Iterator[Live]:
        if shutil.which("bash") is None:
            msg = "bash is not installed: the live shots type their commands into bash"
            raise SystemExit(msg)
        self.runtime.mkdir(mode=0o700, parents=True, exist_ok=True)
        cli = shlex.join([sys.executable, *CLI])
        (self.runtime / "shots.bashrc").write_text(
            f"PS1='$ '\nHISTFILE=/dev/null\nflowplex() {{ {cli} \"$@\"; }}\n", encoding="utf-8")
        try:
            yield self
        finally:
            self.close()

    def close(self) -> None:
        """Stop everything live in the runtime directory, kill what a stop left, remove the directory."""
        for info in self.live():
            self.pids.append(int(info["pid"]))
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.flowplex("stop", str(info["name"]), "--wait", "10", timeout_s=20.0)
        # SIGKILL only what is still ours: it answers on a socket here, or runs with this directory.
        left = {int(info["pid"]) for info in self.live()} | {pid for pid in self.pids if self._ours(pid)}
        for pid in left:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        self.pids.clear()
        shutil.rmtree(self.runtime, ignore_errors=True)

    def _ours(self, pid: int) -> bool:
        """Whether process ``pid`` runs with this runtime directory (not a later process given the pid)."""
        try:
            environ = (Path("/proc") / str(pid) / "environ").read_bytes()
        except OSError:  # gone, or no /proc: the sockets' answers above are all we know
            return False
        return f"FLOWPLEX_RUNTIME_DIR={self.runtime}".encode() in environ.split(b"\0")

    @contextlib.contextmanager
    def graph(self, name: str = "pipeline") -> Iterator[Live]:
        """A detached graph (``flowplex run -d NAME.yaml``), running until the context ends."""
        with self._session():
            path = self.runtime / f"{name}.yaml"
            path.write_text(LIVE_GRAPH, encoding="utf-8")
            self.start("run", "-d", str(path))
            yield self

    @contextlib.contextmanager
    def agents(self, name: str = "team") -> Iterator[Live]:
        """A background agents server (``flowplex agents -d``): a Python REPL, a shell and a ticker,
        with a line typed into the first two (``flowplex agents send``)."""
        python = "python3" if shutil.which("python3") else sys.executable
        with self._session():
            self.start("agents", "-d", "--name", name, "--", python, "-q", "-i", "--", "bash", "--norc", "-i",
                       "--", "sh", "-c", TICKER)
            self._wait_waiting(name, 1)
            self.flowplex("agents", "send", name, "1", "print(6*7)\\n")
            self.flowplex("agents", "send", name, "2", 'for i in 1 2 3; do echo "step $i"; done\\n')
            yield self

    def _wait_waiting(self, name: str, agent: int, timeout_s: float = 15.0) -> None:
        """Until agent number ``agent`` of server ``name`` waits for input (its prompt is up)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            proc = self.flowplex("agents", "ls", name, "--json", timeout_s=30.0)
            rows = json.loads(proc.stdout)["agents"] if proc.returncode == 0 and proc.stdout.strip() else []
            if any(r["number"] == agent and r["state"] == "waiting" for r in rows):
                return
            time.sleep(0.2)
        msg = f"agent {agent} of {name} did not wait for input within {timeout_s:.0f} s"
        raise SystemExit(msg)


def _prompt(lines: list[str]) -> bool:
    return any(line.startswith("$") for line in lines)


def _row(start: str, *words: str) -> Callable[[list[str]], bool]:
    """Ready when a row starts with ``start`` and shows each word."""
    return lambda lines: any(line.startswith(start) and all(w in line for w in words) for line in lines)


def _attached(lines: list[str]) -> bool:
    """The attached view is up, with what was typed into the REPL and the shell answered."""
    rows = [line for line in lines if line.strip()]
    return bool(rows) and "d detach" in rows[-1] and all(any(t in r for r in rows[:-1]) for t in ("42", "step 3"))


def live_runs(live: Live) -> list[Run]:
    """The shots of the live-graph commands: ``flowplex top`` and ``echo`` on a detached graph, and
    ``flowplex attach`` on a background agents server, each typed into a shell."""
    shell, env = live.shell(), live.pane_env
    return [
        # Rates are over the graph's last samples and p50/p99 need timing, which top turns on: ~3 s.
        Run(100, 16, shell, (Capture("top-100x16", _row("sink", "µs"), 3.0, keys=("flowplex top pipeline", "Enter"),
                                     before=_prompt),), env, live.graph),
        Run(100, 16, shell, (Capture("echo-100x16", _row("flowplex:", "dropped by this client"), 0.5,
                                     keys=("flowplex echo pipeline b -n 12", "Enter"), before=_prompt),), env,
            live.graph),
        Run(120, 36, shell, (Capture("attach-120x36", _attached, 2.0, keys=("flowplex attach team", "Enter"),
                                     before=_prompt),), env, live.agents),
    ]


def runs(settle_s: float) -> list[Run]:
    """The shots the docs use: the demo's panes at 160x50 and 80x24, one agent zoomed, and
    ``flowplex agents`` with keys typed into a REPL."""
    demo = (sys.executable, *CLI, "demo", "--mode", "panes", "--duration", str(round(settle_s * 2 + 20)))
    agents = (sys.executable, *CLI, "agents", "--mode", "panes", "-f", str(REPO / "examples" / "agents_team.yaml"))
    return [
        Run(160, 50, demo, (
            Capture("panes-160x50", _shows(status=("flowplex demo", "grid")), settle_s),
            # The coder's pane, zoomed: Tab/1-9 focus, z zooms the focused pane.
            Capture("zoom-160x50", _shows(status=("zoom",), top="2 coder"), 3.0, keys=("2", "z")),
        )),
        Run(80, 24, demo, (Capture("panes-80x24", _shows(status=("flowplex demo",)), settle_s),)),
        # `flowplex agents -f examples/agents_team.yaml`, typing into the REPL (Ctrl-a).
        Run(160, 50, agents, (
            Capture("agents-160x50", lambda lines: any("42" in line for line in lines[1:5]), 2.0,
                    keys=("C-a", "print(6*7)", "Enter"), before=lambda lines: any(">>>" in line for line in lines)),
        )),
    ]


def select(all_runs: Sequence[Run], names: Sequence[str] | None) -> list[Run]:
    """The runs that take the shots ``names`` (every run when none is named), each with only those shots."""
    if not names:
        return list(all_runs)
    known = [c.name for run in all_runs for c in run.captures]
    unknown = [n for n in names if n not in known]
    if unknown:
        msg = f"no shot named {', '.join(unknown)} (the shots: {', '.join(known)})"
        raise SystemExit(msg)
    chosen = [replace(run, captures=tuple(c for c in run.captures if c.name in names)) for run in all_runs]
    return [run for run in chosen if run.captures]


def main(argv: Iterable[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--out", type=Path, default=HERE, help="folder for the PNGs (default: %(default)s)")
    parser.add_argument("--scale", type=int, default=1, choices=(1, 2, 3), help="pixels per cell: 8x17 times this")
    parser.add_argument("--settle", type=float, default=6.0, help="seconds into the demo to take each shot")
    parser.add_argument("--font", type=Path, help="a monospace TTF to use instead of DejaVu Sans Mono")
    parser.add_argument("--text", action="store_true", help="also write each screen as plain text (NAME.txt)")
    parser.add_argument("--only", action="append", metavar="NAME",
                        help="take only this shot (repeatable; --list names them)")
    parser.add_argument("--list", action="store_true", help="print the shots' names and exit")
    args = parser.parse_args(None if argv is None else list(argv))
    live = Live(Path(tempfile.gettempdir()) / f"flowplex-live-shots-{os.getpid()}")
    all_runs = [*runs(args.settle), *live_runs(live)]
    if args.list:
        for run in all_runs:
            for capture in run.captures:
                print(f"{capture.name}  ({run.columns}x{run.rows} cells)")
        return 0
    chosen = select(all_runs, args.only)
    if args.font is not None and not args.font.is_file():
        parser.error(f"--font {args.font}: no such file")
    fonts = Fonts.load(scale=args.scale, font=args.font)
    args.out.mkdir(parents=True, exist_ok=True)
    for run in chosen:
        with run.around() if run.around is not None else nullcontext():
            shots = take(run)
        for name, screen in shots.items():
            path = args.out / f"{name}.png"
            render(screen, fonts).save(path, optimize=True)
            if args.text:
                (args.out / f"{name}.txt").write_text("\n".join(screen_text(screen)).rstrip() + "\n", encoding="utf-8")
            print(f"{path}  ({run.columns}x{run.rows} cells)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
