"""``TerminalSink``: draws the agent streams it receives, in log or panes mode."""

from __future__ import annotations

import logging
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Final, final

from ..kernels import Context, Contract, Kernel, kernel
from ._common import option_error
from ._packets import KIND_START, read_chunk

if TYPE_CHECKING:
    from ..terminal import Display

log = logging.getLogger(__name__)
_ENGINE_LOG: Final = "flowplex.graph"


class _PacedBySink(logging.Filter):
    """Demotes the engine's "internal backpressure" warnings that name this sink as the consumer.

    A sink whose display waits for the terminal (log mode into a file or a pipe, or input
    queues bounded on purpose) holds its producers back by design: that is how nothing is lost,
    not news for standard error. Other records pass unchanged.
    """

    def __init__(self, node_name: str) -> None:
        super().__init__()
        self._consumer = f"consumer `{node_name}` input "

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if (record.levelno == logging.WARNING and isinstance(record.msg, str)
                and record.msg.startswith("internal backpressure") and isinstance(args, tuple)
                and any(isinstance(a, str) and a.startswith(self._consumer) for a in args)):
            record.levelno, record.levelname = logging.DEBUG, "DEBUG"
            return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)
        return True

__all__ = ["TerminalSink"]


@final
@kernel("TerminalSink")
class TerminalSink(Kernel):
    """Renders agent streams on the terminal (see :mod:`flowplex.terminal`).

    Every input port carries chunks of the agent-stream convention; a packet without a
    ``stream_id`` belongs to the stream numbered like its input port, labelled with the port's
    edge name; one with a ``stream_id`` but no ``agent`` label (a ring carries many streams) is
    labelled ``agent-<id>``. Give the node ``input_policy: {type: immediate}`` when several sources feed it,
    so that each chunk is drawn when it arrives rather than aligned by timestamp.

    Ports: inputs 0..N-1 (Str or Bytes chunks); no outputs.

    Options:
        display: Name of a display registered by the host program
            (``flowplex.terminal.register_display``). When absent (or not registered), the sink
            creates its own display on standard output and owns it.
        mode: For its own display: ``auto`` (default: panes on a terminal, log otherwise),
            ``panes`` or ``log``.
        fps: For its own display: most frames per second (default 60).
        overflow: For its own display: ``drop`` (default: a slow terminal never blocks the
            graph; what does not fit is dropped and counted) or ``block`` (the sink waits for the
            terminal, so back-pressure reaches the sources).

    Lifecycle: ``open`` (the thread calling ``Graph.start``, which should be the main thread so
    that resizes are seen) finds or starts the display; ``process`` hands chunks over without
    waiting for the terminal; ``close`` stops a display the sink owns (the last frame is
    written and the terminal restored). While its own display is live, ``sys.stdout`` and
    ``sys.stderr`` are routed into it line by line (agents ``stdout``/``stderr``). Never emits.

    Back-pressure: a display with ``overflow: block`` makes ``process`` wait for the terminal;
    bound the node's ``input_queues`` (``{packets: N}``, N at least one source batch) and the
    engine then pauses the sources instead of queueing without end. The engine's warnings about
    producers paused by this sink are logged at debug level only (it is the design).
    """

    @staticmethod
    def get_contract(c: Contract) -> None:
        for i in range(c.num_inputs):
            c.input_set_any(i)

    def __init__(self) -> None:
        self._display: Display | None = None
        self._owned = False
        self._names: list[str] = []
        self._redirect: AbstractContextManager[None] | None = None
        self._quiet: _PacedBySink | None = None

    def open(self, cc: Context) -> None:
        from ..errors import UsageError
        from ..terminal import create_display, get_display, redirect_std_streams

        name = cc.option_str("display", "")
        display = get_display(name) if name else None
        self._owned = display is None
        if display is None:
            try:
                display = create_display(cc.option_str("mode", "auto"), fps=cc.option_float("fps", 60.0),
                                         overflow=cc.option_str("overflow", "drop"))
            except UsageError as exc:
                key = "overflow" if "overflow" in str(exc) else "mode"
                raise option_error(cc, key, str(exc)) from None
            display.start()
            self._redirect = redirect_std_streams(display)
            self._redirect.__enter__()  # print() must not tear the frames while the display is live
        self._display = display
        self._names = [cc.input_name(i) for i in range(cc.num_inputs)]
        self._quiet = _PacedBySink(cc.node_name)
        logging.getLogger(_ENGINE_LOG).addFilter(self._quiet)

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
            chunk = read_chunk(cc.input(i))
            sid = chunk.stream_id if chunk.stream_id is not None else i
            # A stream of its own (a ring carries many) without a label is `agent-<id>`; a port's
            # only stream is named after the port's edge.
            name = chunk.name or (self._names[i] if chunk.stream_id is None else "")
            if chunk.is_end:
                display.add_agent(sid, name or None, chunk.agent_type)
                display.end_stream(sid, chunk.text, ok=chunk.ok, exit_code=chunk.exit_code)
            elif chunk.kind == KIND_START:
                display.add_agent(sid, name or None, chunk.agent_type)
                display.begin_stream(sid, chunk.text)
            else:
                display.feed(sid, chunk.text, name=name or None, agent_type=chunk.agent_type, pty=chunk.pty)

    def close(self, cc: Context) -> None:
        display, self._display = self._display, None
        redirect, self._redirect = self._redirect, None
        quiet, self._quiet = self._quiet, None
        if quiet is not None:
            logging.getLogger(_ENGINE_LOG).removeFilter(quiet)
        if redirect is not None:
            redirect.__exit__(None, None, None)
        if display is not None and self._owned:
            display.stop()
