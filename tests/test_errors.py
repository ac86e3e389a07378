"""The exception tree: its drawing matches the classes, and the public API raises only from it."""

from __future__ import annotations

import pickle
import re
from collections.abc import Callable
from pathlib import Path

import pytest

import flowplex
from flowplex import errors

SRC = Path(flowplex.__file__).parent

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


# -- the public API raises from the tree --------------------------------------------------------

_BARE: tuple[str, ...] = ("ValueError", "RuntimeError", "KeyError")
_RAISE = re.compile(rf"\braise ({'|'.join(_BARE)})\(")

ALLOWED: dict[str, tuple[int, str]] = {
    # Raised inside kernel callbacks: the engine records `Type: message` in the graph's error
    # (`kernel failed: [n] ValueError: ...`, lm-flow's text), so the builtin name is the message.
    "kernels/_context.py": (3, "Context.require_option_*/source_yield run inside a kernel callback"),
    "kernels/_math.py": (2, "built-in kernels' process: the type name is part of the KernelError text"),
    "kernels/_flow.py": (2, "built-in kernels' process: the type name is part of the KernelError text"),
    "kernels/_tensor.py": (6, "built-in kernels' open/process: the type name is part of the KernelError text"),
    "agents/_openai.py": (1, "a kernel's process failing on purpose (fail: true): lm-flow-style KernelError text"),
    "agents/_command.py": (1, "a kernel's process failing on purpose (fail: true): lm-flow-style KernelError text"),
    "testing/_sources.py": (1, "ScriptedSource's Fail(...) entry: a kernel's process failing on purpose"),
    "testing/_run.py": (1, "Outputs is a Mapping: an unknown port is a KeyError, as the protocol says"),
    # lm-flow's non-test builds raise a bare RuntimeError here; nothing in the tree means
    # "this build has no such feature".
    "__init__.py": (1, "register_cv_test_kernels: lm-flow's RuntimeError for a feature that does not exist"),
    # Stands in for the load/store functions of a closed mapping, as mmap raises ValueError on
    # a closed map; Ring's own methods raise ClosedError before they can reach it.
    "transport/_ordering.py": (1, "a closed mapping's accessors: mmap's ValueError, past Ring's ClosedError checks"),
}


def _bare_raises() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if _RAISE.search(line):
                found.setdefault(rel, []).append(f"{rel}:{number}: {line.strip()}")
    return found


def test_public_modules_raise_from_the_tree() -> None:
    """A new bare ``raise ValueError(`` / ``RuntimeError(`` / ``KeyError(`` fails here.

    Use ``UsageError`` (a ``ValueError``) for a bad argument, ``StateError`` (a ``RuntimeError``)
    for a call in the wrong state, ``ConfigError`` for a bad graph description, or add the file
    to ``ALLOWED`` with the reason.
    """
    found = _bare_raises()
    unexpected = [line for rel, lines in found.items() if len(lines) > ALLOWED.get(rel, (0, ""))[0]
                  for line in lines]
    assert unexpected == []
    stale = {rel: (count, len(found.get(rel, []))) for rel, (count, _) in ALLOWED.items()
             if len(found.get(rel, [])) != count}
    assert stale == {}, "ALLOWED counts more raises than there are: lower them"


def _runner_add_twice() -> None:
    r = flowplex.KernelRunner("PassThroughKernel")
    r.add_input(0, 1)
    r.add_input(0, 2)


def _register_twice() -> None:
    @flowplex.kernel("ScaleKernel")
    class Clash(flowplex.Kernel):
        def process(self, cc: flowplex.Context) -> None:
            pass


def _wait_nan() -> None:
    with flowplex.Graph.from_yaml("""
nodes:
  - { name: n, kernel: PassThroughKernel, input_ports: [x], output_ports: [y] }
input_ports: [x]
output_ports: [y]
""") as g:
        g.wait_done(timeout=float("nan"))


def _set_memory_model() -> None:
    from flowplex.transport._ordering import set_memory_model

    set_memory_model("arm")  # type: ignore[arg-type]  # the wrong value under test


def _cli_override() -> None:
    from flowplex.cli import parse_override

    parse_override("nodot=1", ["n"])


@pytest.mark.parametrize(
    ("call", "cls", "builtin", "message"),
    [
        (lambda: flowplex.KernelRunner("PassThroughKernel", input_ports=-1), flowplex.UsageError, ValueError,
         r"^kernel runner: port counts must be >= 0$"),
        (lambda: flowplex.KernelRunner("PassThroughKernel").add_input(3, 1), flowplex.UsageError, ValueError,
         r"^kernel runner: input port 3 is out of range \(num_inputs=1\)$"),
        (lambda: flowplex.KernelRunner("PassThroughKernel").try_next(2), flowplex.UsageError, ValueError,
         r"^kernel runner: output port 2 is out of range \(num_outputs=1\)$"),
        (_runner_add_twice, flowplex.StateError, RuntimeError,
         r"^kernel runner: input port 0 already has a packet for the next process call$"),
        (lambda: flowplex.kernel(""), flowplex.UsageError, ValueError, r"^kernel name must be a non-empty string$"),
        (_register_twice, flowplex.UsageError, ValueError, r"^kernel `ScaleKernel` already registered \(by "),
        (_wait_nan, flowplex.UsageError, ValueError,
         r"^wait_done: timeout must be a number of seconds or None, got NaN$"),
        (_set_memory_model, flowplex.UsageError, ValueError, r"^set_memory_model\(model='arm'\): expected 'tso'"),
        (_cli_override, flowplex.UsageError, ValueError, r"^--set 'nodot=1': expected NODE\.OPTION=VALUE$"),
    ],
)
def test_bad_calls_raise_tree_classes_with_builtin_bases(call: Callable[[], object], cls: type[Exception],
                                                          builtin: type[Exception], message: str) -> None:
    with pytest.raises(cls, match=message) as info:
        call()
    assert isinstance(info.value, builtin)  # lm-flow's type: callers catching it keep working
