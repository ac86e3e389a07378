"""Properties: metadata maps behave like a sorted dict per handle; to_packet round-trips values."""

from __future__ import annotations

import math

import hypothesis.extra.numpy as hnp
import hypothesis.strategies as st
import numpy as np
import numpy.typing as npt
from hypothesis import given
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from flowplex.packets import Packet, TypeId, clone_owned, to_packet

I64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
KEYS = st.text(min_size=1, max_size=6)
VALUES = st.one_of(st.booleans(), I64, st.floats(allow_nan=False), st.text(max_size=8))
DTYPES = st.sampled_from(
    [np.uint8, np.int8, np.uint16, np.int16, np.int32, np.int64, np.float16, np.float32, np.float64]
)


class MetadataMachine(RuleBasedStateMachine):
    """Two handles sharing a payload; each must see exactly its own model of the map."""

    def __init__(self) -> None:
        super().__init__()
        self.handles = [Packet.from_int(0), Packet.from_int(0)]
        self.models: list[dict[str, object]] = [{}, {}]

    @rule(i=st.integers(0, 1), key=KEYS, value=VALUES)
    def set(self, i: int, key: str, value: bool | int | float | str) -> None:
        self.handles[i].set_metadata(key, value)
        self.models[i][key] = value

    @rule(i=st.integers(0, 1), key=KEYS)
    def remove(self, i: int, key: str) -> None:
        existed = self.handles[i].remove_metadata(key)
        assert existed == (key in self.models[i])
        self.models[i].pop(key, None)

    @rule(src=st.integers(0, 1))
    def clone(self, src: int) -> None:
        dst = 1 - src
        self.handles[dst] = clone_owned(self.handles[src])
        self.models[dst] = dict(self.models[src])

    @invariant()
    def matches_model(self) -> None:
        for handle, model in zip(self.handles, self.models, strict=True):
            assert handle.metadata_keys() == sorted(model)
            for key, value in model.items():
                got = handle.metadata(key)
                assert got == value
                assert type(got) is type(value)
                assert handle.has_metadata(key)


TestMetadataMachine = MetadataMachine.TestCase


@given(value=I64, ts=I64)
def test_int_round_trip(value: int, ts: int) -> None:
    p = to_packet(value, ts)
    assert (p.type_id, p.as_int(), p.timestamp) == (TypeId.I64, value, ts)


@given(value=st.floats())
def test_float_round_trip(value: float) -> None:
    got = to_packet(value).as_float()
    assert got is not None
    assert got == value or (math.isnan(got) and math.isnan(value))


@given(value=st.booleans())
def test_bool_round_trip(value: bool) -> None:
    p = to_packet(value)
    assert (p.type_id, p.as_bool(), p.as_int()) == (TypeId.BOOL, value, None)


@given(value=st.text())
def test_str_round_trip(value: str) -> None:
    assert to_packet(value).as_str() == value


@given(value=st.binary())
def test_bytes_round_trip(value: bytes) -> None:
    p = to_packet(value)
    assert p.as_bytes() == value
    assert repr(p) == f"Packet{{type=Bytes[{len(value)}], ts=Unset}}"


@given(
    arr=DTYPES.flatmap(
        lambda dt: hnp.arrays(dt, hnp.array_shapes(min_dims=1, max_dims=4, min_side=0, max_side=4))
    ),
    flip=st.booleans(),
)
def test_array_round_trip_is_zero_copy(arr: npt.NDArray[np.generic], flip: bool) -> None:
    src = arr[::-1] if flip else arr
    p = to_packet(src, 0)
    view = p.as_numpy()
    assert view.__array_interface__["data"][0] == src.__array_interface__["data"][0]
    assert view.strides == src.strides
    np.testing.assert_array_equal(view, src)
    assert not src.flags.writeable or not arr.flags.writeable
    del p, view
    assert src.flags.writeable
    assert arr.flags.writeable
