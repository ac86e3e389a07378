"""The proof of issue 28: a graph replayed from its own recording records the same streams.

Random graphs (1-3 counting sources, fan-out, a filter that leaves bounds without packets,
sync joins, a batch node, running and final sums, buffers written in place) run live with
``record`` (A); the same graph with its sources replaced by ``ReplaySource`` at ``rate: max``
records B, and with one inner node replaced (its upstream still running) records C. ``compare``
must find A, B and C equal stream by stream, timestamp by timestamp, bounds included. A model
of the graph says what A must hold, so that an empty or wrong run cannot pass. On inline,
threads and a process pool.

Then the CLI, as real processes: ``run --record``, ``replay --graph --record`` and ``diff``
agree; a changed option is a difference that names the stream; corrupt, truncated and foreign
files, a missing channel and a schema mismatch are one line each, never a traceback or a hang.
"""

from __future__ import annotations

import json
import random
import re
import struct
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import Phase, example, given, note, settings
from hypothesis import strategies as st
from mcap.writer import Writer

import flowplex
import flowplex.recording as recording
from flowplex._timestamps import TS_POST_STREAM
from flowplex.cli._replay_graph import Replacement, replace_nodes
from flowplex.config._load import load_yaml
from flowplex.kernels._math import wrap_i64
from flowplex.recording._codec import ENCODING, PROFILE, encode_value, schema_data, schema_name

from .._cli import flowplex_commands
from .._places import assert_placed, default_slot, place_head
from ..processes import dag_kernels as dag_kernels  # registers the kernels (pool workers import them by reference)

WAIT_S = 30.0
"""Bound on one run's wait; each finishes far sooner."""
DONE = 2**63 - 1
"""The bound a stream's end records."""

# --- random graphs ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Kind:
    """A node kind: its kernel, the stream types it reads, the one it makes (``same``: its input's)."""

    kernel: str
    reads: tuple[str, ...]
    makes: str
    options: st.SearchStrategy[dict[str, object]] = field(default_factory=lambda: st.just({}))
    outputs: int = 1
    batch: bool = False


KINDS: dict[str, Kind] = {
    "scale": Kind("ScaleKernel", ("int",), "int", st.fixed_dictionaries({"factor": st.integers(-3, 3)})),
    "filter": Kind("FilterKernel", ("int",), "int", st.fixed_dictionaries({"threshold": st.integers(1, 12)})),
    "forward": Kind("PassThroughKernel", ("any",), "same"),
    "split": Kind("SplitKernel", ("any",), "same", outputs=2),
    "zip": Kind("ZipKernel", ("int", "int"), "int"),
    "batch_sum": Kind("BatchSumKernel", ("int",), "int", batch=True),
    "running_sum": Kind("DagRunningSum", ("int",), "int"),
    "total": Kind("SumKernel", ("int",), "int"),  # one packet, at TS_POST_STREAM, from close
    "to_buffer": Kind("DagToBuffer", ("int",), "buf", st.fixed_dictionaries({"size": st.sampled_from([3, 16])})),
    "in_place": Kind("DagAddInPlace", ("buf",), "buf", st.fixed_dictionaries({"add": st.integers(1, 9)})),
    "affine": Kind("AffineKernel", ("buf",), "buf", st.fixed_dictionaries(
        {"scale": st.sampled_from([-2.0, 0.5, 3.0]), "shift": st.sampled_from([-1.0, 0.0, 4.0])})),
}


@dataclass(frozen=True)
class Node:
    name: str
    kind: str  # a key of KINDS, or "source"
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    options: dict[str, object]
    capacity: int = 1
    """The batch capacity of a ``batch`` kind."""

    def yaml(self) -> str:
        kernel = "RangeSourceKernel" if self.kind == "source" else KINDS[self.kind].kernel
        fields = [f"name: {self.name}", f"kernel: {kernel}", f"input_ports: [{', '.join(self.inputs)}]",
                  f"output_ports: [{', '.join(self.outputs)}]", f"options: {json.dumps(self.options)}"]
        if self.kind != "source" and KINDS[self.kind].batch:
            fields.append(f"input_policy: {{ type: batch, capacity: {self.capacity} }}")
        return "  - { " + ", ".join(fields) + " }"


