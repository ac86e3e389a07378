"""Frames cross the process pool through its shared-memory arena without copies (issue 14).

Each test proves a copy that did not happen by what a copy would change: the memory address of
a frame (the poller's array lies where ``Graph.new_buffer`` put it), the host's arena writes
(``arena_stats().writes``) and the copy-on-write copies of each node (``stats: full``).
"""

from __future__ import annotations

import threading
import time

import numpy as np
import numpy.typing as npt
import pytest

import flowplex
from flowplex.errors import KernelError, UsageError
from flowplex.executors.processes import ProcessPoolExecutor
from flowplex.executors.processes._arena import PAGE
from flowplex.testing import default_executor

from .conftest import WAIT_S, pool_yaml

MIB = 1 << 20
FRAMES = 6

Array = npt.NDArray[np.uint8]


def pool_of(g: flowplex.Graph) -> ProcessPoolExecutor:
    (pool,) = (ex for ex in g._engine.executors if isinstance(ex, ProcessPoolExecutor))
    return pool


def pattern(ts: int, nbytes: int = MIB) -> Array:
    """The content of frame ``ts``: differs from every other frame and at every offset."""
    return ((np.arange(nbytes, dtype=np.int64) + 7 * ts) % 251).astype(np.uint8)


def address(arr: np.ndarray) -> int:
    return int(arr.__array_interface__["data"][0])


def new_frame(g: flowplex.Graph, ts: int, nbytes: int = MIB) -> tuple[flowplex.Packet, int]:
    """A ``Graph.new_buffer`` packet holding ``pattern(ts)``, and its address. The writable view
    dies here: a test that kept it would hold the memory and rightly force a copy."""
    p, view = g.new_buffer((nbytes,), "u8")
    view[:] = pattern(ts, nbytes)
    return p, address(view)


def copies(g: flowplex.Graph) -> dict[str, int]:
    return {n.node_name: n.copies for n in g.stats().nodes}


def changed(ts: int, add: int) -> Array:
    """``pattern(ts)`` after ``PInPlace`` added ``add`` to its first byte."""
    want = pattern(ts)
    want[0] += add
    return want


FORWARD_CHAIN = """
stats: full
nodes:
  - { name: f1, kernel: PForward, input_ports: [x], output_ports: [y], executor: pool }
  - { name: f2, kernel: PForward, input_ports: [y], output_ports: [z], executor: pool }
input_ports: [x]
output_ports: [z]
"""


def test_new_buffer_frames_forwarded_across_two_workers_are_never_copied() -> None:
    """Forward sends a reference: the frame reaches the poller at the address new_buffer gave it."""
    with flowplex.Graph.from_yaml(pool_yaml(FORWARD_CHAIN)) as g:
        out = g.add_poller("z")
        g.start()
        pool = pool_of(g)
        for ts in range(FRAMES):
            p, at = new_frame(g, ts)
            g.send("x", p, ts=ts)
            del p
            arr = out.next(timeout=WAIT_S).as_numpy()
            assert pool.in_arena(arr)
            assert address(arr) == at, f"frame {ts} was copied on its way"
            assert np.array_equal(arr, pattern(ts))
            del arr
        g.close_all_inputs()
        g.wait_done(timeout=WAIT_S)
        stats = pool.arena_stats()
        assert stats is not None
        assert (stats.allocations, stats.writes, stats.write_bytes) == (FRAMES, 0, 0)
        assert copies(g) == {"f1": 0, "f2": 0}
        assert stats.used == 0  # every block came free again


def test_a_numpy_array_sent_is_written_into_the_arena_once_per_frame() -> None:
    body = """
stats: full
nodes:
  - { name: f, kernel: PForward, input_ports: [x], output_ports: [y], executor: pool }
input_ports: [x]
output_ports: [y]
"""
    sent = [pattern(ts) for ts in range(FRAMES)]
    with flowplex.Graph.from_yaml(pool_yaml(body, 1)) as g:
        out = g.add_poller("y")
        g.start()
        pool = pool_of(g)
        for ts, frame in enumerate(sent):
            g.send("x", frame, ts=ts)
            arr = out.next(timeout=WAIT_S).as_numpy()
            assert pool.in_arena(arr) and not pool.in_arena(frame)
            assert np.array_equal(arr, pattern(ts))
            del arr
        g.close_all_inputs()
        g.wait_done(timeout=WAIT_S)
        stats = pool.arena_stats()
        assert stats is not None
        assert (stats.writes, stats.write_bytes) == (FRAMES, FRAMES * MIB)
        assert copies(g) == {"f": 0}
    assert all(np.array_equal(frame, pattern(ts)) for ts, frame in enumerate(sent))  # the sender's, untouched


