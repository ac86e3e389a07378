"""``flowplex replay FILE --graph GRAPH``: the graph run with recorded streams in place of nodes.

Each ``--replace NODE[=CHANNEL,...]`` turns node NODE into a ``ReplaySource`` of the recording:
the node keeps its name and output ports, loses its inputs, and each output port replays the
stream of the same name (or the one ``=CHANNEL`` names). Without ``--replace`` every source node
is replaced. Nodes upstream of a replaced one still run; their outputs then reach nobody.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Any

from flowplex.errors import UsageError

if TYPE_CHECKING:
    from flowplex.spec import GraphSpec, NodeSpec

__all__ = ["Replacement", "parse_replacements", "replace_nodes"]


@dataclasses.dataclass(frozen=True, slots=True)
class Replacement:
    """One ``--replace``: the node, and the channels its outputs replay (empty: by port name)."""

    node: str
    channels: tuple[str, ...] = ()


def parse_replacements(texts: list[str]) -> list[Replacement]:
    """``NODE`` or ``NODE=CHANNEL[,CHANNEL...]`` for each ``--replace`` (a UsageError when malformed)."""
    out: list[Replacement] = []
    for text in texts:
        node, sep, rest = text.partition("=")
        node = node.strip()
        channels = tuple(c.strip() for c in rest.split(",")) if sep else ()
        if not node or (sep and not all(channels)):
            msg = f"--replace {text!r}: expected NODE or NODE=CHANNEL (a stream of the recording)"
            raise UsageError(msg)
        if any(r.node == node for r in out):
            msg = f"--replace {text!r}: node `{node}` is replaced twice"
            raise UsageError(msg)
        out.append(Replacement(node, channels))
    return out


def replace_nodes(spec: GraphSpec, replacements: list[Replacement], recording: Path, have: list[str],
                  options: dict[str, Any]) -> GraphSpec:
    """``spec`` with each replaced node turned into a ``ReplaySource`` of ``recording`` (whose
    streams are ``have``); ``options`` are the replay's own (rate, loop, start, end).

    Raises:
        UsageError: A node the graph does not have, a channel the recording does not have, or
            as many channels as the node has no outputs.
    """
    from flowplex._suggest import did_you_mean

    by_name = {n.name: n for n in spec.nodes}
    if not replacements:
        replacements = [Replacement(n.name) for n in spec.nodes if n.is_source]
        if not replacements:
            msg = "the graph has no source node to replace: name the nodes with --replace NODE"
            raise UsageError(msg)
    new: dict[str, NodeSpec] = {}
    for r in replacements:
        node = by_name.get(r.node)
        if node is None:
            msg = (f"--replace {r.node}: the graph has no node `{r.node}`{did_you_mean(r.node, list(by_name))} "
                   f"(nodes: {', '.join(by_name)})")
            raise UsageError(msg)
        new[node.name] = _replay_node(node, r, recording, have, options)
    return dataclasses.replace(spec, nodes=tuple(new.get(n.name, n) for n in spec.nodes))


def _replay_node(node: NodeSpec, r: Replacement, recording: Path, have: list[str],
                 options: dict[str, Any]) -> NodeSpec:
    from flowplex._suggest import did_you_mean
    from flowplex.spec import InputPolicySpec, InputQueuesSpec
    from flowplex.spec._specs import DEFAULT_EXECUTOR

    ports = [p.name for p in node.output_ports]
    if not ports:
        msg = f"--replace {node.name}: node `{node.name}` has no output port to replay"
        raise UsageError(msg)
    channels = list(r.channels) or ports
    if len(channels) != len(ports):
        msg = (f"--replace {node.name}={','.join(channels)}: node `{node.name}` has {len(ports)} output port(s) "
               f"({', '.join(ports)}): give one channel per port, in that order")
        raise UsageError(msg)
    for channel, port in zip(channels, ports, strict=True):
        if channel not in have:
            given = ("" if r.channels else
                     f" (output port `{port}` replays the stream of its name; NODE=CHANNEL picks another)")
            msg = (f"--replace {node.name}: the recording has no stream `{channel}`{did_you_mean(channel, have)}"
                   f"{given}; it has {', '.join(have) or 'none'}")
            raise UsageError(msg)
    return dataclasses.replace(
        node, kernel="ReplaySource", input_ports=(), executor=DEFAULT_EXECUTOR, max_in_flight=1,
        options={"path": str(recording.resolve()), "channel": list[Any](channels), **options},
        input_policy=InputPolicySpec(), input_queues=InputQueuesSpec(), back_edges=(), on_error="abort",
        rate=0.0, route=None)


def run_replay(file: Path, graph: Path, replace: list[str], rate: float, loop: bool, start: float | None,
               end: float | None, record: Path | None, streams: str | None, compression: str,
               overrides: list[str], imports: list[str], output: Path | None, timeout: float | None,
               name: str | None = None, control: bool = True) -> None:
    """``replay FILE --graph GRAPH``: build the graph with the replaced nodes and run it as
    ``flowplex run`` does (its outputs printed or written, ``--record`` recorded)."""
    import math

    from flowplex.recording import RecordingError
    from flowplex.recording import open as open_recording

    from ._app import fail, setup_logging, usage
    from ._loading import import_kernels, load_graph
    from ._recording import warn_if_truncated
    from ._run import RunOutputs, check_control_name, execute
    from ._watch import Deadline, check_timeout, watch_ctrl_c

    if name is not None:
        check_control_name(name, control)
    if not graph.is_file():
        msg = f"--graph {graph}: no such file"
        raise usage(msg)
    try:
        replacements = parse_replacements(replace)
    except UsageError as exc:
        raise usage(str(exc)) from None
    try:
        with open_recording(file) as rec:
            have = rec.streams
            truncation = rec.truncation  # said once the graph is built: a usage error stays one line
    except RecordingError as exc:
        raise fail(exc, 2) from None
    options: dict[str, Any] = {"rate": "max" if math.isinf(rate) else rate, "loop": loop}
    if start is not None:
        options["start"] = start
    if end is not None:
        options["end"] = end
    setup_logging()
    watch_ctrl_c()
    deadline = Deadline(check_timeout(timeout), graph)
    import_kernels(imports, deadline)
    deadline.step = "loading the graph (running its imports, creating its kernels)"
    g = load_graph(graph, overrides, None, lambda spec: replace_nodes(spec, replacements, file, have, options))
    warn_if_truncated(truncation)
    execute(g, graph, deadline, RunOutputs(output=output, record=record, streams=streams, compression=compression,
                                               name=name, control=control))
