"""The public surface is pinned: lm-flow's names are all there, nothing private leaks."""

from __future__ import annotations

import flowplex

LMFLOW_ALL = {
    "Kernel", "kernel", "Graph", "KernelRunner", "Packet", "Context", "Contract", "Input", "Poller",
    "OutputEvent", "PacketEvent", "TimestampBoundEvent", "DoneEvent", "LogLevel", "CloseReason",
    "GraphState", "AsyncOutputEvents", "DotView", "Timeout", "KernelError", "has_cv_test_kernels",
    "register_cv_test_kernels", "type_id",
    "type_name", "set_log_callback", "TS_UNSET", "TS_PRE_STREAM", "TS_POST_STREAM", "TS_DONE", "INVALID_ID",
}


def test_every_lmflow_name_is_exported() -> None:
    missing = sorted(name for name in LMFLOW_ALL if not hasattr(flowplex, name))
    assert missing == []


def test_all_is_pinned() -> None:
    assert sorted(flowplex.__all__) == sorted(set(flowplex.__all__))
    for name in flowplex.__all__:
        assert hasattr(flowplex, name), name
        assert not name.startswith("_")


def test_sentinels_and_enums_have_lmflow_values() -> None:
    assert flowplex.TS_UNSET == -(2**63)
    assert flowplex.TS_PRE_STREAM == -(2**63) + 2
    assert flowplex.TS_POST_STREAM == 2**63 - 3
    assert flowplex.TS_DONE == 2**63 - 1
    assert flowplex.INVALID_ID == 2**64 - 1
    assert [int(s) for s in flowplex.GraphState] == [0, 1, 2, 3, 4]
    assert (flowplex.CloseReason.NORMAL, flowplex.CloseReason.ERROR, flowplex.CloseReason.CANCELLED) == (0, 1, 2)
    assert [int(level) for level in flowplex.LogLevel] == [0, 1, 2, 3]


def test_exceptions_keep_lmflow_builtin_bases() -> None:
    assert issubclass(flowplex.Timeout, TimeoutError)
    assert issubclass(flowplex.KernelError, RuntimeError)
    assert issubclass(flowplex.ConfigError, ValueError)
    assert issubclass(flowplex.UnknownKernelError, KeyError)
    assert issubclass(flowplex.UnknownKernelError, ValueError)
    assert issubclass(flowplex.DeadlockError, RuntimeError)  # lm-flow raises its KernelError(RuntimeError)
    assert not issubclass(flowplex.DeadlockError, flowplex.KernelError)  # a stall is no kernel's failure
    assert issubclass(flowplex.StateError, RuntimeError)
    assert issubclass(flowplex.GraphCancelled, RuntimeError)
    assert str(flowplex.UnknownKernelError("no such kernel")) == "no such kernel"


def test_graph_has_no_public_constructor() -> None:
    import pytest

    with pytest.raises(TypeError, match=r"Graph\.from_yaml"):
        flowplex.Graph()


def test_cv_test_kernels_are_absent() -> None:
    import pytest

    assert flowplex.has_cv_test_kernels() is False
    with pytest.raises(RuntimeError):
        flowplex.register_cv_test_kernels()


def test_config_package_surface_is_pinned() -> None:
    import flowplex.config

    assert flowplex.config.__all__ == ["Limits", "json_schema", "load_yaml", "load_yaml_file"]


def test_spec_package_surface_is_pinned() -> None:
    import flowplex.spec
    from flowplex.config import load_yaml

    assert flowplex.spec.__all__ == [
        "CONDITION_KINDS", "ConditionSpec",
        "Diagnostic", "EdgePlan", "ExecutorSpec", "GraphPlan", "GraphSpec", "InputPolicySpec", "InputQueuesSpec",
        "NodeSpec", "PortSpec", "PredicateSpec", "RouteRuleSpec", "RouteSpec", "build_plan",
    ]
    spec = load_yaml("nodes: [{name: a, kernel: K, input_ports: [x], output_ports: [y]}]\ninput_ports: [x]\n")
    assert isinstance(spec, flowplex.spec.GraphSpec)
    assert isinstance(spec.nodes[0], flowplex.spec.NodeSpec)
    assert isinstance(flowplex.spec.build_plan(spec), flowplex.spec.GraphPlan)
