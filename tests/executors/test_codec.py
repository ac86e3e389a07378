"""The seam codec: invocations and outcomes to bytes and back, buffers out of band, frames."""

from __future__ import annotations

import math
import pickle
import struct

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from flowplex import Packet
from flowplex._timestamps import (
    TS_DONE,
    TS_MAX,
    TS_MIN,
    TS_ONE_OVER_POST_STREAM,
    TS_POST_STREAM,
    TS_PRE_STREAM,
    TS_UNSET,
    TS_UNSTARTED,
)
from flowplex.errors import KernelError, UsageError
from flowplex.executors._invocation import Invocation, NodeRecipe, Outcome
from flowplex.executors.hosted._codec import (
    ALIGN,
    INLINE,
    MAGIC,
    SHARED,
    Buffer,
    Encoded,
    decode,
    decode_invocation,
    decode_outcome,
    encode,
    encode_invocation,
    encode_outcome,
    frame_flags,
    from_frame,
    pack_frame,
    to_frame,
)
from flowplex.kernels._context import PHASE_CLOSE, PHASE_OPEN, PHASE_PROCESS
from flowplex.kernels._registry import kernel_class
from flowplex.packets import cow_stats, new_buffer
from flowplex.spec import NodeSpec, PortSpec

SPECIAL_TS = [TS_UNSET, TS_UNSTARTED, TS_PRE_STREAM, TS_MIN, -1, 0, 1, TS_MAX, TS_POST_STREAM,
              TS_ONE_OVER_POST_STREAM, TS_DONE]
DTYPES = ["uint8", "int8", "uint16", "int16", "int32", "int64", "float16", "float32", "float64"]


# -- comparing what went in with what came out ------------------------------------------------------


def _scalar_key(v: object) -> object:
    """Floats by their bits (NaN equals itself, -0.0 differs from 0.0); the rest as they are."""
    if isinstance(v, float):
        return ("f", struct.pack("<d", v))
    return (type(v).__name__, v)


def key(p: Packet | None) -> object:
    """Everything a packet carries, as a comparable value."""
    if p is None:
        return None
    meta = tuple((k, _scalar_key(p.metadata(k))) for k in p.metadata_keys())
    if p.type_name == "Buffer":
        a = p.as_numpy()
        body: object = (str(a.dtype), a.shape, a.tobytes())
    else:
        body = _scalar_key(p.payload)
    return (p.type_id, p.timestamp, body, meta)


def invocation_key(inv: Invocation) -> object:
    batch = None if inv.batch is None else [[key(p) for p in ps] for ps in inv.batch]
    return (inv.node, inv.seq, inv.phase, inv.ts, [key(p) for p in inv.inputs], batch, inv.done,
            inv.close_reason)


def outcome_key(o: Outcome) -> object:
    return (o.node, o.seq, [[key(p) for p in ps] for ps in o.outputs], o.bounds, o.source_done,
            None if o.yield_s is None else _scalar_key(o.yield_s), o.counters, o.logs, o.ignored_emits,
            o.started_ns, o.duration_ns, o.copies, o.error, o.traceback)


def roundtrip(obj: object) -> object:
    """Through the codec and a frame, as a pipe would carry it."""
    return decode(from_frame(to_frame(encode(obj))))


# -- strategies ------------------------------------------------------------------------------------

timestamps = st.one_of(st.sampled_from(SPECIAL_TS), st.integers(TS_MIN, TS_MAX))
metadata_values = st.one_of(st.booleans(), st.integers(-(2**63), 2**63 - 1), st.floats(), st.text(max_size=8))


@st.composite
def arrays(draw: st.DrawFn) -> np.ndarray:
    a = draw(hnp.arrays(st.sampled_from(DTYPES), hnp.array_shapes(min_dims=1, max_dims=4, min_side=0, max_side=4)))
    view = draw(st.sampled_from(["as_is", "transposed", "reversed", "strided"]))
    if view == "transposed":
        return a.T
    if view == "reversed":
        return a[::-1]
    if view == "strided":
        return a[::2]
    return a


