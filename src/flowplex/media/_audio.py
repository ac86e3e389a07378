"""``AudioFileSource`` and ``AudioFileSink``: sound files as chunks of float32 samples (soundfile)."""

from __future__ import annotations

import logging
import os
import re
from typing import Any, Final, final

from ..errors import RunError, UsageError
from ..kernels import CloseReason, Context, Contract, Kernel, kernel
from ..packets import Packet, TypeId
from ._common import Options, Pacer, import_soundfile, option_error, refuse_special_file, step_source, warn

log = logging.getLogger(__name__)

__all__ = ["AudioFileSink", "AudioFileSource", "chunk_ts"]

DEFAULT_FRAMES_PER_PACKET: Final = 1024
_HEADER_LIE = re.compile(r"^\s*(data|SSND)\s*:\s*(\d+)\s*\(should be (\d+)\)", re.MULTILINE)
"""libsndfile's log line for a data chunk longer than the file (``data : 2000000000 (should be
1000)``): it reads what is there, and says so only in that log."""
_CUT_STREAM = re.compile(r"^.*File ended unexpectedly.*$", re.MULTILINE)
"""libsndfile's log line for an Ogg stream cut before its end-of-stream page."""


def _truncation(f: Any) -> str:
    """What libsndfile's log says is missing from the file, in words ("" when it is whole)."""
    info = getattr(f, "extra_info", "") or ""
    m = _HEADER_LIE.search(info)
    if m is not None and int(m.group(2)) > int(m.group(3)):
        return f"its header declares {int(m.group(2))} bytes of samples, the file holds {int(m.group(3))}"
    m = _CUT_STREAM.search(info)
    if m is not None:
        return f"the stream ends before its end mark (libsndfile: {' '.join(m.group(0).split())})"
    return ""


def chunk_ts(sample_index: int, sample_rate: int) -> int:
    """The timestamp (µs) of a chunk whose first sample is ``sample_index``.

    >>> chunk_ts(44100, 44100), chunk_ts(1024, 48000)
    (1000000, 21333)
    """
    return sample_index * 1_000_000 // sample_rate


def _describe_open_error(exc: Exception, path: str, sf: Any) -> str:
    if not os.path.exists(path):
        return f"cannot open {path!r}: No such file or directory"
    if os.path.isdir(path):
        return f"cannot open {path!r}: it is a directory"
    if isinstance(exc, sf.LibsndfileError):
        return f"{path!r} is not a sound file libsndfile can read ({exc.error_string}); it reads WAV, FLAC, OGG " \
               "and the formats soundfile.available_formats() lists"
    return f"cannot open {path!r}: {exc}"


