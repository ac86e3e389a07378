"""Helpers shared by the config tests."""

from __future__ import annotations

import re
import textwrap

import pytest

from flowplex.config import load_yaml
from flowplex.errors import ConfigError


def dedent(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def load_error(text: str) -> str:
    """The message of the ConfigError that loading ``text`` raises."""
    with pytest.raises(ConfigError) as info:
        load_yaml(dedent(text))
    return str(info.value)


def assert_error(text: str, pattern: str) -> None:
    """Loading ``text`` fails with a message matching ``pattern`` (``re.search``)."""
    message = load_error(text)
    assert re.search(pattern, message), f"{message!r} does not match {pattern!r}"
