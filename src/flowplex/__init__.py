"""flowplex: a Python dataflow engine for real-time streams, compatible with lm-flow.

A graph, written in YAML, whose nodes run kernels and whose edges carry timestamped packets.
Programs written for lm-lmflow run unchanged after ``import flowplex as lmflow``.
"""

from __future__ import annotations

import contextlib
import importlib
import sys
from typing import TYPE_CHECKING, Final

from . import _native
from . import errors as errors
from ._log import LogLevel as LogLevel
from ._log import set_log_callback as set_log_callback
from ._timestamps import INVALID_ID as INVALID_ID
from ._timestamps import TS_DONE as TS_DONE
from ._timestamps import TS_POST_STREAM as TS_POST_STREAM
from ._timestamps import TS_PRE_STREAM as TS_PRE_STREAM
from ._timestamps import TS_UNSET as TS_UNSET
from .errors import BrokenError as BrokenError
from .errors import ClosedError as ClosedError
from .errors import ConfigError as ConfigError
from .errors import DeadlockError as DeadlockError
from .errors import EndOfStream as EndOfStream
from .errors import FlowplexError as FlowplexError
from .errors import GraphCancelled as GraphCancelled
from .errors import KernelError as KernelError
from .errors import StateError as StateError
from .errors import Timeout as Timeout
from .errors import UnknownKernelError as UnknownKernelError
from .errors import UnknownPortError as UnknownPortError
from .errors import UsageError as UsageError
from .errors import WouldBlock as WouldBlock

_native.use_sources_if_needed()  # before any compiled module loads (see _native)
if TYPE_CHECKING:
    from ._events import DoneEvent as DoneEvent
    from ._events import OutputEvent as OutputEvent
    from ._events import PacketEvent as PacketEvent
    from ._events import TimestampBoundEvent as TimestampBoundEvent
    from .diagnostics._dot_view import DotView as DotView
    from .graph import Graph as Graph
    from .graph import GraphState as GraphState
    from .graph import Input as Input
    from .graph import Poller as Poller
    from .graph._async import AsyncOutputEvents as AsyncOutputEvents
    from .kernels import CloseReason as CloseReason
    from .kernels import Context as Context
    from .kernels import Contract as Contract
    from .kernels import Kernel as Kernel
    from .kernels import KernelRunner as KernelRunner
    from .kernels import kernel as kernel
    from .kernels import registered_kernels as registered_kernels
    from .packets import Packet as Packet
    from .packets import register_type_descriptor as register_type_descriptor
    from .packets import type_id as type_id
    from .packets import type_name as type_name

# The engine loads on first use of one of its names (PEP 562), not with the package: a program
# (or the CLI) pays for what it touches, and `import flowplex` stays a few milliseconds even
# where no bytecode cache exists.  `from flowplex import Graph` works the same way.
_LAZY: Final = {
    **dict.fromkeys(("DoneEvent", "OutputEvent", "PacketEvent", "TimestampBoundEvent"), "._events"),
    **dict.fromkeys(("Graph", "GraphState", "Input", "Poller"), ".graph"),
    **dict.fromkeys(
        ("CloseReason", "Context", "Contract", "Kernel", "KernelRunner", "kernel", "registered_kernels"), ".kernels"
    ),
    **dict.fromkeys(("Packet", "register_type_descriptor", "type_id", "type_name"), ".packets"),
    "AsyncOutputEvents": ".graph._async",
    "DotView": ".diagnostics._dot_view",
}

__version__: Final = "0.1.0"
ABI_VERSION: Final = 4
"""lm-flow's C ABI version this release is compatible with."""

__all__ = [
    "ABI_VERSION",
    "INVALID_ID",
    "TS_DONE",
    "TS_POST_STREAM",
    "TS_PRE_STREAM",
    "TS_UNSET",
    "AsyncOutputEvents",
    "BrokenError",
    "CloseReason",
    "ClosedError",
    "ConfigError",
    "Context",
    "Contract",
    "DeadlockError",
    "DoneEvent",
    "DotView",
    "EndOfStream",
    "FlowplexError",
    "Graph",
    "GraphCancelled",
    "GraphState",
    "Input",
    "Kernel",
    "KernelError",
    "KernelRunner",
    "LogLevel",
    "OutputEvent",
    "Packet",
    "PacketEvent",
    "Poller",
    "StateError",
    "Timeout",
    "TimestampBoundEvent",
    "UnknownKernelError",
    "UnknownPortError",
    "UsageError",
    "WouldBlock",
    "errors",
    "has_cv_test_kernels",
    "kernel",
    "register_cv_test_kernels",
    "register_type_descriptor",
    "registered_kernels",
    "set_log_callback",
    "type_id",
    "type_name",
]


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        msg = f"module 'flowplex' has no attribute {name!r}"
        raise AttributeError(msg)
    importlib.import_module(module, __name__)
    # Publish every lazy name whose module is loaded by now (one import brings several).
    for other, where in _LAZY.items():
        loaded = sys.modules.get(__name__ + where)
        if loaded is not None and other not in globals():
            value = getattr(loaded, other)
            _show_as_public(value)
            globals()[other] = value  # later lookups skip this function
    return globals()[name]


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


def has_cv_test_kernels() -> bool:
    """lm-flow's OpenCV test kernels only exist in its test builds; flowplex has none."""
    return False


def register_cv_test_kernels() -> None:
    """Always fails: flowplex ships no OpenCV test kernels (lm-flow raises the same way)."""
    msg = "OpenCV test kernels are not available in flowplex"
    raise RuntimeError(msg)


def _show_as_public(obj: object) -> None:
    """Show ``flowplex.Graph`` rather than ``flowplex.graph._graph.Graph`` in reprs and docs."""
    if isinstance(obj, type) and obj.__module__.startswith("flowplex."):
        with contextlib.suppress(TypeError):
            obj.__module__ = "flowplex"


for _name in __all__:
    _show_as_public(globals().get(_name))  # the eagerly imported names; lazy ones on first use
del _name
