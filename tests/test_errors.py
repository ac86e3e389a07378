"""The exception tree: its drawing matches the classes."""

from __future__ import annotations

import pickle
import re

import pytest

from flowplex import errors

_BRANCH = re.compile(r"^(?P<indent>(?:│   |    )*)[├└]── (?P<name>\w+)(?: \((?P<mixin>\w+)\))?")


def _drawn_tree() -> dict[str, tuple[str, str | None]]:
    """``name -> (parent, builtin mix-in)`` as the module docstring draws them."""
    drawn: dict[str, tuple[str, str | None]] = {}
    stack = ["FlowplexError"]
    for line in (errors.__doc__ or "").splitlines():
        m = _BRANCH.match(line.strip("\n")[4:])  # the drawing is indented by 4 in the docstring
        if m is None:
            continue
        depth = len(m["indent"]) // 4
        del stack[depth + 1:]
        drawn[m["name"]] = (stack[depth], m["mixin"])
        stack.append(m["name"])
    return drawn


def test_the_drawing_matches_the_classes() -> None:
    drawn = _drawn_tree()
    tree_classes = {n for n in errors.__all__ if n not in ("FlowplexError", "FlowplexInternalError")}
    assert set(drawn) == tree_classes
    for name, (parent, mixin) in drawn.items():
        cls = getattr(errors, name)
        flowplex_bases = [b for b in cls.__bases__ if issubclass(b, errors.FlowplexError)]
        assert [b.__name__ for b in flowplex_bases] == [parent], name
        builtin = [b.__name__ for b in cls.__bases__ if not issubclass(b, errors.FlowplexError)]
        assert builtin == ([mixin] if mixin else []), name


@pytest.mark.parametrize(
    ("cls", "bases"),
    [
        (errors.ConfigError, (errors.FlowplexError, ValueError)),
        (errors.UnknownKernelError, (errors.ConfigError, KeyError, ValueError)),
        (errors.UsageError, (errors.FlowplexError, ValueError)),
        (errors.UnknownPortError, (errors.FlowplexError, KeyError)),
        (errors.RunError, (errors.FlowplexError, RuntimeError)),
        (errors.KernelError, (errors.RunError, RuntimeError)),
        (errors.DeadlockError, (errors.RunError, RuntimeError)),
        (errors.StateError, (errors.RunError, RuntimeError)),
        (errors.GraphCancelled, (errors.RunError, RuntimeError)),
        (errors.ClosedError, (errors.RunError,)),
        (errors.BrokenError, (errors.RunError,)),
        (errors.WouldBlock, (errors.RunError,)),
        (errors.EndOfStream, (errors.FlowplexError,)),
        (errors.Timeout, (errors.FlowplexError, TimeoutError)),
    ],
)
def test_tree(cls: type, bases: tuple[type, ...]) -> None:
    for base in bases:
        assert issubclass(cls, base), (cls, base)


def test_deadlock_is_a_run_error_but_no_kernel_error() -> None:
    assert errors.DeadlockError.__bases__ == (errors.RunError,)
    assert issubclass(errors.DeadlockError, RuntimeError)  # lm-flow programs catch RuntimeError
    assert not issubclass(errors.DeadlockError, errors.KernelError)
    assert not issubclass(errors.KernelError, errors.DeadlockError)


def test_internal_error_is_outside_the_tree() -> None:
    assert not issubclass(errors.FlowplexInternalError, errors.FlowplexError)


def test_kernel_error_attributes_default_to_none_and_survive_pickling() -> None:
    plain = errors.KernelError("kernel failed: boom")
    assert (plain.node, plain.kernel, plain.ts) == (None, None, None)
    err = errors.KernelError("kernel failed: [a/b[1]] ValueError: x", node="a/b[1]", kernel="K", ts=7)
    back = pickle.loads(pickle.dumps(err))
    assert (type(back), str(back), back.node, back.kernel, back.ts) == (
        errors.KernelError, "kernel failed: [a/b[1]] ValueError: x", "a/b[1]", "K", 7)
