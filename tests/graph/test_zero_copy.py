"""Zero-copy buffers through graphs: adoption, in-place writes, copy-on-write for fan-out."""

from __future__ import annotations

import numpy as np
import pytest

import flowplex


@flowplex.kernel("TInPlaceNegate")
class TInPlaceNegate(flowplex.Kernel):
    def process(self, cc: flowplex.Context) -> None:
        p = cc.take_input(0)
        arr = p.make_mutable()
        np.negative(arr, out=arr)
        cc.emit(0, p)


def address(a: np.ndarray) -> int:
    return int(a.__array_interface__["data"][0])


@pytest.mark.parametrize("place", ["", "executor: pool, ", "executor: host, "])
def test_linear_pipeline_writes_in_place(place: str) -> None:
    text = f"""
executors: [{{ name: pool, type: ThreadPoolExecutor, num_threads: 2 }}, {{ name: host, type: DelegatingExecutor }}]
nodes:
  - {{ name: a, {place}kernel: TForward, input_ports: [x], output_ports: [m] }}
  - {{ name: b, {place}kernel: TInPlaceNegate, input_ports: [m], output_ports: [y] }}
input_ports: [x]
output_ports: [y]
"""
    import tests.graph.conftest  # noqa: F401

    addresses = []
    with flowplex.Graph.from_yaml(text) as g:
        seen: list[int] = []
        g.observe("y", lambda p: seen.append(address(p.as_numpy())))
        g.start()
        for i in range(3):
            addresses.append(0)
            # The array is created inside the call: nobody but the graph holds it.
            g.send("x", _adopt(addresses, i), ts=i)
        g.close_all_inputs()
        g.wait_done(timeout=10)
    assert seen == addresses


def _adopt(addresses: list[int], i: int) -> np.ndarray:
    arr = np.full((4, 4), i + 1, dtype=np.float32)
    addresses[i] = address(arr)
    return arr


def test_fan_out_sibling_never_sees_the_change() -> None:
    import tests.graph.conftest  # noqa: F401

    with flowplex.Graph.from_yaml("""
nodes:
  - { name: neg, kernel: TInPlaceNegate, input_ports: [x], output_ports: [y] }
  - { name: keep, kernel: TForward, input_ports: [x], output_ports: [k] }
input_ports: [x]
output_ports: [y, k]
""") as g:
        y, k = g.add_poller("y"), g.add_poller("k")
        g.start()
        g.send("x", np.arange(6, dtype=np.int32).reshape(2, 3), ts=0)
        g.close_all_inputs()
        g.wait_done(timeout=10)
        neg, kept = y.next(), k.next()
        assert neg is not None and kept is not None
        assert neg.as_numpy().tolist() == [[0, -1, -2], [-3, -4, -5]]
        assert kept.as_numpy().tolist() == [[0, 1, 2], [3, 4, 5]]


def test_host_held_array_is_never_modified() -> None:
    import tests.graph.conftest  # noqa: F401

    mine = np.ones((3, 3), dtype=np.uint8)
    with flowplex.Graph.from_yaml("""
nodes:
  - { name: neg, kernel: TInPlaceNegate, input_ports: [x], output_ports: [y] }
input_ports: [x]
output_ports: [y]
""") as g:
        y = g.add_poller("y")
        g.start()
        g.send("x", mine, ts=0)  # the host keeps `mine`: the kernel must work on a copy
        g.close_all_inputs()
        g.wait_done(timeout=10)
        out = y.next()
        assert out is not None and out.as_numpy().tolist() == [[255] * 3] * 3
    assert mine.tolist() == [[1] * 3] * 3
    assert mine.flags.writeable


def test_sent_array_is_read_only_while_the_graph_holds_it() -> None:
    mine = np.zeros(4, dtype=np.float64)
    with flowplex.Graph.from_yaml("input_ports: [x]\noutput_ports: [x]\n") as g:
        x = g.add_poller("x")
        g.start()
        g.send("x", mine, ts=0)
        assert not mine.flags.writeable  # queued in the poller
        with pytest.raises(ValueError, match="read-only"):
            mine[0] = 1.0
        p = x.next(timeout=5)
        assert p is not None and p.as_numpy() is not mine
        del p
        assert mine.flags.writeable  # the last packet reference is gone
        g.close_all_inputs()
        g.wait_done(timeout=5)


def test_full_stats_count_copy_on_write_copies_per_node() -> None:
    import tests.graph.conftest  # noqa: F401

    with flowplex.Graph.from_yaml("""
stats: full
nodes:
  - { name: neg, kernel: TInPlaceNegate, input_ports: [x], output_ports: [y] }
  - { name: keep, kernel: TForward, input_ports: [x], output_ports: [k] }
  - { name: solo, kernel: TInPlaceNegate, input_ports: [k], output_ports: [z] }
input_ports: [x]
output_ports: [y, z]
""") as g:
        g.start()
        for i in range(3):
            g.send("x", np.zeros(8, dtype=np.int16), ts=i)
        g.close_all_inputs()
        g.wait_done(timeout=10)
        stats = {s.node_name: s.copies for s in g.node_stats()}
    # `neg` shares each payload with its fan-out sibling (still queued), so it copies; `solo`
    # then receives the sibling's payload, which nobody else holds any more: no copy there.
    assert stats == {"neg": 3, "keep": 0, "solo": 0}
