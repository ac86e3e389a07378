"""Real media files for the media kernels' tests, made in ``tmp_path`` with PyAV and soundfile.

Without the media extra every test here skips, saying how to install it; with
FLOWPLEX_REQUIRE_EXTRAS=1 the skip becomes a failure.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

WIDTH, HEIGHT, FRAMES, FPS = 64, 48, 20, 25
"""The test clip: 20 frames of 64x48 at 25 fps (0.8 s)."""
WAIT_S = 30.0
"""Generous bound on any single wait; the tests finish far sooner."""


def need(module: str) -> Any:
    """``module``, or a skip saying how to install the extra (a failure with FLOWPLEX_REQUIRE_EXTRAS=1)."""
    if os.environ.get("FLOWPLEX_REQUIRE_EXTRAS") == "1":
        import importlib

        return importlib.import_module(module)
    return pytest.importorskip(module, reason=f"{module} is not installed: pip install 'flowplex[media]'")


def clip_frame(i: int, width: int = WIDTH, height: int = HEIGHT) -> np.ndarray:
    """Frame ``i`` of the test clip: a grey background with a white square moving right."""
    img = np.full((height, width, 3), 60, np.uint8)
    x = (i * 2) % (width - 12)
    img[10:22, x: x + 12] = 255
    return img


def write_clip(path: Path, frames: int = FRAMES, *, fps: int = FPS, codec: str = "libx264",
               width: int = WIDTH, height: int = HEIGHT) -> Path:
    """Encode ``frames`` frames of the test clip into ``path``."""
    av = need("av")
    with av.open(str(path), "w") as container:
        stream = container.add_stream(codec, rate=fps)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        for i in range(frames):
            for packet in stream.encode(av.VideoFrame.from_ndarray(clip_frame(i, width, height), format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return path


def decoded(path: Path, fmt: str = "rgb24") -> list[tuple[int, np.ndarray]]:
    """Every frame of ``path`` as PyAV decodes it itself: (presentation time in µs, pixels)."""
    av = need("av")
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        return [(round(f.pts * stream.time_base * 1_000_000), f.to_ndarray(format=fmt))
                for f in container.decode(stream)]


@pytest.fixture(scope="session")
def av() -> Any:
    return need("av")


@pytest.fixture(scope="session")
def sf() -> Any:
    return need("soundfile")


@pytest.fixture(scope="session")
def clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The test clip (H.264 in MP4), made once for the session; tests only read it."""
    need("av")
    return write_clip(tmp_path_factory.mktemp("media") / "clip.mp4")
