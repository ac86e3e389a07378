"""VideoFileSink: files PyAV reopens with the right frames, finished on end, failure and cancel."""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import flowplex

from . import kernels as kernels  # registers the test kernels
from ._graphs import start_error
from .conftest import FPS, FRAMES, HEIGHT, WAIT_S, WIDTH, clip_frame, decoded

FRAME_US = 1_000_000 // FPS


def transcode_yaml(src: Path, out: Path, *, middle: str = "", source: str = "", **sink: Any) -> str:
    sink_options = ", ".join(f"{k}: {v!r}" for k, v in {"path": str(out), **sink}.items())
    mid = f"  - {middle}\n" if middle else ""
    port = "m" if middle else "f"
    return (f"nodes:\n  - {{ name: src, kernel: VideoFileSource, output_ports: [f], "
            f"options: {{ path: '{src}'{source} }} }}\n{mid}"
            f"  - {{ name: sink, kernel: VideoFileSink, input_ports: [{port}], options: {{ {sink_options} }} }}\n")


def run_to_end(yaml: str) -> None:
    with flowplex.Graph.from_yaml(yaml) as g:
        g.start()
        g.wait_done(timeout=WAIT_S)


def stream_of(path: Path, av: Any) -> tuple[str, int, int, int]:
    with av.open(str(path)) as container:
        s = container.streams.video[0]
        return s.codec_context.name, s.codec_context.width, s.codec_context.height, sum(1 for _ in container.decode(s))


