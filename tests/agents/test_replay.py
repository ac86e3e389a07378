"""ReplaySource: transcripts replayed with their token timing."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

import flowplex
from flowplex.agents import load_transcript, read_chunk
from flowplex.errors import ConfigError
from flowplex.terminal import LogRenderer, TermCaps, Writer, register_display

from .conftest import run_source, source_graph, text_of


def write(tmp_path: Path, lines: list[object]) -> str:
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n", encoding="utf-8")
    return str(path)


@pytest.mark.parametrize("speed", [1.0, 4.0])
def test_timing_follows_the_transcript_scaled_by_speed(tmp_path: Path, speed: float) -> None:
    path = write(tmp_path, [{"meta": {"name": "bot", "agent_type": "user"}},
                            {"t": 0.0, "text": "a"}, {"t": 0.4, "text": "b"}, {"dt": 0.4, "text": "c"}])
    chunks = run_source("ReplaySource", {"path": path, "speed": speed})
    texts = [c.text for _, c in chunks if not c.is_end]
    assert texts == ["a", "b", "c"]
    t0 = chunks[0][0]
    offsets = [t - t0 for t, c in chunks if not c.is_end]
    for got, want in zip(offsets, [0.0, 0.4 / speed, 0.8 / speed], strict=True):
        assert want - 0.02 <= got <= want + 0.15, (offsets, speed)
    assert [c.ts for _, c in chunks[:3]] == [0, 400_000, 800_000]  # transcript time, whatever the speed
    first = chunks[0][1]
    assert (first.name, first.agent_type.name) == ("bot", "USER")
    assert chunks[-1][1].is_end and chunks[-1][1].text == "end of transcript"


def test_options_override_the_transcript_meta(tmp_path: Path) -> None:
    path = write(tmp_path, [{"meta": {"name": "bot"}}, {"t": 0, "text": "x"}])
    chunks = run_source("ReplaySource", {"path": path, "name": "other", "agent_type": 3, "stream_id": 5})
    c = chunks[0][1]
    assert (c.name, c.agent_type.name, c.stream_id) == ("other", "ERROR", 5)


def test_loop_runs_until_the_display_drains(tmp_path: Path) -> None:
    import io

    path = write(tmp_path, [{"t": 0, "text": "x"}])
    display = LogRenderer(Writer(io.BytesIO()), TermCaps(is_tty=False))
    got: list[str] = []
    g = source_graph("ReplaySource", {"path": path, "loop": True, "speed": 10, "display": "loops"})
    with register_display("loops", display), display, g:
        g.observe("out", lambda p: got.append(read_chunk(p).text))
        g.start()
        time.sleep(0.6)  # a loop lasts 0.15 s at speed 10 (1.5 s gap)
        display.draining.set()
        g.wait_done(timeout=5)
    assert got.count("x") >= 3 and got[-1] == "stopped"


def test_bundled_transcripts_are_recordings_replayed_like_any_other() -> None:
    import flowplex.recording as recording
    from flowplex.agents._transcripts import bundled_path

    for name in ("planner", "coder", "reviewer", "mallory"):
        with recording.open(bundled_path(f"{name}.mcap")) as rec:
            summary = rec.summary()
            assert rec.streams == [name] and rec.complete
            s = summary.streams[name]
            assert s.kind == "str" and s.count > 50 and 5 < s.wall_span_s < 60
            first = next(rec.messages())
            assert first.metadata is not None and first.metadata["agent"] == name
    # the former name of a bundled transcript still finds it
    chunks = run_source("ReplaySource", {"path": "bundled:planner.jsonl", "rate": "max"})
    assert text_of(chunks).startswith("## Plan: stream many agents into one terminal")
    assert chunks[-1][1].is_end and chunks[-1][1].text == "end of recording"
    assert [c.ts for _, c in chunks] == sorted({c.ts for _, c in chunks})  # strictly increasing


def test_a_recording_given_as_a_transcript_says_what_it_is(tmp_path: Path) -> None:
    from flowplex.agents._transcripts import bundled_path

    fake = tmp_path / "x.jsonl"
    fake.write_bytes(bundled_path("coder.mcap").read_bytes())
    with pytest.raises(ConfigError, match=r"x\.jsonl: not a JSONL transcript"):
        load_transcript(fake)


@pytest.mark.parametrize(("lines", "message"), [
    (['{"t": 0, "text": "a"}', "not json"], r"t\.jsonl:2: not JSON"),
    (['{"t": 1, "text": "a"}', '{"t": 0.5, "text": "b"}'], r"t\.jsonl:2: time 0\.5 must be a number >= .*1 s"),
    (['{"t": 0}'], r't\.jsonl:1: "text" must be a string'),
    (['{"text": "x"}'], r't\.jsonl:1: a record needs "t"'),
    (['[1, 2]'], r"t\.jsonl:1: expected a JSON object, found list"),
    (['{"meta": {"agent_type": "robot"}}'], r"t\.jsonl:1: meta\.agent_type: unknown agent type 'robot'"),
])
def test_malformed_transcripts_name_file_and_line(tmp_path: Path, lines: list[str], message: str) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(lines), encoding="utf-8")
    with pytest.raises(ConfigError, match=message):
        load_transcript(path)
    with pytest.raises(flowplex.KernelError, match=r"options\.path: .*" + message):
        run_source("ReplaySource", {"path": str(path)})


def test_missing_file_and_bad_options(tmp_path: Path) -> None:
    with pytest.raises(flowplex.KernelError, match=r"options\.path: .*nope\.jsonl: cannot read transcript"):
        run_source("ReplaySource", {"path": str(tmp_path / "nope.jsonl")})
    with pytest.raises(flowplex.KernelError, match=r"options\.path: missing"):
        run_source("ReplaySource", {})
    with pytest.raises(flowplex.KernelError, match=r"options\.speed: must be a positive number"):
        run_source("ReplaySource", {"path": "bundled:coder.mcap", "speed": 0})
