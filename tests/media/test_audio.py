"""AudioFileSource and AudioFileSink on real WAV/FLAC/OGG files made with soundfile."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import flowplex

from ._graphs import collect, source_yaml, start_error
from .conftest import WAIT_S

RATE = 8000


def tone(frames: int = 2500, channels: int = 2) -> np.ndarray:
    """A stereo test signal: two sines, exactly representable in 16 bits."""
    t = np.arange(frames) / RATE
    left = np.round(np.sin(2 * np.pi * 440 * t) * 16000) / 32768
    right = np.round(np.sin(2 * np.pi * 660 * t) * 8000) / 32768
    return np.stack([left, right], axis=1)[:, :channels].astype(np.float32)


def test_chunks_are_float32_frames_x_channels_stamped_from_the_sample_position(sf: Any, tmp_path: Path) -> None:
    wav = tmp_path / "tone.wav"
    signal = tone()
    sf.write(str(wav), signal, RATE, subtype="FLOAT")
    got = collect(source_yaml("AudioFileSource", path=str(wav), frames_per_packet=1000))
    assert [p.as_numpy().shape for p in got] == [(1000, 2), (1000, 2), (500, 2)]
    assert [p.timestamp for p in got] == [0, 125_000, 250_000]  # 1000 samples at 8 kHz: 125 ms
    assert all(p.as_numpy().dtype == np.float32 for p in got)
    assert [p.metadata("sample_index") for p in got] == [0, 1000, 2000]
    assert {(p.metadata("sample_rate"), p.metadata("channels"), p.metadata("format")) for p in got} == {
        (RATE, 2, "WAV")}
    np.testing.assert_array_equal(np.concatenate([p.as_numpy() for p in got]), signal)


@pytest.mark.parametrize(("suffix", "subtype", "tolerance"), [
    ("wav", "FLOAT", 0.0), ("flac", None, 0.0), ("wav", "PCM_16", 0.0), ("ogg", None, 0.05)])
def test_a_file_copied_through_the_graph_reads_back_the_same(sf: Any, tmp_path: Path, suffix: str,
                                                             subtype: str | None, tolerance: float) -> None:
    src, out = tmp_path / "in.wav", tmp_path / f"out.{suffix}"
    signal = tone()
    sf.write(str(src), signal, RATE, subtype="FLOAT")
    sink = f"{{ path: '{out}'" + (f", subtype: {subtype}" if subtype else "") + " }"
    yaml = (f"nodes:\n  - {{ name: src, kernel: AudioFileSource, output_ports: [a], options: {{ path: '{src}', "
            f"frames_per_packet: 256 }} }}\n"
            f"  - {{ name: sink, kernel: AudioFileSink, input_ports: [a], options: {sink} }}\n")
    with flowplex.Graph.from_yaml(yaml) as g:
        g.start()
        g.wait_done(timeout=WAIT_S)
    back, rate = sf.read(str(out), dtype="float32", always_2d=True)
    assert rate == RATE and back.shape == signal.shape  # the sample rate came from the chunks' metadata
    assert np.abs(back - signal).max() <= tolerance  # PCM_16 and FLAC are exact: the tone fits 16 bits


def test_mono_chunks_from_the_host_with_a_sample_rate_option(sf: Any, tmp_path: Path) -> None:
    out = tmp_path / "mono.flac"
    yaml = (f"nodes: [{{ name: sink, kernel: AudioFileSink, input_ports: [x], options: {{ path: '{out}', "
            "sample_rate: 16000 } }]\ninput_ports: [x]\n")
    signal = tone(1024, 1)[:, 0]
    with flowplex.Graph.from_yaml(yaml) as g:
        g.start()
        for i in range(4):
            g.send("x", signal[i * 256: (i + 1) * 256].copy(), ts=i)
        g.close_all_inputs()
        g.wait_done(timeout=WAIT_S)
    back, rate = sf.read(str(out), dtype="float32")
    assert rate == 16000
    np.testing.assert_array_equal(back, signal)


def test_realtime_audio_is_paced(sf: Any, tmp_path: Path) -> None:
    import time

    wav = tmp_path / "short.wav"
    sf.write(str(wav), tone(2400), RATE)  # 0.3 s
    t0 = time.monotonic()
    got = collect(source_yaml("AudioFileSource", path=str(wav), frames_per_packet=800, realtime=True))
    assert len(got) == 3 and time.monotonic() - t0 >= 0.2 * 0.9  # the last chunk is due at 0.2 s


def test_bad_source_input(sf: Any, tmp_path: Path) -> None:
    prefix = "kernel failed: [src] open failed: ConfigError: node 'src' (AudioFileSource): options."
    assert start_error(source_yaml("AudioFileSource", path=str(tmp_path / "nope.wav"))) == (
        f"{prefix}path: cannot open '{tmp_path / 'nope.wav'}': No such file or directory")
    text = tmp_path / "notes.wav"
    text.write_text("not a sound\n")
    assert re.fullmatch(re.escape(f"{prefix}path: '{text}' is not a sound file libsndfile can read (")
                        + r".+\); it reads WAV, FLAC, OGG and the formats soundfile\.available_formats\(\) lists",
                        start_error(source_yaml("AudioFileSource", path=str(text))))
    wav = tmp_path / "ok.wav"
    sf.write(str(wav), tone(100), RATE)
    assert start_error(source_yaml("AudioFileSource", path=str(wav), frames_per_packet=0)) == (
        f"{prefix}frames_per_packet: must be >= 1, got 0")


@pytest.mark.parametrize(("options", "message"), [
    ({"path": "out.xyz"}, r"options\.path: 'XYZ' is not a format libsndfile writes; use one of AIFF, .*WAV.* "
                          r"\(or set `format`\)$"),
    ({"path": "out.wav", "subtype": "VORBIS"},
     r"options\.subtype: 'VORBIS' does not go in WAV files; use one of .*PCM_16"),
    ({"path": "/no/dir/out.wav"},
     r"options\.path: cannot write '/no/dir/out\.wav': directory '/no/dir' does not exist$"),
])
def test_bad_sink_options(sf: Any, options: dict[str, Any], message: str) -> None:
    text = ", ".join(f"{k}: {v!r}" for k, v in options.items())
    error = start_error(f"nodes: [{{ name: sink, kernel: AudioFileSink, input_ports: [x], options: {{ {text} }} }}]\n"
                        "input_ports: [x]\n")
    assert re.search(r"^kernel failed: \[sink\] open failed: ConfigError: node 'sink' \(AudioFileSink\): " + message,
                     error)


def test_a_chunk_without_a_sample_rate(sf: Any, tmp_path: Path) -> None:
    yaml = (f"nodes: [{{ name: sink, kernel: AudioFileSink, input_ports: [x], "
            f"options: {{ path: '{tmp_path}/o.wav' }} }}]\ninput_ports: [x]\n")
    with flowplex.Graph.from_yaml(yaml) as g:
        g.start()
        g.send("x", np.zeros(64, np.float32), ts=0)
        g.close_all_inputs()
        with pytest.raises(flowplex.KernelError, match=r"options\.sample_rate: missing, and the first chunk has no "
                                                       r"sample_rate metadata; set sample_rate: 48000"):
            g.wait_done(timeout=WAIT_S)
