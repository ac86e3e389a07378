"""The media kernels against hostile inputs: a server that trickles its headers, FIFOs and other
files that are not files, truncated videos and sound files, a small image declaring a huge frame.

Each ends with one line naming the node and the path, or with the frames that are there and a
warning saying what is missing; never a hang, never a silent short stream. The media are made
here, tiny, with PyAV, soundfile and numpy; without them the tests skip, saying how to install.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import struct
import threading
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import flowplex

from ..media.conftest import need
from .conftest import CLI, Limited, run_limited

_MEM_MB = 1024
"""Address-space cap of a child run: the frames here are tiny; a runaway decode is not."""


@pytest.fixture(scope="module")
def av() -> Any:
    return need("av")


@pytest.fixture(scope="module")
def sf() -> Any:
    return need("soundfile")


def write_video(path: Path, frames: int, *, codec: str = "rawvideo", fmt: str | None = None,
                options: dict[str, str] | None = None, width: int = 64, height: int = 48) -> bytes:
    """Encode ``frames`` frames of noise (so no two compress alike) into ``path``; its bytes."""
    av = need("av")
    rng = np.random.default_rng(0)
    with av.open(str(path), "w", format=fmt, options=options or {}) as container:
        stream = container.add_stream(codec, rate=25)
        stream.width, stream.height = width, height
        stream.pix_fmt = "rgb8" if codec == "gif" else "yuv420p"
        for _ in range(frames):
            frame = av.VideoFrame.from_ndarray(rng.integers(0, 255, (height, width, 3), np.uint8), format="rgb24")
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return path.read_bytes()


def graph_yaml(kernel: str, **options: object) -> str:
    return json.dumps({"nodes": [{"name": "src", "kernel": kernel, "output_ports": ["out"], "options": options}],
                       "output_ports": ["out"]})


def run_graph(yaml: str) -> list[flowplex.Packet]:
    """Every packet of the graph's output (in this process: for cases that cannot hang)."""
    got: list[flowplex.Packet] = []
    with flowplex.Graph.from_yaml(yaml) as g:
        g.observe("out", got.append)
        g.start()
        g.wait_done(timeout=30)
    return got


def run_error(yaml: str) -> str:
    with pytest.raises(flowplex.KernelError) as info:
        run_graph(yaml)
    message = str(info.value)
    assert "\n" not in message
    return message


def cli_run(tmp_path: Path, yaml: str, *args: str, timeout_s: float = 20.0, mem_mb: int = _MEM_MB) -> Limited:
    """``flowplex run`` on ``yaml`` in a child under a memory cap and a time limit."""
    graph = tmp_path / "graph.yaml"
    graph.write_text(yaml)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(["src", os.environ.get("PYTHONPATH", "")])}
    return run_limited([*CLI, "run", str(graph), "-o", os.devnull, *args], mem_mb=mem_mb, timeout_s=timeout_s,
                       env=env)


def error_line(result: Limited) -> str:
    """The one error line of a failed run (no traceback)."""
    assert not result.hung, result
    assert result.rc == 1, result
    lines = [line for line in result.stderr.splitlines() if line.startswith("flowplex: error:")]
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    return lines[0]


# -- a network input that never finishes opening ------------------------------------------------


