"""``VideoFileSink``: encodes the frames it receives into a video file (PyAV)."""

from __future__ import annotations

import logging
import os
from fractions import Fraction
from typing import Any, Final, final

from .._suggest import suggest
from ..errors import RunError, UsageError
from ..kernels import CloseReason, Context, Contract, Kernel, kernel
from ..packets import Packet, TypeId
from ._common import Options, import_av, option_error, refuse_special_file
from ._video import PIX_FMTS

log = logging.getLogger(__name__)

__all__ = ["CRF_CODECS", "VideoFileSink", "default_codec"]

CRF_CODECS: Final = frozenset({"libx264", "libx265", "libvpx-vp9", "libsvtav1", "libaom-av1"})
"""Encoders that take a constant rate factor (``crf``)."""
_MS_TIME_BASE: Final = frozenset({"mpeg4", "msmpeg4", "msmpeg4v2", "msmpeg4v3", "h263", "h263p"})
"""Encoders whose time base must fit 16 bits: packet timing uses milliseconds for them."""
_ALIASES: Final = {"h264": "libx264", "hevc": "libx265", "h265": "libx265", "vp9": "libvpx-vp9", "av1": "libsvtav1"}
_RATE_HINT: Final = Fraction(30)
"""The frame rate told to the encoder when frames are timed by their packets' timestamps."""


def default_codec(av: Any) -> str:
    """H.264 (libx264) where the bundled FFmpeg has it, else MPEG-4 part 2 (always built in)."""
    try:
        av.Codec("libx264", "w")
    except Exception:
        return "mpeg4"
    return "libx264"


def _video_encoders(av: Any) -> list[str]:
    """The names of the bundled FFmpeg's video encoders (for a did-you-mean; slow-ish, error path only)."""
    names = []
    for name in sorted(av.codecs_available):
        try:
            codec = av.Codec(name, "w")
        except Exception:
            continue
        if codec.type == "video":
            names.append(name)
    return names