@st.composite
def packets(draw: st.DrawFn) -> Packet:
    ts = draw(timestamps)
    kind = draw(st.sampled_from(["empty", "int", "float", "bool", "str", "bytes", "buffer"]))
    if kind == "empty":
        return Packet() if ts == TS_UNSET else _empty_at(ts)
    value: object = {
        "int": lambda: draw(st.integers(-(2**63), 2**63 - 1)),
        "float": lambda: draw(st.floats()),
        "bool": lambda: draw(st.booleans()),
        "str": lambda: draw(st.text(max_size=20)),
        "bytes": lambda: draw(st.binary(max_size=20)),
        "buffer": lambda: draw(arrays()),
    }[kind]()
    p = Packet.from_numpy(value, ts) if isinstance(value, np.ndarray) else _typed(kind, value, ts)  # type: ignore[arg-type]
    for k, v in draw(st.dictionaries(st.text(min_size=1, max_size=5), metadata_values, max_size=3)).items():
        p.set_metadata(k, v)
    return p


def _typed(kind: str, value: object, ts: int) -> Packet:
    make = {"int": Packet.from_int, "float": Packet.from_float, "bool": Packet.from_bool, "str": Packet.from_str,
            "bytes": Packet.from_bytes}[kind]
    return make(value, ts)  # type: ignore[operator]


def _empty_at(ts: int) -> Packet:
    p = Packet()
    p.timestamp = ts
    return p


optional_packets = st.one_of(st.none(), packets())


@st.composite
def invocations(draw: st.DrawFn) -> Invocation:
    n = draw(st.integers(0, 3))
    batch = draw(st.one_of(st.none(), st.lists(st.lists(packets(), max_size=3), min_size=n, max_size=n)))
    done = draw(st.one_of(st.none(), st.lists(st.booleans(), min_size=n, max_size=n)))
    return Invocation(
        node=draw(st.integers(0, 1000)), seq=draw(st.integers(-1, 2**40)),
        phase=draw(st.sampled_from([PHASE_OPEN, PHASE_PROCESS, PHASE_CLOSE])), ts=draw(timestamps),
        inputs=draw(st.lists(optional_packets, min_size=n, max_size=n)), batch=batch, done=done,
        close_reason=draw(st.integers(0, 2)),
    )


@st.composite
def outcomes(draw: st.DrawFn) -> Outcome:
    outputs = draw(st.lists(st.lists(packets(), max_size=3), max_size=3))
    return Outcome(
        node=draw(st.integers(0, 1000)), seq=draw(st.integers(-1, 2**40)), outputs=outputs,
        bounds=draw(st.one_of(st.none(), st.dictionaries(st.integers(0, 3), timestamps, max_size=3))),
        source_done=draw(st.booleans()),
        yield_s=draw(st.one_of(st.none(), st.floats(0, 1e9))),
        counters=draw(st.lists(st.tuples(st.text(max_size=10), st.integers(-(2**63), 2**63 - 1)), max_size=3)),
        logs=draw(st.lists(st.tuples(st.integers(0, 3), st.text(max_size=30)), max_size=3)),
        ignored_emits=draw(st.integers(0, 100)), started_ns=draw(st.integers(0, 2**62)),
        duration_ns=draw(st.integers(0, 2**40)), copies=draw(st.integers(0, 10)),
        error=draw(st.text(max_size=30)), traceback=draw(st.text(max_size=60)),
    )


# -- payload types ---------------------------------------------------------------------------------


@pytest.mark.parametrize("make", [
    lambda: Packet.from_int(0), lambda: Packet.from_int(-(2**63), 4), lambda: Packet.from_int(2**63 - 1, 4),
    lambda: Packet.from_float(1.5, 2), lambda: Packet.from_float(math.nan), lambda: Packet.from_float(-0.0),
    lambda: Packet.from_float(math.inf), lambda: Packet.from_bool(True, 1), lambda: Packet.from_bool(False),
    lambda: Packet.from_str(""), lambda: Packet.from_str("héllo \u2603 \x00", 9), lambda: Packet.from_bytes(b""),
    lambda: Packet.from_bytes(bytes(range(256)), 3), Packet,
], ids=["int0", "int-min", "int-max", "float", "nan", "neg-zero", "inf", "true", "false", "empty-str", "str",
        "empty-bytes", "bytes", "empty"])
def test_scalar_payloads_round_trip(make: object) -> None:
    p: Packet = make()  # type: ignore[operator]
    q = roundtrip(p)
    assert isinstance(q, Packet)
    assert key(q) == key(p)
    assert q.type_name == p.type_name