@contextlib.contextmanager
def trickling_server(what: str) -> Iterator[int]:
    """An HTTP server on 127.0.0.1 that sends a byte every 50 ms: of its headers (``headers``),
    or of an endless body after whole headers (``body``). Bounded: it stops after 15 s, or when
    the test ends."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    srv.settimeout(0.1)
    stop = threading.Event()

    def handle(conn: socket.socket) -> None:
        with conn, contextlib.suppress(OSError):
            conn.recv(65536)
            head = b"HTTP/1.1 200 OK\r\nContent-Type: video/mp4\r\n"
            if what == "body":
                conn.sendall(head + b"Content-Length: 100000000\r\n\r\n")
                head = b"\0" * 400
            for byte in (head + b"X-Pad: " + b"a" * 300)[:300]:
                conn.sendall(bytes([byte]))
                if stop.wait(0.05):
                    return

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=handle, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield srv.getsockname()[1]
    finally:
        stop.set()
        thread.join(5)
        srv.close()


@pytest.mark.parametrize("what", ["headers", "body"])
def test_a_server_that_trickles_fails_open_within_timeout_s(av: Any, tmp_path: Path, what: str) -> None:
    with trickling_server(what) as port:
        url = f"http://cam:pw-1234@127.0.0.1:{port}/clip.mp4"
        result = cli_run(tmp_path, graph_yaml("VideoFileSource", path=url, timeout_s=1))
    line = error_line(result)
    assert f"options.timeout_s: no answer from 'http://***@127.0.0.1:{port}/clip.mp4' within 1 s" in line, line
    assert "pw-1234" not in result.stderr
    assert result.elapsed < 10


def test_timeout_s_must_be_a_positive_number(av: Any, tmp_path: Path) -> None:
    clip = tmp_path / "a.y4m"
    write_video(clip, 1, fmt="yuv4mpegpipe")
    assert "options.timeout_s: must be > 0, got 0" in run_error(graph_yaml("VideoFileSource", path=str(clip),
                                                                             timeout_s=0))


# -- paths that are not regular files -------------------------------------------------------------


def _fifo_name(case: str) -> str:
    """The FIFO's name: a sink's has the extension that picks its format (the open gets that far)."""
    return {"video-sink": "pipe.mkv", "audio-sink": "pipe.wav"}.get(case, "pipe")


def _fifo_graph(tmp_path: Path, case: str) -> str:
    fifo = tmp_path / _fifo_name(case)
    os.mkfifo(fifo)
    if case == "video-source":
        return graph_yaml("VideoFileSource", path=str(fifo))
    if case == "video-source-file-url":
        return graph_yaml("VideoFileSource", path=f"file:{fifo}", format="rawvideo",
                          demuxer_options={"video_size": "64x48"})
    if case == "audio-source":
        return graph_yaml("AudioFileSource", path=str(fifo))
    video = case == "video-sink"
    clip, sink = (tmp_path / "a.y4m", "VideoFileSink") if video else (tmp_path / "a.wav", "AudioFileSink")
    if video:
        write_video(clip, 2, fmt="yuv4mpegpipe")
    else:
        need("soundfile").write(str(clip), np.zeros((100, 1), np.float32), 8000)
    source = "VideoFileSource" if video else "AudioFileSource"
    return json.dumps({"nodes": [
        {"name": "src", "kernel": source, "output_ports": ["x"], "options": {"path": str(clip)}},
        {"name": "sink", "kernel": sink, "input_ports": ["x"], "options": {"path": str(fifo)}}]})


@pytest.mark.parametrize("case", ["video-source", "video-source-file-url", "audio-source", "video-sink", "audio-sink"])
def test_a_fifo_is_refused_before_anything_opens_it(av: Any, sf: Any, tmp_path: Path, case: str) -> None:
    result = cli_run(tmp_path, _fifo_graph(tmp_path, case), timeout_s=15)
    line = error_line(result)
    shown = f"{'file:' if 'file-url' in case else ''}{tmp_path / _fifo_name(case)}"
    assert f"'{shown}' is a named pipe (FIFO), not a regular file; opening it would wait for a " in line, line
    assert result.elapsed < 10


@contextlib.contextmanager
def special(tmp_path: Path, kind: str) -> Iterator[str]:
    if kind == "directory":
        yield str(tmp_path)
    elif kind == "socket":
        path = tmp_path / "sock"
        with socket.socket(socket.AF_UNIX) as s:
            s.bind(str(path))
            yield str(path)
    else:
        yield "/dev/zero"


@pytest.mark.parametrize(("kernel", "kind", "message"), [
    ("VideoFileSource", "directory", "is a directory, not a regular file; name a file in it"),
    ("VideoFileSource", "socket", "is a socket, not a regular file; VideoFileSource reads regular files"),
    ("VideoFileSource", "device", "is a character device, not a regular file; a capture device needs its input "
                                  "format: set format (v4l2 for /dev/video0)"),
    ("AudioFileSource", "directory", "is a directory, not a regular file; name a file in it"),
    ("AudioFileSource", "device", "is a character device, not a regular file; AudioFileSource reads regular files"),
])
def test_other_files_that_are_not_files_are_refused_with_a_hint(av: Any, sf: Any, tmp_path: Path, kernel: str,
                                                                kind: str, message: str) -> None:
    with special(tmp_path, kind) as path:
        assert f"options.path: {path!r} {message}" in run_error(graph_yaml(kernel, path=path))


def test_a_sink_may_write_to_dev_null(av: Any, tmp_path: Path) -> None:
    clip = tmp_path / "a.y4m"
    write_video(clip, 2, fmt="yuv4mpegpipe")
    with flowplex.Graph.from_yaml(json.dumps({"nodes": [
            {"name": "src", "kernel": "VideoFileSource", "output_ports": ["x"], "options": {"path": str(clip)}},
            {"name": "sink", "kernel": "VideoFileSink", "input_ports": ["x"],
             "options": {"path": os.devnull, "format": "nut", "codec": "rawvideo"}}]})) as g:
        g.start()
        g.wait_done(timeout=30)


# -- truncated files ------------------------------------------------------------------------------


def warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelname == "WARNING" and r.name == "flowplex.kernel"]


@pytest.mark.parametrize(("ext", "codec", "fmt", "options", "evidence"), [
    ("y4m", "rawvideo", "yuv4mpegpipe", None, "bytes after the last whole frame"),
    ("mkv", "libx264", None, None, "it declares 0.240 s, frames up to 0.120 s decoded"),
    ("webm", "libvpx", None, None, "it declares 0.240 s, frames up to 0.080 s decoded"),
    ("mp4", "libx264", None, {"movflags": "faststart"}, "it declares 6 frames, 1 decoded"),
    ("nut", "rawvideo", "nut", None, "its last packet is cut and does not decode"),
], ids=["y4m", "mkv", "webm", "mp4-faststart", "nut"])
def test_a_file_cut_after_some_frames_gives_them_and_a_warning(av: Any, tmp_path: Path,
                                                               caplog: pytest.LogCaptureFixture, ext: str, codec: str,
                                                               fmt: str | None, options: dict[str, str] | None,
                                                               evidence: str) -> None:
    path = tmp_path / f"clip.{ext}"
    data = write_video(path, 6, codec=codec, fmt=fmt, options=options)
    path.write_bytes(data[: len(data) * 6 // 10])
    with caplog.at_level("WARNING", logger="flowplex"):
        got = run_graph(graph_yaml("VideoFileSource", path=str(path)))
    assert 0 < len(got) < 6
    (warning,) = warnings(caplog)
    assert warning.startswith(f"[src] '{path}' is truncated: "), warning
    assert evidence in warning and f"the {len(got)} frame(s) before the cut were emitted" in warning


def test_a_whole_file_gives_no_warning(av: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    for ext, codec, fmt in [("y4m", "rawvideo", "yuv4mpegpipe"), ("mkv", "libx264", None), ("mp4", "libx264", None),
                            ("nut", "rawvideo", "nut"), ("gif", "gif", None)]:
        path = tmp_path / f"clip.{ext}"
        write_video(path, 6, codec=codec, fmt=fmt)
        with caplog.at_level("WARNING", logger="flowplex"):
            assert len(run_graph(graph_yaml("VideoFileSource", path=str(path), loop=2))) == 12
    assert warnings(caplog) == []


@pytest.mark.parametrize(("ext", "codec", "fmt", "keep", "evidence"), [
    ("y4m", "rawvideo", "yuv4mpegpipe", 0.5, "0 packet(s) read; 2335 bytes hold no whole frame"),
    ("mp4", "libx264", None, -200, "it declares 3 frames, 0 decoded"),
    ("mkv", "libx264", None, 0.3, "it declares 0.120 s, frames up to 0.000 s decoded"),
], ids=["y4m", "mp4", "mkv"])
def test_a_file_whose_only_frames_are_cut_fails_the_run(av: Any, tmp_path: Path, ext: str, codec: str,
                                                       fmt: str | None, keep: float, evidence: str) -> None:
    path = tmp_path / f"clip.{ext}"
    data = write_video(path, 1 if ext == "y4m" else 3, codec=codec, fmt=fmt)
    path.write_bytes(data[: int(keep)] if keep < 0 else data[: int(len(data) * keep)])
    message = run_error(graph_yaml("VideoFileSource", path=str(path)))
    assert f"node 'src' (VideoFileSource): '{path}' yielded no frame (" in message, message
    assert evidence in message and message.endswith("): the file is truncated or damaged")


@pytest.mark.parametrize(("start_s", "end_s", "shown"), [(5.0, None, "[5 s, end)"), (0.005, 0.01, "[0.005 s, 0.01 s)")])
def test_a_range_that_holds_no_frame_warns(av: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture, start_s: float,
                                           end_s: float | None, shown: str) -> None:
    path = tmp_path / "clip.mkv"
    write_video(path, 3, codec="libx264")
    options: dict[str, object] = {"start_s": start_s} if end_s is None else {"start_s": start_s, "end_s": end_s}
    with caplog.at_level("WARNING", logger="flowplex"):
        assert run_graph(graph_yaml("VideoFileSource", path=str(path), **options)) == []
    assert warnings(caplog) == [f"[src] '{path}': no frame is presented in the range {shown}"]


def test_flowplex_run_shows_the_truncation_warning_from_a_process_pool(av: Any, tmp_path: Path) -> None:
    path = tmp_path / "clip.y4m"
    data = write_video(path, 3, fmt="yuv4mpegpipe")
    path.write_bytes(data[:-100])
    spec = json.loads(graph_yaml("VideoFileSource", path=str(path)))
    spec["executors"] = [{"name": "pool", "type": "ProcessPoolExecutor", "num_processes": 1}]
    # the pool maps its shared-memory arena: more address space than the frames need
    result = cli_run(tmp_path, json.dumps(spec), "--default-executor", "pool", timeout_s=40, mem_mb=16384)
    assert result.rc == 0 and not result.hung, result
    assert f"flowplex: warning: [src] '{path}' is truncated: 4514 bytes after the last whole frame; the 2 frame(s) " \
           "before the cut were emitted" in result.stderr, result.stderr
    assert "flowplex: 2 packet(s) from 1 output(s)" in result.stderr


def _wav_claiming(tmp_path: Path, data_bytes: int, claim: int) -> Path:
    sf = need("soundfile")
    whole = tmp_path / "whole.wav"
    sf.write(str(whole), np.zeros((1000, 1), np.int16), 8000, subtype="PCM_16")
    raw = bytearray(whole.read_bytes())
    at = raw.index(b"data")
    raw[at + 4: at + 8] = struct.pack("<I", claim)
    path = tmp_path / "cut.wav"
    path.write_bytes(bytes(raw[: at + 8 + data_bytes]))
    return path


def test_a_wav_whose_header_claims_2_gb_but_holds_1000_bytes_warns(sf: Any, tmp_path: Path,
                                                                  caplog: pytest.LogCaptureFixture) -> None:
    path = _wav_claiming(tmp_path, 1000, 2_000_000_000)
    with caplog.at_level("WARNING", logger="flowplex"):
        got = run_graph(graph_yaml("AudioFileSource", path=str(path)))
    assert sum(len(p.as_numpy()) for p in got) == 500
    assert warnings(caplog) == [f"[src] '{path}' is truncated: its header declares 2000000000 bytes of samples, the "
                                "file holds 1000; its 500 sample frames are read"]


def test_a_wav_that_holds_none_of_its_samples_fails_open(sf: Any, tmp_path: Path) -> None:
    path = _wav_claiming(tmp_path, 0, 2_000_000_000)
    assert run_error(graph_yaml("AudioFileSource", path=str(path))).endswith(
        f"options.path: '{path}' holds no samples: its header declares 2000000000 bytes of samples, the file "
        "holds 0 (truncated)")


def test_an_ogg_cut_in_half_fails_open_instead_of_giving_nothing(sf: Any, tmp_path: Path) -> None:
    whole = tmp_path / "whole.ogg"
    sf.write(str(whole), np.random.default_rng(0).uniform(-0.5, 0.5, (16000, 1)).astype(np.float32), 16000)
    path = tmp_path / "cut.ogg"
    path.write_bytes(whole.read_bytes()[: whole.stat().st_size // 2])
    assert run_error(graph_yaml("AudioFileSource", path=str(path))).endswith(
        f"options.path: '{path}' holds no samples: the stream ends before its end mark (libsndfile: Ogg : File ended "
        "unexpectedly without an End-Of-Stream flag set.) (truncated)")


def test_whole_sound_files_give_no_warning(sf: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    for ext in ("wav", "flac", "ogg", "aiff"):
        path = tmp_path / f"a.{ext}"
        sf.write(str(path), np.zeros((3000, 2), np.float32), 8000)
        with caplog.at_level("WARNING", logger="flowplex"):
            assert sum(len(p.as_numpy()) for p in run_graph(graph_yaml("AudioFileSource", path=str(path)))) == 3000
    assert warnings(caplog) == []


# -- frames larger than max_frame_bytes -----------------------------------------------------------


def _zeros_zlib(size: int, band: int = 1 << 20) -> bytes:
    """The zlib stream of ``size`` zero bytes, made without compressing them all (768 MB take
    seconds): a band of zeros ended by a full flush (byte-aligned, nothing refers back across
    it) compresses to the same bytes each time, so it is compressed twice and repeated; the
    Adler-32 of ``n`` zeros is ``(n mod 65521) << 16 | 1``."""
    z = zlib.compressobj(9)
    bands, rest = divmod(size, band)
    zeros = b"\0" * band
    parts = [z.compress(zeros) + z.flush(zlib.Z_FULL_FLUSH)] if bands else []
    if bands > 1:
        parts.append((z.compress(zeros) + z.flush(zlib.Z_FULL_FLUSH)) * (bands - 1))
    tail = z.compress(b"\0" * rest) + z.flush()
    return b"".join(parts) + tail[:-4] + struct.pack(">I", (size % 65521) << 16 | 1)


def _png(width: int, height: int) -> bytes:
    """A black RGB PNG of ``width`` x ``height``: a few hundred KB for 16000 x 16000."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    pixels = _zeros_zlib((1 + width * 3) * height)  # each row: filter byte 0, then black pixels
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", pixels) + chunk(b"IEND", b""))


