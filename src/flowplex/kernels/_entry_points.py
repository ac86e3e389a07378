"""The ``flowplex.kernels`` entry-point group: installed distributions' kernels, by name.

A distribution declares one entry point per kernel, named after the kernel::

    [project.entry-points."flowplex.kernels"]
    Denoise = "mypkg.kernels"              # a module whose import registers `Denoise`
    Sharpen = "mypkg.kernels:SharpenKernel" # or the Kernel subclass itself

The registry looks here only on a miss, so ``import flowplex`` never reads package metadata.
There is no "load everything" entry: loading every installed package's kernels to find one
name would be slow and would run code nobody asked for.
"""

from __future__ import annotations

from importlib.metadata import EntryPoint, entry_points
from typing import Final

from ..errors import ConfigError
from ._loading import describe_exception

__all__ = ["GROUP", "describe", "find", "load", "names"]

GROUP: Final = "flowplex.kernels"


def names() -> list[str]:
    """The kernel names that installed distributions declare."""
    return sorted({ep.name for ep in entry_points(group=GROUP)})


def describe(ep: EntryPoint) -> str:
    """``entry point `Denoise = mypkg.kernels` (flowplex.kernels) of distribution `mypkg 0.1```."""
    dist = ep.dist
    owner = f" of distribution `{dist.name} {dist.version}`" if dist is not None else ""
    return f"entry point `{ep.name} = {ep.value}` ({GROUP}){owner}"


def find(name: str, where: str) -> EntryPoint | None:
    """The entry point that declares kernel ``name``, if any distribution does.

    Raises:
        ConfigError: Two distributions declare ``name`` (which one runs would be an accident).
    """
    found = list(entry_points(group=GROUP, name=name))
    if len(found) > 1:
        listed = "; ".join(describe(ep) for ep in found)
        msg = f"{where}: kernel `{name}` is declared by more than one installed distribution ({listed}); uninstall one"
        raise ConfigError(msg)
    return found[0] if found else None


def load(ep: EntryPoint, name: str, where: str) -> object:
    """Load ``ep`` (importing its module registers the kernels it defines).

    Raises:
        ConfigError: The import or attribute lookup failed; the cause is chained.
    """
    try:
        return ep.load()
    except Exception as exc:
        msg = f"{where}: kernel `{name}`: {describe(ep)} failed to load: {describe_exception(exc)}"
        raise ConfigError(msg) from exc
