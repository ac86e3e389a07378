"""Small DLPack exporters that delegate to numpy (the real DLPack implementation in this venv)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

KDL_CPU = 1
KDL_CUDA = 2


class FakeTensor:
    """A CPU 'tensor' exporting DLPack by delegating to a numpy array; counts ``__dlpack__`` calls."""

    def __init__(self, array: npt.NDArray[np.generic], device: tuple[int, int] = (KDL_CPU, 0)) -> None:
        self._array = array
        self._device = device
        self.dlpack_calls = 0

    @property
    def shape(self) -> tuple[int, ...]:
        return self._array.shape

    @property
    def dtype(self) -> object:
        return self._array.dtype

    def __dlpack__(self, **kwargs: object) -> object:
        self.dlpack_calls += 1
        return self._array.__dlpack__(**kwargs)  # type: ignore[arg-type, misc]

    def __dlpack_device__(self) -> tuple[int, int]:
        return self._device


class FakeGpuTensor(FakeTensor):
    """A 'CUDA' tensor: its data must never be touched, so ``__dlpack__`` fails loudly."""

    def __init__(self, array: npt.NDArray[np.generic], device_id: int = 0) -> None:
        super().__init__(array, (KDL_CUDA, device_id))

    def __dlpack__(self, **kwargs: object) -> object:
        raise AssertionError("flowplex must not export a GPU tensor's data")


class TorchLikeDtype:
    """Mimics ``torch.float32``: numpy cannot interpret it, its str is ``torch.<name>``."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __str__(self) -> str:
        return f"torch.{self._name}"


class TorchLikeTensor(FakeTensor):
    @property
    def dtype(self) -> object:
        return TorchLikeDtype(str(self._array.dtype))


class NoShape:
    """Exports the protocol but has no shape attribute."""

    dtype = np.dtype(np.float32)

    def __dlpack__(self, **kwargs: object) -> object:
        raise AssertionError("not called")

    def __dlpack_device__(self) -> tuple[int, int]:
        return (KDL_CPU, 0)
