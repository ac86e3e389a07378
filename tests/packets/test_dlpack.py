"""DLPack arrays travel by reference; flowplex touches their data only for as_numpy on a CPU array."""

from __future__ import annotations

import numpy as np
import pytest

from flowplex.packets import Packet, TypeId, clone_owned, cow_stats, to_packet

from ._fakes import FakeGpuTensor, FakeTensor, NoShape, TorchLikeTensor


def test_cpu_dlpack_object_travels_by_reference() -> None:
    data = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = FakeTensor(data)
    p = to_packet(t, 4)
    q = clone_owned(p)
    assert p.type_id == TypeId.BUFFER
    assert p.device == "cpu"
    assert p.payload is t
    assert q.payload is t
    assert repr(p) == "Packet{type=Buffer[2x3] dtype=F32 external, ts=4}"
    assert t.dlpack_calls == 0
    view = p.as_numpy()
    assert t.dlpack_calls == 1
    assert view.__array_interface__["data"][0] == data.__array_interface__["data"][0]
    assert not view.flags.writeable
    np.testing.assert_array_equal(view, data)
    p.as_numpy()
    assert t.dlpack_calls == 1  # exported once per payload


def test_gpu_dlpack_object_is_never_exported() -> None:
    t = FakeGpuTensor(np.zeros((4, 4), np.float16), device_id=1)
    p = Packet.from_dlpack(t, ts=0)
    assert p.device == "cuda:1"
    assert p.payload is t
    assert repr(p) == "Packet{type=Buffer[4x4] dtype=F16 external device=cuda:1, ts=0}"
    with pytest.raises(
        ValueError, match=r"as_numpy: the buffer lives on cuda:1; flowplex never copies device memory"
    ):
        p.as_numpy()
    with pytest.raises(ValueError, match=r"make_mutable: the buffer lives on cuda:1"):
        p.make_mutable()
    assert p.payload is t


def test_make_mutable_on_cpu_dlpack_copies_once() -> None:
    data = np.ones(3, np.int32)
    t = FakeTensor(data)
    p = Packet.from_dlpack(t)
    before = cow_stats()
    m = p.make_mutable()
    m[:] = 0
    assert data.tolist() == [1, 1, 1]
    assert cow_stats().copies == before.copies + 1
    assert p.payload is not t  # the packet now holds engine memory
    assert p.device == "cpu"
    assert "external" not in repr(p)


def test_torch_style_dtype_names_are_understood() -> None:
    p = to_packet(TorchLikeTensor(np.zeros(2, np.int64)))
    assert "dtype=I64" in repr(p)


def test_unsupported_dlpack_objects() -> None:
    with pytest.raises(ValueError, match=r"unsupported dtype complex128: buffers hold"):
        to_packet(FakeTensor(np.zeros(2, np.complex128)))
    with pytest.raises(ValueError, match=r"unsupported ndim 0"):
        to_packet(FakeTensor(np.zeros((), np.float32)))
    with pytest.raises(ValueError, match=r"NoShape exports __dlpack__ but has no usable \.shape"):
        to_packet(NoShape())


def test_from_dlpack_accepts_numpy_arrays_by_adoption() -> None:
    a = np.zeros(3)
    p = Packet.from_dlpack(a)
    assert "external" in repr(p)
    assert not a.flags.writeable
    del p
    assert a.flags.writeable
