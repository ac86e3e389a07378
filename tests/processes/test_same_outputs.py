"""Property: a graph gives the same outputs inline, on threads and with every node on a process pool.

Random DAGs (fan-out, joins, integer and buffer streams, stateful and filtering nodes, some
nodes with ``max_in_flight: 2``) are fed the same random input streams three times; every
output port must carry the same packets (timestamps and values, in order) each time. Every
kernel here is deterministic given its input streams, and every policy is timing-independent
(``sync``, ``batch``), so any difference is the executor's.

A process pool costs a spawn per graph (about half a second here), hence the few examples and
no shrinking.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pytest
from hypothesis import Phase, example, given, note, settings
from hypothesis import strategies as st

import flowplex

from .._places import assert_placed, default_slot, place_head
from . import dag_kernels as dag_kernels  # registers the kernels here (workers import them by reference)
from .conftest import WAIT_S

PLACES = ("inline", "threads", "processes")
LARGE = 8192
"""Elements of an int64 buffer of 64 KiB: from this size on, buffers cross a pool by reference."""


@dataclass(frozen=True)
class Kind:
    """A node kind: its kernel, the stream types it reads (``any``: one of any type) and makes."""

    kernel: str
    reads: tuple[str, ...]
    makes: str
    """``int``, ``buf`` (int64 arrays), ``float``, or ``same`` (the type it reads)."""
    options: st.SearchStrategy[dict[str, object]] = field(default_factory=lambda: st.just({}))
    outputs: int = 1
    stateless: bool = False
    """Outputs depend on each invocation alone, so replicas (``max_in_flight: 2``) agree."""
    batch: bool = False
    """Runs under the ``batch`` input policy (capacity 1 to 3)."""

    def can_read(self, port: int, edge: str, edge_type: str) -> bool:
        """Whether input ``port`` can read ``edge``, a stream of ``edge_type``."""
        wanted = self.reads[port]
        return wanted in ("any", edge_type)


KINDS: dict[str, Kind] = {
    "scale": Kind("ScaleKernel", ("int",), "int", st.fixed_dictionaries({"factor": st.integers(-3, 3)}),
                  stateless=True),
    "filter": Kind("FilterKernel", ("int",), "int", st.fixed_dictionaries({"threshold": st.integers(-40, 40)}),
                   stateless=True),
    "forward": Kind("PassThroughKernel", ("any",), "same", stateless=True),
    "split": Kind("SplitKernel", ("any",), "same", outputs=2, stateless=True),
    "running_sum": Kind("DagRunningSum", ("int",), "int"),
    "total": Kind("SumKernel", ("int",), "int"),  # emits once, at TS_POST_STREAM, from close
    "batch_sum": Kind("BatchSumKernel", ("int",), "int", batch=True),
    "zip": Kind("ZipKernel", ("int", "int"), "int", stateless=True),
    "to_buffer": Kind("DagToBuffer", ("int",), "buf", st.fixed_dictionaries({"size": st.sampled_from([3, 16, LARGE])}),
                      stateless=True),
    "affine": Kind("AffineKernel", ("buf",), "buf",
                   st.fixed_dictionaries({"scale": st.sampled_from([-2.0, 0.5, 3.0]),
                                          "shift": st.integers(-5, 5).map(float)}), stateless=True),
    "in_place": Kind("DagAddInPlace", ("buf",), "buf", st.fixed_dictionaries({"add": st.integers(1, 9)}),
                     stateless=True),
    "add_scalar": Kind("DagAddScalar", ("buf", "int"), "buf", stateless=True),
    "reduce": Kind("ReduceKernel", ("buf",), "float", st.just({"op": "sum"}), stateless=True),
}


@dataclass
class NodeDesc:
    name: str
    kind: str
    inputs: list[str]
    outputs: list[str]
    options: dict[str, object]
    max_in_flight: int
    batch: int

    def yaml(self) -> str:
        kind = KINDS[self.kind]
        options = ", ".join(f"{k}: {v}" for k, v in self.options.items())
        policy = f", input_policy: {{ type: batch, capacity: {self.batch} }}" if kind.batch else ""
        return (f"  - {{ name: {self.name}, kernel: {kind.kernel}, input_ports: [{', '.join(self.inputs)}], "
                f"output_ports: [{', '.join(self.outputs)}], options: {{ {options} }}, "
                f"max_in_flight: {self.max_in_flight}{policy} }}")


Send = tuple[str, int, object]
"""(graph input, ts, value) of one send."""


@dataclass
class Scenario:
    inputs: dict[str, str]
    """Graph input -> its type (``int`` or ``buf``)."""
    nodes: list[NodeDesc]
    sends: list[Send]

    @property
    def outputs(self) -> list[str]:
        return [port for n in self.nodes for port in n.outputs]

    def yaml(self, place: str) -> str:
        head = place_head(place)
        return (f"{head}nodes:\n" + "\n".join(n.yaml() for n in self.nodes)
                + f"\ninput_ports: [{', '.join(self.inputs)}]\noutput_ports: [{', '.join(self.outputs)}]\n")


def input_array(seed: int, size: int) -> np.ndarray:
    return (np.arange(size, dtype=np.int64) * 7 + seed) % 1013


@st.composite
def scenarios(draw: st.DrawFn) -> Scenario:
    """A random DAG over 1-3 graph inputs, every node's outputs being graph outputs."""
    edges: dict[str, str] = {}  # edge -> stream type
    declared = {f"i{k}": draw(st.sampled_from(["int", "int", "buf"])) for k in range(draw(st.integers(1, 3)))}
    edges.update(declared)
    nodes: list[NodeDesc] = []
    for k in range(draw(st.integers(3, 7))):
        # Only the kinds whose every port some edge can feed (a join takes two distinct edges).
        def feeds(kind: Kind) -> bool:
            return all(len([e for e, et in edges.items() if kind.can_read(port, e, et)])
                       > kind.reads[:port].count(kind.reads[port]) for port in range(len(kind.reads)))

        name = draw(st.sampled_from(sorted(n for n, kind in KINDS.items() if feeds(kind))))
        kind = KINDS[name]
        inputs: list[str] = []
        for port in range(len(kind.reads)):
            fit = sorted(e for e, et in edges.items() if kind.can_read(port, e, et) and e not in inputs)
            inputs.append(draw(st.sampled_from(fit)))
        made = edges[inputs[0]] if kind.makes == "same" else kind.makes
        outputs = [f"n{k}o{j}" if kind.outputs > 1 else f"n{k}" for j in range(kind.outputs)]
        mif = draw(st.sampled_from([1, 1, 2])) if kind.stateless else 1
        nodes.append(NodeDesc(f"n{k}", name, inputs, outputs, draw(kind.options), mif, draw(st.integers(1, 3))))
        edges.update(dict.fromkeys(outputs, made))
    used = {e for n in nodes for e in n.inputs}
    graph_inputs = {name: t for name, t in declared.items() if name in used}  # node 0 reads one
    streams: dict[str, list[tuple[int, object]]] = {}
    for name, t in graph_inputs.items():
        stamps = sorted(draw(st.sets(st.integers(-3, 12), min_size=1, max_size=10)))  # ties: joins meet
        if t == "int":
            values: list[object] = draw(st.lists(st.integers(-100, 100), min_size=len(stamps), max_size=len(stamps)))
        else:
            values = [input_array(draw(st.integers(0, 99)), draw(st.sampled_from([2, 9, LARGE + 100])))
                      for _ in stamps]
        streams[name] = list(zip(stamps, values, strict=True))
    order = draw(st.permutations([name for name in graph_inputs for _ in streams[name]]))
    cursors = dict.fromkeys(graph_inputs, 0)
    sends: list[Send] = []
    for name in order:
        ts, value = streams[name][cursors[name]]
        cursors[name] += 1
        sends.append((name, ts, value))
    return Scenario(graph_inputs, nodes, sends)


