"""Replaying a recording into a graph: the ``Player`` (pacing, windows, loops) and ``ReplaySource``.

A replay gives each output port its stream's packets with their recorded timestamps, values
and metadata, and the bounds that advanced with no packet; it keeps the recorded pacing scaled
by ``rate``; a loop shifts every timestamp by one period so that streams stay increasing and
aligned. Bad options fail the graph's start with the option named.
"""

from __future__ import annotations

import itertools
import json
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import flowplex
import flowplex.agents  # registers ReplaySource
import flowplex.recording as recording
from flowplex.errors import UsageError
from flowplex.recording import Record
from flowplex.recording._replay import RATE_MAX, Player, parse_rate

S = 1_000_000_000  # ns per second


def _write(path: Path, streams: dict[str, list[tuple[int, object, float] | tuple[str, int, float]]]) -> str:
    """A recording of ``streams``: ``(ts, value, wall_s)`` packets and ``("bound", ts, wall_s)`` bounds,
    written in wall-time order."""
    items = [(w, name, m) for name, ms in streams.items() for m in ms for w in [m[2]]]
    items.sort(key=lambda x: x[0])
    with recording.Recorder(path) as rec:
        for name in streams:
            rec.add_stream(name)
        for wall, name, m in items:
            if m[0] == "bound":
                rec.write_bound(name, int(m[1]), wall_ns=int(wall * S))  # type: ignore[call-overload]
            else:
                rec.write_value(name, int(m[0]), m[1], wall_ns=int(wall * S), metadata={"k": "v"})  # type: ignore[call-overload]
    return str(path)


def _graph(outputs: list[str], options: dict[str, object]) -> flowplex.Graph:
    spec = {"nodes": [{"name": "rp", "kernel": "ReplaySource", "output_ports": outputs, "options": options}],
            "output_ports": outputs}
    return flowplex.Graph.from_yaml(json.dumps(spec))


def _run(outputs: list[str], options: dict[str, object]) -> dict[str, list[tuple[str, int, object]]]:
    """Every packet and bound per output: ``("p", ts, value)`` / ``("b", ts, None)``."""
    got: dict[str, list[tuple[str, int, object]]] = {o: [] for o in outputs}
    with _graph(outputs, options) as g:
        for o in outputs:
            g.tap(o, lambda p, o=o: got[o].append(("p", p.timestamp, p.payload if not isinstance(p.payload, np.ndarray)
                                                     else p.payload.copy())),
                  lambda ts, o=o: got[o].append(("b", ts, None)))
        g.start()
        g.wait_done(timeout=20)
    return got


def _packets(events: list[tuple[str, int, object]]) -> list[tuple[int, object]]:
    return [(ts, v) for kind, ts, v in events if kind == "p"]


def test_packets_keep_their_timestamps_values_and_metadata(tmp_path: Path) -> None:
    frame = np.arange(24, dtype=np.uint16).reshape(2, 3, 4)
    path = _write(tmp_path / "r.mcap", {"a": [(3, 10, 0.0), (7, "x", 0.01), (9, frame, 0.02)]})
    metadata: list[object] = []
    got: list[tuple[int, object]] = []
    with _graph(["a"], {"path": path, "rate": "max"}) as g:
        g.observe("a", lambda p: (got.append((p.timestamp, p.payload)), metadata.append(p.metadata("k"))))
        g.start()
        g.wait_done(timeout=20)
    assert [ts for ts, _ in got] == [3, 7, 9]
    assert got[0][1] == 10 and got[1][1] == "x"
    arr = got[2][1]
    assert isinstance(arr, np.ndarray) and arr.dtype == np.uint16 and np.array_equal(arr, frame)
    assert metadata == ["v", "v", "v"]


def test_bounds_recorded_without_packets_are_replayed_as_bounds(tmp_path: Path) -> None:
    path = _write(tmp_path / "r.mcap", {"a": [(1, 5, 0.0), ("bound", 40, 0.01), (50, 6, 0.02)]})
    events = _run(["a"], {"path": path, "rate": "max"})["a"]
    assert ("b", 40, None) in events
    assert events.index(("b", 40, None)) < events.index(("p", 50, 6))
    assert _packets(events) == [(1, 5), (50, 6)]


