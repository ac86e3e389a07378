"""``kernel: mypkg.vision:Features``: a kernel named by its module and class, not registered by name.

A name that contains ``:`` is such a reference: a dotted module path, a colon, and a class name
(dotted for a nested class, ``Outer.Inner``), as in an entry point's value. Resolving it imports
the module and checks that the attribute is a ``Kernel`` subclass; the registry then registers
the class under the reference (``kernel_class``), so that later lookups are cheap and a worker
process loads it the same way. Each mistake is one line that says which part is wrong: the
module (with the closest module name), the attribute (with the closest names and the module's
kernel classes) or the object found (what it is instead).
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import sys
from typing import Final, TypeGuard

from .._suggest import did_you_mean, suggest
from ..errors import ConfigError, UnknownKernelError
from ._loading import describe_exception, is_file_target
from ._registry import Kernel

__all__ = ["is_module_class", "resolve"]

SEPARATOR: Final = ":"
EXAMPLE: Final = "mypkg.vision:Features"


def is_module_class(name: str) -> bool:
    """Whether the kernel name ``name`` is a ``module:Class`` reference rather than a registered name.

    >>> is_module_class("mypkg.vision:Features"), is_module_class("ScaleKernel")
    (True, False)
    """
    return SEPARATOR in name


def resolve(name: str, where: str) -> type[Kernel]:
    """Import the module that ``name`` (``module:Class``) names and return its kernel class.

    Args:
        name: ``mypkg.vision:Features`` or ``mypkg.vision:Outer.Inner``.
        where: Where the name was written, the prefix of every message (``nodes[2].kernel``).

    Raises:
        UnknownKernelError: The module does not exist, or has no such attribute.
        ConfigError: ``name`` is not of the form ``module:Class``, importing the module raised
            (chained), or the attribute is not a ``Kernel`` subclass.
    """
    module_name, qualname = _split(name, where)
    module = _import(module_name, name, where)
    found: object = module
    parts = qualname.split(".")
    for i, part in enumerate(parts):
        try:
            found = getattr(found, part)
        except AttributeError:
            owner = _describe_owner(found, f"{module_name}:{'.'.join(parts[:i])}" if i else module_name)
            msg = f"{where}: kernel `{name}`: {owner} has no attribute `{part}`{_hint(found, part)}"
            raise UnknownKernelError(msg) from None
    if _is_kernel_class(found):
        return found
    msg = f"{where}: kernel `{name}` is {_describe_object(found)}"
    raise ConfigError(msg)


def _split(name: str, where: str) -> tuple[str, str]:
    module_name, _, qualname = name.partition(SEPARATOR)
    if is_file_target(module_name):
        msg = (f"{where}: kernel `{name}`: `{module_name}` is a file, not a module path (like `{EXAMPLE}`); "
               "name the file in the graph's `imports:` and the kernel by its registered name")
        raise ConfigError(msg)
    if not (_dotted(module_name) and _dotted(qualname)):
        msg = (f"{where}: kernel `{name}` is not a `module:Class` reference: expected a dotted module path, "
               f"a colon and a class name, like `{EXAMPLE}`")
        raise ConfigError(msg)
    return module_name, qualname


def _dotted(text: str) -> bool:
    return all(part.isidentifier() for part in text.split("."))


def _import(module_name: str, name: str, where: str) -> object:
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        missing = exc.name
        if missing is not None and (module_name == missing or module_name.startswith(f"{missing}.")):
            hint = _module_hint(missing) or "; is it installed, or on PYTHONPATH?"
            msg = f"{where}: kernel `{name}`: no module named `{missing}`{hint}"
            raise UnknownKernelError(msg) from None
        msg = f"{where}: kernel `{name}`: cannot import module `{module_name}`: {describe_exception(exc)}"
        raise ConfigError(msg) from exc
    except Exception as exc:
        msg = f"{where}: kernel `{name}`: cannot import module `{module_name}`: {describe_exception(exc)}"
        raise ConfigError(msg) from exc


def _module_hint(missing: str) -> str:
    """``; did you mean `mypkg.vision`?`` for a misspelt module: its siblings in its package, or
    the top-level modules on ``sys.path`` (only read on this error path)."""
    parent, _, last = missing.rpartition(".")
    if parent:
        package = sys.modules.get(parent)
        search = getattr(package, "__path__", None)
        if search is None:
            return f"; `{parent}` is a module, not a package" if package is not None else ""
        names = [info.name for info in pkgutil.iter_modules(search)]
    else:
        names = [info.name for info in pkgutil.iter_modules()] + [m for m in sys.modules if "." not in m]
    hint = suggest(last, names)
    return "" if hint is None else f"; did you mean `{parent + '.' if parent else ''}{hint}`?"


def _hint(owner: object, attribute: str) -> str:
    """``; did you mean `Features`? (kernel classes in it: Features, Other)``: what exists instead."""
    names = dir(owner)
    kernels = sorted(n for n in names if _is_kernel_class(getattr(owner, n, None)))
    listed = f"kernel classes in it: {', '.join(kernels)}" if kernels else "it has no kernel classes"
    return f"{did_you_mean(attribute, names)} ({listed})"


def _is_kernel_class(value: object) -> TypeGuard[type[Kernel]]:
    return isinstance(value, type) and issubclass(value, Kernel) and value is not Kernel


def _describe_owner(owner: object, path: str) -> str:
    if inspect.ismodule(owner):
        return f"module `{path}`"
    if isinstance(owner, type):
        return f"class `{path}`"
    return f"`{path}`"


def _describe_object(value: object) -> str:
    """What ``value`` is instead of a kernel class, and what to name instead."""
    if value is Kernel:
        return "the flowplex.Kernel base class itself; name a subclass of it"
    if isinstance(value, type):
        return f"a class (`{value.__module__}.{value.__qualname__}`) that does not subclass flowplex.Kernel"
    if isinstance(value, Kernel):
        cls = type(value)
        return f"an instance of `{cls.__module__}.{cls.__qualname__}`, not a class; name its class"
    if inspect.ismodule(value):
        return f"a module, not a class; name a class in it (`{value.__name__}:Class`)"
    if inspect.isroutine(value):
        return "a function, not a flowplex.Kernel subclass"
    return f"an object of type `{type(value).__name__}`, not a flowplex.Kernel subclass"
