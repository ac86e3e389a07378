"""Repository-level pytest settings (the test fixtures live in tests/conftest.py)."""

from __future__ import annotations

from flowplex import _native

# --doctest-modules imports each source file under src/ by path; a module that this install
# loads compiled (see flowplex._native) would clash with its compiled twin. They hold no doctests.
collect_ignore = ["src/" + "/".join(module.split(".")) + ".py" for module in _native.COMPILED]
