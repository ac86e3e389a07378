"""mkdocs hook: the pages and charts made from the code at build time (named in mkdocs.yml).

- ``reference/yaml.md`` and ``reference/flowplex-graph.schema.json`` from the JSON Schema
  (``gen_schema``);
- ``reference/kernels.md`` from the kernel registry (``gen_kernels``);
- ``reference/api/*.md``, one per public module, rendered by mkdocstrings (``gen_api``); a public
  name without a docstring is a warning, so ``mkdocs build --strict`` fails on it;
- the benchmark tables and PNG charts from ``docs/benchmarks/*.json`` (``gen_bench``);
- the architecture page's pictures: the parts from the imports in ``src/``, one packet's path
  from the functions the page names, each of which must exist (``gen_architecture``).

Everything is made from this checkout's ``src/`` (put first on ``sys.path``), in memory, in a
fixed order: two builds of the same sources give the same generated pages and charts.
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import Any

import gen_api
import gen_architecture
import gen_bench
import gen_kernels
import gen_schema
from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src"
log = logging.getLogger("mkdocs.hooks.flowplex")  # under "mkdocs": --strict counts its warnings

_API_SECTION = "API reference"
_state: dict[str, Any] = {}


def on_startup(command: str, dirty: bool) -> None:
    if str(SRC) not in sys.path:
        sys.path.insert(0, str(SRC))
    os.environ.setdefault("MPLBACKEND", "Agg")


def on_config(config: Any) -> Any:
    """Fill the nav's API section with one page per public module, the package first."""
    api_pages = gen_api.pages(SRC)
    _state["api_pages"] = api_pages
    for entry in config["nav"] or []:
        if isinstance(entry, dict) and _API_SECTION in entry:
            entry[_API_SECTION] = [{p.title: f"reference/api/{p.path}"} for p in api_pages]
    return config


def on_files(files: Files, config: Any) -> Files:
    """Add the generated pages and charts to the site's files."""
    from flowplex.config import json_schema

    for path, text in gen_schema.schema_files(json_schema()).items():
        files.append(File.generated(config, f"reference/{path}", content=text))
    files.append(File.generated(config, "reference/kernels.md", content=gen_kernels.render()))

    package = gen_api.load(SRC)
    api_pages: list[gen_api.ApiPage] = _state["api_pages"]
    for name in gen_api.undocumented(package, [p.module for p in api_pages]):
        log.warning("public name %s has no docstring (the API reference would show it bare)", name)
    for page in api_pages:
        files.append(File.generated(config, f"reference/api/{page.path}",
                                    content=gen_api.render(package, page, api_pages)))

    fragments: dict[str, str] = {}
    for name, result in gen_bench.load(Path(config["docs_dir"]) / "benchmarks").items():
        pngs = gen_bench.charts(name, result)
        for file_name, data in pngs.items():
            files.append(File.generated(config, f"benchmarks/{file_name}", content=data))
        fragments[name] = gen_bench.markdown(name, result, list(pngs))
    _state["bench"] = fragments
    files.append(File.generated(config, "architecture-parts.svg", content=gen_architecture.parts_svg(SRC)))
    page = Path(config["docs_dir"]) / "architecture.md"
    steps = gen_architecture.packet_path(page.read_text(encoding="utf-8")) if page.exists() else []
    files.append(File.generated(config, "architecture-path.svg", content=gen_architecture.path_svg(steps)))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    """Put each benchmark's table and charts where ``<!-- bench:NAME -->`` stands, and the
    architecture pictures where their markers stand."""
    if "<!-- packet-path" in markdown:
        markdown = _packet_path(markdown, page)
    for name, fragment in _state.get("bench", {}).items():
        markdown = markdown.replace(f"<!-- bench:{name} -->", fragment)
    if "<!-- bench:" in markdown:
        missing = markdown.split("<!-- bench:", 1)[1].split(" -->", 1)[0]
        log.warning("%s: no docs/benchmarks/%s.json for the marker <!-- bench:%s -->",
                    page.file.src_uri, missing, missing)
    return markdown


def _packet_path(markdown: str, page: Any) -> str:
    """Put the packet path's picture and a table of its steps where the page lists them."""
    steps = gen_architecture.packet_path(markdown)
    for name in gen_architecture.missing_steps(steps):
        log.warning("%s: the packet path names %s, which the code no longer has", page.file.src_uri, name)
    rows = ["| step | function | what happens |", "|---|---|---|"]
    rows += [f"| {i} | `{s.name}` | {s.what.replace('|', '&#124;')} |" for i, s in enumerate(steps, 1)]
    table = "\n".join(rows)
    picture = "![One packet's path through the engine](architecture-path.svg)"
    return gen_architecture.replace_path_block(markdown, f"{picture}\n\n{table}\n")