IN_PLACE = """
stats: full
nodes:
  - { name: f, kernel: PForward, input_ports: [x], output_ports: [y], executor: pool }
  - { name: i, kernel: PInPlace, input_ports: [y], output_ports: [z], executor: pool, options: { add: 5 } }
  - { name: j, kernel: PInPlace, input_ports: [w], output_ports: [v], executor: pool, options: { add: 9 } }
input_ports: [x, w]
output_ports: [z, v]
"""


def test_a_worker_changes_an_exclusively_held_frame_in_place() -> None:
    """``j`` alone, and ``f`` -> ``i`` on the other worker: the frame never moves."""
    with flowplex.Graph.from_yaml(pool_yaml(IN_PLACE)) as g:
        outs = {"x": g.add_poller("z"), "w": g.add_poller("v")}
        g.start()
        pool = pool_of(g)
        for ts in range(FRAMES):
            for port, add in (("x", 5), ("w", 9)):
                p, at = new_frame(g, ts)
                g.send(port, p, ts=ts)
                del p
                arr = outs[port].next(timeout=WAIT_S).as_numpy()
                assert address(arr) == at, f"frame {ts} on {port} was copied"
                assert np.array_equal(arr, changed(ts, add))
                del arr
        g.close_all_inputs()
        g.wait_done(timeout=WAIT_S)
        assert copies(g) == {"f": 0, "i": 0, "j": 0}
        stats = pool.arena_stats()
        assert stats is not None and stats.writes == 0


def test_a_numpy_frame_the_message_wrote_into_the_arena_is_the_workers_to_change() -> None:
    """The arena copy made for the message is the receiver's alone: no second copy in the worker.
    In one process the same graph changes a frame the host let go of in place, too."""
    body = """
stats: full
nodes:
  - { name: i, kernel: PInPlace, input_ports: [x], output_ports: [y], executor: pool, options: { add: 3 } }
input_ports: [x]
output_ports: [y]
"""
    with flowplex.Graph.from_yaml(pool_yaml(body, 1)) as g:
        out = g.add_poller("y")
        g.start()
        for ts in range(FRAMES):
            g.send("x", pattern(ts), ts=ts)  # nothing but the packet refers to the array
            arr = out.next(timeout=WAIT_S).as_numpy()
            assert np.array_equal(arr, changed(ts, 3))
            del arr
        g.close_all_inputs()
        g.wait_done(timeout=WAIT_S)
        stats = pool_of(g).arena_stats()
        assert stats is not None and stats.writes == FRAMES
        assert copies(g) == {"i": 0}


FAN_OUT = """
stats: full
nodes:
  - { name: a, kernel: PInPlace, input_ports: [x], output_ports: [ya], executor: pool, options: { add: 10 } }
  - { name: b, kernel: PInPlace, input_ports: [x], output_ports: [yb], executor: pool, options: { add: 20 } }
input_ports: [x]
output_ports: [ya, yb]
"""


@pytest.mark.parametrize("made_by", ["new_buffer", "numpy"])
def test_a_frame_shared_by_two_workers_is_copied_by_each_writer_at_most_once(made_by: str) -> None:
    kept: list[Array] = []
    with flowplex.Graph.from_yaml(pool_yaml(FAN_OUT)) as g:
        ya, yb = g.add_poller("ya"), g.add_poller("yb")
        g.start()
        for ts in range(FRAMES):
            if made_by == "numpy":
                kept.append(pattern(ts))
                g.send("x", kept[-1], ts=ts)
            else:
                p, _ = new_frame(g, ts)
                g.send("x", p, ts=ts)
                del p
            a, b = ya.next(timeout=WAIT_S).as_numpy(), yb.next(timeout=WAIT_S).as_numpy()
            assert (int(a[0]), int(b[0])) == (int(changed(ts, 10)[0]), int(changed(ts, 20)[0])), \
                f"frame {ts}: one branch saw the other's change"
            assert np.array_equal(a[1:], pattern(ts)[1:]) and np.array_equal(b[1:], pattern(ts)[1:])
            del a, b
        g.close_all_inputs()
        g.wait_done(timeout=WAIT_S)
        made = copies(g)
    assert 0 <= made["a"] <= FRAMES and 0 <= made["b"] <= FRAMES
    if made_by == "new_buffer":  # one memory for both: at least one of them copied each frame
        assert made["a"] + made["b"] >= FRAMES
    assert all(np.array_equal(frame, pattern(ts)) for ts, frame in enumerate(kept))  # the host's, untouched


