"""Many agents' output on one terminal without tearing: log mode and panes mode.

One :class:`Writer` owns the terminal and writes each frame (or batch of whole lines) in one
write. :class:`LogRenderer` interleaves whole, labelled, coloured lines and keeps ``\\r``
progress in a status footer; :class:`PaneRenderer` gives every agent its own emulated screen
(pyte) in a grid and draws only changed cells, in synchronized-output frames on the alternate
screen. Agent output can never drive the real terminal: log mode keeps only SGR colours, panes
mode emulates everything inside the pane. :class:`TermCaps` is detected once and injectable;
without a TTY everything falls back to plain lines.

>>> import io
>>> from flowplex.terminal import LogRenderer, TermCaps, Writer
>>> out = io.BytesIO()
>>> with LogRenderer(Writer(out), TermCaps(is_tty=False)) as display:
...     display.feed(1, "hello\\x1b]52;c;cHduZWQ=\\x07 world\\n", name="planner")
>>> out.getvalue()
b'planner | hello world\\n'
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._caps import TermCaps as TermCaps
    from ._display import AgentInfo as AgentInfo
    from ._display import Display as Display
    from ._display import agent_type_of as agent_type_of
    from ._layout import View as View
    from ._logmode import LogRenderer as LogRenderer
    from ._panes import PaneRenderer as PaneRenderer
    from ._proxy import redirect_std_streams as redirect_std_streams
    from ._registry import create_display as create_display
    from ._registry import get_display as get_display
    from ._registry import register_display as register_display
    from ._registry import resolve_mode as resolve_mode
    from ._stats import RenderStats as RenderStats
    from ._writer import Writer as Writer

__all__ = [
    "AgentInfo",
    "Display",
    "LogRenderer",
    "PaneRenderer",
    "RenderStats",
    "TermCaps",
    "View",
    "Writer",
    "agent_type_of",
    "create_display",
    "get_display",
    "redirect_std_streams",
    "register_display",
    "resolve_mode",
]

_HOMES = {"TermCaps": "_caps", "AgentInfo": "_display", "Display": "_display", "agent_type_of": "_display",
          "View": "_layout", "LogRenderer": "_logmode", "PaneRenderer": "_panes", "redirect_std_streams": "_proxy",
          "create_display": "_registry", "get_display": "_registry", "register_display": "_registry",
          "resolve_mode": "_registry", "RenderStats": "_stats", "Writer": "_writer"}
"""Where each public name lives. They load on first use: the command line's every command reads
``_sanitize``, and panes mode needs pyte; neither should pay for the displays (numpy, the ring)."""


def __getattr__(name: str) -> object:
    home = _HOMES.get(name)
    if home is None:
        msg = f"module 'flowplex.terminal' has no attribute {name!r}"
        raise AttributeError(msg)
    value = getattr(import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value
