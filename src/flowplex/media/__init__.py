"""Media sources and sinks: video through FFmpeg (PyAV), sound files through soundfile.

Importing this package registers the kernels ``VideoFileSource``, ``VideoFileSink``,
``AudioFileSource`` and ``AudioFileSink`` (the registry imports it when a graph first names one,
so ``import flowplex`` never loads it). It imports without the extra: PyAV and soundfile are
imported by the kernels' ``open``, and a graph that uses one without them fails to start with
the ``pip install 'flowplex[media]'`` line. See docs/media.md.
"""

from __future__ import annotations

from ._audio import AudioFileSink as AudioFileSink
from ._audio import AudioFileSource as AudioFileSource
from ._common import INSTALL_HINT as INSTALL_HINT
from ._video import PIX_FMTS as PIX_FMTS
from ._video import VideoFileSource as VideoFileSource
from ._video import frame_shape as frame_shape
from ._video_sink import VideoFileSink as VideoFileSink

__all__ = [
    "INSTALL_HINT",
    "PIX_FMTS",
    "AudioFileSink",
    "AudioFileSource",
    "VideoFileSink",
    "VideoFileSource",
    "frame_shape",
]
