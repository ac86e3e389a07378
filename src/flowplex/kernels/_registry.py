"""The ``Kernel`` base class and the process-wide kernel registry.

Kernels are declared, not discovered: ``@kernel("Name")`` registers a ``Kernel`` subclass at
decoration time, and a graph that names the kernel instantiates it once per node. An installed
distribution declares its kernels by name in the ``flowplex.kernels`` entry-point group; a name
that is not registered is looked up there (``_entry_points``) and loaded on first use. A name
of the form ``module:Class`` needs no registration: it names the class (``_module_class``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Final, TypeVar

from .._suggest import suggest
from ..errors import ConfigError, UnknownKernelError, UsageError

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

    from ._context import Context
    from ._contract import Contract

__all__ = ["Kernel", "kernel", "kernel_class", "registered_kernels"]

K = TypeVar("K", bound="type[Kernel]")


class Kernel:
    """Base class of user kernels.

    Lifecycle, per node: ``get_contract`` (optional static method, called on the class at graph
    build) → ``open(cc)`` once at ``Graph.start()`` on the thread that calls ``start`` →
    ``process(cc)`` once per claimed invocation on the node's executor → ``close(cc)`` once when
    the node's inputs are all closed and drained (or the graph failed or was cancelled; check
    ``cc.close_reason``). ``open``, ``process`` and ``close`` may emit; nothing is delivered
    until the callback returns, and a callback that raises has its output discarded.

    ``process`` must be re-entrant when the node sets ``max_in_flight > 1``.
    """

    language: str = "Python"
    """Shown in DOT labels (``Name · Python``)."""

    # get_contract is optional and looked up on the class: define it as a @staticmethod
    # ``def get_contract(c: Contract) -> None`` (lm-flow's convention).
    get_contract: Callable[[Contract], None] | None = None

    def open(self, cc: Context) -> None:
        """Called once before the first ``process``; may read options and side packets."""

    def process(self, cc: Context) -> None:
        """Called once per invocation with the claimed inputs; override this."""
        msg = f"{type(self).__name__}.process is not implemented"
        raise NotImplementedError(msg)

    def close(self, cc: Context) -> None:
        """Called once at the end; may emit a summary (stamp it explicitly)."""


_lock: Final = threading.Lock()
_registry: dict[str, type[Kernel]] = {}

_TENSOR: Final = "flowplex.kernels._tensor"

# Kernels that live in heavier modules register when first named, so that `import flowplex`
# stays fast (the buffer kernels need numpy): name -> module whose import registers it.
_PROVIDERS: Final = {
    "InvertKernel": _TENSOR,
    "NormalizeKernel": _TENSOR,
    "CastKernel": _TENSOR,
    "AffineKernel": _TENSOR,
    "ClampKernel": _TENSOR,
    "ReduceKernel": _TENSOR,
    "RingSink": "flowplex.transport._kernels",
    "RingSource": "flowplex.transport._kernels",
    "CommandSource": "flowplex.agents",
    "OpenAIStreamSource": "flowplex.agents",
    "ReplaySource": "flowplex.agents",
    "TerminalSink": "flowplex.agents",
    "VideoFileSource": "flowplex.media",  # the media extra (PyAV, soundfile): imported by the kernels' open
    "VideoFileSink": "flowplex.media",
    "AudioFileSource": "flowplex.media",
    "AudioFileSink": "flowplex.media",
}

_RESERVED: Final = {name: module for name, module in _PROVIDERS.items() if module == _TENSOR}
"""Lazily registered names that ``import flowplex`` used to register eagerly (and so reserve)."""


def kernel(name: str) -> Callable[[K], K]:
    """Class decorator that registers a ``Kernel`` subclass under ``name``.

    Registering the same class twice is a no-op; another class under a taken name is a
    ``UsageError``, a ``ValueError`` (lm-flow's rule).

    >>> import flowplex
    >>> @flowplex.kernel("DocDouble")
    ... class DocDouble(flowplex.Kernel):
    ...     def process(self, cc):
    ...         cc.emit(0, cc.input(0).as_int() * 2)
    """
    if not isinstance(name, str) or not name:
        msg = "kernel name must be a non-empty string"
        raise UsageError(msg)

    def register(cls: K) -> K:
        if not (isinstance(cls, type) and issubclass(cls, Kernel)):
            msg = f"@kernel({name!r}) must decorate a subclass of flowplex.Kernel, got {cls!r}"
            raise TypeError(msg)
        provider = _RESERVED.get(name)
        if provider is not None and cls.__module__ != provider:
            # A built-in's name stays taken even before its module is loaded: load it, so that
            # the clash below is reported now, as it was when every built-in loaded eagerly.
            import importlib

            importlib.import_module(provider)
        with _lock:
            existing = _registry.get(name)
            if existing is not None and existing is not cls:
                msg = (
                    f"kernel `{name}` already registered (by {existing.__module__}."
                    f"{existing.__qualname__}); choose another name"
                )
                raise UsageError(msg)
            _registry[name] = cls
        return cls

    return register


def registered_kernels() -> list[str]:
    """Sorted names of every registered kernel (including those registered on first use)."""
    with _lock:
        return sorted(set(_registry) | set(_PROVIDERS))


def kernel_class(name: str, *, where: str = "kernel") -> type[Kernel]:
    """The class registered under ``name``; ``UnknownKernelError`` (a ``KeyError``) otherwise.

    A name containing ``:`` is a ``module:Class`` reference (``mypkg.vision:Features``, see
    ``_module_class``): the module is imported and the class, which must subclass ``Kernel``,
    is registered under that name. On a miss, the ``flowplex.kernels`` entry points of
    installed distributions are consulted (see ``_entry_points``): one named ``name`` is
    loaded, which registers the kernel.

    Raises:
        UnknownKernelError: No kernel is registered or declared under ``name``, or the module
            or class a ``module:Class`` reference names does not exist.
        ConfigError: A ``module:Class`` reference is malformed, its module fails to import, or
            it names something that is not a ``Kernel`` subclass; an entry point fails to load.
    """
    with _lock:
        cls = _registry.get(name)
    if cls is None and ":" in name:
        from . import _module_class
        from ._loading import record_import

        # Registered under the reference: later lookups are cheap, and a name cannot come to
        # mean another class (the same class again is a no-op, so resolving twice is fine).
        cls = kernel(name)(_module_class.resolve(name, where))
        record_import("class", name)  # a worker process loads it the same way
        return cls
    if cls is None and name in _PROVIDERS:
        import importlib

        importlib.import_module(_PROVIDERS[name])
    with _lock:
        cls = _registry.get(name)
    if cls is not None:
        return cls
    from . import _entry_points  # lazy: importlib.metadata is only needed on a miss

    found = _entry_points.find(name, where)
    if found is not None:
        cls = _register_entry_point(name, found, _entry_points.load(found, name, where), where)
        from ._loading import record_import

        record_import("entry_point", name)  # a worker process loads it the same way
        return cls
    with _lock:
        names = sorted(set(_registry) | set(_PROVIDERS) | set(_entry_points.names()))
    hint = suggest(name, names)
    did_you_mean = f"; did you mean `{hint}`?" if hint else ""
    msg = (
        f"{where}: kernel `{name}` not registered{did_you_mean}. registered: [{', '.join(names)}]; "
        "to use your own kernels, name their module or `.py` file in the graph's `imports:` "
        "or with `--import` on the command line"
    )
    raise UnknownKernelError(msg)


def _register_entry_point(name: str, ep: EntryPoint, loaded: object, where: str) -> type[Kernel]:
    """The kernel an entry point provides: registered by loading it, or the class it names."""
    with _lock:
        cls = _registry.get(name)
    if cls is not None:
        return cls
    if isinstance(loaded, type) and issubclass(loaded, Kernel):
        return kernel(name)(loaded)
    from ._entry_points import describe

    msg = (
        f"{where}: {describe(ep)} loaded {loaded!r}, which registers no kernel `{name}`; point it at "
        f"a flowplex.Kernel subclass, or at a module that registers `{name}` with @flowplex.kernel"
    )
    raise ConfigError(msg)