@final
@kernel("AudioFileSource")
class AudioFileSource(Kernel):
    """Reads a sound file (WAV, FLAC, OGG... through soundfile) as chunks of float32 samples.

    Each packet is a float32 buffer of shape (frames, channels), read straight into memory the
    engine allocated (``cc.new_buffer``), ``frames_per_packet`` sample frames long (the last
    one shorter), stamped with the time of its first sample in microseconds
    (``sample_index * 1e6 // sample_rate``). Metadata: ``sample_rate``, ``channels``,
    ``sample_index`` (the first sample's position in the file) and ``format`` (``WAV``...).

    Ports: no inputs → output 0 (sample chunks).

    Options:
        path: The sound file. Required.
        frames_per_packet: Sample frames per packet (default 1024: 21 ms at 48 kHz).
        realtime: Release each chunk when its timestamp is due, counting from the first
            (default false: as fast as downstream takes them).

    Lifecycle: ``open`` (the thread calling ``Graph.start``, or the worker process) opens the
    file; a missing file, one that is not sound and a path that is not a regular file (a FIFO
    would block for ever) fail it with one line naming the node and the path. ``process`` (the
    source's thread) emits one chunk; ``close`` closes the file.

    Truncated files: a header that declares more samples than the file holds (a WAV cut while
    it was written) gives the samples that are there and a warning (``[node] 'x.wav' is
    truncated: ...``); a file that holds none of the samples it declares fails ``open``.
    """

    @staticmethod
    def get_contract(c: Contract) -> None:
        c.output_set_any(0)

    def __init__(self) -> None:
        self._file: Any = None
        self._path = ""
        self._frames_per_packet = DEFAULT_FRAMES_PER_PACKET
        self._pacer: Pacer | None = None
        self._pending: tuple[Packet, int] | None = None
        self._position = 0

    def open(self, cc: Context) -> None:
        sf = import_soundfile(cc)
        opts = Options(cc, ("path", "frames_per_packet", "realtime"))
        self._path = opts.string("path", required="give a sound file (WAV, FLAC, OGG...)")
        self._frames_per_packet = opts.integer("frames_per_packet", DEFAULT_FRAMES_PER_PACKET, minimum=1)
        self._pacer = Pacer() if opts.boolean("realtime", False) else None
        refuse_special_file(cc, self._path)
        try:
            self._file = sf.SoundFile(self._path, "r")
        except Exception as exc:
            raise option_error(cc, "path", _describe_open_error(exc, self._path, sf)) from None
        self._pending = None
        self._position = 0
        missing = _truncation(self._file)
        if missing and self._file.frames == 0:
            self._file.close()
            self._file = None
            raise option_error(cc, "path", f"{self._path!r} holds no samples: {missing} (truncated)")
        if missing:
            warn(cc, f"{self._path!r} is truncated: {missing}; its {self._file.frames} sample frames are read")

    def process(self, cc: Context) -> None:
        self._pending = step_source(cc, self._pending, self._next_chunk, self._pacer)

    def _next_chunk(self, cc: Context) -> tuple[Packet, int] | None:
        import numpy as np

        f = self._file
        frames = self._frames_per_packet
        if f.seekable() and f.frames >= 0:
            frames = min(frames, f.frames - self._position)
            if frames <= 0:
                return None
        packet, view = cc.new_buffer((frames, f.channels), np.float32)
        try:
            got = len(f.read(frames, dtype="float32", always_2d=True, out=view))
        except Exception as exc:
            msg = (f"node '{cc.node_name}' ({cc.kernel_name}): reading {self._path!r} failed at sample "
                   f"{self._position}: {exc}")
            raise RunError(msg) from None
        if got == 0:
            return None
        if got < frames:  # a stream of unknown length ended inside this chunk
            packet, short = cc.new_buffer((got, f.channels), np.float32)
            short[...] = view[:got]
        ts = chunk_ts(self._position, f.samplerate)
        packet.set_metadata("sample_rate", f.samplerate)
        packet.set_metadata("channels", f.channels)
        packet.set_metadata("sample_index", self._position)
        packet.set_metadata("format", f.format)
        self._position += got
        return packet, ts

    def close(self, cc: Context) -> None:
        self._pending = None
        f, self._file = self._file, None
        if f is not None:
            f.close()


