"""Zero-copy buffers through graphs: adoption, in-place writes, copy-on-write for fan-out."""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

import numpy as np
import pytest

import flowplex

from .conftest import NO_RUN


@flowplex.kernel("TInPlaceNegate")
class TInPlaceNegate(flowplex.Kernel):
    def process(self, cc: flowplex.Context) -> None:
        p = cc.take_input(0)
        arr = p.make_mutable()
        np.negative(arr, out=arr)
        cc.emit(0, p)


ZERO_COPY = pytest.mark.local_kernels(reason="zero copy: loopback hands its kernels decoded copies of the packets")
"""Tests of the engine's own zero-copy path (where kernels run on the packets the engine holds)."""


def address(a: np.ndarray) -> int:
    return int(a.__array_interface__["data"][0])


@ZERO_COPY
def test_linear_pipeline_writes_in_place() -> None:
    text = """
nodes:
  - { name: a, kernel: TForward, input_ports: [x], output_ports: [m] }
  - { name: b, kernel: TInPlaceNegate, input_ports: [m], output_ports: [y] }
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


@ZERO_COPY
def test_full_stats_count_copy_on_write_copies_per_node(executor_kind: str) -> None:
    import tests.graph.conftest  # noqa: F401
    from tests.conftest import KINDS_WITH

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
    # Each payload is shared by `neg` and its fan-out sibling `keep`: whichever of `neg` and
    # `solo` writes it while the other still holds it copies, once per payload; `keep` never
    # writes. Where a send runs the work, `neg` runs first, while `keep` still holds the
    # payload: it copies, and `solo` then gets a payload nobody else holds. On worker threads
    # which of the two writes first is thread timing.
    assert stats["keep"] == 0
    assert stats["neg"] + stats["solo"] == 3
    if executor_kind in KINDS_WITH["on_caller"]:
        assert stats == {"neg": 3, "keep": 0, "solo": 0}


# --- new_buffer packets sent by the host: handed over, written in place (issue 12) ----------------


@flowplex.kernel("TInPlaceAddOne")
class TInPlaceAddOne(flowplex.Kernel):
    """Adds 1 in place and records the address it wrote into (class-level, per test)."""

    written: ClassVar[list[int]] = []

    def process(self, cc: flowplex.Context) -> None:
        p = cc.take_input(0)
        arr = p.make_mutable()
        TInPlaceAddOne.written.append(address(arr))
        np.add(arr, 1, out=arr)
        cc.emit(0, p)


CHAIN3 = """
stats: full
nodes:
  - { name: a, kernel: TForward, input_ports: [x], output_ports: [m] }
  - { name: b, kernel: TForward, input_ports: [m], output_ports: [n] }
  - { name: c, kernel: TInPlaceAddOne, input_ports: [n], output_ports: [y] }
