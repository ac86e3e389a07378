"""``VideoFileSource``: decodes a video file, URL or capture device into frame packets (PyAV)."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Any, Final, final

from ..errors import ConfigError, RunError
from ..kernels import Context, Contract, Kernel, kernel
from ._common import Options, Pacer, import_av, option_error, step_source

if TYPE_CHECKING:
    import numpy as np

    from ..packets import Packet

log = logging.getLogger(__name__)

__all__ = ["PIX_FMTS", "PixFmt", "VideoFileSource", "describe_open_error", "frame_shape"]


@dataclass(frozen=True, slots=True)
class PixFmt:
    """A pixel format a frame packet can hold: its FFmpeg name and its numpy layout."""

    name: str
    """The option value and the ``pix_fmt`` metadata (``rgb24``)."""
    ffmpeg: str
    """FFmpeg's name for it (``gray8`` is FFmpeg's ``gray``)."""
    channels: int
    """The last dimension of a packed frame; 0 for the planar ``yuv420p``."""


PIX_FMTS: Final = {
    "rgb24": PixFmt("rgb24", "rgb24", 3),
    "bgr24": PixFmt("bgr24", "bgr24", 3),
    "gray8": PixFmt("gray8", "gray", 1),
    "yuv420p": PixFmt("yuv420p", "yuv420p", 0),
}
"""The ``pix_fmt`` values: ``rgb24`` (the default), ``bgr24`` (OpenCV's order), ``gray8`` and the
planar ``yuv420p`` (I420: the Y plane, then U, then V, as PyAV's ``to_ndarray`` lays it out)."""


def frame_shape(fmt: PixFmt, width: int, height: int) -> tuple[int, ...]:
    """The numpy shape of a ``width`` x ``height`` frame in ``fmt``.

    >>> frame_shape(PIX_FMTS["rgb24"], 64, 48), frame_shape(PIX_FMTS["gray8"], 64, 48)
    ((48, 64, 3), (48, 64, 1))
    >>> frame_shape(PIX_FMTS["yuv420p"], 64, 48)
    (72, 64)
    """
    if fmt.channels == 0:
        return (height * 3 // 2, width)
    return (height, width, fmt.channels)


def describe_open_error(exc: BaseException, path: str) -> str:
    """What FFmpeg's failure to open ``path`` means, in words (without the node's prefix)."""
    import av

    if isinstance(exc, av.error.InvalidDataError):
        return f"{path!r} is not a media file FFmpeg can read (found: {_sniff(path)}; FFmpeg: {exc.strerror})"
    if isinstance(exc, OSError) and exc.strerror:
        return f"cannot open {path!r}: {exc.strerror}"
    return f"cannot open {path!r}: {exc}"


def _sniff(path: str) -> str:
    """A short description of what a file holds, for an error message."""
    try:
        with open(path, "rb") as f:
            head = f.read(64)
    except OSError:
        return "unreadable"
    if not head:
        return "an empty file"
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError:
        return f"{os.path.getsize(path)} bytes of unrecognised data"
    first = text.splitlines()[0][:32] if text.strip() else ""
    return f"text starting {first!r}"


def _copy_frame(frame: Any, fmt: PixFmt, dest: np.ndarray) -> None:
    """Copy a decoded frame (already in ``fmt``) into ``dest``, honouring FFmpeg's line padding."""
    import numpy as np

    width, height = frame.width, frame.height
    if fmt.channels == 0:  # I420: three planes, each copied row by row into the flat layout
        flat = dest.reshape(-1)
        at = 0
        for plane, (w, h) in zip(frame.planes, ((width, height), (width // 2, height // 2), (width // 2, height // 2)),
                                 strict=True):
            src = np.frombuffer(plane, np.uint8)[: plane.line_size * h].reshape(h, plane.line_size)[:, :w]
            np.copyto(flat[at: at + w * h].reshape(h, w), src)
            at += w * h
        return
    plane = frame.planes[0]
    row = width * fmt.channels
    src = np.frombuffer(plane, np.uint8)[: plane.line_size * height].reshape(height, plane.line_size)[:, :row]
    np.copyto(dest.reshape(height, row), src)


@final
@kernel("VideoFileSource")
class VideoFileSource(Kernel):
    """Decodes a video file, URL or capture device with FFmpeg (PyAV), one packet per frame.

    Each packet is a uint8 buffer allocated by the engine (``cc.new_buffer``: in the shared
    memory arena when the frames feed a process pool, so they cross without a copy, and a
    downstream kernel may write into them in place), stamped with the frame's presentation time
    in microseconds. Shapes: ``rgb24``/``bgr24`` (H, W, 3), ``gray8`` (H, W, 1), ``yuv420p``
    (H * 3 / 2, W), planar I420. Metadata: ``width``, ``height``, ``pix_fmt``, ``frame_index``
    (frames emitted before this one, counted across loops), ``loop`` (the pass, from 0) and
    ``time_base`` (the stream's, as ``"1/12800"``).

    Ports: no inputs → output 0 (frames).

    Options:
        path: A file, a URL FFmpeg opens (``rtsp://...``, ``http://...``) or a device
            (``/dev/video0`` with ``format: v4l2``). Required. Relative paths are relative to
            the current directory.
        format: FFmpeg's input format (``v4l2``, ``avfoundation``, ``dshow``...); default:
            guessed from the file.
        demuxer_options: FFmpeg options for opening it (``{video_size: 640x480, framerate:
            30}`` for a camera), as a mapping.
        pix_fmt: ``rgb24`` (default), ``bgr24``, ``gray8`` or ``yuv420p`` (even sizes only).
        start_s, end_s: Decode only frames presented in ``[start_s, end_s)`` seconds of the
            file (seeks to the key frame before ``start_s``). Timestamps stay the file's.
        loop: ``true`` plays the range forever, a number ``N`` plays it N times (default: once);
            each pass continues the timestamps, one frame duration after the last.
        realtime: Release each frame when its timestamp is due, counting from the first frame
            (default false: as fast as downstream takes them). Leave it off for devices and live
            streams, which pace themselves.

    Errors: a missing file, a file that is not media, a file without a video stream or one
    whose codec the bundled FFmpeg cannot decode fail ``open`` with one line naming the node and
    the path; a decoding failure later fails ``process`` (a ``RunError``) with the frame number.

    Lifecycle: ``open`` (the thread calling ``Graph.start``, or the worker process) opens the
    input and checks the options; ``process`` (the source's thread) decodes and emits one
    frame, or yields until a ``realtime`` frame is due; ``close`` closes the input.
    """

    @staticmethod
    def get_contract(c: Contract) -> None:
        c.output_set_any(0)

    def __init__(self) -> None:
        self._container: Any = None
        self._stream: Any = None
        self._frames: Iterator[Any] | None = None
        self._path = ""
        self._fmt = PIX_FMTS["rgb24"]
        self._start_s: float | None = None
        self._end_s: float | None = None
        self._passes: int | None = 1
        """How many times to play the range; None: forever."""
        self._pass = 0
        self._pacer: Pacer | None = None
        self._pending: tuple[Packet, int] | None = None
        self._emitted = 0
        self._offset_us = 0
        """Added to the file's timestamps: the length of the passes played so far."""
        self._pass_first_us: int | None = None
        self._pass_end_us = 0
        """The end of the last frame of this pass (its time plus its duration), file time."""
        self._last_ts: int | None = None
        self._time_base = Fraction(1, 1)
        self._reformatter: Any = None
        """One converter for the whole stream (a new one per frame would rebuild its tables)."""

    def open(self, cc: Context) -> None:
        av = import_av(cc)
        opts = Options(cc, ("path", "format", "demuxer_options", "pix_fmt", "start_s", "end_s", "loop", "realtime"))
        self._path = opts.string("path", required="give a video file, a URL, or a device such as /dev/video0")
        fmt_name = opts.choice("pix_fmt", "rgb24", tuple(PIX_FMTS))
        self._fmt = PIX_FMTS[fmt_name]
        self._start_s = opts.number("start_s", minimum=0.0)
        self._end_s = opts.number("end_s", minimum=0.0)
        if self._start_s is not None and self._end_s is not None and self._end_s <= self._start_s:
            raise option_error(cc, "end_s", f"must be after start_s ({self._start_s:g} s), got {self._end_s:g}")
        self._passes = _read_loop(cc, opts)
        self._pacer = Pacer() if opts.boolean("realtime", False) else None
        input_format = opts.string("format") or None
        demuxer_options = opts.mapping("demuxer_options")
        try:
            self._container = av.open(self._path, format=input_format, options=demuxer_options)
        except ValueError as exc:
            if input_format is not None and not isinstance(exc, av.error.FFmpegError):
                problem = f"{input_format!r} is not an input format of the bundled FFmpeg ({exc})"
                raise option_error(cc, "format", problem) from None
            raise option_error(cc, "path", describe_open_error(exc, self._path)) from None
        except (OSError, av.error.FFmpegError) as exc:
            raise option_error(cc, "path", describe_open_error(exc, self._path)) from None
        try:
            self._stream = self._video_stream(cc)
        except ConfigError:
            self._release()
            raise
        self._time_base = Fraction(self._stream.time_base or Fraction(1, 1_000_000))
        self._reformatter = av.video.reformatter.VideoReformatter()
        self._stream.thread_type = "AUTO"  # frame threads: decoding keeps up with 1080p on a few cores
        width, height = self._stream.codec_context.width, self._stream.codec_context.height
        if self._fmt.channels == 0 and (width % 2 or height % 2):
            self._release()
            problem = f"yuv420p needs an even width and height; {self._path!r} is {width}x{height}"
            raise option_error(cc, "pix_fmt", problem)
        self._pending = None
        self._emitted = self._pass = self._offset_us = 0
        self._pass_first_us = self._last_ts = None
        try:
            self._start_pass()
        except RunError as exc:
            self._release()
            raise option_error(cc, "start_s", str(exc)) from None

    def _video_stream(self, cc: Context) -> Any:
        streams = self._container.streams
        if not streams.video:
            found = ", ".join(f"{s.type} ({s.codec_context.name if s.codec_context else '?'})" for s in streams) \
                or "no streams"
            raise option_error(cc, "path", f"{self._path!r} has no video stream (found: {found})")
        stream = streams.video[0]
        if stream.codec_context is None:
            name = getattr(stream.codec_parameters, "name", None) or "unknown"
            raise option_error(cc, "path", f"{self._path!r}: video codec {name!r} has no decoder in the bundled FFmpeg")
        return stream

    def _start_pass(self) -> None:
        """Seek to the start of the range (for a pass after the first, or a ``start_s``) and decode."""
        if self._pass > 0 or self._start_s:
            import av

            target = self._start_s or 0.0
            try:
                self._container.seek(int(target / self._time_base), stream=self._stream, backward=True,
                                     any_frame=False)
            except (av.error.FFmpegError, OSError) as exc:
                msg = f"cannot seek {self._path!r} to {target:g} s ({exc}); start_s and loop need a seekable input"
                raise RunError(msg) from None
        self._frames = self._container.decode(self._stream)
        self._pass_first_us = None

    def process(self, cc: Context) -> None:
        self._pending = step_source(cc, self._pending, self._next_frame, self._pacer)

    def _next_frame(self, cc: Context) -> tuple[Packet, int] | None:
        """The next frame in range as a packet and its timestamp; None at the end of the last pass."""
        import av

        while True:
            assert self._frames is not None  # set by open
            try:
                frame = next(self._frames, None)
            except av.error.FFmpegError as exc:
                msg = (f"node '{cc.node_name}' ({cc.kernel_name}): decoding {self._path!r} failed after "
                       f"{self._emitted} frames: {exc}")
                raise RunError(msg) from None
            file_us = None if frame is None else self._file_us(frame)
            start_us = None if self._start_s is None else self._start_s * 1e6
            if frame is not None and file_us is not None and start_us is not None and file_us < start_us:
                continue  # decoded from the key frame before start_s
            if frame is None or (file_us is not None and self._end_s is not None and file_us >= self._end_s * 1e6):
                try:
                    more = self._next_pass()
                except RunError as exc:
                    msg = f"node '{cc.node_name}' ({cc.kernel_name}): {exc}"
                    raise RunError(msg) from None
                if not more:
                    return None
                continue
            return self._packet(cc, frame, file_us)

    def _file_us(self, frame: Any) -> int | None:
        """The frame's presentation time in microseconds, file time (None: the stream has none)."""
        pts = frame.pts
        return None if pts is None else round(pts * self._time_base * 1_000_000)

    def _next_pass(self) -> bool:
        """Start the next pass if there is one; the timestamps go on after this one's last frame."""
        self._pass += 1
        if self._pass_first_us is None or (self._passes is not None and self._pass >= self._passes):
            return False  # an empty range would loop without end
        self._offset_us += self._pass_end_us - self._pass_first_us
        self._start_pass()
        return True

    def _packet(self, cc: Context, frame: Any, file_us: int | None) -> tuple[Packet, int]:
        import numpy as np

        fmt = self._fmt
        width, height = frame.width, frame.height
        if frame.format.name != fmt.ffmpeg:
            frame = self._reformatter.reformat(frame, format=fmt.ffmpeg)
        packet, view = cc.new_buffer(frame_shape(fmt, width, height), np.uint8)
        _copy_frame(frame, fmt, view)
        duration_us = self._duration_us(frame)
        if file_us is None:  # no presentation times (some raw streams): count frame durations
            file_us = self._pass_end_us if self._pass_first_us is not None else 0
        if self._pass_first_us is None:
            self._pass_first_us = file_us
        self._pass_end_us = file_us + duration_us
        ts = file_us + self._offset_us
        if self._last_ts is not None and ts <= self._last_ts:
            ts = self._last_ts + 1  # timestamps strictly increase on a stream; FFmpeg's may repeat
        self._last_ts = ts
        packet.set_metadata("width", width)
        packet.set_metadata("height", height)
        packet.set_metadata("pix_fmt", fmt.name)
        packet.set_metadata("frame_index", self._emitted)
        packet.set_metadata("loop", self._pass)
        packet.set_metadata("time_base", str(self._time_base))
        self._emitted += 1
        return packet, ts

    def _duration_us(self, frame: Any) -> int:
        """How long the frame shows: its own duration, else one over the stream's average rate."""
        if frame.duration:
            return max(1, round(int(frame.duration) * self._time_base * 1_000_000))
        rate = self._stream.average_rate or self._stream.guessed_rate
        return max(1, round(1_000_000 / float(rate))) if rate else 40_000

    def close(self, cc: Context) -> None:
        self._pending = None
        self._release()

    def _release(self) -> None:
        container, self._container, self._frames = self._container, None, None
        if container is not None:
            try:
                container.close()
            except Exception as exc:  # closing an input loses nothing; say it and go on
                log.warning("media.source.close.failed path=%r error=%s", self._path, exc)


def _read_loop(cc: Context, opts: Options) -> int | None:
    """The ``loop`` option as a number of passes (None: forever)."""
    value = opts.raw("loop")
    if value is None or value is False:
        return 1
    if value is True:
        return None
    if isinstance(value, int) and value >= 1:
        return value
    raise option_error(cc, "loop", f"expected true (forever), false (once) or a number of passes >= 1, got {value!r}")
