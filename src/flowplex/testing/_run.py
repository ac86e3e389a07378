"""``run_graph``: build a graph, feed its inputs, run it to the end, and return what came out."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Final, final

import yaml

from ..engine._clock import Clock
from ..errors import RunError, Timeout, UsageError
from ..graph import Graph, Poller
from ..kernels import kernel_class
from ..packets._values import decode_packet
from ..spec._specs import ROUTE_KERNEL
from ._script import parse_script

__all__ = ["Outputs", "build_graph", "check_scripts", "run_graph"]

GraphSource = str | Path | Graph | Mapping[str, object]
"""What ``run_graph`` builds from: YAML text, a YAML file, a graph dict or a built ``Graph``."""
_POLL_S: Final = 0.02
"""How often the outputs are drained while the graph runs (unbounded pollers never block it;
draining keeps their packets from counting against the graph's queue budget for long)."""


@final
class Outputs(Mapping[str, list[tuple[int, object]]]):
    """What a graph sent to each output port: ``outputs["y"] == [(ts, value), ...]``, in order.

    Values are decoded as in ``flowplex run``, but losslessly: bool, int, float, str, bytes, or
    a numpy copy of a buffer. ``error`` is the graph's failure when ``run_graph`` was told not
    to raise it (``raise_on_error=False``), else None.
    """

    __slots__ = ("_ports", "error")

    def __init__(self, ports: dict[str, list[tuple[int, object]]], error: RunError | None = None) -> None:
        self._ports = ports
        self.error = error

    def __getitem__(self, port: str) -> list[tuple[int, object]]:
        try:
            return self._ports[port]
        except KeyError:
            msg = f"no graph output port `{port}` (graph outputs: {list(self._ports)})"
            raise KeyError(msg) from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._ports)

    def __len__(self) -> int:
        return len(self._ports)

    def values_of(self, port: str) -> list[object]:
        """The values of ``port``, without their timestamps."""
        return [value for _, value in self[port]]

    def timestamps_of(self, port: str) -> list[int]:
        """The timestamps of ``port``'s packets."""
        return [ts for ts, _ in self[port]]

    def __repr__(self) -> str:
        tail = f", error={self.error!r}" if self.error is not None else ""
        return f"Outputs({self._ports!r}{tail})"


def check_scripts(graph: Graph) -> None:
    """Check every ``ScriptedSource`` node's script, naming the YAML path of a bad entry.

    The kernel checks it too, in ``open``, but only knows its node's name; here the plan knows
    where each node was written (``nodes[0].options.script[3] (node `src`): ...``).
    """
    from ._sources import ScriptedSource

    for spec in graph.plan.spec.nodes:
        if spec.kernel == ROUTE_KERNEL:
            continue
        try:
            cls = kernel_class(spec.kernel)
        except Exception:  # the build resolved it already; an oddity here is not ours to report
            continue
        if cls is ScriptedSource:
            parse_script(spec.options, f"{spec.path}.options", f" (node `{spec.name}`)")


def build_graph(source: GraphSource) -> Graph:
    """A graph from YAML text, a YAML file (a ``Path``, or a one-line ``.yaml``/``.yml`` string)
    or a graph dict, with its scripts checked (see ``check_scripts``)."""
    if isinstance(source, Graph):
        graph = source
    elif isinstance(source, Path) or (isinstance(source, str) and "\n" not in source
                                      and source.strip().endswith((".yaml", ".yml"))):
        graph = Graph.from_yaml_file(source)
    elif isinstance(source, str):
        graph = Graph.from_yaml(source)
    elif isinstance(source, Mapping):
        graph = Graph.from_yaml(yaml.safe_dump(dict(source), sort_keys=False))
    else:
        msg = f"run_graph: expected YAML text, a path, a graph dict or a Graph, got {type(source).__name__}"
        raise UsageError(msg)
    try:
        check_scripts(graph)
    except Exception:
        if graph is not source:
            graph.close()
        raise
    return graph


def _timed(port: str, items: Iterable[object]) -> list[tuple[int, object]]:
    """``(ts, value)`` pairs for one port: plain values count on from the last timestamp (from 0)."""
    if isinstance(items, str | bytes) or not isinstance(items, Iterable):
        msg = f"run_graph: inputs[{port!r}] must be an iterable of values or (ts, value) pairs, got {items!r}"
        raise UsageError(msg)
    out: list[tuple[int, object]] = []
    next_ts = 0
    for item in items:
        if isinstance(item, tuple):
            if len(item) != 2 or not isinstance(item[0], int) or isinstance(item[0], bool):
                msg = f"run_graph: inputs[{port!r}][{len(out)}]: a tuple must be (ts, value), got {item!r}"
                raise UsageError(msg)
            ts, value = item
        else:
            ts, value = next_ts, item
        out.append((ts, value))
        next_ts = ts + 1
    return out