input_ports: [x]
output_ports: [y]
"""


@ZERO_COPY
def test_sent_new_buffer_is_written_in_place_while_the_host_keeps_packet_and_view(
    make_graph: Callable[[str], flowplex.Graph],
) -> None:
    TInPlaceAddOne.written = []
    g = make_graph(CHAIN3)
    with g:
        y = g.add_poller("y")
        g.start()
        pkt, view = g.new_buffer((4, 6), np.uint16)
        view[:] = 7
        at = address(view)
        g.send("x", pkt, ts=0)  # the host keeps `pkt` and `view` in scope
        assert not view.flags.writeable  # handed over at send
        with pytest.raises(ValueError, match="assignment destination is read-only"):
            view[0, 0] = 1
        g.close_all_inputs()
        out = y.next(timeout=10)
        assert out is not None
        assert address(out.as_numpy()) == at
        assert (out.as_numpy() == 8).all()
        g.wait_done(timeout=10)
        copies = {s.node_name: s.copies for s in g.node_stats()}
    assert TInPlaceAddOne.written == [at]
    assert copies == {"a": 0, "b": 0, "c": 0}
    # The host's handle and view read the buffer as the graph left it.
    assert pkt.timestamp == 0 and (pkt.as_numpy() == 8).all() and (view == 8).all()
    assert not view.flags.writeable  # `out` and `pkt` still share the buffer
    del out
    assert not view.flags.writeable
    del pkt  # the last packet sharing it
    assert view.flags.writeable
    view[0, 0] = 1
    assert view[0, 0] == 1


@ZERO_COPY
def test_a_new_buffer_sent_twice_copies_once_and_no_packet_sees_the_other_write() -> None:
    TInPlaceAddOne.written = []
    with flowplex.Graph.from_yaml(CHAIN3) as g:
        y = g.add_poller("y")
        g.start()
        g.pause()  # both sends queue: the graph holds two handles of one buffer
        pkt, view = g.new_buffer(8, np.int32)
        view[:] = 5
        at = address(view)
        g.send("x", pkt, ts=0)
        g.send("x", pkt, ts=1)
        g.resume()
        g.close_all_inputs()
        first, second = y.next(timeout=10), y.next(timeout=10)
        assert first is not None and second is not None
        g.wait_done(timeout=10)
        copies = {s.node_name: s.copies for s in g.node_stats()}
    # The first take shares the buffer with the queued second packet: it copies. The second
    # is then the graph's only handle (the host's `pkt` does not count) and writes in place.
    assert (first.timestamp, second.timestamp) == (0, 1)
    assert (first.as_numpy() == 6).all() and (second.as_numpy() == 6).all()
    assert address(first.as_numpy()) != at and address(second.as_numpy()) == at
    assert copies == {"a": 0, "b": 0, "c": 1}
    del first, second, pkt
    assert view.flags.writeable


def test_reading_a_sent_new_buffer_packet_is_fine() -> None:
    with flowplex.Graph.from_yaml("input_ports: [x]\noutput_ports: [x]\n") as g:
        x = g.add_poller("x")
        g.start()
        pkt, view = g.new_buffer(3, "f32")
        view[:] = [1.0, 2.0, 3.0]
        g.send("x", pkt, ts=4)
        assert pkt.as_numpy().tolist() == [1.0, 2.0, 3.0] and pkt.timestamp == 4
        got = x.next(timeout=5)
        assert got is not None and got.as_numpy().tolist() == [1.0, 2.0, 3.0]
        g.close_all_inputs()
        g.wait_done(timeout=5)
    del got, pkt
    assert view.flags.writeable


@NO_RUN
def test_kernel_runner_input_from_new_buffer_is_handed_over() -> None:
    TInPlaceAddOne.written = []
    from flowplex.packets import cow_stats, new_buffer

    before = cow_stats().copies
    with flowplex.KernelRunner("TInPlaceAddOne") as r:
        pkt, view = new_buffer((2, 2), "u8")
        r.add_input(0, pkt, ts=0)
        assert not view.flags.writeable
        r.process(0)
        out = r.try_next()
    assert out is not None and (out.as_numpy() == 1).all()
    assert TInPlaceAddOne.written == [address(view)] and address(out.as_numpy()) == address(view)
    assert cow_stats().copies == before
    del out, pkt
    assert view.flags.writeable


def test_new_buffer_side_packet_is_read_only_until_the_graph_closed() -> None:
    g = flowplex.Graph.from_yaml("input_ports: [x]\noutput_ports: [x]\n")
    with g:
        pkt, view = g.new_buffer(2, "i64")
        g.set_side_packet("table", pkt)
        del pkt
        assert not view.flags.writeable
        g.start()
        g.close_all_inputs()
        g.wait_done(timeout=5)
    assert view.flags.writeable


@pytest.mark.executors(
    "delegating",
    reason="pins every node to `host` (lm-lmflow's pool sometimes copies) and registers kernels in lm-lmflow's "
    "process-wide registry, which cannot forget them",
)
def test_lmflow_keeps_the_pointer_too_but_leaves_the_view_writeable() -> None:
    lmflow = pytest.importorskip("lmflow", reason="the comparison needs lm-lmflow (extra `bench`)")

    seen: list[int] = []

    class InPlace:
        def process(self, cc: object) -> None:
            p = cc.take_input(0)  # type: ignore[attr-defined]
            arr = p.make_mutable()
            seen.append(address(arr))
            arr += 1
            cc.emit(0, p)  # type: ignore[attr-defined]

    class Forward:
        def process(self, cc: object) -> None:
            cc.forward(0, 0)  # type: ignore[attr-defined]

    results = {}
    for name, engine in (("flowplex", flowplex), ("lmflow", lmflow)):
        in_place, forward = f"TCompareInPlace_{name}", f"TCompareForward_{name}"
        engine.kernel(in_place)(type(in_place, (InPlace, engine.Kernel), {}))
        engine.kernel(forward)(type(forward, (Forward, engine.Kernel), {}))
        seen.clear()
        # On the host thread (a DelegatingExecutor): lm-lmflow's thread pool sometimes copies.
        text = CHAIN3.replace("TInPlaceAddOne", in_place).replace("TForward", forward)
        text = "executors: [{ name: host, type: DelegatingExecutor }]\n" + text.replace(
            "kernel:", "executor: host, kernel:")
        with engine.Graph.from_yaml(text) as g:
            y = g.add_poller("y")
            g.start()
            pkt, view = g.new_buffer((4, 4), np.uint8)
            view[:] = 1
            g.send("x", pkt, ts=0)
            writeable = bool(view.flags.writeable)
            g.close_all_inputs()
            out = y.next(timeout=10)
            results[name] = (seen == [address(view)], address(out.as_numpy()) == address(view), writeable)
            del out
            g.wait_done(timeout=10)
    assert results["flowplex"] == (True, True, False)
    # lm-lmflow keeps the pointer as well, but cannot stop the host writing while a kernel does.
    assert results["lmflow"] == (True, True, True)