@pytest.mark.parametrize("ts", SPECIAL_TS)
def test_every_timestamp_round_trips(ts: int) -> None:
    p = Packet.from_int(7, ts) if ts != TS_UNSET else Packet.from_int(7)
    empty = _empty_at(ts) if ts != TS_UNSET else Packet()
    for q, original in ((roundtrip(p), p), (roundtrip(empty), empty)):
        assert isinstance(q, Packet)
        assert q.timestamp == ts
        assert key(q) == key(original)


def test_metadata_round_trips() -> None:
    p = Packet.from_str("frame", 5)
    for k, v in {"flag": True, "count": -(2**63), "gain": math.nan, "name": "cam \u2603"}.items():
        p.set_metadata(k, v)
    q = roundtrip(p)
    assert isinstance(q, Packet)
    assert q.metadata_keys() == ["count", "flag", "gain", "name"]
    assert key(q) == key(p)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(3,), (2, 3), (0,), (2, 0, 3), (2, 1, 2, 1, 2, 1, 2, 1)])
def test_buffers_of_every_dtype_and_shape_round_trip(dtype: str, shape: tuple[int, ...]) -> None:
    a = (np.arange(math.prod(shape)) % 100).astype(dtype).reshape(shape)
    p = Packet.from_numpy(a, 11)
    q = roundtrip(p)
    assert isinstance(q, Packet)
    out = q.as_numpy()
    assert (out.dtype, out.shape) == (a.dtype, a.shape)
    assert np.array_equal(out, a)
    assert q.timestamp == 11
    assert str(q) == str(p)  # the "external" flag too


@pytest.mark.parametrize("view", ["transposed", "reversed", "strided", "column"])
def test_non_contiguous_buffers_travel_out_of_band_with_their_values(view: str) -> None:
    base = np.arange(4 * 6 * 5, dtype=np.int16).reshape(4, 6, 5)
    a = {"transposed": base.transpose(1, 0, 2), "reversed": base[::-1], "strided": base[:, ::2],
         "column": base[:, 2, :]}[view]
    encoded = encode(Packet.from_numpy(a))
    assert len(encoded.buffers) == 1
    assert memoryview(encoded.buffers[0]).nbytes == a.nbytes
    q = decode(from_frame(to_frame(encoded)))
    assert isinstance(q, Packet)
    assert np.array_equal(q.as_numpy(), a)
    assert q.as_numpy().shape == a.shape


def test_engine_buffers_keep_their_flags() -> None:
    p, view = new_buffer((2, 2), "f32")
    view[:] = 3.5
    q = roundtrip(p)
    assert isinstance(q, Packet)
    assert str(q) == "Packet{type=Buffer[2x2] dtype=F32, ts=Unset}"  # not "external"
    assert np.array_equal(q.as_numpy(), np.full((2, 2), 3.5, np.float32))


def test_a_zero_dimensional_array_is_no_packet_but_encodes_as_an_object() -> None:
    with pytest.raises(UsageError, match="unsupported ndim 0"):
        Packet.from_numpy(np.array(5.0))
    encoded = encode(np.array(5.0))
    assert len(encoded.buffers) == 1
    out = decode(encoded)
    assert isinstance(out, np.ndarray)
    assert (out.shape, float(out)) == ((), 5.0)


# -- out of band and zero-copy ------------------------------------------------------------------------


def test_buffer_memory_stays_out_of_the_header() -> None:
    a = np.full(1 << 20, 0x5A, np.uint8)
    encoded = encode_invocation(Invocation(3, 0, PHASE_PROCESS, 10, [Packet.from_numpy(a, 10)]))
    assert len(encoded.header) < 1024
    assert b"\x5a" * 64 not in encoded.header
    assert [memoryview(b).nbytes for b in encoded.buffers] == [a.nbytes]
    assert encoded.nbytes == len(encoded.header) + a.nbytes


def test_decode_wraps_the_out_of_band_memory_without_copying() -> None:
    a = np.arange(1000, dtype=np.float64)
    p = Packet.from_numpy(a, 1)
    q = decode(encode(p))  # buffers handed over as they are (what a shared-memory arena does)
    assert isinstance(q, Packet)
    assert np.shares_memory(q.as_numpy(), a)

    frame = to_frame(encode(p))
    r = decode(from_frame(frame))
    assert isinstance(r, Packet)
    assert np.shares_memory(r.as_numpy(), np.frombuffer(frame, np.uint8))
    assert not np.shares_memory(r.as_numpy(), a)


