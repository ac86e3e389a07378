"""``kernel: mypkg.vision:Features``: kernels named by module and class, resolved while the document loads.

Such a reference is kernel code the document asks for, like an ``imports`` entry: it is imported
when the graph loads, so that ``flowplex check`` reports one that is wrong, with the node's path
and line (a kernel *name* that is not registered is only reported when the graph is built). The
registry does the work (``kernels._registry.kernel_class``) and keeps the class for the build.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..kernels._module_class import is_module_class
from ..kernels._registry import kernel_class
from ..spec._specs import NodeSpec
from ._convert import NodeSite

__all__ = ["resolve_module_classes"]


def resolve_module_classes(nodes: Sequence[NodeSpec], sites: Sequence[NodeSite]) -> None:
    """Import and check the class of every node whose kernel is a ``module:Class`` reference.

    Args:
        nodes: The expanded nodes.
        sites: Where each was written (``sites[i]`` belongs to ``nodes[i]``).

    Raises:
        ConfigError: A reference is malformed, its module fails to import or it names something
            that is not a ``Kernel`` subclass; ``UnknownKernelError`` (a ``ConfigError``) when
            its module or class does not exist. The message starts with ``file:LINE: nodes[i].kernel``.
    """
    for node, site in zip(nodes, sites, strict=True):
        if is_module_class(node.kernel):
            kernel_class(node.kernel, where=site.where(("kernel",)))
