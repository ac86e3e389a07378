"""Packet handles: factories, exact-match readers, timestamps, repr, metadata and borrowing."""

from __future__ import annotations

import copy
import pickle
from collections.abc import Callable

import numpy as np
import pytest

from flowplex._timestamps import TS_DONE, TS_POST_STREAM, TS_PRE_STREAM, TS_UNSET
from flowplex.errors import UsageError
from flowplex.packets import Packet, TypeId, _borrow, _byte_size, _new, clone_owned, new_buffer, to_packet

READERS = ("as_int", "as_float", "as_bool", "as_str", "as_bytes")


def test_empty_packet() -> None:
    p = Packet()
    assert p.is_empty
    assert p.timestamp == TS_UNSET
    assert p.type_id == TypeId.NONE
    assert p.type_id == 0
    assert p.type_name == "any/undeclared"
    assert p.device is None
    assert p.payload is None
    assert all(getattr(p, r)() is None for r in READERS)
    assert repr(p) == "Packet{type=Empty, ts=Unset}"


@pytest.mark.parametrize(
    ("packet", "reader", "value", "tid", "name"),
    [
        (Packet.from_int(-5), "as_int", -5, TypeId.I64, "I64"),
        (Packet.from_float(2.5), "as_float", 2.5, TypeId.F64, "F64"),
        (Packet.from_bool(False), "as_bool", False, TypeId.BOOL, "Bool"),
        (Packet.from_str("héllo"), "as_str", "héllo", TypeId.STR, "Str"),
        (Packet.from_bytes(b"\x00\x01"), "as_bytes", b"\x00\x01", TypeId.BYTES, "Bytes"),
    ],
)
def test_readers_match_exact_type_only(
    packet: Packet, reader: str, value: object, tid: int, name: str
) -> None:
    assert not packet.is_empty
    assert packet.type_id == tid
    assert packet.type_name == name
    assert getattr(packet, reader)() == value
    assert type(getattr(packet, reader)()) is type(value)
    for other in READERS:
        if other != reader:
            assert getattr(packet, other)() is None, other
    assert packet.payload == value
    assert packet.device is None


def test_no_coercion_between_kinds() -> None:
    assert Packet.from_bool(True).as_int() is None
    assert Packet.from_int(1).as_bool() is None
    assert Packet.from_int(1).as_float() is None
    assert Packet.from_float(1.0).as_int() is None
    assert Packet.from_str("1").as_int() is None
    assert Packet.from_bytes(b"a").as_str() is None


def test_factories_normalise_numeric_inputs() -> None:
    assert Packet.from_int(np.int32(7)).as_int() == 7
    assert type(Packet.from_int(np.int64(7)).as_int()) is int
    assert Packet.from_int(True).as_int() == 1  # an int subclass, as lm-flow accepts
    assert Packet.from_float(3).as_float() == 3.0
    assert type(Packet.from_float(np.float32(0.5)).as_float()) is float
    assert Packet.from_bool(np.bool_(True)).as_bool() is True
    assert Packet.from_int(2**63 - 1).as_int() == 2**63 - 1
    assert Packet.from_int(-(2**63)).as_int() == -(2**63)


def test_from_bytes_copies_mutable_buffers() -> None:
    raw = bytearray(b"abc")
    p = Packet.from_bytes(raw)
    q = Packet.from_bytes(memoryview(raw)[1:])
    raw[0] = ord("z")
    assert p.as_bytes() == b"abc"
    assert q.as_bytes() == b"bc"


@pytest.mark.parametrize(
    ("factory", "arg", "error", "pattern"),
    [
        (
            Packet.from_int,
            2**63,
            ValueError,
            r"from_int: int 9223372036854775808 does not fit a signed 64-bit",
        ),
        (Packet.from_int, -(2**63) - 1, ValueError, r"does not fit a signed 64-bit I64 packet"),
        (Packet.from_int, 1.5, TypeError, r"from_int: expected an int, got float"),
        (Packet.from_float, "1.5", TypeError, r"from_float: expected a float, got str"),
        (Packet.from_bool, 1, TypeError, r"from_bool: expected a bool, got int"),
        (Packet.from_str, b"x", TypeError, r"from_str: expected a str, got bytes"),
        (Packet.from_bytes, "x", TypeError, r"from_bytes: expected bytes, got str"),
        (Packet.from_numpy, [1, 2], TypeError, r"from_numpy: expected a numpy.ndarray, got list"),
        (Packet.from_dlpack, [1, 2], TypeError, r"from_dlpack: list does not export __dlpack__"),
    ],
)
def test_factory_errors(
    factory: Callable[[object], Packet], arg: object, error: type[Exception], pattern: str
) -> None:
    with pytest.raises(error, match=pattern):
        factory(arg)


# --- timestamps -------------------------------------------------------------------------------------


