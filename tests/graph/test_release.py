"""However a graph ends, it releases the packets it still holds: adopted arrays are writeable again."""

from __future__ import annotations

import gc
from collections.abc import Callable

import numpy as np
import pytest

import flowplex
from flowplex.executors import DelegatingExecutor, ThreadPoolExecutor
from flowplex.packets import Packet


@flowplex.kernel("TFailAtOne")
class TFailAtOne(flowplex.Kernel):
    """Forwards, but fails at timestamp 1."""

    def process(self, cc: flowplex.Context) -> None:
        if cc.input_timestamp == 1:
            raise ValueError("boom at 1")
        cc.forward(0, 0)


def chain(kernel: str = "TForward", extra: str = "") -> str:
    return extra + f"""
nodes:
  - {{ name: a, kernel: {kernel}, input_ports: [x], output_ports: [m] }}
  - {{ name: b, kernel: TForward, input_ports: [m], output_ports: [y] }}
input_ports: [x]
output_ports: [y]
"""


def arrays(n: int = 3) -> list[np.ndarray]:
    return [np.full(5, i, dtype=np.float64) for i in range(n)]


def assert_released(arrs: list[np.ndarray]) -> None:
    for i, a in enumerate(arrs):
        assert a.flags.writeable, f"array {i} is still read-only"
        a[0] = -1.0  # writing works
        assert a[0] == -1.0


def send_paused(g: flowplex.Graph, arrs: list[np.ndarray]) -> None:
    g.start()
    g.pause()
    for ts, a in enumerate(arrs):
        g.send("x", a, ts=ts)
    assert not any(a.flags.writeable for a in arrs)


def test_cancel_while_paused_releases_queued_arrays() -> None:
    arrs = arrays()
    with flowplex.Graph.from_yaml(chain()) as g:
        g.add_poller("y")
        send_paused(g, arrs)
        g.cancel()
        with pytest.raises(flowplex.GraphCancelled):
            g.wait_done(timeout=10)
        assert_released(arrs)  # already when wait_done reports the end, before close
        stats = g.stats()
        assert sum(n.queued for n in stats.nodes) == 0
        assert g._engine.budget.queued == 0 and g._engine.budget.queued_bytes == 0


def test_close_with_queued_packets_releases_them() -> None:
    arrs = arrays()
    with flowplex.Graph.from_yaml(chain()) as g:
        g.add_poller("y")
        send_paused(g, arrs)
    assert_released(arrs)


def test_close_with_a_byte_limit_keeps_the_counters_straight() -> None:
    arrs = arrays()
    g = flowplex.Graph.from_yaml(chain(extra="max_queued_packets: 64\n"))
    g._engine.budget.limit_bytes = 1 << 20  # the byte watermark (diagnostics only in YAML): counted too
    with g:
        g.add_poller("y")
        send_paused(g, arrs)
        assert g._engine.budget.queued_bytes == sum(a.nbytes for a in arrs)
    assert g._engine.budget.queued == 0 and g._engine.budget.queued_bytes == 0
    assert_released(arrs)


@pytest.mark.local_kernels(
    reason="checks that the delivered packet holds the very array sent: loopback delivers decoded copies",
)
def test_kernel_error_with_a_backlog_releases_it() -> None:
    arrs = arrays(4)
    with flowplex.Graph.from_yaml(chain("TFailAtOne")) as g:
        y = g.add_poller("y")
        send_paused(g, arrs)
        g.resume()
        with pytest.raises(flowplex.KernelError, match="boom at 1"):
            g.wait_done(timeout=10)
        got = y.try_next()  # ts 0 went through before the failure: it is the host's now
        assert got is not None and got.timestamp == 0
        assert not arrs[0].flags.writeable
        del got
        assert_released(arrs)


def test_reset_releases_queued_packets_and_contexts() -> None:
    arrs = arrays()
    g = flowplex.Graph.from_yaml(chain())
    try:
        g.add_poller("y")
        send_paused(g, arrs)
        g.cancel()
        with pytest.raises(flowplex.GraphCancelled):
            g.wait_done(timeout=10)
        g.reset()
        assert_released(arrs)
        assert g._engine.budget.queued == 0
        again = arrays(1)
        g.start()
        g.send("x", again[0], ts=0)
        g.close_all_inputs()
        g.wait_done(timeout=10)
    finally:
        g.close()


def test_dropping_an_unclosed_graph_releases_its_arrays() -> None:
    arrs = arrays()
    g = flowplex.Graph.from_yaml(chain())
    g.add_poller("y")
    send_paused(g, arrs)
    del g
    gc.collect()
    assert_released(arrs)


def test_feedback_register_is_released_at_close() -> None:
    import tests.graph.conftest  # noqa: F401

    arr = np.zeros(3)
    with flowplex.Graph.from_yaml("""
nodes:
  - { name: j, kernel: TForward, input_ports: [x, fb], output_ports: [y], back_edges: [fb] }
  - { name: loop, kernel: TForward, input_ports: [y], output_ports: [fb] }
input_ports: [x]
output_ports: [y]
""") as g:
        y = g.add_poller("y")
        g.start()
        g.send("x", arr, ts=0)  # `j` forwards it, `loop` feeds it back into `j`'s register
        g.close_all_inputs()
        g.wait_done(timeout=10)
        out = y.next(timeout=5)
        assert out is not None
        del out
    assert arr.flags.writeable


@pytest.mark.local_kernels(
    reason="checks that the delivered packet holds the very array sent: loopback delivers decoded copies",
)
def test_unread_poller_packets_stay_the_hosts_after_close() -> None:
    arrs = arrays()
    with flowplex.Graph.from_yaml(chain()) as g:
        y = g.add_poller("y")
        g.start()
        for ts, a in enumerate(arrs):
            g.send("x", a, ts=ts)
        g.close_all_inputs()
        g.wait_done(timeout=10)
    # Delivered packets are the host's: still readable after close, released as they are read.
    assert not any(a.flags.writeable for a in arrs)
    got = [p.as_numpy().tolist() for p in y]
    assert got == [a.tolist() for a in arrs]
    assert_released(arrs)


def test_side_packets_are_released_at_close() -> None:
    arr = np.ones(2)
    with flowplex.Graph.from_yaml(chain()) as g:
        g.set_side_packet("table", arr)
        g.start()
        g.close_all_inputs()
        g.wait_done(timeout=10)
        assert not arr.flags.writeable
    assert_released([arr])


@pytest.mark.executors("inline", reason="builds the executors it tests itself, outside any graph")
@pytest.mark.parametrize("make", [lambda: ThreadPoolExecutor("pool", 1), lambda: DelegatingExecutor("host")])
def test_executor_shutdown_drops_queued_tasks_and_their_packets(make: Callable[[], object]) -> None:
    ex = make()
    arr = np.zeros(4)
    held = [Packet.from_numpy(arr)]  # what a queued task's context holds
    ex.submit(lambda arg: None, held)  # type: ignore[attr-defined]  # never run: not started / not pumped
    del held
    assert not arr.flags.writeable
    ex.shutdown()  # type: ignore[attr-defined]
    assert_released([arr])
