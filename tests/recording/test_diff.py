"""``flowplex.recording.diff``: two recordings are equal stream by stream, whatever their interleaving;
otherwise the first divergence says where (stream, index, timestamp) and how.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Sequence
from pathlib import Path

import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from flowplex import UsageError
from flowplex.recording import Divergence, Recorder, RecordingError, compare, diff
from flowplex.recording import open as open_recording

# A message: (stream, ts, value, metadata) or (stream, ts, "bound") for a bound.
Message = tuple[object, ...]
BOUND = "bound"


def write(path: Path, messages: Iterable[Message], streams: Sequence[str] | None = None) -> Path:
    """A recording of ``messages`` in that order (streams added in first-seen order, or ``streams``)."""
    messages = list(messages)
    with Recorder(path, chunk_size=256) as rec:
        for s in streams if streams is not None else dict.fromkeys(str(m[0]) for m in messages):
            rec.add_stream(s)
        for m in messages:
            stream, ts = str(m[0]), int(m[1])  # type: ignore[call-overload]
            if len(m) == 3 and isinstance(m[2], str) and m[2] == BOUND:
                rec.write_bound(stream, ts)
            else:
                meta = m[3] if len(m) > 3 else None
                rec.write_value(stream, ts, m[2], metadata=meta)  # type: ignore[arg-type]
    return path


def pair(tmp_path: Path, a: Iterable[Message], b: Iterable[Message], **kw: object) -> Divergence | None:
    return diff(write(tmp_path / "a.mcap", a), write(tmp_path / "b.mcap", b), **kw)  # type: ignore[arg-type]


BASE: list[Message] = [("x", i, i * 10) for i in range(5)] + [("y", i, f"s{i}") for i in range(3)]


def test_equal_files_and_what_was_compared(tmp_path: Path) -> None:
    a, b = write(tmp_path / "a.mcap", BASE), write(tmp_path / "b.mcap", BASE)
    assert diff(a, b) is None
    result = compare(a, b)
    assert result.equal and result.streams == ("x", "y") and result.packets == 8 and result.bounds == 0
    with open_recording(a) as ra, open_recording(b) as rb:  # open recordings too (left open)
        assert diff(ra, rb) is None
        assert ra.streams == ["x", "y"]


def test_interleaving_does_not_matter(tmp_path: Path) -> None:
    other = [m for m in BASE if m[0] == "y"] + [m for m in BASE if m[0] == "x"]
    assert pair(tmp_path, BASE, other) is None


def test_a_changed_value(tmp_path: Path) -> None:
    changed = [("x", 3, 31) if m == ("x", 3, 30) else m for m in BASE]
    d = pair(tmp_path, BASE, changed)
    assert d is not None and (d.what, d.stream, d.index, d.ts) == ("value", "x", 3, 3)
    assert d.a is not None and d.b is not None and (d.a.value, d.b.value) == (30, 31)
    assert str(d) == "stream 'x' #3 (ts=3): value 30 vs 31"


def test_a_changed_ts(tmp_path: Path) -> None:
    changed = [("y", 7, "s2") if m == ("y", 2, "s2") else m for m in BASE]
    d = pair(tmp_path, BASE, changed)
    assert d is not None and (d.what, d.stream, d.index, d.ts) == ("ts", "y", 2, 2)
    assert str(d) == "stream 'y' #2: ts=2 vs ts=7 (str 's2' vs str 's2')"


def test_an_extra_packet_either_way(tmp_path: Path) -> None:
    longer = [*BASE, ("x", 5, 50)]
    d = pair(tmp_path, BASE, longer)
    assert d is not None and (d.what, d.stream, d.index, d.ts) == ("count", "x", 5, 5)
    assert d.a is None and d.b is not None and d.b.value == 50
    assert str(d) == f"stream 'x' #5: {tmp_path / 'a.mcap'} ends after 5 record(s); {tmp_path / 'b.mcap'} has " \
                     "i64 50 at ts=5"
    d = pair(tmp_path, longer, BASE)
    assert d is not None and (d.what, d.index) == ("count", 5) and d.b is None


def test_a_missing_stream_either_way(tmp_path: Path) -> None:
    only_x = [m for m in BASE if m[0] == "x"]
    d = pair(tmp_path, BASE, only_x)
    assert d is not None and (d.what, d.stream, d.index, d.ts) == ("stream", "y", None, None)
    assert str(d) == f"stream 'y': in {tmp_path / 'a.mcap'}, not in {tmp_path / 'b.mcap'}"
    d = pair(tmp_path, only_x, BASE)
    assert d is not None and str(d) == f"stream 'y': in {tmp_path / 'b.mcap'}, not in {tmp_path / 'a.mcap'}"
    assert pair(tmp_path, BASE, only_x, streams=["x"]) is None  # only the streams asked for


def test_a_stream_named_in_neither_file(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"no stream 'other' in .* \(they have 'x', 'y'\)$"):
        pair(tmp_path, BASE, BASE, streams=["other"])
    with pytest.raises(UsageError, match="did you mean `x`"):
        pair(tmp_path, BASE, BASE, streams=["xx"])


def test_the_first_divergence_is_the_earliest_in_a_whatever_b_interleaves(tmp_path: Path) -> None:
    a = [("x", i, i) for i in range(4)] + [("y", i, i) for i in range(4)]
    b = [("y", i, i if i != 1 else -1) for i in range(4)] + [("x", i, i if i != 2 else -1) for i in range(4)]
    d = pair(tmp_path, a, b)  # B shows y's change first, but x's comes first in A
    assert d is not None and (d.stream, d.index) == ("x", 2)
    d = pair(tmp_path, b, a)
    assert d is not None and (d.stream, d.index) == ("y", 1)


def test_a_different_kind(tmp_path: Path) -> None:
    d = pair(tmp_path, [("x", 1, 1)], [("x", 1, 1.0)])
    assert d is not None and d.what == "kind" and str(d) == "stream 'x' #0 (ts=1): i64 1 vs f64 1.0"
    d = pair(tmp_path, [("x", 1, True)], [("x", 1, 1)])
    assert d is not None and d.what == "kind"


def test_floats_exact_by_default_nan_equal_and_atol(tmp_path: Path) -> None:
    a = [("f", 0, 1.0), ("f", 1, math.nan), ("f", 2, math.inf)]
    assert pair(tmp_path, a, a) is None  # NaN == NaN, inf == inf
    near = [("f", 0, 1.0 + 1e-9), ("f", 1, math.nan), ("f", 2, math.inf)]
    d = pair(tmp_path, a, near)
    assert d is not None and (d.what, d.index) == ("value", 0)
    assert pair(tmp_path, a, near, atol=1e-6) is None
    far = [("f", 0, 1.1), ("f", 1, math.nan), ("f", 2, math.inf)]
    d = pair(tmp_path, a, far, atol=1e-6)
    assert d is not None and str(d).startswith("stream 'f' #0 (ts=0): value 1.0 vs 1.1 (|diff| ")
    assert str(d).endswith("> atol 1e-06)")
    d = pair(tmp_path, a, [("f", 0, 1.0), ("f", 1, 0.0), ("f", 2, math.inf)], atol=1e9)
    assert d is not None and d.index == 1  # NaN is never near a number
    d = pair(tmp_path, a, [("f", 0, 1.0), ("f", 1, math.nan), ("f", 2, -math.inf)], atol=1e9)
    assert d is not None and d.index == 2


def test_atol_is_for_floats_and_arrays_not_ints(tmp_path: Path) -> None:
    d = pair(tmp_path, [("x", 0, 1)], [("x", 0, 2)], atol=5)
    assert d is not None and d.what == "value"


def test_arrays_by_dtype_shape_and_values(tmp_path: Path) -> None:
    f = np.linspace(0, 1, 12, dtype=np.float32).reshape(3, 4)
    f[1, 1] = np.nan
    a = [("img", 0, f)]
    assert pair(tmp_path, a, [("img", 0, f.copy())]) is None  # NaN == NaN in arrays too
    g = f.copy()
    g[2, 3] += 1e-3
    d = pair(tmp_path, a, [("img", 0, g)])
    assert d is not None and d.what == "value"
    assert str(d) == ("stream 'img' #0 (ts=0): array float32[3x4]: element [2, 3] 1.0 vs "
                      f"{float(g[2, 3])!r} (1 of 12 element(s) differ)")
    assert pair(tmp_path, a, [("img", 0, g)], atol=1e-2) is None
    d = pair(tmp_path, a, [("img", 0, g)], atol=1e-4)
    assert d is not None and str(d).endswith("(1 of 12 element(s) differ; atol 0.0001)")
    d = pair(tmp_path, a, [("img", 0, f.astype(np.float64))])
    assert d is not None and str(d) == "stream 'img' #0 (ts=0): array float32[3x4] vs float64[3x4]"
    d = pair(tmp_path, a, [("img", 0, f.reshape(4, 3))])
    assert d is not None and str(d) == "stream 'img' #0 (ts=0): array float32[3x4] vs float32[4x3]"


def test_integer_arrays_with_atol_do_not_wrap(tmp_path: Path) -> None:
    u = np.array([0, 255, 7], dtype=np.uint8)
    assert pair(tmp_path, [("u", 0, u)], [("u", 0, np.array([1, 254, 7], dtype=np.uint8))], atol=1) is None
    d = pair(tmp_path, [("u", 0, u)], [("u", 0, np.array([255, 255, 7], dtype=np.uint8))], atol=1)
    assert d is not None and "element [0] 0 vs 255" in str(d)
    big = np.array([-(2**63), 2**63 - 1], dtype=np.int64)
    d = pair(tmp_path, [("i", 0, big)], [("i", 0, big[::-1].copy())], atol=1e6)
    assert d is not None and "element [0]" in str(d)
    assert pair(tmp_path, [("i", 0, big)], [("i", 0, big + np.array([1, -1]))], atol=1) is None
    d = pair(tmp_path, [("i", 0, big)], [("i", 0, big + np.array([1, 0]))], atol=0.5)
    assert d is not None


def test_scalar_and_empty_arrays(tmp_path: Path) -> None:
    z = np.array(1.5)
    assert pair(tmp_path, [("a", 0, z)], [("a", 0, np.array(1.5))]) is None
    d = pair(tmp_path, [("a", 0, z)], [("a", 0, np.array(2.5))])
    assert d is not None and "element [] 1.5 vs 2.5" in str(d)
    e = np.zeros((0, 3), dtype=np.int16)
    assert pair(tmp_path, [("a", 0, e)], [("a", 0, e.copy())]) is None


def test_strings_bytes_bools_empty(tmp_path: Path) -> None:
    a: list[Message] = [("s", 0, "hello"), ("b", 0, b"\x00\x01"), ("t", 0, True), ("e", 0, None)]
    assert pair(tmp_path, a, a) is None
    d = pair(tmp_path, a, [("s", 0, "hellO"), *a[1:]])
    assert d is not None and str(d) == "stream 's' #0 (ts=0): value 'hello' vs 'hellO'"
    d = pair(tmp_path, a, [a[0], ("b", 0, b"\x00\x02"), *a[2:]])
    assert d is not None and str(d) == "stream 'b' #0 (ts=0): value 2 byte(s) 0001 vs 2 byte(s) 0002"
    d = pair(tmp_path, a, [*a[:2], ("t", 0, False), a[3]])
    assert d is not None and str(d) == "stream 't' #0 (ts=0): value True vs False"


def test_bounds_compared_unless_told_not(tmp_path: Path) -> None:
    a: list[Message] = [("x", 0, 1), ("x", 5, BOUND), ("x", 6, 2)]
    b: list[Message] = [("x", 0, 1), ("x", 4, BOUND), ("x", 6, 2)]
    d = pair(tmp_path, a, b)
    assert d is not None and (d.what, d.index) == ("ts", 1) and str(d) == "stream 'x' #1: ts=5 vs ts=4 " \
                                                                          "(a bound vs a bound)"
    assert pair(tmp_path, a, b, bounds=False) is None
    d = pair(tmp_path, a, [("x", 0, 1), ("x", 6, 2)])
    assert d is not None and d.what == "ts" and "(a bound vs i64 2)" in str(d)
    assert compare(tmp_path / "a.mcap", tmp_path / "a.mcap").bounds == 1


def test_metadata_compared_unless_told_not(tmp_path: Path) -> None:
    a: list[Message] = [("x", 0, 1, {"k": 1.0, "n": math.nan})]
    assert pair(tmp_path, a, a) is None
    b: list[Message] = [("x", 0, 1, {"k": 2.0, "n": math.nan})]
    d = pair(tmp_path, a, b)
    assert d is not None and d.what == "metadata" and str(d) == \
        'stream \'x\' #0 (ts=0): metadata {"k": 1.0, "n": NaN} vs {"k": 2.0, "n": NaN}'
    assert pair(tmp_path, a, b, metadata=False) is None
    d = pair(tmp_path, a, [("x", 0, 1)])
    assert d is not None and d.what == "metadata"


def test_bad_input(tmp_path: Path) -> None:
    good = write(tmp_path / "a.mcap", BASE)
    with pytest.raises(RecordingError, match="cannot open"):
        diff(good, tmp_path / "missing.mcap")
    (tmp_path / "t.txt").write_text("hello\n")
    with pytest.raises(RecordingError, match="not an MCAP file"):
        diff(tmp_path / "t.txt", good)
    for atol in (-1.0, math.nan):
        with pytest.raises(UsageError, match="atol"):
            diff(good, good, atol=atol)


def test_a_truncated_file_differs_where_it_was_cut(tmp_path: Path) -> None:
    whole = write(tmp_path / "a.mcap", [("x", i, i) for i in range(200)])
    data = whole.read_bytes()
    cut = tmp_path / "cut.mcap"
    cut.write_bytes(data[: len(data) // 2])
    with open_recording(cut) as rec:
        kept = len(list(rec))
    assert 0 < kept < 200
    d = diff(whole, cut)
    assert d is not None and (d.what, d.index) == ("count", kept)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_interleaving_is_equal_and_one_change_is_found_where_it_is(tmp_path: Path, data: st.DataObject) -> None:
    counts = data.draw(st.lists(st.integers(0, 6), min_size=1, max_size=3), label="counts")
    streams = [f"s{k}" for k in range(len(counts))]
    per = {s: [(s, i, i * 1.5) for i in range(n)] for s, n in zip(streams, counts, strict=True)}
    seed = data.draw(st.integers(0, 2**16), label="seed")

    def shuffled(r: random.Random) -> list[Message]:  # each stream in order, the streams interleaved at random
        queues = {s: list(ms) for s, ms in per.items()}
        out: list[Message] = []
        while any(queues.values()):
            s = r.choice([s for s, q in queues.items() if q])
            out.append(queues[s].pop(0))
        return out

    a, b = shuffled(random.Random(seed)), shuffled(random.Random(seed + 1))
    pa, pb = write(tmp_path / "a.mcap", a, streams), write(tmp_path / "b.mcap", b, streams)
    assert diff(pa, pb) is None
    assert compare(pa, pb).packets == sum(counts)
    if not a:
        return
    k = data.draw(st.integers(0, len(a) - 1), label="changed")
    stream, ts, value = a[k]
    b2 = [(m[0], m[1], float(m[2]) + 1.0) if m == (stream, ts, value) else m for m in b]  # type: ignore[arg-type]
    d = diff(pa, write(tmp_path / "b2.mcap", b2, streams))
    assert d is not None and (d.what, d.stream, d.index, d.ts) == ("value", stream, ts, ts)
    truncated = [m for m in b if m != (stream, ts, value)]  # dropping it: that stream is one short from there
    d = diff(pa, write(tmp_path / "b3.mcap", truncated, streams))
    assert d is not None and d.stream == stream and d.index == ts