def observed(p: flowplex.Packet) -> object:
    """What a packet carries, comparable across runs (a buffer by dtype, shape and bytes)."""
    if p.type_name == "Buffer":
        arr = p.as_numpy()
        return ("buffer", arr.dtype.str, arr.shape, arr.tobytes())
    return (p.type_name, p.payload)


def run(scenario: Scenario, place: str) -> dict[str, list[tuple[int, object]]]:
    """Run the scenario with its nodes on ``place``; every output port's (ts, value) in order."""
    text = scenario.yaml(place)
    with default_slot(place):
        g = flowplex.Graph.from_yaml(text)
    with g:
        pollers = {port: g.add_poller(port) for port in scenario.outputs}
        g.start()
        for name, ts, value in scenario.sends:
            g.send(name, value, ts=ts)
        g.close_all_inputs()
        g.wait_done(timeout=WAIT_S)
        assert_placed(g, place)
        return {port: [(p.timestamp, observed(p)) for p in poller] for port, poller in pollers.items()}


def _rich() -> Scenario:
    """Every feature at once, whatever the generated examples hold: a large buffer made by a
    replicated node and read by two nodes, a large graph-input buffer shared by a node that
    writes it in place and one that forwards it, joins of a buffer and an int and of two ints,
    a running sum, a filter, a batch and a total."""
    def node(k: int, kind: str, inputs: list[str], mif: int = 1, **options: object) -> NodeDesc:
        outputs = [f"n{k}o0", f"n{k}o1"] if KINDS[kind].outputs > 1 else [f"n{k}"]
        return NodeDesc(f"n{k}", kind, inputs, outputs, options, mif, 2)

    nodes = [
        node(0, "to_buffer", ["i0"], 2, size=LARGE),
        node(1, "affine", ["n0"], scale=-2.0, shift=1.0),
        node(2, "reduce", ["n0"], op="sum"),
        node(3, "running_sum", ["i0"]),
        node(4, "add_scalar", ["n1", "n3"]),
        node(5, "filter", ["i0"], threshold=0),
        node(6, "zip", ["n5", "n3"]),
        node(7, "in_place", ["i1"], 2, add=1),
        node(8, "split", ["i1"]),
        node(9, "batch_sum", ["n6"]),
        node(10, "total", ["i0"]),
        node(11, "scale", ["n9"], 2, factor=-3),
    ]
    sends: list[Send] = []
    for ts in range(8):
        sends.append(("i0", ts, (ts * 37) % 11 - 5))
        if ts % 2:
            sends.append(("i1", ts, input_array(ts, LARGE + 100)))
    return Scenario({"i0": "int", "i1": "buf"}, nodes, sends)


