"""docs/recording.md runs: its Python blocks, in order, in one namespace (a block may use what an
earlier one made), in a directory of their own; its YAML graphs load.

The blocks check themselves with ``assert``; a block that fails names its first line.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from flowplex.config import load_yaml

PAGE = Path(__file__).resolve().parents[2] / "docs" / "recording.md"


def blocks(language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```$", PAGE.read_text(encoding="utf-8"), re.S | re.M)


def test_the_python_blocks_run_in_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    code = blocks("python")
    assert len(code) >= 5  # record, read, Recorder, compare, the plain mcap reader
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": "recording_md"}
    for i, block in enumerate(code):
        try:
            exec(compile(block, f"{PAGE.name}, python block {i + 1}", "exec"), namespace)
        except Exception as exc:
            first = block.strip().splitlines()[0]
            pytest.fail(f"python block {i + 1} (starting {first!r}) failed: {exc!r}")


def test_the_yaml_graphs_load() -> None:
    graphs = blocks("yaml")
    assert graphs
    for text in graphs:
        assert load_yaml(text).nodes