@dataclass(frozen=True)
class Scenario:
    nodes: tuple[Node, ...]
    replaced: str
    """The inner node whose outputs the third run replays."""

    @property
    def streams(self) -> list[str]:
        return [s for n in self.nodes for s in n.outputs]

    @property
    def outputs(self) -> list[str]:
        """The streams no node reads: the graph's outputs."""
        read = {s for n in self.nodes for s in n.inputs}
        return [s for s in self.streams if s not in read]

    def yaml(self, place: str) -> str:
        return (place_head(place, workers=1) + "nodes:\n" + "\n".join(n.yaml() for n in self.nodes)
                + f"\noutput_ports: [{', '.join(self.outputs)}]\n")


@st.composite
def scenarios(draw: st.DrawFn) -> Scenario:
    """1-3 sources, then a filter of one of them (bounds without packets in every graph), then
    1-5 nodes of random kinds, each reading streams made before it (fan-out where two read one).

    A final sum reads no stream that may carry a packet at ``TS_POST_STREAM`` (another sum's, or
    one made from it): it would process that packet, which moves its output's bound past
    ``TS_POST_STREAM``, and then emit its total there from ``close``, below that bound. The live
    recording then holds a bound before a packet it precedes, which no replay can give back.
    """
    types: dict[str, str] = {}
    late: set[str] = set()  # the streams that may carry a packet at TS_POST_STREAM
    nodes: list[Node] = []
    for k in range(draw(st.integers(1, 3))):
        nodes.append(Node(f"s{k}", "source", (), (f"a{k}",), {"count": draw(st.integers(1, 16))}))
        types[f"a{k}"] = "int"
    first = draw(st.sampled_from(sorted(types)))
    nodes.append(Node("n0", "filter", (first,), ("n0",), draw(KINDS["filter"].options)))
    types["n0"] = "int"

    def readable(name: str, want: str) -> list[str]:
        return sorted(s for s, t in types.items() if want in ("any", t) and not (name == "total" and s in late))

    for k in range(1, draw(st.integers(2, 6))):
        def feeds(name: str) -> bool:  # enough distinct streams for each port (a join reads two)
            reads = KINDS[name].reads
            return all(len(readable(name, want)) > reads[:port].count(want) for port, want in enumerate(reads))

        name = draw(st.sampled_from(sorted(n for n in KINDS if feeds(n))))
        kind = KINDS[name]
        inputs: list[str] = []
        for want in kind.reads:
            inputs.append(draw(st.sampled_from([s for s in readable(name, want) if s not in inputs])))
        made = types[inputs[0]] if kind.makes == "same" else kind.makes
        outputs = tuple(f"n{k}o{j}" for j in range(kind.outputs)) if kind.outputs > 1 else (f"n{k}",)
        nodes.append(Node(f"n{k}", name, tuple(inputs), outputs, draw(kind.options), draw(st.integers(1, 3))))
        types.update(dict.fromkeys(outputs, made))
        if name == "total" or late.intersection(inputs):
            late.update(outputs)
    replaced = draw(st.sampled_from([n.name for n in nodes if n.kind != "source"]))
    return Scenario(tuple(nodes), replaced)


def _rich() -> Scenario:
    """Every kind at once: two sources of different lengths, a filter read by a join and a batch,
    a join of two filtered streams, a fan-out of buffers written in place, a final sum; the
    filter's outputs replayed."""
    def node(name: str, kind: str, inputs: tuple[str, ...], capacity: int = 2, **options: object) -> Node:
        outputs = (f"{name}o0", f"{name}o1") if KINDS[kind].outputs > 1 else (name,)
        return Node(name, kind, inputs, outputs, options, capacity)

    return Scenario((
        Node("s0", "source", (), ("a0",), {"count": 14}),
        Node("s1", "source", (), ("a1",), {"count": 9}),
        node("n0", "filter", ("a0",), threshold=5),
        node("n1", "zip", ("n0", "a1")),
        node("n2", "batch_sum", ("n0",), capacity=3),
        node("n3", "filter", ("a1",), threshold=3),
        node("n4", "zip", ("n0", "n3")),
        node("n5", "running_sum", ("n4",)),
        node("n6", "total", ("n1",)),
        node("n7", "scale", ("n2",), factor=-2),
        node("n8", "to_buffer", ("a1",), size=16),
        node("n9", "split", ("n8",)),
        node("n10", "in_place", ("n9o0",), add=3),
        node("n11", "affine", ("n9o1",), scale=0.5, shift=1.0),
    ), "n0")


