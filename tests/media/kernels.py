"""Kernels the media tests put between a source and a sink (module level, so worker processes import them)."""

from __future__ import annotations

import flowplex


@flowplex.kernel("MediaTestFailAt")
class MediaTestFailAt(flowplex.Kernel):
    """Forwards its input, and fails on the packet with ``frame_index`` equal to option ``at``."""

    def open(self, cc: flowplex.Context) -> None:
        self.at = cc.option_int("at", -1)

    def process(self, cc: flowplex.Context) -> None:
        if cc.input(0).metadata("frame_index") == self.at:
            msg = f"planned failure at frame {self.at}"
            raise OSError(msg)
        cc.forward(0, 0)


@flowplex.kernel("MediaTestInPlace")
class MediaTestInPlace(flowplex.Kernel):
    """Takes each frame, writes its first pixel in place (``make_mutable``) and emits it."""

    def process(self, cc: flowplex.Context) -> None:
        frame = cc.take_input(0)
        frame.make_mutable().reshape(-1)[0] = 7
        cc.emit(0, frame)
