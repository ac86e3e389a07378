"""Registers lm-flow's 18 built-in kernels under their lm-flow names by importing their families.

``flowplex/__init__.py`` imports this module, so ``import flowplex`` is enough to use them.
"""

from __future__ import annotations

from . import _flow as _flow
from . import _math as _math
from . import _tensor as _tensor

__all__: list[str] = []