# --- what a graph must record -----------------------------------------------------------------------

Stream = list[tuple[int, object]]
"""A stream as the model knows it: (ts, value), a buffer's value None (the model gives its ts only)."""


def model(scenario: Scenario) -> tuple[dict[str, Stream], dict[str, list[int]]]:
    """Each stream's packets, and the bounds each filter's output records (one per dropped packet)."""
    out: dict[str, Stream] = {}
    bounds: dict[str, list[int]] = {}
    for n in scenario.nodes:
        o, ins = n.options, [out[s] for s in n.inputs]
        got: Stream
        if n.kind == "source":
            got = [(i, i) for i in range(int(o["count"]))]  # type: ignore[call-overload]
        elif n.kind == "scale":
            got = [(ts, wrap_i64(v * o["factor"])) for ts, v in ins[0]]  # type: ignore[operator]
        elif n.kind == "filter":
            got = [(ts, v) for ts, v in ins[0] if v >= o["threshold"]]  # type: ignore[operator]
            bounds[n.outputs[0]] = [ts + 1 for ts, v in ins[0] if v < o["threshold"]]  # type: ignore[operator]
        elif n.kind == "zip":
            b = dict(ins[1])
            got = [(ts, wrap_i64(v + b[ts])) for ts, v in ins[0] if ts in b]  # type: ignore[operator]
        elif n.kind == "batch_sum":
            got = [(chunk[-1][0], wrap_i64(sum(v for _, v in chunk)))  # type: ignore[misc]
                   for chunk in (ins[0][i:i + n.capacity] for i in range(0, len(ins[0]), n.capacity))]
        elif n.kind == "running_sum":
            total, got = 0, []
            for ts, v in ins[0]:
                total = wrap_i64(total + v)  # type: ignore[operator]
                got.append((ts, total))
        elif n.kind == "total":
            got = [(TS_POST_STREAM, wrap_i64(sum(v for _, v in ins[0])))]  # type: ignore[misc]
        else:  # forward, split and the buffer kinds keep the timestamps
            got = [(ts, v if KINDS[n.kind].makes == "same" else None) for ts, v in ins[0]]
        out.update(dict.fromkeys(n.outputs, got))
    return out, bounds


# --- running ----------------------------------------------------------------------------------------

PLACES = ("inline", "threads", "processes")


def run(spec: object, path: Path, scenario: Scenario, place: str) -> dict[str, list[tuple[int, object]]]:
    """Run the graph of ``spec`` recorded into ``path``; what reached each graph output."""
    with default_slot(place):
        g = flowplex.Graph.from_spec(spec)  # type: ignore[arg-type]
    with g:
        pollers = {port: g.add_poller(port) for port in scenario.outputs}
        with recording.record(g, path):
            g.start()
            g.wait_done(timeout=WAIT_S)
        assert_placed(g, place)
        return {port: [(p.timestamp, _value(p.payload)) for p in poller] for port, poller in pollers.items()}


def _value(v: object) -> object:
    return None if hasattr(v, "dtype") else v


def recorded(path: Path) -> tuple[dict[str, Stream], dict[str, list[int]]]:
    """Each stream's packets (a buffer's value as None) and its bounds, from a recording."""
    packets: dict[str, Stream] = {}
    bounds: dict[str, list[int]] = {}
    with recording.open(path) as rec:
        for s in rec.streams:
            packets[s], bounds[s] = [], []
        for r in rec.messages(bounds=True):
            if r.is_bound:
                bounds[r.stream].append(r.ts)
            else:
                packets[r.stream].append((r.ts, None if r.kind == "buffer" else r.value))
    return packets, bounds


def _same(a: Path, b: Path, what: str) -> recording.Comparison:
    c = recording.compare(a, b)
    assert c.equal, f"{what}: {c.divergence}"
    return c