# Each example spawns a pool, so a failure ends the run: no shrinking (the example is noted).
@settings(max_examples=10, phases=[Phase.explicit, Phase.reuse, Phase.generate])
@example(scenario=_rich())
@given(scenario=scenarios())
def test_a_graph_gives_the_same_outputs_inline_on_threads_and_on_a_process_pool(scenario: Scenario) -> None:
    note(scenario.yaml("processes"))
    note(f"sends: {[(name, ts) for name, ts, _ in scenario.sends]}")
    inline = run(scenario, "inline")
    for place in PLACES[1:]:
        got = run(scenario, place)
        for port in scenario.outputs:
            assert got[port] == inline[port], f"{place}: output port {port}"


SHARED_IN_PLACE = """
executors: [{ name: pool, type: ProcessPoolExecutor, num_processes: 2 }]
nodes:
  - { name: make, kernel: DagToBuffer, input_ports: [x], output_ports: [made], options: { size: %d }%s }
  - { name: add, kernel: DagAddInPlace, input_ports: [made], output_ports: [added], executor: pool,
      options: { add: 3 } }
input_ports: [x]
output_ports: [made, added]
"""


@pytest.mark.parametrize("maker", ["", ", executor: pool"], ids=["made-here", "made-in-a-worker"])
def test_a_shared_large_engine_buffer_is_not_written_in_place(maker: str) -> None:
    with flowplex.Graph.from_yaml(SHARED_IN_PLACE % (LARGE, maker)) as g:
        made, added = g.add_poller("made"), g.add_poller("added")
        g.start()
        for ts in range(3):
            g.send("x", ts, ts=ts)
        g.close_all_inputs()
        g.wait_done(timeout=WAIT_S)
        got = ([int(p.as_numpy()[0]) for p in made], [int(p.as_numpy()[0]) for p in added])
    assert got == ([0, 1, 2], [3, 4, 5])
