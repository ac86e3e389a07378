"""``NodeHosting``: the nodes one kernel host serves, outside the engine's process.

What a pool's worker process and a Ray actor both do with a ``HostRequest``: take the host's
``sys.path`` and working directory, load the kernel code the host loaded (each entry once),
decode each node's recipe, build the kernels (all or none), then run invocations on them.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, final

from ...errors import ConfigError, UsageError
from ...kernels._host import KernelHosts, failed_outcome
from ...kernels._loading import describe_exception, import_target
from ._wire import HostReply, HostRequest, decode_recipe

if TYPE_CHECKING:
    from ...kernels._context import Context
    from ...kernels._registry import Kernel
    from ...spec._specs import NodeSpec
    from .._invocation import Invocation, NodeRecipe, Outcome

__all__ = ["NodeHosting", "RecipeDecoder"]

RecipeDecoder = Callable[[bytes, dict[int, "tuple[NodeSpec, type[Kernel]]"]], "NodeRecipe"]
"""``decode(frame, route_classes) -> NodeRecipe`` (``_wire.decode_recipe`` by default)."""


@final
class NodeHosting:
    """The kernel instances of the nodes placed on this host, and the code loaded for them."""

    __slots__ = ("_decode", "_loaded", "_route_classes", "hosts", "recipes")

    def __init__(self, decode: RecipeDecoder = decode_recipe, spill: Callable[[Context], None] | None = None) -> None:
        """``decode`` reads a recipe frame; ``spill`` is each kernel host's (``KernelHost``)."""
        self.hosts = KernelHosts(spill)
        self._decode = decode
        self._loaded: set[tuple[str, str]] = set()
        self._route_classes: dict[int, tuple[NodeSpec, type[Kernel]]] = {}
        self.recipes: dict[int, NodeRecipe] = {}
        """The recipes of the nodes hosted now, by node index."""

    def forget(self) -> None:
        """Drop every node (another pool or graph takes this host over); loaded code stays."""
        self.hosts.clear()
        self._route_classes.clear()
        self.recipes = {}

    def host(self, request: HostRequest) -> HostReply:
        """Load the host's kernel code, decode each recipe, then host them all (or none)."""
        follow(request)
        lost = self._replay(request.imports)
        failures: list[tuple[int, str]] = []
        recipes: list[NodeRecipe] = []
        for index, frame in request.recipes:
            try:
                recipes.append(self._decode(frame, self._route_classes))
            except Exception as exc:
                failures.append((index, describe_exception(exc)))
        if not failures:
            try:
                self.hosts.host(recipes)
            except (ConfigError, UsageError) as exc:
                failures.append((-1, str(exc)))
            else:
                self.recipes = {recipe.index: recipe for recipe in recipes}
        return HostReply(failures, lost)

    def run(self, invocation: Invocation) -> Outcome:
        """Run one invocation (a failure of ours becomes the outcome), then let go of its inputs:
        a packet forwarded is then held by the outcome alone."""
        hosts = self.hosts
        try:
            outcome = hosts.run(invocation)
        except UsageError as exc:
            outcome = failed_outcome(invocation, exc, hosts.num_outputs(invocation.node))
        invocation.inputs = []
        invocation.batch = None
        return outcome

    def _replay(self, imports: tuple[tuple[str, str], ...]) -> list[tuple[str, str, str]]:
        """Load what the host loaded for kernels, each once; ``(kind, value, error)`` of each failure.

        A file that no longer exists is skipped: nothing could import it, here or there.
        """
        from ...kernels._registry import kernel_class

        lost: list[tuple[str, str, str]] = []
        for entry in imports:
            if entry in self._loaded:
                continue
            self._loaded.add(entry)
            kind, value = entry
            if kind == "file" and not os.path.isfile(value):
                continue
            try:
                if kind == "entry_point":
                    kernel_class(value, where="entry point")
                elif kind == "class":  # a `module:Class` kernel name: imports and registers it
                    kernel_class(value, where="kernel")
                else:
                    import_target(value, base=Path.cwd(), where=f"`{value}`")
            except Exception as exc:
                lost.append((kind, value, describe_exception(exc)))
        return lost


def follow(request: HostRequest) -> None:
    """Take the host's ``sys.path`` entries this process lacks, in the host's order, and its
    working directory (a warm worker, or a Ray worker, started elsewhere)."""
    missing = [entry for entry in request.sys_path if entry not in sys.path]
    if missing:
        sys.path[:0] = missing
        importlib.invalidate_caches()
    if request.cwd and request.cwd != os.getcwd() and os.path.isdir(request.cwd):
        os.chdir(request.cwd)
