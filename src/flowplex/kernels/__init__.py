"""Kernels: the ``Kernel`` base class, the registry, contracts, contexts and the runner."""

from ._context import CloseReason as CloseReason
from ._context import Context as Context
from ._contract import Contract as Contract
from ._registry import Kernel as Kernel
from ._registry import kernel as kernel
from ._registry import kernel_class as kernel_class
from ._registry import registered_kernels as registered_kernels
from ._runner import KernelRunner as KernelRunner

__all__ = ["CloseReason", "Context", "Contract", "Kernel", "KernelRunner", "kernel", "kernel_class",
           "registered_kernels"]

# The built-in kernels register with the package, so that any use of the registry (a graph
# build, ``registered_kernels``, ``@kernel``'s duplicate check) sees them.
from . import _builtins as _builtins