def test_timestamp_belongs_to_the_handle() -> None:
    p = Packet.from_int(5, ts=3)
    q = clone_owned(p)
    q.timestamp = 4
    assert (p.timestamp, q.timestamp) == (3, 4)
    p.timestamp = np.int64(9)  # type: ignore[assignment]
    assert p.timestamp == 9
    assert type(p.timestamp) is int


@pytest.mark.parametrize(
    ("ts", "error", "pattern"),
    [
        (2**63, ValueError, r"timestamp 9223372036854775808 does not fit a signed 64-bit int"),
        (-(2**63) - 1, ValueError, r"does not fit a signed 64-bit int"),
        (1.5, TypeError, r"timestamp must be an int, got float"),
        ("3", TypeError, r"timestamp must be an int, got str"),
    ],
)
def test_bad_timestamps(ts: object, error: type[Exception], pattern: str) -> None:
    p = Packet.from_int(1)
    with pytest.raises(error, match=pattern):
        p.timestamp = ts  # type: ignore[assignment]
    with pytest.raises(error, match=pattern):
        Packet.from_int(1, ts)  # type: ignore[arg-type]
    assert p.timestamp == TS_UNSET


# --- repr ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("packet", "text"),
    [
        (Packet.from_int(5, 3), "Packet{type=I64(5), ts=3}"),
        (Packet.from_int(-1, TS_DONE), "Packet{type=I64(-1), ts=Done}"),
        (Packet.from_float(1.5, TS_PRE_STREAM), "Packet{type=F64(1.5), ts=PreStream}"),
        (Packet.from_bool(True, TS_POST_STREAM), "Packet{type=Bool(true), ts=PostStream}"),
        (Packet.from_bool(False), "Packet{type=Bool(false), ts=Unset}"),
        (Packet.from_str("hi"), 'Packet{type=Str("hi"), ts=Unset}'),
        (Packet.from_str('a"b\n'), 'Packet{type=Str("a\\"b\\n"), ts=Unset}'),
        (Packet.from_bytes(b"abc"), "Packet{type=Bytes[3], ts=Unset}"),
        (
            Packet.from_numpy(np.zeros((2, 3), np.uint8)),
            "Packet{type=Buffer[2x3] dtype=U8 external, ts=Unset}",
        ),
        (Packet.from_numpy(np.zeros(0, np.float16), 0), "Packet{type=Buffer[0] dtype=F16 external, ts=0}"),
        (new_buffer((4, 1, 2), "f64")[0], "Packet{type=Buffer[4x1x2] dtype=F64, ts=Unset}"),
        (Packet(), "Packet{type=Empty, ts=Unset}"),
    ],
)
def test_repr_is_lm_flow_debug_string(packet: Packet, text: str) -> None:
    assert repr(packet) == text


def test_repr_of_engine_only_kinds() -> None:
    assert repr(_new(object(), 0, 1)) == "Packet{type=Native, ts=1}"
    assert repr(_new(object(), 99, 1)) == "Packet{type=Foreign(type#99), ts=1}"


# --- metadata -----------------------------------------------------------------------------------------


def test_metadata_round_trip_and_sorted_keys() -> None:
    p = Packet.from_int(1)
    p.set_metadata("zeta", "z")
    p.set_metadata("alpha", True)
    p.set_metadata("mid", 7)
    p.set_metadata("flt", 0.25)
    assert p.metadata_keys() == ["alpha", "flt", "mid", "zeta"]
    assert p.metadata("alpha") is True
    assert p.metadata("mid") == 7
    assert type(p.metadata("mid")) is int
    assert p.metadata("flt") == 0.25
    assert p.metadata("zeta") == "z"
    assert p.metadata("missing") is None
    assert p.has_metadata("mid")
    assert not p.has_metadata("missing")
    assert p.remove_metadata("mid") is True
    assert p.remove_metadata("mid") is False
    assert p.metadata_keys() == ["alpha", "flt", "zeta"]
    p.set_metadata("alpha", 2)
    assert p.metadata("alpha") == 2


def test_metadata_dispatches_bool_before_int() -> None:
    p = Packet.from_int(1)
    p.set_metadata("b", True)
    p.set_metadata("n", np.int16(3))
    p.set_metadata("nb", np.bool_(False))
    assert type(p.metadata("b")) is bool
    assert type(p.metadata("n")) is int
    assert p.metadata("nb") is False


@pytest.mark.parametrize(
    ("key", "value", "error", "pattern"),
    [
        ("", 1, ValueError, r"metadata key must not be empty"),
        (3, 1, TypeError, r"metadata key must be a str, got int"),
        ("k", None, TypeError, r"set_metadata\('k'\): value must be bool, int, float or str, got NoneType"),
        ("k", b"x", TypeError, r"got bytes"),
        ("k", [1], TypeError, r"got list"),
        ("k", 2**63, ValueError, r"set_metadata\('k'\): int 9223372036854775808 does not fit"),
    ],
)
def test_metadata_errors(key: object, value: object, error: type[Exception], pattern: str) -> None:
    p = Packet.from_int(1)
    with pytest.raises(error, match=pattern):
        p.set_metadata(key, value)  # type: ignore[arg-type]
    assert p.metadata_keys() == []