def test_a_transcoded_clip_reopens_with_every_frame_at_its_timestamp(av: Any, clip: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.mp4"
    run_to_end(transcode_yaml(clip, out, source=", start_s: 0.2"))
    assert stream_of(out, av) == ("h264", WIDTH, HEIGHT, FRAMES - 5)  # H.264 by default: the bundled FFmpeg has it
    frames = decoded(out)
    assert [ts for ts, _ in frames] == [i * FRAME_US for i in range(FRAMES - 5)]  # counted from the first frame
    difference = np.abs(frames[3][1].astype(int) - decoded(clip)[8][1].astype(int))
    assert difference.mean() < 3  # lossy, but the same picture


def test_fps_times_frames_by_their_count(av: Any, clip: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.avi"
    run_to_end(transcode_yaml(clip, out, source=", end_s: 0.4", codec="mpeg4", fps=10))
    assert stream_of(out, av)[0::3] == ("mpeg4", 10)
    assert [ts for ts, _ in decoded(out)] == [i * 100_000 for i in range(10)]


@pytest.mark.parametrize("pix_fmt", ["gray8", "yuv420p", "bgr24"])
def test_every_source_pix_fmt_encodes(av: Any, clip: Path, tmp_path: Path, pix_fmt: str) -> None:
    out = tmp_path / "out.mkv"
    run_to_end(transcode_yaml(clip, out, source=f", pix_fmt: {pix_fmt}, end_s: 0.2", crf=18))
    assert stream_of(out, av) == ("h264", WIDTH, HEIGHT, 5)
    got, want = decoded(out, "rgb24")[2][1].astype(int), decoded(clip, "rgb24")[2][1].astype(int)
    if pix_fmt == "gray8":
        got, want = got.mean(axis=2), want.mean(axis=2)
    assert np.abs(got - want).mean() < 6


def test_frames_sent_by_the_host_gray_or_rgb(av: Any, tmp_path: Path) -> None:
    out = tmp_path / "host.mp4"
    yaml = (f"nodes: [{{ name: sink, kernel: VideoFileSink, input_ports: [x], "
            f"options: {{ path: '{out}', fps: 25 }} }}]\ninput_ports: [x]\n")
    with flowplex.Graph.from_yaml(yaml) as g:
        g.start()
        for i in range(6):
            g.send("x", clip_frame(i)[..., 0].copy() if i % 2 else clip_frame(i), ts=i)
        g.close_all_inputs()
        g.wait_done(timeout=WAIT_S)
    assert stream_of(out, av) == ("h264", WIDTH, HEIGHT, 6)


def test_a_failing_graph_still_leaves_a_file_that_plays(av: Any, clip: Path, tmp_path: Path) -> None:
    out = tmp_path / "failed.mp4"
    yaml = transcode_yaml(clip, out, middle="{ name: fail, kernel: MediaTestFailAt, input_ports: [f], "
                                            "output_ports: [m], options: { at: 12 } }")
    assert "planned failure at frame 12" in start_error(yaml)
    assert 1 <= stream_of(out, av)[3] <= 12


def test_a_cancelled_graph_still_leaves_a_file_that_plays(av: Any, clip: Path, tmp_path: Path) -> None:
    out = tmp_path / "cancelled.mp4"
    yaml = transcode_yaml(clip, out, source=", realtime: true, loop: true") + "output_ports: [f]\n"
    with flowplex.Graph.from_yaml(yaml) as g:
        poller = g.add_poller("f")
        g.start()
        for _ in range(4):
            assert poller.next(timeout=WAIT_S) is not None
        g.cancel()
    assert stream_of(out, av)[3] >= 3  # what the sink received before the cancel


def test_no_frame_writes_no_file_and_says_so(av: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    out = tmp_path / "empty.mp4"
    yaml = f"nodes: [{{ name: sink, kernel: VideoFileSink, input_ports: [x], options: {{ path: '{out}' }} }}]\n" \
           "input_ports: [x]\n"
    with caplog.at_level(logging.WARNING), flowplex.Graph.from_yaml(yaml) as g:
        g.start()
        g.close_all_inputs()
        g.wait_done(timeout=WAIT_S)
    assert not out.exists()
    assert "media.sink.empty node='sink'" in caplog.text


# -- bad input ------------------------------------------------------------------------------------------------------


def _sink_error(tmp_path: Path, **options: Any) -> str:
    options = {"path": str(tmp_path / "out.mp4"), **options}
    text = ", ".join(f"{k}: {v!r}" for k, v in options.items())
    return start_error(f"nodes: [{{ name: sink, kernel: VideoFileSink, input_ports: [x], options: {{ {text} }} }}]\n"
                       "input_ports: [x]\n")


@pytest.mark.parametrize(("options", "message"), [
    ({"codec": "libx246"}, r"options\.codec: 'libx246' is not an encoder of the bundled FFmpeg; did you mean "
                           r"'libx264'\? found: libx264, mpeg4, .* and \d+ more$"),
    ({"codec": "aac"}, r"options\.codec: 'aac' is an audio encoder, not a video one$"),
    ({"codec": "mpeg4", "crf": 20}, r"options\.crf: codec 'mpeg4' has no constant rate factor \(those that do: "),
    ({"path": "/no/such/dir/out.mp4"}, r"options\.path: cannot write '/no/such/dir/out\.mp4': directory '/no/such/dir' "
                                       r"does not exist$"),
    ({"fps": 0}, r"options\.fps: must be > 0, got 0$"),
])
def test_bad_options(av: Any, tmp_path: Path, options: dict[str, Any], message: str) -> None:
    assert re.search(r"^kernel failed: \[sink\] open failed: ConfigError: node 'sink' \(VideoFileSink\): " + message,
                     _sink_error(tmp_path, **options))


def test_an_unknown_extension(av: Any, tmp_path: Path) -> None:
    assert _sink_error(tmp_path, path=str(tmp_path / "out.zzz")).endswith(
        f"options.path: cannot write '{tmp_path / 'out.zzz'}': Could not determine output format; name it with the "
        "`format` option, or use .mp4, .mkv, .avi")


@pytest.mark.parametrize(("value", "message"), [
    (np.zeros((8, 8, 3), np.float32), r"input frame has dtype float32, expected uint8"),
    (np.zeros((8, 8, 4), np.uint8), r"input frame has shape \(8, 8, 4\); expected \(H, W, 3\) RGB"),
    ("frame", r"input frame is Str, expected a uint8 image buffer"),
])
def test_bad_frames_fail_the_graph_naming_the_node(av: Any, tmp_path: Path, value: object, message: str) -> None:
    yaml = (f"nodes: [{{ name: sink, kernel: VideoFileSink, input_ports: [x], "
            f"options: {{ path: '{tmp_path}/o.mp4' }} }}]\ninput_ports: [x]\n")
    with flowplex.Graph.from_yaml(yaml) as g:
        g.start()
        g.send("x", value, ts=0)
        g.close_all_inputs()
        with pytest.raises(flowplex.KernelError, match=r"^kernel failed: \[sink\] UsageError: node 'sink' "
                                                       r"\(VideoFileSink\): " + message):
            g.wait_done(timeout=WAIT_S)


def test_a_frame_of_another_size(av: Any, tmp_path: Path) -> None:
    yaml = (f"nodes: [{{ name: sink, kernel: VideoFileSink, input_ports: [x], "
            f"options: {{ path: '{tmp_path}/o.mp4' }} }}]\ninput_ports: [x]\n")
    with flowplex.Graph.from_yaml(yaml) as g:
        g.start()
        g.send("x", clip_frame(0), ts=0)
        g.send("x", np.zeros((32, 32, 3), np.uint8), ts=1)
        g.close_all_inputs()
        with pytest.raises(flowplex.KernelError,
                           match=r"frame 1 is 32x32, but '.*o\.mp4' was started at 64x48; a video keeps one size$"):
            g.wait_done(timeout=WAIT_S)
    assert stream_of(tmp_path / "o.mp4", av)[3] == 1  # closed on the error: the first frame plays
