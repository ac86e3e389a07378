"""The architecture page cannot go stale: its pictures come from the code, and what it names exists.

``docs/_hooks/gen_architecture.py`` draws the parts from the imports in ``src/`` and the packet
path from the functions the page lists; these checks run without mkdocs (the site build in
``test_site.py`` also fails on a missing step, as a strict-mode warning).
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import flowplex

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "architecture.md"
SRC = Path(flowplex.__file__).parent


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("flowplex_docs_gen_architecture",
                                                  ROOT / "docs" / "_hooks" / "gen_architecture.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


gen = _generator()


def _parts_in_source() -> set[str]:
    parts = {p.name for p in SRC.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    parts |= {p.stem for p in SRC.glob("*.py") if p.stem not in ("__init__", "__main__")}
    return parts | set(gen.SUBPARTS)


def test_every_step_of_the_packet_path_exists_in_the_code() -> None:
    steps = gen.packet_path(PAGE.read_text(encoding="utf-8"))
    assert len(steps) >= 6, "the page lists the packet path's steps in a <!-- packet-path --> block"
    assert gen.missing_steps(steps) == []
    assert all(callable(gen.resolve(s.name)) for s in steps)


def test_the_tap_point_is_one_of_the_steps() -> None:
    """The page says where taps and recorders attach, and that place is a step of the path."""
    steps = gen.packet_path(PAGE.read_text(encoding="utf-8"))
    taps = [s for s in steps if "tap" in s.what.lower()]
    assert len(taps) == 1, [s.name for s in steps]


def test_a_renamed_step_is_reported() -> None:
    """Guards the checker itself: a name the code lacks is found, a real one is not."""
    steps = [gen.Step("flowplex.graph.Graph.send", "real"), gen.Step("flowplex.graph.Graph.no_such", "gone"),
             gen.Step("flowplex.no_such_module.f", "gone")]
    assert gen.missing_steps(steps) == ["flowplex.graph.Graph.no_such", "flowplex.no_such_module.f"]


def test_the_parts_picture_shows_every_part_of_the_source() -> None:
    svg = gen.parts_svg(SRC.parent)
    drawn = set(re.findall(r"<text [^>]*>([^<]+)</text>", svg))
    names = {n for label in drawn for n in label.split(" + ")}
    leaves = gen.leaf_parts(SRC.parent)
    assert _parts_in_source() - leaves <= names
    assert gen.LEAF_BOX in names


def test_the_page_says_what_each_part_does() -> None:
    """Each part drawn in the picture has a line in the page's table of parts."""
    text = PAGE.read_text(encoding="utf-8")
    described = set(re.findall(r"^\| `([^`]+)` \|", text, re.M))
    leaves = gen.leaf_parts(SRC.parent)
    assert sorted(_parts_in_source() - leaves - described) == []

