"""to_packet: lm-flow's conversion order for values handed to send/emit/side packets."""

from __future__ import annotations

import enum

import numpy as np
import pytest

from flowplex._timestamps import TS_UNSET
from flowplex.packets import Packet, TypeId, _borrow, to_packet

from ._fakes import FakeTensor


class Color(enum.IntEnum):
    RED = 3


class Name(str):
    pass


def test_packet_is_returned_itself() -> None:
    p = Packet.from_int(1, ts=5)
    assert to_packet(p) is p
    assert p.timestamp == 5
    assert to_packet(p, 9) is p  # surrendered: its timestamp is overwritten
    assert p.timestamp == 9


def test_borrowed_packet_is_cloned_when_retimed() -> None:
    p = _borrow(Packet.from_int(1, ts=5))
    assert to_packet(p) is p
    q = to_packet(p, 9)
    assert q is not p
    assert (p.timestamp, q.timestamp, q.as_int(), q._owned) == (5, 9, 1, True)


@pytest.mark.parametrize(
    ("value", "tid", "reader", "expected"),
    [
        (True, TypeId.BOOL, "as_bool", True),
        (np.bool_(False), TypeId.BOOL, "as_bool", False),
        (42, TypeId.I64, "as_int", 42),
        (Color.RED, TypeId.I64, "as_int", 3),
        (np.uint64(7), TypeId.I64, "as_int", 7),
        (np.int8(-2), TypeId.I64, "as_int", -2),
        (1.25, TypeId.F64, "as_float", 1.25),
        (np.float32(0.5), TypeId.F64, "as_float", 0.5),
        (np.float64(2.0), TypeId.F64, "as_float", 2.0),
        (b"ab", TypeId.BYTES, "as_bytes", b"ab"),
        (bytearray(b"ab"), TypeId.BYTES, "as_bytes", b"ab"),
        (memoryview(b"abc")[1:], TypeId.BYTES, "as_bytes", b"bc"),
        ("hé", TypeId.STR, "as_str", "hé"),
        (Name("n"), TypeId.STR, "as_str", "n"),
    ],
)
def test_conversion_order(value: object, tid: int, reader: str, expected: object) -> None:
    p = to_packet(value, 3)
    assert p.type_id == tid
    got = getattr(p, reader)()
    assert got == expected
    assert type(got) is type(expected)  # subclasses are normalised to the exact built-in type
    assert p.timestamp == 3
    assert p._owned


def test_default_timestamp_is_unset() -> None:
    assert to_packet(1).timestamp == TS_UNSET
    assert to_packet(np.zeros(1)).timestamp == TS_UNSET


def test_ndarray_is_adopted_and_dlpack_referenced() -> None:
    a = np.zeros(3, np.uint16)
    p = to_packet(a, 0)
    assert p.as_numpy().__array_interface__["data"][0] == a.__array_interface__["data"][0]
    t = FakeTensor(np.zeros(2, np.float32))
    assert to_packet(t).payload is t


@pytest.mark.parametrize("value", [None, {"a": 1}, [1, 2], (1,), 1 + 2j, object(), np.complex64(1)])
def test_other_types_are_rejected(value: object) -> None:
    pattern = (
        r"can only send a Packet or a built-in type \(int/float/bool/str/bytes/ndarray\) or a DLPack array, "
        r"got \w+; send structured data as a numpy N x K array or a JSON str"
    )
    with pytest.raises(TypeError, match=pattern):
        to_packet(value)


@pytest.mark.parametrize("value", [2**63, -(2**63) - 1, np.uint64(2**64 - 1)])
def test_ints_outside_int64_are_rejected(value: object) -> None:
    with pytest.raises(ValueError, match=r"to_packet: int \d+|to_packet: int -\d+"):
        to_packet(value)


@pytest.mark.parametrize(
    ("ts", "error", "pattern"),
    [
        (2**63, ValueError, r"timestamp 9223372036854775808 does not fit"),
        (1.0, TypeError, r"timestamp must be an int, got float"),
    ],
)
def test_bad_timestamps(ts: object, error: type[Exception], pattern: str) -> None:
    with pytest.raises(error, match=pattern):
        to_packet(1, ts)  # type: ignore[arg-type]


def test_numpy_timestamp_is_accepted() -> None:
    p = to_packet("x", np.int64(12))
    assert p.timestamp == 12
    assert type(p.timestamp) is int


def test_zero_d_array_hint() -> None:
    with pytest.raises(ValueError, match=r"unsupported ndim 0: .*\.item\(\) to send a scalar"):
        to_packet(np.array(3))
