"""VideoFileSource on real files made with PyAV: frames, timestamps, metadata, ranges, loops, pacing."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import flowplex
from flowplex.media import PIX_FMTS, frame_shape

from . import kernels as kernels  # registers the test kernels
from ._graphs import collect, frames, source_yaml, start_error
from .conftest import FPS, FRAMES, HEIGHT, WIDTH, decoded, need, write_clip

FRAME_US = 1_000_000 // FPS


@pytest.mark.parametrize(("pix_fmt", "ffmpeg", "shape"), [
    ("rgb24", "rgb24", (HEIGHT, WIDTH, 3)),
    ("bgr24", "bgr24", (HEIGHT, WIDTH, 3)),
    ("gray8", "gray", (HEIGHT, WIDTH, 1)),
    ("yuv420p", "yuv420p", (HEIGHT * 3 // 2, WIDTH)),
])
def test_every_frame_arrives_with_its_pts_in_us_its_pixels_and_metadata(clip: Path, pix_fmt: str, ffmpeg: str,
                                                                       shape: tuple[int, ...]) -> None:
    got = frames(clip, pix_fmt=pix_fmt)
    expected = decoded(clip, ffmpeg)
    assert len(got) == len(expected) == FRAMES
    assert [p.timestamp for p in got] == [ts for ts, _ in expected] == [i * FRAME_US for i in range(FRAMES)]
    assert frame_shape(PIX_FMTS[pix_fmt], WIDTH, HEIGHT) == shape
    for i, (p, (_, pixels)) in enumerate(zip(got, expected, strict=True)):
        array = p.as_numpy()
        assert array.shape == shape and array.dtype == np.uint8
        np.testing.assert_array_equal(array.reshape(pixels.shape), pixels)  # FFmpeg's line padding is gone
        assert {k: p.metadata(k) for k in p.metadata_keys()} == {
            "width": WIDTH, "height": HEIGHT, "pix_fmt": pix_fmt, "frame_index": i, "loop": 0, "time_base": "1/12800"}


def test_start_s_and_end_s_keep_the_frames_presented_in_the_range(clip: Path) -> None:
    got = frames(clip, start_s=0.2, end_s=0.5)
    assert [p.timestamp for p in got] == [i * FRAME_US for i in range(5, 13)]  # 0.20 .. 0.48 s
    np.testing.assert_array_equal(got[0].as_numpy(), decoded(clip)[5][1])
    assert [p.metadata("frame_index") for p in got] == list(range(8))
    # 0.72 s is the first frame at or after 0.7 s
    assert [p.timestamp for p in frames(clip, start_s=0.7)] == [i * FRAME_US for i in range(18, 20)]


def test_loop_n_plays_the_range_n_times_with_timestamps_going_on(clip: Path) -> None:
    got = frames(clip, loop=3, end_s=0.2)  # 5 frames a pass
    assert len(got) == 15
    assert [p.timestamp for p in got] == [i * FRAME_US for i in range(15)]
    assert [p.metadata("loop") for p in got] == [0] * 5 + [1] * 5 + [2] * 5
    assert [p.metadata("frame_index") for p in got] == list(range(15))
    np.testing.assert_array_equal(got[5].as_numpy(), got[0].as_numpy())


def test_loop_true_plays_until_the_graph_is_cancelled(clip: Path) -> None:
    with flowplex.Graph.from_yaml(source_yaml("VideoFileSource", path=str(clip), loop=True)) as g:
        poller = g.add_poller("out")
        g.start()
        stamps = [poller.next(timeout=30).timestamp for _ in range(2 * FRAMES + 3)]
        g.cancel()
    assert stamps == [i * FRAME_US for i in range(2 * FRAMES + 3)]


def test_realtime_paces_frames_by_their_timestamps(tmp_path: Path) -> None:
    short = write_clip(tmp_path / "short.mp4", frames=8)  # 0.28 s from the first frame to the last
    t0 = time.monotonic()
    got = frames(short, realtime=True)
    elapsed = time.monotonic() - t0
    assert len(got) == 8
    assert elapsed >= 7 * FRAME_US / 1e6 * 0.9  # never early; late is allowed (a loaded machine)


def test_frames_are_engine_buffers_a_kernel_writes_in_place_without_a_copy(clip: Path) -> None:
    from flowplex.packets import cow_stats

    yaml = (f"nodes:\n  - {{ name: src, kernel: VideoFileSource, output_ports: [f], options: {{ path: '{clip}' }} }}\n"
            "  - { name: ink, kernel: MediaTestInPlace, input_ports: [f], output_ports: [out] }\noutput_ports: [out]\n")
    before = cow_stats().copies
    got = collect(yaml)
    assert len(got) == FRAMES and all(p.as_numpy().reshape(-1)[0] == 7 for p in got)
    assert cow_stats().copies == before


@pytest.mark.skipif(not Path("/dev/video0").exists(), reason="no capture device at /dev/video0 on this machine")
def test_a_v4l2_device_is_the_same_source_with_a_device_path() -> None:  # pragma: no cover - needs a camera
    need("av")
    with flowplex.Graph.from_yaml(source_yaml("VideoFileSource", path="/dev/video0", format="v4l2")) as g:
        poller = g.add_poller("out")
        g.start()
        first = poller.next(timeout=30)
        g.cancel()
    assert first is not None and first.as_numpy().ndim == 3


# -- bad input: one line naming the node, the path and what was found ------------------------------------------------


def _error(**options: Any) -> str:
    return start_error(source_yaml("VideoFileSource", **options))


def test_a_missing_file(av: Any, tmp_path: Path) -> None:
    assert _error(path=str(tmp_path / "nope.mp4")) == (
        f"kernel failed: [src] open failed: ConfigError: node 'src' (VideoFileSource): options.path: "
        f"cannot open '{tmp_path / 'nope.mp4'}': No such file or directory")


def test_a_text_file_is_not_media(av: Any, tmp_path: Path) -> None:
    notes = tmp_path / "notes.mp4"
    notes.write_text("shopping list: eggs, milk\n")
    assert _error(path=str(notes)).endswith(
        f"options.path: '{notes}' is not a media file FFmpeg can read (found: text starting 'shopping list: eggs, "
        "milk'; FFmpeg: Invalid data found when processing input)")


def test_a_sound_file_has_no_video_stream(av: Any, sf: Any, tmp_path: Path) -> None:
    wav = tmp_path / "tone.wav"
    sf.write(str(wav), np.zeros((800, 1), np.float32), 8000)
    assert _error(path=str(wav)).endswith(f"options.path: '{wav}' has no video stream (found: audio (pcm_s16le))")


@pytest.mark.parametrize(("options", "message"), [
    ({}, r"options\.path: missing; give a video file, a URL, or a device such as /dev/video0$"),
    ({"pix_fmt": "rgba"}, r"options\.pix_fmt: 'rgba' is not one of rgb24, bgr24, gray8, yuv420p$"),
    ({"loop": "yes"},
     r"options\.loop: expected true \(forever\), false \(once\) or a number of passes >= 1, got 'yes'$"),
    ({"start_s": 0.5, "end_s": 0.5}, r"options\.end_s: must be after start_s \(0\.5 s\), got 0\.5$"),
    ({"start_s": -1}, r"options\.start_s: must be >= 0, got -1$"),
    ({"realtime": 1}, r"options\.realtime: expected true or false, got 1$"),
    ({"format": "v4l9"},
     r"options\.format: 'v4l9' is not an input format of the bundled FFmpeg \(no container format 'v4l9'\)$"),
])
def test_bad_options(av: Any, clip: Path, options: dict[str, Any], message: str) -> None:
    if options != {}:
        options = {"path": str(clip), **options}
    import re

    assert re.search(r"^kernel failed: \[src\] open failed: ConfigError: node 'src' \(VideoFileSource\): " + message,
                     _error(**options))


def test_an_unknown_option_gets_a_did_you_mean(av: Any, clip: Path) -> None:
    assert _error(path=str(clip), pixfmt="gray8").endswith(
        "options.pixfmt: unknown option; did you mean `pix_fmt`? VideoFileSource takes path, format, demuxer_options, "
        "pix_fmt, start_s, end_s, loop, realtime, timeout_s, max_frame_bytes")