def test_a_decoded_buffer_is_owned_and_copies_once_before_a_write() -> None:
    a = np.arange(12, dtype=np.int32).reshape(3, 4)
    p = Packet.from_numpy(a, 1)
    for q in (decode(encode(p)), roundtrip(p)):
        assert isinstance(q, Packet)
        before = cow_stats().copies
        data = q.make_mutable()  # owned by the receiver: no take_input needed
        data[:] = -1
        assert cow_stats().copies == before + 1  # the out-of-band memory is never written
        assert np.array_equal(q.as_numpy(), np.full((3, 4), -1))
        assert np.array_equal(a, np.arange(12).reshape(3, 4))
        assert np.array_equal(p.as_numpy(), a)


def test_one_payload_shared_by_two_packets_travels_once() -> None:
    a = np.ones(100, np.uint8)
    p = Packet.from_numpy(a, 5)
    outcome = Outcome(0, 0, [[p], [p]])
    encoded = encode_outcome(outcome)
    assert len(encoded.buffers) == 1
    back = decode_outcome(from_frame(to_frame(encoded)))
    assert back.outputs[0][0] is back.outputs[1][0]


def test_node_recipes_pickle_by_reference_to_their_kernel() -> None:
    spec = NodeSpec("scale", "ScaleKernel", "nodes[0]", (PortSpec("x"),), (PortSpec("y"),), options={"factor": 3})
    recipe = NodeRecipe(0, spec, kernel_class("ScaleKernel"), True, {"calib": Packet.from_numpy(np.zeros(64))})
    encoded = encode(recipe)
    assert len(encoded.buffers) == 1
    back = roundtrip(recipe)
    assert isinstance(back, NodeRecipe)
    assert (back.index, back.spec, back.kernel_cls, back.strict_ports) == (0, spec, recipe.kernel_cls, True)
    assert key(back.side_packets["calib"]) == key(recipe.side_packets["calib"])


# -- outcomes and their exceptions -------------------------------------------------------------------


class NeedsTwoArguments(Exception):
    def __init__(self, a: int, b: int) -> None:
        super().__init__(f"{a} and {b}")  # pickle calls NeedsTwoArguments("1 and 2"): TypeError


class HoldsALambda(Exception):
    def __init__(self) -> None:
        super().__init__("holds a lambda")
        self.fn = lambda: None


def _failed(exc: BaseException) -> Outcome:
    return Outcome(2, 7, [[], []], error=f"{type(exc).__name__}: {exc}", traceback="Traceback ...\nboom\n",
                   exception=exc)


def test_an_exception_that_pickles_travels_with_its_attributes() -> None:
    exc = KernelError("kernel failed: [n] ValueError: bad", node="n", kernel="K", ts=5)
    back = decode_outcome(from_frame(to_frame(encode_outcome(_failed(exc)))))
    assert isinstance(back.exception, KernelError)
    assert (str(back.exception), back.exception.node, back.exception.kernel, back.exception.ts) == (
        str(exc), "n", "K", 5)
    assert back.error == "KernelError: kernel failed: [n] ValueError: bad"
    value = decode_outcome(encode_outcome(_failed(ValueError("bad value"))))
    assert type(value.exception) is ValueError
    assert value.exception.args == ("bad value",)


def test_an_exception_that_does_not_unpickle_arrives_as_none() -> None:
    back = decode_outcome(from_frame(to_frame(encode_outcome(_failed(NeedsTwoArguments(1, 2))))))
    assert back.exception is None
    assert back.error == "NeedsTwoArguments: 1 and 2"
    assert back.traceback == "Traceback ...\nboom\n"


def test_an_exception_that_does_not_pickle_arrives_as_none() -> None:
    class Local(Exception):  # not importable by name
        pass

    for exc in (Local("local"), HoldsALambda()):
        back = decode_outcome(encode_outcome(_failed(exc)))
        assert back.exception is None
        assert back.error == f"{type(exc).__name__}: {exc}"


def test_encoding_an_outcome_leaves_it_unchanged() -> None:
    exc = ValueError("kept")
    outcome = _failed(exc)
    encode_outcome(outcome)
    assert outcome.exception is exc


# -- frames --------------------------------------------------------------------------------------------