@final
@kernel("VideoFileSink")
class VideoFileSink(Kernel):
    """Encodes the frames it receives into a video file with FFmpeg (PyAV).

    Input frames are uint8 buffers as :class:`VideoFileSource` makes them: (H, W, 3) RGB,
    (H, W) or (H, W, 1) gray, or (H * 3 / 2, W) I420 when the packet's ``pix_fmt`` metadata says
    ``yuv420p`` (``bgr24`` likewise); every frame must have the first one's size. The file is
    finished (encoder flushed, trailer written) whenever the node closes: at the end of the
    stream, when the graph fails and when it is cancelled, so what was written plays. A sink
    that received no frame writes no file (and logs a warning).

    Ports: input 0 (frames) → no outputs.

    Options:
        path: The output file; its extension picks the container (``.mp4``, ``.mkv``,
            ``.avi``, ``.webm``...). Required; its directory must exist.
        format: The container format, when the extension does not say it.
        codec: An FFmpeg encoder (``libx264``, ``mpeg4``, ``libvpx-vp9``, ``mjpeg``...; ``h264``
            means libx264). Default: H.264 where the bundled FFmpeg has it, else MPEG-4.
        fps: A constant frame rate: frame N is shown at N / fps seconds. Default: each frame at
            its packet's timestamp (microseconds, counted from the first frame).
        crf: Constant rate factor for the encoders that have one (libx264: 0 lossless, 23 the
            default, 51 worst); others fail with a clear error.
        encoder_pix_fmt: The pixel format stored in the file (default ``yuv420p``, which plays
            everywhere; the encoder's own first choice when it lacks yuv420p).
        encoder_options: More FFmpeg encoder options (``{preset: veryfast}``), as a mapping.

    Lifecycle: ``open`` (the thread calling ``Graph.start``, or the worker process) checks the
    options, the codec and the container format; ``process`` encodes one frame (the file and
    the stream are created with the first); ``close`` flushes and closes the file, whatever
    ``cc.close_reason``. Nothing is emitted.
    """

    @staticmethod
    def get_contract(c: Contract) -> None:
        c.input_set_any(0)

    def __init__(self) -> None:
        self._av: Any = None
        self._container: Any = None
        self._stream: Any = None
        self._path = ""
        self._format: str | None = None
        self._codec = ""
        self._fps: Fraction | None = None
        self._crf: int | None = None
        self._encoder_pix_fmt = "yuv420p"
        self._encoder_options: dict[str, str] = {}
        self._size: tuple[int, int] | None = None
        self._first_ts: int | None = None
        self._last_pts = -1
        self._frames = 0
        self._time_base = Fraction(1, 1_000_000)

    def open(self, cc: Context) -> None:
        av = self._av = import_av(cc)
        opts = Options(cc, ("path", "format", "codec", "fps", "crf", "encoder_pix_fmt", "encoder_options"))
        self._path = opts.string("path", required="give the video file to write, e.g. out.mp4")
        refuse_special_file(cc, self._path, writing=True)
        directory = os.path.dirname(os.path.abspath(self._path))
        if not os.path.isdir(directory):
            raise option_error(cc, "path", f"cannot write {self._path!r}: directory {directory!r} does not exist")
        self._format = opts.string("format") or None
        self._codec = self._read_codec(cc, opts, av)
        fps = opts.number("fps", above=0.0)
        self._fps = None if fps is None else Fraction(fps).limit_denominator(1001000)
        self._crf = opts.integer("crf", -1, minimum=0) if opts.has("crf") else None
        if self._crf is not None and self._codec not in CRF_CODECS:
            problem = (f"codec {self._codec!r} has no constant rate factor (those that do: "
                       f"{', '.join(sorted(CRF_CODECS))}); set a bit rate in encoder_options instead (b: 2M)")
            raise option_error(cc, "crf", problem)
        self._encoder_pix_fmt = opts.string("encoder_pix_fmt", "yuv420p")
        self._encoder_options = opts.mapping("encoder_options")
        if self._crf is not None:
            self._encoder_options.setdefault("crf", str(self._crf))
        try:  # checks the container format now; FFmpeg creates the file with the first frame
            self._container = av.open(self._path, "w", format=self._format)
        except ValueError as exc:
            key = "format" if self._format else "path"
            hint = "" if self._format else "; name it with the `format` option, or use .mp4, .mkv, .avi"
            raise option_error(cc, key, f"cannot write {self._path!r}: {exc}{hint}") from None
        except OSError as exc:
            raise option_error(cc, "path", f"cannot write {self._path!r}: {exc.strerror or exc}") from None
        self._stream = None
        self._size = None
        self._first_ts = None
        self._last_pts = -1
        self._frames = 0

    @staticmethod
    def _read_codec(cc: Context, opts: Options, av: Any) -> str:
        name = opts.string("codec") or default_codec(av)
        name = _ALIASES.get(name, name)
        try:
            codec = av.Codec(name, "w")
        except Exception:
            encoders = _video_encoders(av)
            hint = suggest(name, encoders)
            did_you_mean = f"did you mean {hint!r}? " if hint else ""
            common = [n for n in ("libx264", "mpeg4", "libvpx-vp9", "libsvtav1", "mjpeg", "ffv1") if n in encoders]
            raise option_error(cc, "codec", f"{name!r} is not an encoder of the bundled FFmpeg; {did_you_mean}"
                                      f"found: {', '.join(common)} and {len(encoders) - len(common)} more") from None
        if codec.type != "video":
            raise option_error(cc, "codec", f"{name!r} is an {codec.type} encoder, not a video one")
        return name

    def process(self, cc: Context) -> None:
        if cc.input_is_empty(0):
            return
        packet = cc.input(0)
        array, fmt_name = self._frame_array(cc, packet)
        av = self._av
        frame = av.VideoFrame.from_ndarray(array, format=PIX_FMTS[fmt_name].ffmpeg)
        height, width = (array.shape[0] * 2 // 3, array.shape[1]) if fmt_name == "yuv420p" else array.shape[:2]
        if self._stream is None:
            self._add_stream(cc, width, height)
        elif (width, height) != self._size and self._size is not None:
            msg = (f"node '{cc.node_name}' ({cc.kernel_name}): frame {self._frames} is {width}x{height}, but "
                   f"{self._path!r} was started at {self._size[0]}x{self._size[1]}; a video keeps one size")
            raise UsageError(msg)
        frame.pts = self._pts(packet.timestamp)
        frame.time_base = self._time_base
        self._encode(cc, frame)
        self._frames += 1

    def _frame_array(self, cc: Context, packet: Packet) -> tuple[Any, str]:
        """The packet's pixels and their pixel format (from ``pix_fmt`` metadata, else the shape)."""
        import numpy as np

        where = f"node '{cc.node_name}' ({cc.kernel_name}): input frame"
        if packet.type_id != TypeId.BUFFER:
            msg = f"{where} is {packet.type_name}, expected a uint8 image buffer"
            raise UsageError(msg)
        array = packet.as_numpy()
        if array.dtype != np.uint8:
            msg = f"{where} has dtype {array.dtype}, expected uint8 (cast it, e.g. with CastKernel dtype: u8)"
            raise UsageError(msg)
        declared = packet.metadata("pix_fmt")
        if isinstance(declared, str) and declared in PIX_FMTS:
            fmt = PIX_FMTS[declared]
            expected_ok = array.ndim == 2 if fmt.channels == 0 else (
                array.ndim == 3 and array.shape[2] == fmt.channels) or (fmt.channels == 1 and array.ndim == 2)
            if expected_ok:
                return (array[..., 0] if array.ndim == 3 and fmt.channels == 1 else array), declared
        elif array.ndim == 2 or (array.ndim == 3 and array.shape[2] == 1):
            return (array if array.ndim == 2 else array[..., 0]), "gray8"
        elif array.ndim == 3 and array.shape[2] == 3:
            return array, "rgb24"
        told = f" (metadata pix_fmt {declared!r})" if declared is not None else ""
        msg = (f"{where} has shape {array.shape}{told}; expected (H, W, 3) RGB, (H, W) or (H, W, 1) gray, "
               "or (H*3/2, W) with pix_fmt: yuv420p")
        raise UsageError(msg)

    def _add_stream(self, cc: Context, width: int, height: int) -> None:
        rate = self._fps or _RATE_HINT
        if self._fps is not None:
            self._time_base = 1 / self._fps
        else:
            self._time_base = Fraction(1, 1000) if self._codec in _MS_TIME_BASE else Fraction(1, 1_000_000)
        stream = self._container.add_stream(self._codec, rate=rate)
        stream.width, stream.height = width, height
        formats = [f.name for f in (stream.codec_context.codec.video_formats or ())]
        stream.pix_fmt = self._encoder_pix_fmt if not formats or self._encoder_pix_fmt in formats else formats[0]
        stream.codec_context.time_base = self._time_base
        stream.time_base = self._time_base
        if self._encoder_options:
            stream.codec_context.options = dict(self._encoder_options)
        self._stream = stream
        self._size = (width, height)
        log.debug("media.sink.open.ok node=%r path=%r codec=%s size=%dx%d", cc.node_name, self._path, self._codec,
                  width, height)

    def _pts(self, ts: int) -> int:
        """The frame's presentation time in the stream's time base (strictly increasing)."""
        if self._fps is not None:
            pts = self._frames
        else:
            if self._first_ts is None:
                self._first_ts = ts
            pts = round((ts - self._first_ts) / 1_000_000 / self._time_base)
        pts = max(pts, self._last_pts + 1)
        self._last_pts = pts
        return pts

    def _encode(self, cc: Context, frame: Any) -> None:
        av = self._av
        try:
            for out in self._stream.encode(frame):
                self._container.mux(out)
        except (av.error.FFmpegError, OSError, ValueError) as exc:
            msg = f"node '{cc.node_name}' ({cc.kernel_name}): encoding frame {self._frames} into {self._path!r} " \
                  f"with {self._codec} failed: {exc}"
            raise RunError(msg) from None

    def close(self, cc: Context) -> None:
        container, stream, self._container, self._stream = self._container, self._stream, None, None
        if container is None:
            return
        if stream is None:
            log.warning("media.sink.empty node=%r path=%r: no frame arrived; no file written", cc.node_name, self._path)
            try:
                container.close()
            except Exception:  # nothing was written: FFmpeg never created the file
                log.debug("media.sink.close.empty path=%r", self._path)
            return
        try:
            for out in stream.encode(None):  # flush the frames the encoder still holds
                container.mux(out)
            container.close()  # writes the trailer
        except Exception as exc:
            try:
                container.close()
            except Exception:
                log.debug("media.sink.close.again.failed path=%r", self._path)
            if cc.close_reason == CloseReason.NORMAL:
                msg = f"node '{cc.node_name}' ({cc.kernel_name}): finishing {self._path!r} failed: {exc}"
                raise RunError(msg) from None
            log.warning("media.sink.finish.failed node=%r path=%r error=%s", cc.node_name, self._path, exc)
            return
        log.debug("media.sink.close.ok node=%r path=%r frames=%d", cc.node_name, self._path, self._frames)
