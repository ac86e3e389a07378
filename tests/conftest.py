"""Shared test configuration: hypothesis profiles and a clean environment."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci",
    max_examples=60,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("dev", max_examples=300, deadline=None)
settings.load_profile(os.environ.get("FLOWPLEX_HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Strip FLOWPLEX_* variables so a developer's shell cannot change test outcomes."""
    for key in list(os.environ):
        if key.startswith("FLOWPLEX_") and key != "FLOWPLEX_REQUIRE_EXTRAS":
            monkeypatch.delenv(key, raising=False)