def check_replays(scenario: Scenario, place: str, tmp: Path) -> None:
    text = scenario.yaml(place)
    note(text)
    spec = load_yaml(text)
    a, b, c = tmp / "live.mcap", tmp / "sources.mcap", tmp / "inner.mcap"
    outputs = run(spec, a, scenario, place)

    # A is what the graph must do: every stream, its packets and its filters' bounds.
    want, want_bounds = model(scenario)
    got, got_bounds = recorded(a)
    assert list(got) == scenario.streams
    assert got == want
    assert {port: got[port] for port in scenario.outputs} == outputs  # what ran is what was recorded
    for s, expected in want_bounds.items():  # those past TS_POST_STREAM end the stream, whatever it held
        kept = [ts for ts in got_bounds[s] if ts <= TS_POST_STREAM]
        assert kept == [ts for ts in expected if ts <= TS_POST_STREAM], f"bounds of {s}: {got_bounds[s]}"
    assert all(bs[-1:] == [DONE] for bs in got_bounds.values())  # each stream's end
    total = sum(map(len, want.values()))
    assert total > 0 and want_bounds["n0"]  # a source counts from 0, and n0 drops what is below 1 at least

    # B: every source replayed from A.
    with recording.open(a) as rec:
        streams = rec.streams
    sources = replace_nodes(spec, [], a, streams, {"rate": "max"})
    assert [n.name for n in sources.nodes if n.kernel == "ReplaySource"] == [
        n.name for n in scenario.nodes if n.kind == "source"]
    assert run(sources, b, scenario, place) == outputs
    compared = _same(a, b, "sources replayed")
    assert compared.streams == tuple(scenario.streams)
    assert compared.packets == total
    assert compared.bounds == sum(map(len, got_bounds.values()))

    # C: one inner node's outputs replayed, its upstream running live, its downstream fed by the replay.
    inner = replace_nodes(spec, [Replacement(scenario.replaced)], a, streams, {"rate": "max"})
    assert run(inner, c, scenario, place) == outputs
    _same(a, c, f"node {scenario.replaced} replayed")


@pytest.mark.parametrize("place", PLACES[:2])
@settings(max_examples=40, deadline=None)
@example(scenario=_rich())
@given(scenario=scenarios())
def test_a_replay_records_what_the_live_run_recorded(scenario: Scenario, place: str,
                                                     tmp_path_factory: pytest.TempPathFactory) -> None:
    check_replays(scenario, place, tmp_path_factory.mktemp("proof"))


# Each run starts a pool (three per example): few examples, and no shrinking (the example is noted).
@settings(max_examples=3, deadline=None, phases=[Phase.explicit, Phase.reuse, Phase.generate])
@example(scenario=_rich())
@given(scenario=scenarios())
def test_a_replay_on_a_process_pool_records_what_the_live_run_recorded(
        scenario: Scenario, tmp_path_factory: pytest.TempPathFactory) -> None:
    check_replays(scenario, "processes", tmp_path_factory.mktemp("proof"))


def _replay_into(path: Path, outputs: list[str], body: str, graph_outputs: list[str], back: Path) -> None:
    """Replay ``path`` into ``outputs`` of one ReplaySource, then ``body``; record every stream into ``back``."""
    g = flowplex.Graph.from_yaml(
        f"nodes:\n  - {{ name: src, kernel: ReplaySource, output_ports: [{', '.join(outputs)}], options: "
        f"{{ path: {json.dumps(str(path))}, rate: max }} }}\n{body}output_ports: [{', '.join(graph_outputs)}]\n")
    with g:
        for port in graph_outputs:
            g.add_poller(port)
        with recording.record(g, back):
            g.start()
            g.wait_done(timeout=WAIT_S)


def test_consecutive_bounds_are_replayed_one_by_one(tmp_path: Path) -> None:
    """A stream whose bound advances several times with no packet between (a filter dropping a
    run of packets) replays each advance, not only the last one of a burst."""
    with recording.Recorder(tmp_path / "r.mcap") as rec:
        rec.add_stream("x", kind="i64")
        for ts in (1, 2, 3):
            rec.write_bound("x", ts)
        rec.write_value("x", 5, 50)
        rec.write_bound("x", 7)
        rec.write_bound("x", 9)
    _replay_into(tmp_path / "r.mcap", ["x"], "  - { name: p, kernel: PassThroughKernel, input_ports: [x], "
                 "output_ports: [y] }\n", ["y"], tmp_path / "back.mcap")
    packets, bounds = recorded(tmp_path / "back.mcap")
    assert (packets["x"], bounds["x"]) == ([(5, 50)], [1, 2, 3, 7, 9, DONE])