def test_empty_packet_cannot_carry_metadata() -> None:
    p = Packet()
    with pytest.raises(UsageError, match="an empty packet has no body to carry metadata"):
        p.set_metadata("k", 1)
    assert p.remove_metadata("k") is False
    assert p.metadata_keys() == []


def test_metadata_is_copy_on_write_between_handles() -> None:
    p = Packet.from_numpy(np.arange(4, dtype=np.int32))
    p.set_metadata("a", 1)
    q = clone_owned(p)
    q.set_metadata("b", 2)
    p.remove_metadata("a")
    assert p.metadata_keys() == []
    assert q.metadata_keys() == ["a", "b"]
    # Metadata never copies or detaches the payload.
    assert p._value is q._value


# --- borrowed handles ---------------------------------------------------------------------------------


BORROWED = r"packet is borrowed \(the engine still holds it.*\); take it with ctx\.take_input\(i\) first"


def test_borrowed_handles_refuse_mutation_but_allow_reads() -> None:
    p = Packet.from_numpy(np.zeros(3, np.uint8), ts=1)
    p.set_metadata("k", "v")
    assert _borrow(p) is p
    with pytest.raises(UsageError, match="make_mutable: " + BORROWED):
        p.make_mutable()
    with pytest.raises(UsageError, match="set_metadata: " + BORROWED):
        p.set_metadata("k", "w")
    with pytest.raises(UsageError, match="remove_metadata: " + BORROWED):
        p.remove_metadata("k")
    with pytest.raises(UsageError, match="setting timestamp: " + BORROWED):
        p.timestamp = 2
    assert p.metadata("k") == "v"
    assert p.timestamp == 1
    assert p.as_numpy().shape == (3,)
    owned = clone_owned(p)
    owned.set_metadata("k", "w")
    owned.timestamp = 2
    assert (p.metadata("k"), p.timestamp) == ("v", 1)


def test_factories_create_owned_packets() -> None:
    for p in (Packet(), Packet.from_int(1), to_packet("x"), new_buffer(2, "u8")[0]):
        assert p._owned
    assert clone_owned(_borrow(Packet.from_int(1)))._owned


# --- engine helpers, copy and pickle --------------------------------------------------------------------


def test_new_and_clone_owned() -> None:
    p = _new(41, TypeId.I64, 7)
    assert (p.as_int(), p.timestamp, p._owned) == (41, 7, True)
    p.set_metadata("k", 1)
    q = clone_owned(_borrow(p))
    assert q is not p
    assert (q.as_int(), q.timestamp, q.metadata("k"), q._owned) == (41, 7, 1, True)


@pytest.mark.parametrize(
    ("packet", "size"),
    [
        (Packet(), 0),
        (Packet.from_int(1), 8),
        (Packet.from_float(1), 8),
        (Packet.from_bool(True), 1),
        (Packet.from_str("é"), 2),
        (Packet.from_bytes(b"abc"), 3),
        (Packet.from_numpy(np.zeros((3, 4), np.float32)[:, ::2]), 24),
    ],
)
def test_byte_size(packet: Packet, size: int) -> None:
    assert _byte_size(packet) == size


def test_copy_shares_and_deepcopy_copies() -> None:
    a = np.arange(6, dtype=np.int16)
    p = Packet.from_numpy(a, ts=5)
    p.set_metadata("k", 1)
    shallow = copy.copy(p)
    deep = copy.deepcopy(p)
    assert shallow._value is p._value
    assert deep._value is not p._value
    assert np.shares_memory(shallow.as_numpy(), a)
    assert not np.shares_memory(deep.as_numpy(), a)
    assert (deep.timestamp, deep.metadata("k")) == (5, 1)
    np.testing.assert_array_equal(deep.as_numpy(), a)
    assert copy.deepcopy(Packet.from_str("s")).as_str() == "s"


def test_pickle_round_trip() -> None:
    for p in (Packet(), Packet.from_int(3, 4), Packet.from_str("x", TS_DONE), Packet.from_bytes(b"z")):
        if not p.is_empty:
            p.set_metadata("k", 1.5)
        q = pickle.loads(pickle.dumps(_borrow(p)))
        assert repr(q) == repr(p)
        assert q.metadata_keys() == p.metadata_keys()
        assert q._owned
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    q = pickle.loads(pickle.dumps(Packet.from_numpy(a, 1)))
    np.testing.assert_array_equal(q.as_numpy(), a)
    assert not np.shares_memory(q.as_numpy(), a)
    address = q.as_numpy().__array_interface__["data"][0]
    m = q.make_mutable()  # the unpickled array belongs to nobody else: written in place
    assert m.__array_interface__["data"][0] == address
    m[0, 0] = 9
    assert q.as_numpy()[0, 0] == 9
    assert a[0, 0] == 0