def test_channels_by_port_name_by_option_and_the_only_one(tmp_path: Path) -> None:
    path = _write(tmp_path / "r.mcap", {"a": [(1, 1, 0.0), (2, 2, 0.1)], "b": [(1, 10, 0.05)]})
    by_port = _run(["b", "a"], {"path": path, "rate": "max"})
    assert _packets(by_port["b"]) == [(1, 10)] and _packets(by_port["a"]) == [(1, 1), (2, 2)]
    picked = _run(["x", "y"], {"path": path, "rate": "max", "channel": ["b", "a"]})
    assert _packets(picked["x"]) == [(1, 10)] and _packets(picked["y"]) == [(1, 1), (2, 2)]
    one = _run(["z"], {"path": path, "rate": "max", "channel": "a"})
    assert _packets(one["z"]) == [(1, 1), (2, 2)]
    only = _write(tmp_path / "one.mcap", {"cam": [(4, 4, 0.0)]})
    assert _packets(_run(["frames"], {"path": only, "rate": "max"})["frames"]) == [(4, 4)]


@pytest.mark.parametrize(("options", "message"), [
    ({"channel": "nope"}, r"options\.channel: the recording has no stream `nope`.*it has a, b"),
    ({"channel": "aa"}, r"did you mean `a`"),
    ({"channel": ["a", "b"]}, r"options\.channel: 2 stream\(s\) for 1 output port"),
    ({}, r"options\.channel: the recording has no stream `out`"),
    ({"channel": 3}, r"options\.channel: expected a stream name or a list"),
    ({"rate": 0}, r"options\.rate: expected a positive number or max, got 0"),
    ({"rate": "fast"}, r"options\.rate: expected a positive number or max, got 'fast'"),
    ({"start": -1}, r"options\.start: expected a number of seconds >= 0"),
    ({"start": 2, "end": 1}, r"options\.end: expected a number of seconds after start"),
])
def test_bad_options_fail_the_start_naming_the_option(tmp_path: Path, options: dict[str, object],
                                                       message: str) -> None:
    path = _write(tmp_path / "r.mcap", {"a": [(1, 1, 0.0)], "b": [(1, 1, 0.0)]})
    with pytest.raises(flowplex.KernelError, match=message):
        _run(["out"], {"path": path, **options})


def test_a_file_that_is_not_a_recording_fails_the_start_with_its_path(tmp_path: Path) -> None:
    bad = tmp_path / "junk.mcap"
    bad.write_bytes(b"\x00garbage" * 40)
    with pytest.raises(flowplex.KernelError, match=r"options\.path: .*junk\.mcap"):
        _run(["a"], {"path": str(bad)})
    with pytest.raises(flowplex.KernelError, match=r"options\.path: .*missing\.mcap"):
        _run(["a"], {"path": str(tmp_path / "missing.mcap")})
    with pytest.raises(flowplex.KernelError, match=r"options\.path: missing"):
        _run(["a"], {})


@pytest.mark.parametrize("rate", [1.0, 3.0])
def test_pacing_follows_the_recorded_wall_times_scaled_by_rate(tmp_path: Path, rate: float) -> None:
    path = _write(tmp_path / "r.mcap", {"a": [(i, i, 0.15 * i) for i in range(4)]})
    arrivals: list[float] = []
    with _graph(["a"], {"path": path, "rate": rate}) as g:
        g.observe("a", lambda p: arrivals.append(time.monotonic()))
        g.start()
        g.wait_done(timeout=20)
    offsets = [t - arrivals[0] for t in arrivals]
    for got, want in zip(offsets, [0.15 * i / rate for i in range(4)], strict=True):
        assert want - 0.02 <= got <= want + 0.15, (offsets, rate)


