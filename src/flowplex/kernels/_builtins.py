"""Registers lm-flow's 18 built-in kernels under their lm-flow names by importing their families.

``flowplex/__init__.py`` imports this module, so ``import flowplex`` is enough to use them. The
buffer kernels (``_tensor``, which needs numpy) register on first use instead, through the
registry's ``_PROVIDERS``; importing this module registers the other twelve.
"""

from __future__ import annotations

from . import _flow as _flow
from . import _math as _math

__all__: list[str] = []
