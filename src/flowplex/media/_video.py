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
from ._common import Options, Pacer, import_av, option_error, refuse_special_file, shown_path, step_source, warn

if TYPE_CHECKING:
    import numpy as np

    from ..packets import Packet

log = logging.getLogger(__name__)

__all__ = ["DEFAULT_MAX_FRAME_BYTES", "DEFAULT_TIMEOUT_S", "PIX_FMTS", "PixFmt", "VideoFileSource",
           "describe_open_error", "frame_shape"]

DEFAULT_TIMEOUT_S: Final = 30.0
"""The longest FFmpeg may wait to open the input, and then for each packet: ample for a slow
server or a camera starting up; a server that trickles its headers fails in that time."""
DEFAULT_MAX_FRAME_BYTES: Final = 128 * 1024 * 1024
"""The largest frame packet (128 MiB): 8K (8192 x 4320) in rgb24 is 106 MB. A 249 KB PNG can
declare 16000 x 16000 (768 MB)."""
_RAW_FORMATS: Final = frozenset({"yuv4mpegpipe", "rawvideo"})
"""Demuxers whose file is frames end to end: bytes after the last whole frame are a cut frame."""


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
        timeout_s: The longest FFmpeg may wait to open the input, then for each packet
            (default 30): a server that never answers, or trickles its headers, fails ``open``.
        max_frame_bytes: The largest frame packet accepted (default 128 MiB; 8K rgb24 is 106 MB),
            checked against the size the stream declares before anything is decoded, and on
            each frame: a small file can declare a frame of gigabytes.

    Paths that are not regular files are refused before anything opens them (a FIFO would block
    ``open`` for ever): a directory, a socket, a FIFO, and a device without ``format``.

    Truncated files: frames up to the cut are emitted and a warning (``[node] 'x.mp4' is
    truncated: ...``) says what is missing (fewer frames than the file declares, damaged
    packets, a cut frame at the end of a Y4M); a file that yields no frame at all fails the run,
    since an empty stream downstream would look like success.

    Errors: a missing file, a file that is not media, a file without a video stream or one
    whose codec the bundled FFmpeg cannot decode, an input silent for ``timeout_s`` and frames
    larger than ``max_frame_bytes`` fail ``open`` with one line naming the node and the path; a
    decoding failure later fails ``process`` (a ``RunError``) with the frame number. A URL's
    user and password are shown as ``***``.

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
        self._shown = ""
        """The path as messages show it (a URL's credentials redacted)."""
        self._fmt = PIX_FMTS["rgb24"]
        self._max_frame_bytes = DEFAULT_MAX_FRAME_BYTES
        self._size_unknown = False
        """Whether the stream declared no frame size when it was opened (probing refused it)."""
        self._read = _ReadStats()
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
        opts = Options(cc, ("path", "format", "demuxer_options", "pix_fmt", "start_s", "end_s", "loop", "realtime",
                            "timeout_s", "max_frame_bytes"))
        self._path = opts.string("path", required="give a video file, a URL, or a device such as /dev/video0")
        self._shown = shown_path(self._path)
        fmt_name = opts.choice("pix_fmt", "rgb24", tuple(PIX_FMTS))
        self._fmt = PIX_FMTS[fmt_name]
        self._start_s = opts.number("start_s", minimum=0.0)
        self._end_s = opts.number("end_s", minimum=0.0)
        if self._start_s is not None and self._end_s is not None and self._end_s <= self._start_s:
            raise option_error(cc, "end_s", f"must be after start_s ({self._start_s:g} s), got {self._end_s:g}")
        self._passes = _read_loop(cc, opts)
        self._pacer = Pacer() if opts.boolean("realtime", False) else None
        timeout_s = opts.number("timeout_s", above=0.0) or DEFAULT_TIMEOUT_S
        self._max_frame_bytes = opts.integer("max_frame_bytes", DEFAULT_MAX_FRAME_BYTES, minimum=1)
        input_format = opts.string("format") or None
        refuse_special_file(cc, self._path, device_format=input_format)
        demuxer_options = opts.mapping("demuxer_options")
        # The decoders' own cap, so that probing the stream in av.open does not decode a huge
        # frame either (FFmpeg refuses to allocate a picture of more pixels).
        demuxer_options.setdefault("max_pixels", str(self._max_pixels()))
        try:
            self._container = av.open(self._path, format=input_format, options=demuxer_options,
                                      timeout=(timeout_s, timeout_s))
        except ValueError as exc:
            if input_format is not None and not isinstance(exc, av.error.FFmpegError):
                problem = f"{input_format!r} is not an input format of the bundled FFmpeg ({exc})"
                raise option_error(cc, "format", problem) from None
            raise option_error(cc, "path", describe_open_error(exc, self._shown)) from None
        except av.error.ExitError as exc:
            problem = (f"no answer from {self._shown!r} within {timeout_s:g} s (FFmpeg: {exc.strerror}); raise "
                       "timeout_s for a slow source")
            raise option_error(cc, "timeout_s", problem) from None
        except (OSError, av.error.FFmpegError) as exc:
            raise option_error(cc, "path", describe_open_error(exc, self._shown)) from None
        try:
            self._stream = self._video_stream(cc)
            self._check_declared_size(cc)
        except ConfigError:
            self._release()
            raise
        self._time_base = Fraction(self._stream.time_base or Fraction(1, 1_000_000))
        self._reformatter = av.video.reformatter.VideoReformatter()
        self._stream.thread_type = "AUTO"  # frame threads: decoding keeps up with 1080p on a few cores
        width, height = self._stream.codec_context.width, self._stream.codec_context.height
        if self._fmt.channels == 0 and (width % 2 or height % 2):
            self._release()
            problem = f"yuv420p needs an even width and height; {self._shown!r} is {width}x{height}"
            raise option_error(cc, "pix_fmt", problem)
        self._pending = None
        self._emitted = self._pass = self._offset_us = 0
        self._pass_first_us = self._last_ts = None
        self._read = _ReadStats()
        try:
            self._start_pass()
        except RunError as exc:
            self._release()
            raise option_error(cc, "start_s", str(exc)) from None

    def _max_pixels(self) -> int:
        """The most pixels a frame of ``max_frame_bytes`` holds in the output format."""
        half_bytes_per_pixel = 2 * self._fmt.channels or 3  # yuv420p: 1.5 bytes a pixel
        return max(1, self._max_frame_bytes * 2 // half_bytes_per_pixel)

    def _frame_bytes(self, width: int, height: int) -> int:
        size = 1
        for n in frame_shape(self._fmt, width, height):
            size *= n
        return size

    def _too_large(self, width: int, height: int) -> str:
        """The message for a frame over ``max_frame_bytes`` (without the node's prefix)."""
        return (f"{self._shown!r} has {width}x{height} frames, {self._frame_bytes(width, height)} bytes each in "
                f"{self._fmt.name}, over max_frame_bytes={self._max_frame_bytes}; raise max_frame_bytes if the file "
                "is trusted")

    def _check_declared_size(self, cc: Context) -> None:
        """Refuse a stream whose declared frame size is over the cap, before decoding a frame."""
        ctx = self._stream.codec_context
        width, height = ctx.width or 0, ctx.height or 0
        self._size_unknown = width == 0 or height == 0
        if self._frame_bytes(width, height) > self._max_frame_bytes:
            raise option_error(cc, "max_frame_bytes", self._too_large(width, height))
        # Probing may have been refused by max_pixels (the size is then unknown here): the
        # decoder gets the same cap, so it fails the first frame instead of allocating it.
        ctx.options = {**ctx.options, "max_pixels": str(self._max_pixels())}

    def _video_stream(self, cc: Context) -> Any:
        streams = self._container.streams
        if not streams.video:
            found = ", ".join(f"{s.type} ({s.codec_context.name if s.codec_context else '?'})" for s in streams) \
                or "no streams"
            raise option_error(cc, "path", f"{self._shown!r} has no video stream (found: {found})")
        stream = streams.video[0]
        if stream.codec_context is None:
            name = getattr(stream.codec_parameters, "name", None) or "unknown"
            problem = f"{self._shown!r}: video codec {name!r} has no decoder in the bundled FFmpeg"
            raise option_error(cc, "path", problem)
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
                msg = f"cannot seek {self._shown!r} to {target:g} s ({exc}); start_s and loop need a seekable input"
                raise RunError(msg) from None
        self._frames = self._decode()
        self._pass_first_us = None

    def _decode(self) -> Iterator[Any]:
        """The stream's frames, demuxed here (not ``container.decode``) so that what a truncated
        file lacks can be seen: packets flagged corrupt, where the last packet ended, and a last
        packet that does not decode (cut in the middle).

        A packet that fails to decode fails the run, unless it is the file's last: that one is
        what a cut leaves, counted and reported as truncation at the end.
        """
        import av

        read = self._read
        failed: Exception | None = None
        for packet in self._container.demux(self._stream):
            if packet.size:  # the flush packet at the end has none
                if failed is not None:
                    raise failed  # a packet inside the file does not decode: the file is damaged
                read.packets += 1
                read.corrupt += bool(packet.is_corrupt)
                if packet.pos is not None and packet.pos >= 0:
                    read.end_pos = max(read.end_pos, packet.pos + packet.size)
            try:
                frames = packet.decode()
            except av.error.ExitError:
                raise
            except av.error.FFmpegError as exc:
                if not packet.size or self._too_large_now():
                    raise
                failed = exc
                continue
            yield from frames
        if failed is not None:
            read.undecodable += 1

    def _too_large_now(self) -> bool:
        ctx = self._stream.codec_context
        return self._size_unknown or self._frame_bytes(ctx.width or 0, ctx.height or 0) > self._max_frame_bytes

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
                raise RunError(self._decode_error(cc, exc)) from None
            file_us = None if frame is None else self._file_us(frame)
            start_us = None if self._start_s is None else self._start_s * 1e6
            if frame is not None and file_us is not None and start_us is not None and file_us < start_us:
                continue  # decoded from the key frame before start_s
            past_end = file_us is not None and self._end_s is not None and file_us >= self._end_s * 1e6
            if (frame is None or past_end) and self._pass == 0:
                self._check_complete(cc, at_eof=frame is None)
            if frame is None or past_end:
                try:
                    more = self._next_pass()
                except RunError as exc:
                    msg = f"node '{cc.node_name}' ({cc.kernel_name}): {exc}"
                    raise RunError(msg) from None
                if not more:
                    return None
                continue
            return self._packet(cc, frame, file_us)

    def _decode_error(self, cc: Context, exc: Exception) -> str:
        import av

        where = f"node '{cc.node_name}' ({cc.kernel_name}): "
        if isinstance(exc, av.error.ExitError):
            return f"{where}no data from {self._shown!r} within timeout_s after {self._emitted} frames"
        ctx = self._stream.codec_context
        if self._frame_bytes(ctx.width or 0, ctx.height or 0) > self._max_frame_bytes:
            return f"{where}options.max_frame_bytes: {self._too_large(ctx.width, ctx.height)}"
        if self._size_unknown and self._emitted == 0:
            # FFmpeg refuses to probe (then to decode) a picture over max_pixels, and says
            # neither its size nor why: the stream reports 0x0, and the first frame fails.
            return (f"{where}options.max_frame_bytes: decoding {self._shown!r} failed before its first frame "
                    f"({exc}); FFmpeg found no frame size within max_frame_bytes={self._max_frame_bytes} "
                    f"({self._max_pixels()} pixels in {self._fmt.name}): raise max_frame_bytes if the file is "
                    "trusted and its frames are larger")
        return f"{where}decoding {self._shown!r} failed after {self._emitted} frames: {exc}"

    def _check_complete(self, cc: Context, *, at_eof: bool) -> None:
        """At the end of the first pass: warn when the file looks truncated (``at_eof``: the
        pass read it to its end) or the range held no frame; fail when it yielded no frame at all."""
        missing = self._missing() if at_eof else ""
        ranged = self._start_s is not None or self._end_s is not None
        if self._emitted == 0 and not ranged:
            what = f"; {missing}" if missing else ""
            msg = (f"node '{cc.node_name}' ({cc.kernel_name}): {self._shown!r} yielded no frame "
                   f"({self._read.packets} packet(s) read{what}): the file is truncated or damaged")
            raise RunError(msg)
        if self._emitted == 0:
            warn(cc, f"{self._shown!r}: no frame is presented in the range "
                     f"[{self._start_s or 0:g} s, {'end' if self._end_s is None else f'{self._end_s:g} s'})")
        elif missing:
            warn(cc, f"{self._shown!r} is truncated: {missing}; the {self._emitted} frame(s) before the cut "
                     "were emitted")

    def _missing(self) -> str:
        """What the file lacks, in words ("" when it looks whole)."""
        read, stream = self._read, self._stream
        found = []
        if read.corrupt:
            found.append(f"{read.corrupt} damaged packet(s)")
        if read.undecodable:
            found.append("its last packet is cut and does not decode")
        ranged = self._start_s is not None or self._end_s is not None
        declared = int(stream.frames or 0)
        if not ranged and declared > self._emitted:
            found.append(f"it declares {declared} frames, {self._emitted} decoded")
        if self._container.format.name in _RAW_FORMATS and os.path.isfile(self._path):
            left = os.path.getsize(self._path) - read.end_pos
            if read.packets and left > 0:
                found.append(f"{left} bytes after the last whole frame")
            elif not read.packets:
                found.append(f"{os.path.getsize(self._path)} bytes hold no whole frame")
        declared_us = float(stream.duration * self._time_base) * 1e6 if stream.duration else 0.0
        if not declared_us and "matroska" in self._container.format.name and self._container.duration:
            declared_us = float(self._container.duration)  # Matroska/WebM: the segment's, in µs, from its header
        if not found and not ranged and declared_us and stream.frames == 0:
            start_us = float((stream.start_time or 0) * self._time_base) * 1e6
            decoded_us = self._pass_end_us - start_us if self._pass_first_us is not None else 0.0
            # a margin: the last frame's duration is a guess in some containers
            short = declared_us - decoded_us > 2 * self._frame_us() and declared_us > 1.05 * decoded_us
            if short or (self._emitted == 0 and declared_us > 0):
                found.append(f"it declares {declared_us / 1e6:.3f} s, frames up to {decoded_us / 1e6:.3f} s decoded")
        return ", ".join(found)

    def _frame_us(self) -> float:
        rate = self._stream.average_rate or self._stream.guessed_rate
        return 1e6 / float(rate) if rate else 40_000.0

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
        if self._frame_bytes(width, height) > self._max_frame_bytes:  # the size can change inside a stream
            msg = f"node '{cc.node_name}' ({cc.kernel_name}): options.max_frame_bytes: {self._too_large(width, height)}"
            raise RunError(msg)
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
                log.warning("media.source.close.failed path=%r error=%s", self._shown, exc)


@dataclass(slots=True)
class _ReadStats:
    """What the demuxer gave on the first pass: the evidence for a truncation warning."""

    packets: int = 0
    """Packets with data."""
    corrupt: int = 0
    """Of those, flagged corrupt by the demuxer (a short read at the end of the file)."""
    end_pos: int = 0
    """The byte after the last packet, where the demuxer says."""
    undecodable: int = 0
    """1 when the file's last packet did not decode (cut in the middle)."""


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
