"""Chrome for panes mode, rendered to data: borders with titles, the status bar, ticker rows.

Pure functions from text and styles to rows of cells; the renderer copies them into its
canvas. Agent colours are Perdix's palette (``flowplex.transport``'s ``COLOURS``).
"""

from __future__ import annotations

from typing import Final

from pyte import graphics

from ..transport import AgentType
from ..transport._format import COLOURS
from ._sanitize import safe_label
from ._text import char_width, display_width
from ._vt import BLANK, Cell, restyle

__all__ = ["AGENT_FG", "Box", "border_rows", "status_row", "text_cells", "ticker_row"]


def _pyte_name(sgr: bytes) -> str:
    code = int(sgr[2:-1])
    return {**graphics.FG_ANSI, **graphics.FG_AIXTERM}[code]


AGENT_FG: Final[tuple[str, ...]] = tuple(_pyte_name(c) for c in COLOURS)
"""pyte colour name of each agent type's SGR colour (``AGENT_FG[AgentType.ERROR] == "red"``)."""


class Box:
    """The characters of a border."""

    __slots__ = ("bl", "br", "h", "tl", "tr", "v")

    def __init__(self, chars: str) -> None:
        self.tl, self.tr, self.bl, self.br, self.h, self.v = tuple(chars)


LIGHT: Final = Box("┌┐└┘─│")
HEAVY: Final = Box("┏┓┗┛━┃")
ASCII: Final = Box("++++-|")
ASCII_FOCUS: Final = Box("####=#")


def text_cells(text: str, width: int, style: Cell = BLANK, *, pad: bool = True) -> list[Cell]:
    """``text`` as ``width`` cells in ``style``: cut, and padded unless ``pad`` is False. A wide
    character becomes the character plus an empty right half, as pyte lays it out."""
    cells: list[Cell] = []
    for ch in safe_label(text, 4 * width + 8):
        w = char_width(ch)
        if w == 0:
            continue
        if len(cells) + w > width:
            break
        cells.append(restyle(style, data=ch))
        if w == 2:
            cells.append(restyle(style, data=""))
    if pad:
        cells.extend([restyle(style, data=" ")] * (width - len(cells)))
    return cells


def agent_style(agent_type: AgentType, *, focused: bool) -> Cell:
    """Border/label style of an agent: its palette colour, bold when focused."""
    return Cell(" ", fg=AGENT_FG[agent_type], bold=focused)


def border_rows(
    width: int, title: str, note: str, style: Cell, *, unicode: bool, focused: bool
) -> tuple[list[Cell], list[Cell], Cell]:
    """The top row (with ``title`` on the left and ``note`` on the right), the bottom row and the
    side cell of a box ``width`` cells wide."""
    box = (HEAVY if focused else LIGHT) if unicode else (ASCII_FOCUS if focused else ASCII)
    h = restyle(style, data=box.h)
    inner = max(0, width - 2)
    top = [h] * inner
    label_cells = text_cells(f" {title} ", max(0, inner - 2), style, pad=False) if title else []
    top[1 : 1 + len(label_cells)] = label_cells
    room = inner - 3 - len(label_cells)
    if note and room > 4:
        note_cells = text_cells(f" {note} ", room, style, pad=False)
        start = inner - 1 - len(note_cells)
        top[start : start + len(note_cells)] = note_cells
    if width < 2:
        return [h] * width, [h] * width, restyle(style, data=box.v)
    top_row = [restyle(style, data=box.tl), *top[:inner], restyle(style, data=box.tr)]
    bottom_row = [restyle(style, data=box.bl), *([h] * inner), restyle(style, data=box.br)]
    return top_row, bottom_row, restyle(style, data=box.v)


def status_row(width: int, left: str, right: str) -> list[Cell]:
    """The status bar: ``left`` text, and ``right`` (key hints) if there is room, in reverse video."""
    style = Cell(" ", reverse=True)
    left_cells = text_cells(left, width, style)
    used = display_width(left.rstrip())
    if right and used + len(right) + 2 <= width:
        right_cells = text_cells(right, len(right), style)
        left_cells[width - len(right) : width] = right_cells
    return left_cells


def ticker_row(width: int, number: int, name: str, agent_type: AgentType, text: str, note: str) -> list[Cell]:
    """One ticker line: the agent's number and name in its colour, then its last line."""
    style = agent_style(agent_type, focused=False)
    head = f"{number:>2} {name[:14]:<14} "
    head_cells = text_cells(head, min(width, len(head)), style)
    tail = f"{text}  [{note}]" if note else text
    return head_cells + text_cells(tail, max(0, width - len(head_cells)))