def test_the_bombs_zlib_stream_inflates_to_its_zeros() -> None:
    for size in (0, 5, (1 << 20) - 1, 1 << 20, 3 * (1 << 20) + 7):
        assert zlib.decompress(_zeros_zlib(size)) == b"\0" * size, size  # (zlib checks the Adler-32 too)


def test_a_small_png_declaring_16000x16000_fails_naming_max_frame_bytes(av: Any, tmp_path: Path) -> None:
    path = tmp_path / "bomb.png"
    path.write_bytes(_png(16000, 16000))
    assert path.stat().st_size < 1_000_000  # 768 MB decoded
    start = time.monotonic()
    result = cli_run(tmp_path, graph_yaml("VideoFileSource", path=str(path)), timeout_s=40)
    line = error_line(result)
    assert f"options.max_frame_bytes: decoding '{path}' failed before its first frame" in line, line
    assert "FFmpeg found no frame size within max_frame_bytes=134217728 (44739242 pixels in rgb24): raise " \
           "max_frame_bytes if the file is trusted" in line
    assert time.monotonic() - start < 30


def test_a_declared_frame_size_over_max_frame_bytes_fails_open(av: Any, tmp_path: Path) -> None:
    path = tmp_path / "big.y4m"  # the header says 16000x16000; the body is one short line
    path.write_bytes(b"YUV4MPEG2 W16000 H16000 F25:1 Ip A1:1 C420jpeg\nFRAME\n" + b"\0" * 1000)
    assert run_error(graph_yaml("VideoFileSource", path=str(path))).endswith(
        f"options.max_frame_bytes: '{path}' has 16000x16000 frames, 768000000 bytes each in rgb24, over "
        "max_frame_bytes=134217728; raise max_frame_bytes if the file is trusted")


def test_max_frame_bytes_holds_for_each_output_format(av: Any, tmp_path: Path) -> None:
    path = tmp_path / "a.y4m"
    write_video(path, 2, fmt="yuv4mpegpipe")  # 64x48: 9216 bytes in rgb24, 4608 in yuv420p, 3072 in gray8
    for pix_fmt, size in [("rgb24", 9216), ("yuv420p", 4608), ("gray8", 3072)]:
        assert len(run_graph(graph_yaml("VideoFileSource", path=str(path), pix_fmt=pix_fmt,
                                        max_frame_bytes=size))) == 2
        # one byte less: FFmpeg's probe refuses the frame, and the first frame fails
        assert f"options.max_frame_bytes: decoding '{path}' failed before its first frame" in run_error(
            graph_yaml("VideoFileSource", path=str(path), pix_fmt=pix_fmt, max_frame_bytes=size - 1))