def test_an_output_that_gets_nothing_keeps_its_recorded_bound(tmp_path: Path) -> None:
    """An invocation that emits nothing on an output leaves its bound alone: the engine would
    move it past the source's call count, which says nothing of the recorded timestamps (a join
    then misses a packet that comes later, at an earlier timestamp)."""
    with recording.Recorder(tmp_path / "r.mcap") as rec:
        for s in ("x", "w", "empty"):
            rec.add_stream(s, kind="i64")
        rec.write_value("x", 0, 10)
        rec.write_bound("x", 5)  # after a packet of x: x's next invocation...
        rec.write_value("w", 0, 1)  # ...is w's first, at ts 0
    _replay_into(tmp_path / "r.mcap", ["x", "w", "empty"], "  - { name: z, kernel: ZipKernel, input_ports: [x, w], "
                 "output_ports: [z] }\n", ["z", "empty"], tmp_path / "back.mcap")
    packets, bounds = recorded(tmp_path / "back.mcap")
    assert packets == {"x": [(0, 10)], "w": [(0, 1)], "empty": [], "z": [(0, 11)]}
    assert bounds == {"x": [5, DONE], "w": [DONE], "empty": [DONE], "z": [DONE]}


def test_a_bound_past_post_stream_is_replayed(tmp_path: Path) -> None:
    """A join that saw a packet at ``TS_POST_STREAM`` on one input only moves its bound past it
    with no packet: that bound is part of the stream, not its end, and is replayed."""
    with recording.Recorder(tmp_path / "r.mcap") as rec:
        rec.add_stream("x", kind="i64")
        rec.write_value("x", 0, 1)
        rec.write_bound("x", TS_POST_STREAM + 1)
        rec.write_bound("x", DONE)
    _replay_into(tmp_path / "r.mcap", ["x"], "  - { name: p, kernel: PassThroughKernel, input_ports: [x], "
                 "output_ports: [y] }\n", ["y"], tmp_path / "back.mcap")
    assert recorded(tmp_path / "back.mcap")[1]["x"] == [TS_POST_STREAM + 1, DONE]


# --- the CLI ----------------------------------------------------------------------------------------

GRAPH = """
nodes:
  - { name: src, kernel: RangeSourceKernel, output_ports: [a], options: { count: 30 } }
  - { name: other, kernel: RangeSourceKernel, output_ports: [b], options: { count: 20 } }
  - { name: big, kernel: FilterKernel, input_ports: [a], output_ports: [fa], options: { threshold: 12 } }
  - { name: zip, kernel: ZipKernel, input_ports: [fa, b], output_ports: [z] }
  - { name: scale, kernel: ScaleKernel, input_ports: [z], output_ports: [y], options: { factor: 2 } }
output_ports: [y]
"""
Y = [(ts, 2 * (ts + ts)) for ts in range(12, 20)]
"""What reaches output ``y``: ``2 * (a + b)`` where both have a packet."""


def _cli(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "flowplex", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, timeout=60, stdin=subprocess.DEVNULL, check=False)


def _printed(done: subprocess.CompletedProcess[str]) -> list[tuple[int, int]]:
    rows = [line.split("\t") for line in done.stdout.splitlines()]
    return [(int(ts.removeprefix("ts=")), int(v)) for _, ts, v in rows]