def test_a_frame_a_poller_also_holds_is_copied_before_a_worker_changes_it() -> None:
    """``f`` forwards to a poller and to ``i``, which writes: the poller keeps the original."""
    body = """
stats: full
nodes:
  - { name: f, kernel: PForward, input_ports: [x], output_ports: [y], executor: pool }
  - { name: i, kernel: PInPlace, input_ports: [y], output_ports: [z], executor: pool, options: { add: 5 } }
input_ports: [x]
output_ports: [y, z]
"""
    with flowplex.Graph.from_yaml(pool_yaml(body)) as g:
        y, z = g.add_poller("y"), g.add_poller("z")
        g.start()
        for ts in range(FRAMES):
            p, _ = new_frame(g, ts)
            g.send("x", p, ts=ts)
            del p
            forwarded, written = y.next(timeout=WAIT_S).as_numpy(), z.next(timeout=WAIT_S).as_numpy()
            assert np.array_equal(written, changed(ts, 5))
            assert np.array_equal(forwarded, pattern(ts)), f"frame {ts}: the poller of y saw i's change"
            del forwarded, written
        g.close_all_inputs()
        g.wait_done(timeout=WAIT_S)
        assert copies(g) == {"f": 0, "i": FRAMES}


def test_buffers_made_in_a_worker_reach_the_host_and_the_next_worker_in_the_arena() -> None:
    """``m`` (new_buffer) feeds ``i`` on the other worker; ``n`` emits a plain numpy array."""
    body = f"""
stats: full
nodes:
  - {{ name: m, kernel: PMake, input_ports: [x], output_ports: [made], executor: pool, options: {{ size: {MIB} }} }}
  - {{ name: i, kernel: PInPlace, input_ports: [made], output_ports: [z], executor: pool, options: {{ add: 1 }} }}
  - {{ name: n, kernel: PFull, input_ports: [x], output_ports: [full], executor: pool, options: {{ size: {MIB} }} }}
input_ports: [x]
output_ports: [z, full]
"""
    with flowplex.Graph.from_yaml(pool_yaml(body)) as g:
        z, full = g.add_poller("z"), g.add_poller("full")
        g.start()
        pool = pool_of(g)
        for ts in range(FRAMES):
            g.send("x", 40 + ts, ts=ts)
            written, emitted = z.next(timeout=WAIT_S).as_numpy(), full.next(timeout=WAIT_S).as_numpy()
            assert pool.in_arena(written) and pool.in_arena(emitted)
            assert written.shape == emitted.shape == (MIB,)
            assert int(written[0]) == 41 + ts and (written[1:] == 40 + ts).all()
            assert (emitted == 40 + ts).all()
            del written, emitted
        g.close_all_inputs()
        g.wait_done(timeout=WAIT_S)
        stats = pool.arena_stats()
        assert stats is not None
        assert (stats.allocations, stats.writes, stats.used) == (0, 0, 0)  # the host made and copied nothing
        assert copies(g) == {"m": 0, "i": 0, "n": 0}


# -- a bounded arena ------------------------------------------------------------------------------

SMALL_ARENA = 8 * PAGE
"""512 KiB: four 128 KiB frames."""
FORWARD = """
nodes:
  - { name: f, kernel: PForward, input_ports: [x], output_ports: [y] }
input_ports: [x]
output_ports: [y]
"""


def small_pool_graph(body: str = FORWARD) -> flowplex.Graph:
    """``body``'s default executor: one worker with a 512 KiB arena."""
    with default_executor(lambda name: ProcessPoolExecutor(name, 1, arena_bytes=SMALL_ARENA)):
        return flowplex.Graph.from_yaml(body)


