"""Synthesise a short clip of moving shapes for the motion example (and the media benchmark).

Usage: python examples/video/make_clip.py [--out examples/video/clip.mp4] [--seconds 4] [--size 320x240]
       [--fps 25]

Two rectangles and a disc move over a still, textured background, so that a frame difference
finds exactly them. Written with PyAV (``pip install 'flowplex[media]'``), H.264 where the
bundled FFmpeg has it (else MPEG-4); nothing binary is committed to the repository.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent


def background(width: int, height: int) -> np.ndarray:
    """A still background: a soft diagonal gradient with a faint checker texture."""
    y, x = np.mgrid[0:height, 0:width]
    base = (40 + 60 * (x + y) / (width + height)).astype(np.uint8)
    texture = (((x // 16) + (y // 16)) % 2 * 12).astype(np.uint8)
    img = np.stack([base + texture, base, base + texture // 2], axis=-1)
    return img


def frame_at(bg: np.ndarray, i: int, frames: int) -> np.ndarray:
    """Frame ``i`` of ``frames``: the background with the shapes where they are at that time."""
    height, width = bg.shape[:2]
    img = bg.copy()
    t = i / max(1, frames - 1)
    s = max(4, min(width, height) // 8)  # shape size
    x = int(t * (width - 2 * s))  # a red rectangle crossing left to right
    img[height // 4: height // 4 + s, x: x + 2 * s] = (220, 40, 40)
    y = int(t * (height - s))  # a green square going down
    img[y: y + s, width - 2 * s: width - s] = (40, 220, 60)
    cy, cx = height * 3 // 4, int(width * (1 - t) * 0.8 + s)  # a blue disc going right to left
    yy, xx = np.ogrid[0:height, 0:width]
    img[(yy - cy) ** 2 + (xx - cx) ** 2 <= (s // 2) ** 2] = (60, 80, 230)
    return img


def make_clip(path: str | Path, *, width: int = 320, height: int = 240, seconds: float = 4.0, fps: int = 25,
              codec: str | None = None) -> int:
    """Write the clip to ``path``; returns the number of frames written."""
    import av

    if codec is None:
        try:
            av.Codec("libx264", "w")
            codec = "libx264"
        except Exception:
            codec = "mpeg4"
    frames = max(2, round(seconds * fps))
    bg = background(width, height)
    with av.open(str(path), "w") as container:
        stream = container.add_stream(codec, rate=fps)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        for i in range(frames):
            frame = av.VideoFrame.from_ndarray(frame_at(bg, i, frames), format="rgb24")
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return frames


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=str(HERE / "clip.mp4"), help="the clip to write (default: next to this file)")
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--size", default="320x240", help="WIDTHxHEIGHT (even numbers)")
    parser.add_argument("--fps", type=int, default=25)
    args = parser.parse_args()
    width, height = (int(v) for v in args.size.lower().split("x"))
    frames = make_clip(args.out, width=width, height=height, seconds=args.seconds, fps=args.fps)
    print(f"wrote {args.out}: {frames} frames of {width}x{height} at {args.fps} fps")


if __name__ == "__main__":
    main()