@pytest.fixture(scope="module")
def cli_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``g.yaml`` and its live recording ``A.mcap`` (by ``flowplex run --record``)."""
    d = tmp_path_factory.mktemp("cli")
    (d / "g.yaml").write_text(GRAPH)
    done = _cli("run", "g.yaml", "--record", "A.mcap", cwd=d)
    assert done.returncode == 0 and _printed(done) == Y, done.stderr
    return d


def test_cli_run_replay_and_diff_agree(cli_dir: Path) -> None:
    replay = _cli("replay", "A.mcap", "--graph", "g.yaml", "--rate", "max", "--record", "B.mcap", cwd=cli_dir)
    assert replay.returncode == 0 and _printed(replay) == Y, replay.stderr
    inner = _cli("replay", "A.mcap", "--graph", "g.yaml", "--replace", "big", "--rate", "max", "--record", "C.mcap",
                 cwd=cli_dir)
    assert inner.returncode == 0 and _printed(inner) == Y, inner.stderr
    n = sum(len(p) for p in recorded(cli_dir / "A.mcap")[0].values())
    assert n == 30 + 20 + 18 + 8 + 8
    for other in ("B.mcap", "C.mcap"):
        done = _cli("diff", "A.mcap", other, cwd=cli_dir)
        assert (done.returncode, done.stdout, done.stderr) == (
            0, f"flowplex: A.mcap and {other} are equal: 5 stream(s), {n} packet(s)\n", "")


def test_cli_a_changed_option_is_a_difference_naming_the_stream(cli_dir: Path) -> None:
    replay = _cli("replay", "A.mcap", "--graph", "g.yaml", "--rate", "max", "--set", "scale.factor=3",
                  "--record", "D.mcap", cwd=cli_dir)
    assert replay.returncode == 0, replay.stderr
    done = _cli("diff", "A.mcap", "D.mcap", cwd=cli_dir)
    assert (done.returncode, done.stdout, done.stderr) == (
        1, "flowplex: A.mcap and D.mcap differ: stream 'y' #0 (ts=12): value 48 vs 72\n", "")


def _foreign(path: Path) -> None:
    """A ROS 2 bag's kind of MCAP: another profile, schema and message encoding."""
    with path.open("wb") as f:
        w = Writer(f)
        w.start(profile="ros2", library="test")
        sid = w.register_schema(name="std_msgs/msg/Int64", encoding="ros2msg", data=b"int64 data")
        cid = w.register_channel(topic="a", message_encoding="cdr", schema_id=sid)
        w.add_message(channel_id=cid, log_time=1, data=b"\x00\x01\x00\x00" + bytes(8), publish_time=1)
        w.finish()


def _flowplex_mcap(path: Path, schema: str, values: dict[str, list[object]]) -> None:
    """A flowplex-profile file written with the plain writer, which checks nothing: channels of
    schema ``schema`` (``flowplex.i64`` or one flowplex does not know) holding ``values``."""
    with path.open("wb") as f:
        w = Writer(f)
        w.start(profile=PROFILE, library="test")
        data = schema_data("i64") if schema == schema_name("i64") else b"{}"  # what an unknown one says matters not
        for topic, items in values.items():
            sid = w.register_schema(name=schema, encoding=ENCODING, data=data)
            cid = w.register_channel(topic=topic, message_encoding=ENCODING, schema_id=sid)
            for ts, value in enumerate(items):
                w.add_message(channel_id=cid, log_time=ts, data=encode_value(ts, value, wall_ns=ts)[1],
                              publish_time=ts)
        w.finish()


def _one_line(done: subprocess.CompletedProcess[str], code: int, text: str) -> None:
    assert (done.returncode, done.stdout) == (code, ""), (done.args, done.stderr)
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("flowplex: error: "), done.stderr
    assert text in done.stderr, done.stderr


def test_cli_bad_recordings_are_one_line_exit_2(cli_dir: Path, tmp_path: Path) -> None:
    d = tmp_path
    (d / "g.yaml").write_text(GRAPH)
    (d / "noise.mcap").write_bytes(random.Random(28).randbytes(4096))
    (d / "magic.mcap").write_bytes(b"\x89MCAP0\r\n" + random.Random(29).randbytes(4096))  # corrupt past the magic
    whole = (cli_dir / "A.mcap").read_bytes()
    (d / "A.mcap").write_bytes(whole)
    _foreign(d / "ros.mcap")
    _flowplex_mcap(d / "quat.mcap", "flowplex.quaternion", {"a": [], "b": []})
    replay = ("--graph", "g.yaml", "--rate", "max")
    cases = [
        (("replay", "noise.mcap", *replay), "noise.mcap: not an MCAP file (bad magic bytes)"),
        (("diff", "A.mcap", "noise.mcap"), "noise.mcap: not an MCAP file (bad magic bytes)"),
        (("replay", "magic.mcap", *replay), "magic.mcap: not a valid MCAP file: the first record is opcode "),
        (("diff", "magic.mcap", "A.mcap"), "magic.mcap: not a valid MCAP file: the first record is opcode "),
        (("replay", "ros.mcap", *replay), "ros.mcap: an MCAP file not written by flowplex (profile 'ros2'"),
        (("diff", "A.mcap", "ros.mcap"), "ros.mcap: an MCAP file not written by flowplex (profile 'ros2'"),
        (("replay", "quat.mcap", *replay), "quat.mcap: stream 'a': unknown schema: schema 'flowplex.quaternion'"),
        (("replay", "A.mcap", *replay, "--replace", "src=nope"),
         "--replace src: the recording has no stream `nope`; it has a, b, fa, z, y"),
        (("replay", "A.mcap", *replay, "--replace", "nope"), "--replace nope: the graph has no node `nope`"),
        (("replay", "A.mcap", *replay, "--replace", "src=a,b"), "node `src` has 1 output port(s)"),
    ]
    # One interpreter runs them all, as the console script runs each (its own timeout: no hang).
    for (_, text), done in zip(cases, flowplex_commands(*(argv for argv, _ in cases), cwd=d), strict=True):
        _one_line(done, 2, text)


