"""Kernels the ``module:Class`` tests name by reference: none is registered by name.

In a module (not a test file) because graphs name it by module path, and worker processes import
it by reference too.
"""

from __future__ import annotations

import os

import flowplex

PROBE = f"{__name__}:Probe"
"""``Probe``'s reference, as a graph names it."""


class AddOne(flowplex.Kernel):
    """Emits its input plus one."""

    def process(self, cc: flowplex.Context) -> None:
        cc.emit(0, cc.input(0).as_int() + 1)


class Outer:
    """Not a kernel: holds one."""

    class Times10(flowplex.Kernel):
        """Emits ten times its input (a nested class: ``Outer.Times10``)."""

        def process(self, cc: flowplex.Context) -> None:
            cc.emit(0, cc.input(0).as_int() * 10)


class Probe(flowplex.Kernel):
    """Emits ``"<pid> <whether PROBE is registered in this process>"`` for each input."""

    def process(self, cc: flowplex.Context) -> None:
        cc.emit(0, f"{os.getpid()} {PROBE in flowplex.registered_kernels()}")


class NotAKernel:
    """A class that does not subclass ``flowplex.Kernel``."""


def helper() -> None:
    """A function, not a kernel."""


instance = AddOne()
"""A kernel instance, not a class."""