def test_rate_max_does_not_wait(tmp_path: Path) -> None:
    path = _write(tmp_path / "r.mcap", {"a": [(i, i, 10.0 * i) for i in range(5)]})  # 40 s as recorded
    t0 = time.monotonic()
    assert len(_packets(_run(["a"], {"path": path, "rate": "max"})["a"])) == 5
    assert time.monotonic() - t0 < 5


def test_start_and_end_cut_a_window_in_seconds_from_the_first_message(tmp_path: Path) -> None:
    path = _write(tmp_path / "r.mcap", {"a": [(i, i, 1.0 * i) for i in range(10)]})
    got = _packets(_run(["a"], {"path": path, "rate": "max", "start": 2.5, "end": 6})["a"])
    assert [ts for ts, _ in got] == [3, 4, 5, 6]


# --- Player: the engine-free half ---------------------------------------------------------------


def _records(streams: dict[str, list[int]], step_s: float = 0.1) -> list[Record]:
    out = [Record(name, "i64", ts, ts, int(ts * step_s * S)) for name, tss in streams.items() for ts in tss]
    return sorted(out, key=lambda r: (r.wall_ns, r.stream))


def test_a_loop_shifts_every_stream_by_one_period_and_keeps_them_aligned() -> None:
    records = _records({"a": [0, 2, 4], "b": [0, 4]})
    player = Player(lambda: records, {"a": 0, "b": 1}, rate=RATE_MAX, loop=True)
    dues = [player.pop() for _ in range(15)]
    by_out: dict[int, list[int]] = {0: [], 1: []}
    for d in dues:
        assert d is not None
        by_out[d.output].append(d.ts)
    period = 4 - 0 + 2  # span + the smallest step
    assert by_out[0][:6] == [0, 2, 4, 0 + period, 2 + period, 4 + period]
    assert by_out[1][:4] == [0, 4, period, 4 + period]


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(st.sampled_from("abc"), st.lists(st.integers(-50, 50), min_size=1, max_size=8, unique=True),
                       min_size=1),
       st.integers(1, 4))
def test_looped_timestamps_strictly_increase_per_stream_and_repeat_round_zero(
        streams: dict[str, list[int]], rounds: int) -> None:
    records = _records({k: sorted(v) for k, v in streams.items()})
    outputs = {name: i for i, name in enumerate(streams)}
    player = Player(lambda: records, outputs, rate=RATE_MAX, loop=True)
    dues = [player.pop() for _ in range(rounds * len(records))]
    per: dict[int, list[int]] = {}
    for d in dues:
        assert d is not None
        per.setdefault(d.output, []).append(d.ts)
    for out, tss in per.items():
        assert all(x < y for x, y in itertools.pairwise(tss)), tss
        n = len(streams[list(streams)[out]])
        base = tss[:n]
        shift = tss[n] - base[0] if len(tss) > n else 0
        for k in range(rounds):
            assert tss[k * n:(k + 1) * n] == [t + k * shift for t in base]
    # no packet lost or duplicated within a round
    first = [(d.output, d.ts) for d in dues[:len(records)] if d is not None]
    assert sorted(first) == sorted((outputs[r.stream], r.ts) for r in records)


def test_player_without_loop_ends_and_paces_by_rate() -> None:
    records = _records({"a": [0, 10, 20]}, step_s=0.1)
    player = Player(lambda: records, {"a": 0}, rate=2.0)
    dues = [player.pop(), player.pop(), player.pop()]
    assert player.pop() is None and player.peek() is None
    assert [d.at_s for d in dues if d is not None] == pytest.approx([0.0, 0.5, 1.0])


@pytest.mark.parametrize(("text", "want"), [("max", RATE_MAX), ("2", 2.0), ("2x", 2.0), (" 0.5 ", 0.5), (3, 3.0)])
def test_parse_rate(text: object, want: float) -> None:
    assert parse_rate(text) == want


@pytest.mark.parametrize("bad", ["", "maxx", "-1", "0", "nan", "inf", True, None, [1]])
def test_parse_rate_refuses(bad: object) -> None:
    with pytest.raises(UsageError, match="expected a positive number or max"):
        parse_rate(bad)