@pytest.mark.parametrize("made_by", ["new_buffer", "numpy"])
def test_a_full_arena_makes_the_producer_wait_and_loses_nothing(made_by: str) -> None:
    """40 frames of 128 KiB (ten arenas' worth) through a 512 KiB arena while the reader starts
    late: the producer waits for room, and every frame arrives, intact and in order."""
    count, nbytes = 40, 2 * PAGE
    got: list[tuple[int, bool]] = []
    peak = [0]
    failure: list[BaseException] = []
    with small_pool_graph() as g:
        out = g.add_poller("y")
        g.start()
        pool = pool_of(g)

        def read() -> None:
            try:
                time.sleep(0.3)  # let the sender fill the arena first
                for _ in range(count):
                    p = out.next(timeout=WAIT_S)
                    stats = pool.arena_stats()
                    assert stats is not None
                    peak[0] = max(peak[0], stats.used)
                    arr = p.as_numpy()
                    got.append((p.timestamp, np.array_equal(arr, pattern(p.timestamp, nbytes))))
                    del p, arr
            except BaseException as exc:
                failure.append(exc)

        reader = threading.Thread(target=read)
        reader.start()
        for ts in range(count):
            if made_by == "numpy":
                g.send("x", pattern(ts, nbytes), ts=ts)
            else:
                p, _ = new_frame(g, ts, nbytes)
                g.send("x", p, ts=ts)
                del p
        g.close_all_inputs()
        reader.join(WAIT_S)
        g.wait_done(timeout=WAIT_S)
        stats = pool.arena_stats()
    assert not failure, failure
    assert got == [(ts, True) for ts in range(count)]
    assert stats is not None and stats.capacity == SMALL_ARENA
    assert stats.waits >= 1  # it was full while the reader slept, and someone waited
    assert 0 < peak[0] <= SMALL_ARENA
    assert stats.used == 0


def test_a_frame_larger_than_the_arena_is_a_clear_error_not_a_hang() -> None:
    too_big = (r"does not fit in the process pool's shared-memory arena \(524288 bytes\); "
               "raise the executor's `arena_bytes`")
    with small_pool_graph() as g:
        out = g.add_poller("y")
        g.start()
        with pytest.raises(UsageError, match=rf"^new_buffer of {MIB} bytes {too_big}$"):
            g.new_buffer((MIB,), "u8")
        started = time.monotonic()
        g.send("x", pattern(0), ts=0)
        with pytest.raises(KernelError, match=rf"^kernel failed: \[f\] UsageError: buffer of {MIB} bytes {too_big}$"):
            out.next(timeout=WAIT_S)
        with pytest.raises(KernelError):
            g.wait_done(timeout=WAIT_S)
        assert time.monotonic() - started < 5.0


def test_a_worker_making_a_buffer_larger_than_the_arena_fails_its_node() -> None:
    body = f"""
nodes:
  - {{ name: m, kernel: PMake, input_ports: [x], output_ports: [y], options: {{ size: {MIB} }} }}
input_ports: [x]
output_ports: [y]
"""
    with small_pool_graph(body) as g:
        out = g.add_poller("y")
        g.start()
        g.send("x", 1, ts=0)
        with pytest.raises(KernelError, match=rf"^kernel failed: \[m\] UsageError: new_buffer of {MIB} bytes does "
                                              r"not fit in the process pool's shared-memory arena \(524288 bytes\)"):
            out.next(timeout=WAIT_S)


def test_a_frame_a_worker_kept_is_copied_before_the_host_changes_it() -> None:
    """``k`` (in a worker) keeps each frame in its state; the host's own handle of the same frame,
    read from a poller, is changed with ``make_mutable`` once ``k``'s call is over: the copy in
    ``k``'s state must not change (in one process, the kernel's handle would force the copy too)."""
    body = """
nodes:
  - { name: k, kernel: PKeep, input_ports: [x], output_ports: [y], executor: pool }
  - { name: h, kernel: PassThroughKernel, input_ports: [x], output_ports: [xo] }
input_ports: [x]
output_ports: [y, xo]
"""
    with flowplex.Graph.from_yaml(pool_yaml(body, 1)) as g:
        y, xo = g.add_poller("y"), g.add_poller("xo")
        g.start()
        seen = []
        for ts in range(3):
            p, _ = new_frame(g, ts)
            g.send("x", p, ts=ts)
            del p
            seen.append(y.next(timeout=WAIT_S).as_int())  # k's call is over
            mine = xo.next(timeout=WAIT_S)
            assert mine is not None
            mine.make_mutable()[0] = 250  # the host's handle, alone here now
            del mine
        g.close_all_inputs()
        g.wait_done(timeout=WAIT_S)
    assert seen == [-1, int(pattern(0)[0]), int(pattern(1)[0])]