def test_cli_truncated_recordings(cli_dir: Path, tmp_path: Path) -> None:
    d = tmp_path
    (d / "g.yaml").write_text(GRAPH)
    # One uncompressed chunk, cut at half: no complete chunk, so no stream to replay.
    done = _cli("run", "g.yaml", "--record", "N.mcap", "--compression", "none", cwd=d)
    assert done.returncode == 0, done.stderr
    data = (d / "N.mcap").read_bytes()
    (d / "N-half.mcap").write_bytes(data[:len(data) // 2])
    _one_line(_cli("replay", "N-half.mcap", "--graph", "g.yaml", "--rate", "max", cwd=d), 2,
              "--replace src: the recording has no stream `a`")
    # Many small chunks, cut at half: what the complete chunks hold is replayed, which is less.
    with recording.Recorder(d / "many.mcap", chunk_size=256) as rec:
        for s in "ab":
            rec.add_stream(s, kind="i64")
        for ts in range(30):
            for s in "ab"[:1 if ts >= 20 else 2]:  # as the two sources of the graph count
                rec.write_value(s, ts, ts)
    data = (d / "many.mcap").read_bytes()
    (d / "many-half.mcap").write_bytes(data[:len(data) // 2])
    kept = recorded(d / "many-half.mcap")[0]
    assert 0 < len(kept["a"]) < 30
    done = _cli("replay", "many-half.mcap", "--graph", "g.yaml", "--rate", "max", "--record", "H.mcap", cwd=d)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert all(line.startswith("flowplex: ") for line in done.stderr.splitlines()), done.stderr
    warnings = [line for line in done.stderr.splitlines() if line.startswith("flowplex: warning: ")]
    kept_messages = sum(1 for _ in recording.open(d / "many-half.mcap").messages(bounds=True))
    assert len(warnings) == 1 and re.fullmatch(
        r"flowplex: warning: many-half\.mcap is truncated: cut short at byte \d+: [^;]+; read up to its last "
        rf"complete chunk \({kept_messages} messages\)", warnings[0]), done.stderr
    replayed = recorded(d / "H.mcap")[0]
    assert replayed["a"] == kept["a"] and replayed["b"] == kept["b"]
    diff = _cli("diff", "many.mcap", "many-half.mcap", cwd=d)
    assert diff.returncode == 1 and diff.stdout.startswith("flowplex: many.mcap and many-half.mcap differ: stream ")
    assert diff.stderr.count("\n") == 1 and "cut short at byte" in diff.stderr, diff.stderr


def test_cli_bad_data_found_while_replaying_is_a_runtime_error(cli_dir: Path, tmp_path: Path) -> None:
    """A corrupt chunk, a message whose kind is not its channel's, a stream whose
    kind the graph's port refuses: the file opens, and the replay finds each while the graph runs.
    A runtime error then (exit 1), said in one line of its own; ``diff``, which only reads the
    files, says the file is bad input (exit 2)."""
    d = tmp_path
    (d / "g.yaml").write_text(GRAPH)
    data = bytearray((cli_dir / "A.mcap").read_bytes())
    for i in range(len(data) // 4, len(data) // 4 + 32):  # inside the one chunk
        data[i] ^= 0x5A
    (d / "flipped.mcap").write_bytes(bytes(data))
    _flowplex_mcap(d / "mixed.mcap", "flowplex.i64", {"a": [0, "text", 2], "b": [0, 1, 2]})  # a str in an i64 channel
    with recording.Recorder(d / "strs.mcap") as rec:
        rec.add_stream("s", kind="str")
        for ts in range(3):
            rec.write_value("s", ts, f"v{ts}")
    replay = ("--graph", "g.yaml", "--rate", "max")
    checksum = re.compile(r"flowplex: error: g\.yaml: kernel failed: \[(src|other)\] RecordingError: .*flipped\.mcap: "
                          r"corrupt Chunk at byte \d+: [^\n]+\n")  # its checksum, or zstd's own check
    done = _cli("replay", "flipped.mcap", *replay, cwd=d)
    assert (done.returncode, done.stdout) == (1, ""), done.stderr
    *before, last = done.stderr.splitlines(keepends=True)
    assert checksum.fullmatch(last), done.stderr
    assert all(line.startswith("flowplex: warning: (subsequent error, ignored) kernel failed: ") for line in before)
    _one_line(_cli("diff", cli_dir / "A.mcap", "flipped.mcap", cwd=d), 2, "flipped.mcap: corrupt Chunk at byte ")
    for argv, code in ((("replay", "mixed.mcap", *replay, "--replace", "src=a"), 1),
                       (("diff", "mixed.mcap", "mixed.mcap"), 2)):
        done = _cli(*argv, cwd=d)
        _one_line(done, code, "mixed.mcap: stream 'a', message at byte ")
        assert done.stderr.endswith(": a str value in a i64 stream (schema mismatch)\n"), done.stderr
    _one_line(_cli("replay", "strs.mcap", *replay, "--replace", "src=s", cwd=d), 1,
              "[big] input port `a` type mismatch: contract declares I64, actual Str")


def _chunk_offsets(data: bytes) -> list[int]:
    """Where each top-level Chunk record of an MCAP file starts."""
    record = struct.Struct("<BQ")
    pos, found = 8, []  # after the magic bytes
    while pos + record.size <= len(data):
        opcode, length = record.unpack_from(data, pos)
        if opcode == 0x06:
            found.append(pos)
        pos += record.size + length
    return found


@pytest.mark.parametrize("compression", ["none", "zstd"])
def test_cli_a_corrupt_chunk_in_the_middle_is_one_line_naming_the_file(tmp_path: Path, compression: str) -> None:
    """Chunks before it replay; the damaged one stops the run (exit 1) with one line that names
    the file and the chunk's offset, never a traceback. Printing or comparing the file, which only
    reads it, is bad input (exit 2), said the same way."""
    d = tmp_path
    (d / "g.yaml").write_text(GRAPH)
    with recording.Recorder(d / "many.mcap", chunk_size=256, compression=compression) as rec:
        rec.add_stream("a", kind="i64")
        for ts in range(60):
            rec.write_value("a", ts, ts)
    data = bytearray((d / "many.mcap").read_bytes())
    chunks = _chunk_offsets(bytes(data))
    assert len(chunks) >= 5
    middle = chunks[len(chunks) // 2]
    data[middle + 60] ^= 0xFF  # in the chunk's records, past its header (36 bytes) and compression name
    (d / "bad.mcap").write_bytes(bytes(data))
    where = f"bad.mcap: corrupt Chunk at byte {middle}: "
    done = _cli("replay", "bad.mcap", "--graph", "g.yaml", "--replace", "src=a", "--rate", "max",
                "-o", "out.jsonl", cwd=d)
    _one_line(done, 1, where)
    assert re.fullmatch(rf"flowplex: error: g\.yaml: kernel failed: \[src\] RecordingError: \S*{re.escape(where)}"
                        r"[^\n]+\n", done.stderr), done.stderr
    printed = _cli("replay", "bad.mcap", cwd=d)
    assert printed.returncode == 2 and "Traceback" not in printed.stderr
    assert printed.stderr == f"flowplex: error: {where}" + printed.stderr.split(where, 1)[1]
    assert printed.stderr.count("\n") == 1
    assert 0 < len(printed.stdout.splitlines()) < 60  # the chunks before it were printed
    _one_line(_cli("inspect", "bad.mcap", cwd=d), 2, where)
    _one_line(_cli("diff", "many.mcap", "bad.mcap", cwd=d), 2, where)