def test_frame_buffers_are_aligned_slices_of_the_frame() -> None:
    arrays_ = [np.arange(n, dtype=np.uint8) for n in (1, 3, 64, 100, 0, 7)]
    encoded = encode([Packet.from_numpy(a) for a in arrays_])
    frame = to_frame(encoded)
    assert frame[:4] == MAGIC
    back = from_frame(frame)
    assert [memoryview(b).nbytes for b in back.buffers] == [a.nbytes for a in arrays_]
    base = np.frombuffer(frame, np.uint8).ctypes.data
    for b in back.buffers:
        if memoryview(b).nbytes:
            assert (np.frombuffer(b, np.uint8).ctypes.data - base) % ALIGN == 0
    assert back.header == encoded.header
    out = decode(back)
    assert isinstance(out, list)
    assert [p.as_numpy().tolist() for p in out] == [a.tolist() for a in arrays_]


@pytest.mark.parametrize("wrap", [bytes, bytearray, memoryview])
def test_from_frame_reads_any_bytes_like(wrap: type) -> None:
    frame = wrap(to_frame(encode(Packet.from_numpy(np.arange(5.0), 3))))
    q = decode(from_frame(frame))
    assert isinstance(q, Packet)
    assert q.as_numpy().tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]


def test_a_frame_without_buffers() -> None:
    frame = to_frame(encode(Packet.from_str("x", 1)))
    back = from_frame(frame)
    assert back.buffers == []
    assert key(decode(back)) == key(Packet.from_str("x", 1))  # type: ignore[arg-type]


# -- bad input: one clear line, no deep traceback ----------------------------------------------------


def _frame() -> bytes:
    return to_frame(encode(Packet.from_numpy(np.arange(10, dtype=np.uint8), 1)))


def _raises(fn: object, pattern: str) -> UsageError:
    with pytest.raises(UsageError, match=pattern) as info:
        fn()  # type: ignore[operator]
    exc = info.value
    assert exc.__cause__ is None and (exc.__context__ is None or exc.__suppress_context__)  # no pickle traceback
    assert "\n" not in str(exc)
    return exc


@pytest.mark.parametrize(("data", "pattern"), [
    (b"", r"^from_frame: truncated frame: 0 bytes, shorter than the 20-byte prefix$"),
    (b"FPX", r"truncated frame: 3 bytes"),
    (b"GIF89a" + bytes(30), r"^from_frame: not a flowplex frame: it starts with b'GIF8', expected b'FPXC'$"),
    (b"FPXC\x01" + bytes(15), r"^from_frame: frame version 1; this flowplex reads version 2$"),
    (b"FPXC\x02" + bytes(3) + struct.pack("<IQ", 1000, 0), r"announces 1000 buffer\(s\) and a 0-byte header"),
    (b"FPXC\x02" + bytes(3) + struct.pack("<IQ", 1, 0) + struct.pack("<QQQ", 7, 0, 0),
     r"^from_frame: buffer 0 has kind 7; a frame's buffers are inline \(0\) or shared \(1\)$"),
])
def test_malformed_frames_are_named(data: bytes, pattern: str) -> None:
    _raises(lambda: from_frame(data), pattern)


def test_a_truncated_frame_names_the_buffer_that_runs_out() -> None:
    frame = _frame()
    _raises(lambda: from_frame(frame[:-1]), r"^from_frame: truncated frame: \d+ bytes, but buffer 0 ends at byte \d+$")


def test_bytes_after_the_last_buffer_are_an_error() -> None:
    _raises(lambda: from_frame(_frame() + b"\0\0"), r"^from_frame: 2 byte\(s\) after the last buffer of the frame$")


def test_a_frame_that_refers_to_shared_memory_needs_its_reader() -> None:
    # The pool's arena frames use the same layout; without the arena they cannot be read.
    frame = pack_frame(b"", [(SHARED, 4096, 100)], [])
    _raises(lambda: from_frame(frame), r"^from_frame: 1 buffer\(s\) of the frame are in a process pool's shared memory")
    memory = bytearray(range(256)) * 20
    seen: list[list[tuple[int, int]]] = []

    def adopt(refs: list[tuple[int, int]]) -> list[Buffer]:
        seen.append(refs)
        return [memoryview(memory)[offset:offset + n] for offset, n in refs]

    encoded = encode(Packet.from_numpy(np.arange(600, dtype=np.uint8), 1))
    raw = pickle.PickleBuffer(encoded.buffers[0]).raw()
    memory[4096:4096 + raw.nbytes] = raw
    small = memoryview(b"abc")
    frame = pack_frame(encoded.header, [(SHARED, 4096, raw.nbytes), (INLINE, 3, 0)], [small], flags=5)
    assert frame_flags(frame) == 5
    back = from_frame(frame, adopt)
    assert seen == [[(4096, raw.nbytes)]]
    assert bytes(back.buffers[0]) == bytes(raw) and bytes(back.buffers[1]) == b"abc"


