"""The 18 built-ins are registered under lm-flow's names and document themselves."""

from __future__ import annotations

import pytest

import flowplex
from flowplex.kernels import kernel_class

from .conftest import NO_GRAPH

pytestmark = NO_GRAPH

BUILTINS = [
    "PassThroughKernel", "ScaleKernel", "SumKernel", "SplitKernel", "ZipKernel", "FilterKernel",
    "StringifyKernel", "SinkKernel", "InvertKernel", "NormalizeKernel", "RangeSourceKernel",
    "MuxKernel", "FeedbackAddKernel", "BatchSumKernel", "CastKernel", "AffineKernel",
    "ClampKernel", "ReduceKernel",
]


def test_importing_flowplex_registers_all_18() -> None:
    assert len(set(BUILTINS)) == 18
    assert set(BUILTINS) <= set(flowplex.registered_kernels())


@pytest.mark.parametrize("name", BUILTINS)
def test_builtin_docstrings_state_ports_options_and_behaviour(name: str) -> None:
    cls = kernel_class(name)
    assert cls.__name__ == name
    doc = cls.__doc__ or ""
    for section in ("Ports:", "Options:", "Behaviour:"):
        assert section in doc, f"{name} docstring lacks {section!r}"


def test_a_builtin_name_cannot_be_taken_by_another_kernel() -> None:
    with pytest.raises(ValueError, match=r"kernel `ScaleKernel` already registered"):
        @flowplex.kernel("ScaleKernel")
        class Impostor(flowplex.Kernel):
            pass
