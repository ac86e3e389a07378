"""``TerminalSink``: draws the agent streams it receives, in log or panes mode."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, final

from ..kernels import Context, Contract, Kernel, kernel
from ._common import option_error
from ._packets import read_chunk

if TYPE_CHECKING:
    from ..terminal import Display

log = logging.getLogger(__name__)

__all__ = ["TerminalSink"]


@final
@kernel("TerminalSink")
class TerminalSink(Kernel):
    """Renders agent streams on the terminal (see :mod:`flowplex.terminal`).

    Every input port carries chunks of the agent-stream convention; a packet without a
    ``stream_id`` belongs to the stream numbered like its input port, labelled with the port's
    edge name. Give the node ``input_policy: {type: immediate}`` when several sources feed it,
    so that each chunk is drawn when it arrives rather than aligned by timestamp.

    Ports: inputs 0..N-1 (Str or Bytes chunks); no outputs.

    Options:
        display: Name of a display registered by the host program
            (``flowplex.terminal.register_display``). When absent (or not registered), the sink
            creates its own display on standard output and owns it.
        mode: For its own display: ``auto`` (default: panes on a terminal, log otherwise),
            ``panes`` or ``log``.
        fps: For its own display: most frames per second (default 60).

    Lifecycle: ``open`` (the thread calling ``Graph.start``, which should be the main thread so
    that resizes are seen) finds or starts the display; ``process`` hands chunks over without
    waiting for the terminal; ``close`` stops a display the sink owns (the last frame is
    written and the terminal restored). Never emits.
    """

    @staticmethod
    def get_contract(c: Contract) -> None:
        for i in range(c.num_inputs):
            c.input_set_any(i)

    def __init__(self) -> None:
        self._display: Display | None = None
        self._owned = False
        self._names: list[str] = []

    def open(self, cc: Context) -> None:
        from ..errors import UsageError
        from ..terminal import create_display, get_display

        name = cc.option_str("display", "")
        display = get_display(name) if name else None
        self._owned = display is None
        if display is None:
            try:
                display = create_display(cc.option_str("mode", "auto"), fps=cc.option_float("fps", 60.0))
            except UsageError as exc:
                raise option_error(cc, "mode", str(exc)) from None
            display.start()
        self._display = display
        self._names = [cc.input_name(i) for i in range(cc.num_inputs)]

    @property
    def display(self) -> Display | None:
        """The display drawn into (tests read it)."""
        return self._display

    def process(self, cc: Context) -> None:
        display = self._display
        if display is None:
            return
        for i in range(cc.num_inputs):
            if cc.input_is_empty(i):
                continue
            chunk = read_chunk(cc.input(i), default_stream_id=i, default_name=self._names[i])
            sid = chunk.stream_id if chunk.stream_id is not None else i
            if chunk.is_end:
                display.add_agent(sid, chunk.name or None, chunk.agent_type)
                display.end_stream(sid, chunk.text, ok=chunk.ok, exit_code=chunk.exit_code)
            else:
                display.feed(sid, chunk.text, name=chunk.name or None, agent_type=chunk.agent_type, pty=chunk.pty)

    def close(self, cc: Context) -> None:
        display, self._display = self._display, None
        if display is not None and self._owned:
            display.stop()
