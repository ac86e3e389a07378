"""What crosses a worker's pipe besides invocations and outcomes: hosting, its reply, stop.

Invocations and outcomes travel as codec frames (``executors._codec.to_frame``), which start
with ``MAGIC``; a control message starts with one byte of its own instead, then a pickle. The
recipes of a hosting request are encoded one by one, so that a class a worker cannot import
fails for its own node, by name.

The kernel class travels by reference (its module and qualified name), never by value: a worker
imports it. A route node's class is made by the engine for that node, so it travels as None and
the worker makes it again from the spec (``make_route_kernel``).
"""

from __future__ import annotations

import multiprocessing.process
import os
import pickle
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, final

from ...errors import ConfigError, UsageError
from ...kernels._route import make_route_kernel
from ...spec._specs import ROUTE_KERNEL
from .._invocation import NodeRecipe
from . import _codec as codec

if TYPE_CHECKING:
    from ...kernels._registry import Kernel
    from ...packets import Packet
    from ...spec._specs import NodeSpec

__all__ = [
    "GO_ON",
    "HOST",
    "HOSTED",
    "MAGIC",
    "STOP",
    "HostReply",
    "HostRequest",
    "decode_recipe",
    "encode_recipe",
    "WireRecipe",
    "main_path",
    "recipe_from_wire",
    "wire_recipe",
]

MAGIC: Final = codec.MAGIC
"""The first bytes of an invocation or outcome frame."""
HOST: Final = b"\x01"
"""host → worker: a pickled ``HostRequest``."""
HOSTED: Final = b"\x02"
"""worker → host: a pickled ``HostReply``."""
STOP: Final = b"\x03"
"""host → worker: exit now (after the messages before it)."""
GO_ON: Final = b"\x04"
"""host → worker: the go-ahead for a call that sent a partial outcome (``Outcome.partial``),
then one byte: 1 when its next slice may come after ``SPILL_SLICE`` packets, 0 after twice its
last count (``Spill``)."""


@final
@dataclass(frozen=True, slots=True)
class WireRecipe:
    """A ``NodeRecipe`` as it travels: the class by reference, or None for a route node."""

    index: int
    spec: NodeSpec
    kernel_cls: type[Kernel] | None
    strict_ports: bool
    side_packets: dict[str, Packet]


@final
@dataclass(frozen=True, slots=True)
class HostRequest:
    """Host exactly these nodes, after loading the kernel code the host process loaded."""

    imports: tuple[tuple[str, str], ...]
    """``kernels._loading.imports_so_far()`` of the host: replayed in order, each once."""
    recipes: list[tuple[int, bytes]]
    """``(node index, encode_recipe(...))`` per node placed on this worker."""
    arena: tuple[str, int] | None = None
    """A warm worker taken over by another pool: forget every node, map this arena as this slot."""
    sys_path: tuple[str, ...] = ()
    """The host's ``sys.path`` now: a warm worker started before it changed looks there too."""
    cwd: str = ""
    """The host's working directory now (relative paths of ``imports:`` resolve against it)."""


@final
@dataclass(frozen=True, slots=True)
class HostReply:
    """What hosting did: one message per node that failed (none: all hosted)."""

    failures: list[tuple[int, str]]
    """``(node index, message)``; the message starts with the node's label."""
    lost_imports: list[tuple[str, str, str]]
    """``(kind, value, error)`` of the kernel code the host loaded that this worker could not."""


def encode_recipe(recipe: NodeRecipe, executor: str) -> bytes:
    """``recipe`` as a frame a worker decodes; its kernel class by reference.

    Raises:
        ConfigError: The class cannot be imported in a worker (defined in a function, or in
            ``__main__`` of a program without a file), or the recipe does not pickle; the
            message names the node and what to do.
    """
    spec = recipe.spec
    cls: type[Kernel] | None = None
    if spec.kernel != ROUTE_KERNEL:
        cls = recipe.kernel_cls
        problem = _class_problem(cls)
        if problem:
            msg = (f"{spec.label}: kernel class `{cls.__module__}.{cls.__qualname__}` cannot be imported "
                   f"by the worker processes of executor `{executor}`: {problem}; move the class into a "
                   "module they can import (on sys.path), or name its file in the graph's `imports:`")
            raise ConfigError(msg)
    wire = wire_recipe(recipe)
    try:
        return codec.to_frame(codec.encode(wire))
    except UsageError as exc:
        msg = f"{spec.label}: cannot send the node to executor `{executor}`: {exc}"
        raise ConfigError(msg) from None