def test_writable_gives_inline_buffers_their_own_memory() -> None:
    frame = _frame()
    read_only = from_frame(frame)
    assert memoryview(read_only.buffers[0]).readonly
    own = from_frame(frame, writable=True)
    view = memoryview(own.buffers[0])
    assert not view.readonly
    view[0] = 99
    assert from_frame(frame).buffers[0][0] != 99  # the frame itself is untouched


def test_from_frame_needs_bytes() -> None:
    _raises(lambda: from_frame(12), r"^from_frame: expected bytes, got int")  # type: ignore[arg-type]


def test_a_garbled_header_is_named() -> None:
    frame = bytearray(_frame())
    start = 20 + 24  # the prefix, one buffer reference
    frame[start + 2:start + 40] = b"\xff" * 38
    _raises(lambda: decode(from_frame(bytes(frame))), r"^decode: the header is not an encoded message \(\w+: ")
    _raises(lambda: decode(Encoded(b"not a pickle", [])), r"^decode: the header is not an encoded message")


def test_missing_and_extra_buffers_are_named() -> None:
    encoded = encode(Packet.from_numpy(np.arange(4.0)))
    _raises(lambda: decode(Encoded(encoded.header, [])), r"^decode: the header is not an encoded message "
                                                         r"\(UnpicklingError: .*out-of-band")
    extra = Encoded(encoded.header, [*encoded.buffers, memoryview(b"spare")])
    _raises(lambda: decode(extra), r"^decode: 1 of 2 out-of-band buffer\(s\) left unused")


def test_typed_decoders_check_the_message_type() -> None:
    outcome = encode_outcome(Outcome(0, 0, []))
    invocation = encode_invocation(Invocation(0, 0, PHASE_PROCESS, 0, []))
    _raises(lambda: decode_invocation(outcome), r"^decode_invocation: the message holds a Outcome, not an Invocation$")
    _raises(lambda: decode_outcome(invocation), r"^decode_outcome: the message holds a Invocation, not an Outcome$")
    _raises(lambda: encode_invocation(Outcome(0, 0, [])),  # type: ignore[arg-type]
            r"^encode_invocation: expected an Invocation, got Outcome$")
    _raises(lambda: encode_outcome("x"), r"^encode_outcome: expected an Outcome, got str$")  # type: ignore[arg-type]


def test_what_cannot_pickle_is_named() -> None:
    _raises(lambda: encode({"fn": lambda: None}), r"^encode: cannot pickle dict: \w+Error: ")


def test_the_codec_uses_pickle_protocol_5() -> None:
    header = encode(Invocation(0, 0, PHASE_PROCESS, 0, [])).header
    assert header[:2] == pickle.PROTO + bytes([5])


# -- properties ----------------------------------------------------------------------------------------


@given(invocations())
def test_any_invocation_round_trips(inv: Invocation) -> None:
    expected = invocation_key(inv)
    assert invocation_key(decode_invocation(encode_invocation(inv))) == expected
    assert invocation_key(decode_invocation(from_frame(to_frame(encode_invocation(inv))))) == expected


@given(outcomes())
def test_any_outcome_round_trips(outcome: Outcome) -> None:
    expected = outcome_key(outcome)
    assert outcome_key(decode_outcome(encode_outcome(outcome))) == expected
    assert outcome_key(decode_outcome(from_frame(to_frame(encode_outcome(outcome))))) == expected


@given(st.lists(packets(), max_size=4))
def test_every_buffer_goes_out_of_band(ps: list[Packet]) -> None:
    encoded = encode(ps)
    holders = {id(p._value) for p in ps if p.type_name == "Buffer"}
    assert len(encoded.buffers) == len(holders)
