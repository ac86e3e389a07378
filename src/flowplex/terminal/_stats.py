"""``RenderStats``: a frozen snapshot of what a display received, drew, coalesced and dropped."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["RenderStats"]


@dataclass(frozen=True, slots=True)
class RenderStats:
    """Counters of one display, taken with ``display.stats()``.

    Nothing is lost without being counted: every byte an agent sent is either drawn, part of a
    coalesced update, or counted in ``dropped_bytes``/``dropped_lines``.
    """

    mode: str
    """``"panes"`` or ``"log"``."""
    agents: int
    """Agents (streams) seen."""
    messages: int
    """Chunks received through ``feed``."""
    bytes_in: int
    """Bytes of agent output received."""
    frames: int
    """Frames (panes) or line batches (log) written, each as one write."""
    bytes_out: int
    """Bytes written to the terminal."""
    max_frame_bytes: int
    """The largest single frame."""
    coalesced: int
    """Updates that did not get a frame of their own: merged into a later frame (the latest
    state wins), or, in log mode, progress (``\\r``) rewrites replaced before being shown, lines
    of a repainted frame, and a full-screen program's redraws that its next logged screen
    replaced."""
    skipped_frames: int
    """Frame slots lost because writing the previous frame took longer than a frame period
    (the terminal is slower than the agents)."""
    deferred_repaints: int
    """Pane repaints postponed by flood control (a background pane scrolling faster than
    ``flood_fps``)."""
    dropped_bytes: int
    """Agent output discarded because a pane's input buffer was full (oldest bytes first)."""
    dropped_lines: int
    """Log lines discarded because the log backlog was full (oldest first)."""
    stripped: int
    """Control sequences removed from agent output (log mode; panes mode emulates them)."""
    resizes: int
    """Re-layouts after the terminal size changed."""
    render_cpu_s: float
    """CPU time of the render thread (composing, diffing and writing frames)."""
    write_s: float
    """Wall time spent writing to the terminal."""
    cut_lines: int = 0
    """Log lines cut at ``max_line_chars`` (log mode): nothing is lost, the rest of the line
    follows on continuation lines; a line without end cannot grow without bound."""
    cut_sequences: int = 0
    """Escape sequences dropped for running past ``MAX_SEQUENCE`` (4096) characters without their
    end (an OSC whose BEL never came, endless CSI parameters); what followed was shown as text.
    Also counted in ``stripped`` (log mode)."""

    @property
    def dropped(self) -> int:
        """Everything counted as lost: ``dropped_bytes + dropped_lines``."""
        return self.dropped_bytes + self.dropped_lines
