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


def _command_lines() -> list[list[str]]:
    """Each ``flowplex CMD ...`` of the page's ``sh`` blocks, as words (continued lines joined,
    comments and ``[ ] |`` left out)."""
    found: list[list[str]] = []
    for block in blocks("sh"):
        for line in block.replace("\\\n", " ").splitlines():
            words = re.sub(r"[\[\]|]", " ", line.split("#", 1)[0]).split()
            if words[:1] == ["flowplex"]:
                found.append(words[1:])
    return found


def test_every_option_the_commands_show_is_in_their_help() -> None:
    """The synopses and examples name real commands and real options (what ``--help`` lists)."""
    import typer.main

    from flowplex.cli import app

    group = typer.main.get_command(app)
    lines = _command_lines()
    assert {words[0] for words in lines} >= {"run", "record", "agents", "replay", "inspect", "diff"}
    for words in lines:
        command = group.commands[words[0]]  # type: ignore[attr-defined]
        options = {o for p in command.params for o in (*p.opts, *p.secondary_opts)}
        for word in words[1:]:
            flag = word.split("=", 1)[0]
            if flag.startswith("-") and flag != "--":
                assert flag in options, f"flowplex {words[0]}: no option {flag} (it has {sorted(options)})"
