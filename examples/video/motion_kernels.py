"""Kernels of the motion example: grayscale, frame difference, threshold, boxes drawn.

Each kernel is a thin wrapper over a numpy function below, so that the benchmark's hand-written
loop (benchmarks/media.py) does exactly the same work. ``examples/video/motion.yaml`` imports
this file with ``imports:``; worker processes of a process pool load it the same way.
"""

from __future__ import annotations

from collections import deque

import numpy as np

import flowplex

# -- the work, as plain numpy ----------------------------------------------------------------------


def to_gray(rgb: np.ndarray, out: np.ndarray) -> None:
    """Luma of an (H, W, 3) RGB frame into ``out`` (H, W, 1): (77 R + 150 G + 29 B) / 256."""
    r, g, b = (rgb[..., i].astype(np.uint16) for i in range(3))
    out[..., 0] = (r * 77 + g * 150 + b * 29) >> 8


def frame_diff(a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
    """|a - b| of two uint8 frames into ``out``, without overflow."""
    np.subtract(np.maximum(a, b), np.minimum(a, b), out=out)


def threshold(diff: np.ndarray, level: int, out: np.ndarray) -> None:
    """255 where ``diff >= level``, else 0."""
    np.multiply(diff >= level, 255, out=out, casting="unsafe")


def find_boxes(mask: np.ndarray, cell: int = 8, min_fill: float = 0.05) -> list[tuple[int, int, int, int]]:
    """Boxes ``(x0, y0, x1, y1)`` around the moving regions of a 0/255 mask.

    The mask is cut into ``cell`` x ``cell`` cells; a cell moves when at least ``min_fill`` of
    its pixels are set; each 8-connected group of moving cells gives one box.
    """
    h, w = mask.shape[0] // cell, mask.shape[1] // cell
    cells = mask[: h * cell, : w * cell, 0].reshape(h, cell, w, cell).mean(axis=(1, 3)) >= 255 * min_fill
    seen = np.zeros_like(cells)
    boxes = []
    for y, x in zip(*np.nonzero(cells), strict=True):
        if seen[y, x]:
            continue
        seen[y, x] = True
        todo = deque([(y, x)])
        y0, x0, y1, x1 = y, x, y, x
        while todo:
            cy, cx = todo.popleft()
            y0, x0, y1, x1 = min(y0, cy), min(x0, cx), max(y1, cy), max(x1, cx)
            for ny in range(max(0, cy - 1), min(h, cy + 2)):
                for nx in range(max(0, cx - 1), min(w, cx + 2)):
                    if cells[ny, nx] and not seen[ny, nx]:
                        seen[ny, nx] = True
                        todo.append((ny, nx))
        boxes.append((int(x0) * cell, int(y0) * cell, (int(x1) + 1) * cell - 1, (int(y1) + 1) * cell - 1))
    return boxes


def draw_boxes(frame: np.ndarray, boxes: list[tuple[int, int, int, int]], color: tuple[int, int, int]) -> None:
    """Draw the outline of each box on an (H, W, 3) frame, in place."""
    for x0, y0, x1, y1 in boxes:
        frame[y0, x0: x1 + 1] = color
        frame[y1, x0: x1 + 1] = color
        frame[y0: y1 + 1, x0] = color
        frame[y0: y1 + 1, x1] = color


# -- the kernels --------------------------------------------------------------------------------------


@flowplex.kernel("MotionGray")
class MotionGray(flowplex.Kernel):
    """RGB frame (H, W, 3) → gray frame (H, W, 1), in a buffer of the engine's."""

    def process(self, cc: flowplex.Context) -> None:
        rgb = cc.input(0).as_numpy()
        packet, view = cc.new_buffer((*rgb.shape[:2], 1), np.uint8)
        to_gray(rgb, view)
        cc.emit(0, packet)


@flowplex.kernel("MotionDiff")
class MotionDiff(flowplex.Kernel):
    """Gray frame → |frame - previous frame| (zeros for the first frame)."""

    def open(self, cc: flowplex.Context) -> None:
        self.previous: flowplex.Packet | None = None

    def process(self, cc: flowplex.Context) -> None:
        current = cc.take_input(0)  # kept until the next frame
        gray = current.as_numpy()
        packet, view = cc.new_buffer(gray.shape, np.uint8)
        if self.previous is not None:
            frame_diff(gray, self.previous.as_numpy(), view)
        self.previous = current
        cc.emit(0, packet)


@flowplex.kernel("MotionThreshold")
class MotionThreshold(flowplex.Kernel):
    """Difference → 0/255 mask. Option ``level`` (default 30): the least difference that counts."""

    def open(self, cc: flowplex.Context) -> None:
        self.level = cc.option_int("level", 30)

    def process(self, cc: flowplex.Context) -> None:
        diff = cc.input(0).as_numpy()
        packet, view = cc.new_buffer(diff.shape, np.uint8)
        threshold(diff, self.level, view)
        cc.emit(0, packet)


@flowplex.kernel("MotionBoxes")
class MotionBoxes(flowplex.Kernel):
    """Frame + mask → the frame with a box around each moving region, drawn in place (output 0),
    and how many boxes it got (output 1, when the node has it).

    The frame is taken and made mutable: the engine's buffer is written without a copy when
    nothing else holds it (the gray node has finished with it by then). Metadata ``boxes``
    counts them. Options ``cell`` (8) and ``min_fill`` (0.05) as in ``find_boxes``.
    """

    def open(self, cc: flowplex.Context) -> None:
        self.cell = cc.option_int("cell", 8)
        self.min_fill = cc.option_float("min_fill", 0.05)

    def process(self, cc: flowplex.Context) -> None:
        boxes = find_boxes(cc.input(1).as_numpy(), self.cell, self.min_fill)
        frame = cc.take_input(0)
        draw_boxes(frame.make_mutable(), boxes, (255, 255, 0))
        frame.set_metadata("boxes", len(boxes))
        cc.emit(0, frame)
        if cc.num_outputs > 1:
            cc.emit(1, len(boxes))