def _schedule(inputs: Mapping[str, Iterable[object]]) -> list[tuple[str, int, object]]:
    """Every input packet, in timestamp order across ports (ties: in the order the ports were given),
    so that nodes aligning several inputs see them arrive together."""
    timed = [(ts, order, k, port, value) for order, (port, items) in enumerate(inputs.items())
             for k, (ts, value) in enumerate(_timed(port, items))]
    timed.sort(key=lambda t: (t[0], t[1], t[2]))
    return [(port, ts, value) for ts, _, _, port, value in timed]


def _drain(pollers: dict[str, Poller], got: dict[str, list[tuple[int, object]]]) -> None:
    for port, poller in pollers.items():
        while True:
            try:
                packet = poller.try_next()
            except RunError:  # the graph failed: what was queued before is read; wait_done reports it
                break
            if packet is None:
                break
            got[port].append((packet.timestamp, decode_packet(packet)))


def run_graph(
    graph: GraphSource,
    inputs: Mapping[str, Iterable[object]] | None = None,
    *,
    timeout: float = 10.0,
    executor: str | None = None,
    raise_on_error: bool = True,
    clock: Clock | None = None,
) -> Outputs:
    """Run ``graph`` to the end and return what each output port received, with timestamps.

    Args:
        graph: YAML text, a YAML file, a graph dict (nodes from ``scripted`` fit in) or a
            ``Graph`` not started yet (it is run, and left for you to close).
        inputs: Per graph input port, values (stamped 0, 1, 2... counting on from the last
            timestamp) or ``(ts, value)`` pairs; sent in timestamp order across ports, then
            every input is closed (also those not named here).
        timeout: Seconds for the whole run; past it the graph is cancelled and ``Timeout`` raised.
        executor: Run the graph's default slot on this kind (``default_executor``): ``"inline"``,
            ``"threads"``, ``"processes"``...; None keeps the graph's own.
        raise_on_error: Raise the graph's failure (``KernelError``, ``DeadlockError``); with
            False it is returned in ``Outputs.error``, with the outputs that came before it.
        clock: Run the graph's timing rules on this clock (``FakeClock(autojump=True)``: an hour
            of timers in a moment, the same outputs every run); ``timeout`` stays in real seconds.

    Raises:
        ConfigError: The graph or a ``ScriptedSource`` script is invalid (path named).
        UsageError: ``inputs`` name no graph input, or are malformed.
        Timeout: The graph did not finish within ``timeout`` seconds.
    """
    from . import default_executor

    if executor is not None and isinstance(graph, Graph):
        msg = "run_graph: executor= applies to graphs run_graph builds; build the Graph inside default_executor()"
        raise UsageError(msg)
    schedule = _schedule(inputs or {})
    with default_executor(executor) if executor is not None else contextlib.nullcontext():
        g = build_graph(graph)
    owned = g is not graph
    deadline = time.monotonic() + timeout
    try:
        if clock is not None:
            g.set_clock(clock)
        for port in {port for port, _, _ in schedule}:
            g.input(port)  # an unknown port fails before anything runs (with a did-you-mean)
        pollers = {port: g.add_poller(port) for port in g.plan.graph_outputs}
        got: dict[str, list[tuple[int, object]]] = {port: [] for port in pollers}
        try:
            g.start()
        except RunError as exc:  # a kernel's open failed
            error: RunError | None = exc
        else:
            error = _feed(g, schedule, deadline)
        if error is None:
            error = _finish(g, pollers, got, deadline, timeout)
        _drain(pollers, got)
    finally:
        if owned:
            g.close()
    if error is not None and raise_on_error:
        raise error
    return Outputs(got, error)


def _feed(g: Graph, schedule: list[tuple[str, int, object]], deadline: float) -> RunError | None:
    """Send the inputs and close them; the graph's failure if a send met it."""
    try:
        for port, ts, value in schedule:
            g.send(port, value, ts, timeout=max(0.0, deadline - time.monotonic()))
        g.close_all_inputs()
    except RunError as exc:
        with contextlib.suppress(RunError):
            g.close_all_inputs()
        return _failure(g, exc)
    return None


def _failure(g: Graph, exc: RunError) -> RunError:
    """The graph's own error for a send that failed (a send may only see that it did)."""
    try:
        g.wait_done(timeout=1.0)
    except RunError as err:
        return err
    except Timeout:
        pass
    return exc


def _finish(g: Graph, pollers: dict[str, Poller], got: dict[str, list[tuple[int, object]]], deadline: float,
            timeout: float) -> RunError | None:
    """Wait for the end, draining the outputs meanwhile; the graph's failure, if any."""
    while True:
        _drain(pollers, got)
        left = deadline - time.monotonic()
        try:
            g.wait_done(timeout=max(0.0, min(_POLL_S, left)))
        except Timeout:
            if time.monotonic() >= deadline:
                g.cancel()
                msg = f"run_graph: the graph did not finish within {timeout} s ({g.last_error() or 'no error'})"
                raise Timeout(msg) from None
            continue
        except RunError as exc:
            return exc
        return None
