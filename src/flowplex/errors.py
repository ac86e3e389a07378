"""The whole flowplex exception tree, in one place.

::

    FlowplexError
    ├── ConfigError (ValueError)              a graph description or option is wrong
    │   └── UnknownKernelError (KeyError)     no kernel registered under that name
    ├── UsageError (ValueError)               an API was called with a bad argument
    ├── UnknownPortError (KeyError)           no graph input/output port of that name
    ├── RunError (RuntimeError)               something went wrong while running
    │   ├── KernelError                       a kernel failed: .node, .kernel, .ts; the cause chained
    │   ├── DeadlockError                     nothing can ever run again but inputs wait
    │   ├── StateError                        the call is not allowed in the graph's state
    │   ├── GraphCancelled                    the graph was cancelled
    │   ├── ClosedError                       you closed it (send after close_input)
    │   ├── BrokenError                       the peer went away (cause chained)
    │   └── WouldBlock                        a ``*_nowait`` call found no room
    ├── EndOfStream                           a clean end: nothing more will come
    ├── ControlError                          a live graph's control endpoint: no such graph, refused, bad reply
    └── Timeout (TimeoutError)                a wait ran past its deadline

    FlowplexInternalError                     a flowplex bug (kept outside the tree)

The builtin mix-ins keep programs written for lm-lmflow working unchanged: lm-flow raises
``ValueError`` for configuration errors, ``KeyError`` for unknown kernels, ``RuntimeError``
for state errors and ``lmflow.Timeout(TimeoutError)`` for timeouts.

One difference is deliberate: lm-flow raises its ``KernelError`` for stalls too, flowplex a
``DeadlockError``, which is a ``RunError`` (so a ``RuntimeError``) but not a ``KernelError``:
``except KernelError`` means "a kernel failed", and a stall is no kernel's failure. Code that
must catch both catches ``RunError`` (or ``RuntimeError``, as lm-flow programs do).
"""

from __future__ import annotations

__all__ = [
    "BrokenError",
    "ClosedError",
    "ConfigError",
    "ControlError",
    "DeadlockError",
    "EndOfStream",
    "FlowplexError",
    "FlowplexInternalError",
    "GraphCancelled",
    "KernelError",
    "RunError",
    "StateError",
    "Timeout",
    "UnknownKernelError",
    "UnknownPortError",
    "UsageError",
    "WouldBlock",
]


class FlowplexError(Exception):
    """Base of every error flowplex raises on purpose."""


class ConfigError(FlowplexError, ValueError):
    """A graph description, an option or a kernel contract is invalid.

    The message starts with the YAML path of the offending value, e.g.
    ``nodes[2].input_ports[0] (node 'cam'): ...``.
    """


class UnknownKernelError(ConfigError, KeyError):
    """A node names a kernel that is not registered."""

    def __str__(self) -> str:
        # KeyError.__str__ would wrap the message in quotes.
        return str(self.args[0]) if self.args else ""


class UsageError(FlowplexError, ValueError):
    """A public API was called with an invalid argument (bad timestamp, bad index...)."""


class UnknownPortError(FlowplexError, KeyError):
    """A graph input or output port name does not exist."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class RunError(FlowplexError, RuntimeError):
    """Base of the errors raised while a graph runs."""


class KernelError(RunError):
    """A kernel callback failed; the message names the node and ``__cause__`` is the original.

    The message is lm-flow's, ``kernel failed: [node] Type: text``; read the parts from the
    attributes rather than from the message (a node's name may contain any character).

    Attributes:
        node: The name of the failing node; ``None`` when the failure is not one node's.
            ``KernelRunner`` failures name its node, ``kernel_runner``.
        kernel: The registered name of the failing node's kernel, or ``None``.
        ts: The input timestamp of the failed ``process`` call (``cc.input_timestamp``);
            ``None`` for a failure in ``open`` or ``close``.
    """

    def __init__(self, message: str = "", *, node: str | None = None, kernel: str | None = None,
                 ts: int | None = None) -> None:
        super().__init__(message)
        self.node = node
        self.kernel = kernel
        self.ts = ts


class DeadlockError(RunError):
    """No node can ever run again while inputs still wait; the message names the ports.

    Not a ``KernelError`` (lm-flow raises its ``KernelError`` for stalls): no kernel failed.
    """


class StateError(RunError):
    """The call is not allowed in the graph's current lifecycle state."""


class GraphCancelled(RunError):
    """The graph was cancelled with ``Graph.cancel()``."""


class ClosedError(RunError):
    """The resource was closed by this side (e.g. ``send`` after ``close_input``)."""


class BrokenError(RunError):
    """The other side went away (a producer process died...); the cause is chained."""


class WouldBlock(RunError):
    """A non-blocking call (``send_nowait``, ``try_*``) could not proceed without waiting."""


class EndOfStream(FlowplexError):
    """A clean end of stream: every producer closed and everything was consumed."""


class ControlError(FlowplexError):
    """A live graph's control endpoint failed: no graph of that name, a refused or broken
    connection, a reply that breaks the protocol."""


class Timeout(FlowplexError, TimeoutError):
    """A blocking call ran past its ``timeout``."""


class FlowplexInternalError(Exception):
    """An invariant of flowplex itself broke: this is a flowplex bug.

    Please report it together with the graph that triggered it.
    """