def wire_recipe(recipe: NodeRecipe) -> WireRecipe:
    """``recipe`` as it travels: a route node's class left out (the receiver makes it again)."""
    cls = None if recipe.spec.kernel == ROUTE_KERNEL else recipe.kernel_cls
    return WireRecipe(recipe.index, recipe.spec, cls, recipe.strict_ports, dict(recipe.side_packets))


def decode_recipe(frame: bytes, route_classes: dict[int, tuple[NodeSpec, type[Kernel]]]) -> NodeRecipe:
    """The ``NodeRecipe`` in ``frame``, its class imported here (in the worker).

    ``route_classes`` keeps the class made for each route node, so that hosting the same node
    again (a restart) keeps its instance.

    Raises:
        UsageError: The frame does not hold a recipe.
        Exception: Whatever importing the kernel class raised (``ModuleNotFoundError``,
            ``AttributeError``...), as is: the host reports it.
    """
    encoded = codec.from_frame(frame)
    wire = pickle.loads(encoded.header, buffers=encoded.buffers)  # not codec.decode: keep the import error
    return recipe_from_wire(wire, route_classes)


def recipe_from_wire(wire: object, route_classes: dict[int, tuple[NodeSpec, type[Kernel]]]) -> NodeRecipe:
    """The ``NodeRecipe`` a decoded ``WireRecipe`` stands for (a route node's class made again,
    or kept from ``route_classes``).

    Raises:
        UsageError: ``wire`` is not a ``WireRecipe``.
    """
    if type(wire) is not WireRecipe:
        msg = f"decode_recipe: the message holds a {type(wire).__name__}, not a recipe"
        raise UsageError(msg)
    cls = wire.kernel_cls
    if cls is None:
        kept = route_classes.get(wire.index)
        if kept is not None and kept[0] == wire.spec:
            cls = kept[1]
        else:
            cls = make_route_kernel(wire.spec)
            route_classes[wire.index] = (wire.spec, cls)
    return NodeRecipe(wire.index, wire.spec, cls, wire.strict_ports, wire.side_packets)


def main_path() -> str | None:
    """The file a spawned worker re-imports the host's ``__main__`` from (multiprocessing does,
    as ``__mp_main__``); None when it imports ``__main__`` by module name (``python -m``) or not
    at all: a program without a file (an interactive session, ``python -c``, a script read from
    stdin, whose ``__file__`` is ``<stdin>``)."""
    main = sys.modules.get("__main__")
    if getattr(getattr(main, "__spec__", None), "name", None) is not None:
        return None
    path = getattr(main, "__file__", None)
    if not isinstance(path, str):
        return None
    start_dir = getattr(multiprocessing.process, "ORIGINAL_DIR", None) or ""  # where multiprocessing resolves it
    return path if os.path.isfile(os.path.join(start_dir, path)) else None


def _class_problem(cls: type) -> str:
    """Why a worker could not import ``cls`` by reference ("" when it can, as far as we can tell)."""
    if cls.__module__ == "__main__":
        main = sys.modules.get("__main__")
        if main_path() is None and getattr(getattr(main, "__spec__", None), "name", None) is None:
            return ("it is defined in `__main__` of a program that has no file (an interactive session, "
                    "`python -c`, or a script read from stdin)")
    if "<locals>" in cls.__qualname__:
        return "it is defined inside a function"
    try:
        pickle.dumps(cls, codec.PROTOCOL)
    except Exception as exc:
        return f"it does not pickle by reference ({type(exc).__name__}: {exc})"
    return ""