@final
@kernel("AudioFileSink")
class AudioFileSink(Kernel):
    """Writes the sample chunks it receives into a sound file (WAV, FLAC, OGG... through soundfile).

    Chunks are numpy arrays of shape (frames,) (mono) or (frames, channels), float32 or float64
    in [-1, 1], or int16/int32 PCM; every chunk must have the first one's channel count. The
    file is created with the first chunk and closed whenever the node closes (end of stream,
    failure, cancel), so what was written is a complete file.

    Ports: input 0 (sample chunks) → no outputs.

    Options:
        path: The output file; its extension picks the format (``.wav``, ``.flac``,
            ``.ogg``...). Required; its directory must exist.
        sample_rate: Samples per second; default: the first chunk's ``sample_rate`` metadata
            (as :class:`AudioFileSource` sets it). One of the two is required.
        format: The file format (``WAV``, ``FLAC``, ``OGG``...) when the extension does not say it.
        subtype: The sample encoding (``PCM_16``, ``PCM_24``, ``FLOAT``, ``VORBIS``...); default:
            the format's usual one (16-bit PCM for WAV and FLAC).

    Lifecycle: ``open`` (the thread calling ``Graph.start``, or the worker process) checks the
    options; ``process`` writes one chunk; ``close`` closes the file. Nothing is emitted.
    """

    @staticmethod
    def get_contract(c: Contract) -> None:
        c.input_set_any(0)

    def __init__(self) -> None:
        self._sf: Any = None
        self._file: Any = None
        self._path = ""
        self._format: str | None = None
        self._subtype: str | None = None
        self._sample_rate: int | None = None
        self._channels = 0
        self._written = 0

    def open(self, cc: Context) -> None:
        sf = self._sf = import_soundfile(cc)
        opts = Options(cc, ("path", "sample_rate", "format", "subtype"))
        self._path = opts.string("path", required="give the sound file to write, e.g. out.wav")
        refuse_special_file(cc, self._path, writing=True)
        directory = os.path.dirname(os.path.abspath(self._path))
        if not os.path.isdir(directory):
            raise option_error(cc, "path", f"cannot write {self._path!r}: directory {directory!r} does not exist")
        formats = sf.available_formats()
        fmt = opts.string("format").upper() or os.path.splitext(self._path)[1].lstrip(".").upper()
        if fmt not in formats:
            key = "format" if opts.has("format") else "path"
            raise option_error(cc, key, f"{fmt or 'no extension'!r} is not a format libsndfile writes; "
                                  f"use one of {', '.join(sorted(formats))} (or set `format`)")
        self._format = fmt
        self._subtype = opts.string("subtype").upper() or None
        if self._subtype is not None and not sf.check_format(fmt, self._subtype):
            raise option_error(cc, "subtype", f"{self._subtype!r} does not go in {fmt} files; use one of "
                                        f"{', '.join(sorted(sf.available_subtypes(fmt)))}")
        rate = opts.integer("sample_rate", 0, minimum=1) if opts.has("sample_rate") else None
        self._sample_rate = rate
        self._channels = 0
        self._written = 0

    def process(self, cc: Context) -> None:
        import numpy as np

        if cc.input_is_empty(0):
            return
        packet = cc.input(0)
        where = f"node '{cc.node_name}' ({cc.kernel_name}): input chunk"
        if packet.type_id != TypeId.BUFFER:
            msg = f"{where} is {packet.type_name}, expected a numpy array of samples"
            raise UsageError(msg)
        samples = packet.as_numpy()
        if samples.ndim not in (1, 2) or samples.dtype not in (np.float32, np.float64, np.int16, np.int32):
            msg = (f"{where} is {samples.dtype} with shape {samples.shape}; expected (frames,) or (frames, channels) "
                   "of float32, float64, int16 or int32")
            raise UsageError(msg)
        channels = 1 if samples.ndim == 1 else samples.shape[1]
        if self._file is None:
            self._create(cc, packet, channels)
        elif channels != self._channels:
            msg = f"{where} has {channels} channels, but {self._path!r} was started with {self._channels}"
            raise UsageError(msg)
        try:
            self._file.write(samples)
        except Exception as exc:
            msg = f"node '{cc.node_name}' ({cc.kernel_name}): writing {self._path!r} failed: {exc}"
            raise RunError(msg) from None
        self._written += len(samples)

    def _create(self, cc: Context, packet: Packet, channels: int) -> None:
        rate = self._sample_rate
        if rate is None:
            meta = packet.metadata("sample_rate")
            if not isinstance(meta, int) or isinstance(meta, bool) or meta < 1:
                msg = (f"node '{cc.node_name}' ({cc.kernel_name}): options.sample_rate: missing, and the first chunk "
                       "has no sample_rate metadata; set sample_rate: 48000 (or what the samples are)")
                raise UsageError(msg)
            rate = meta
        try:
            self._file = self._sf.SoundFile(self._path, "w", samplerate=rate, channels=channels, format=self._format,
                                            subtype=self._subtype)
        except Exception as exc:
            msg = f"node '{cc.node_name}' ({cc.kernel_name}): cannot create {self._path!r}: {exc}"
            raise RunError(msg) from None
        self._channels = channels
        self._sample_rate = rate

    def close(self, cc: Context) -> None:
        f, self._file = self._file, None
        if f is None:
            if cc.close_reason == CloseReason.NORMAL:
                log.warning("media.audio_sink.empty node=%r path=%r: no chunk arrived; no file written",
                            cc.node_name, self._path)
            return
        try:
            f.close()
        except Exception as exc:
            if cc.close_reason == CloseReason.NORMAL:
                msg = f"node '{cc.node_name}' ({cc.kernel_name}): finishing {self._path!r} failed: {exc}"
                raise RunError(msg) from None
            log.warning("media.audio_sink.close.failed node=%r path=%r error=%s", cc.node_name, self._path, exc)
