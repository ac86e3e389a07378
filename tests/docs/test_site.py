"""The documentation site: ``mkdocs build --strict`` passes, the generated pages cover the code,
and the built pages render in headless Chromium with no console error and no outside request.

The site is built once per session (a real ``mkdocs build`` in a subprocess, into a temporary
directory); the hook's generators are also checked on their own where a build cannot show a
failure cheaply (a public name without a docstring, a kernel whose module cannot be imported).
"""

from __future__ import annotations

import fcntl
import functools
import http.server
import importlib.util
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest


def _require(module: str, reason: str) -> None:
    """Skip without ``module``, or fail under FLOWPLEX_REQUIRE_EXTRAS=1 (CI installs the docs extra)."""
    if importlib.util.find_spec(module) is None:
        if os.environ.get("FLOWPLEX_REQUIRE_EXTRAS") == "1":
            pytest.fail(f"{module} is missing and FLOWPLEX_REQUIRE_EXTRAS=1: {reason}")
        pytest.skip(reason, allow_module_level=True)


_INSTALL = "install the docs extra: pip install -e '.[docs]'"
_require("mkdocs", f"mkdocs builds the site; {_INSTALL}")
_require("material", f"mkdocs-material is the site's theme; {_INSTALL}")
_require("mkdocstrings_handlers.python", f"mkdocstrings[python] renders the API reference; {_INSTALL}")
_require("matplotlib", f"matplotlib draws the benchmark charts; {_INSTALL}")

import griffe  # noqa: E402  (mkdocstrings' own dependency, present once the checks above pass)

ROOT = Path(__file__).resolve().parents[2]
HOOKS = ROOT / "docs" / "_hooks"
CHROMIUM = Path("/usr/bin/chromium")
BUILD_TIMEOUT_S = 300
pytestmark = [
    pytest.mark.timeout(BUILD_TIMEOUT_S + 60),  # the first test also waits for the build (~20 s)
    # One worker runs this module under ``pytest -n --dist loadgroup`` (the others would wait for
    # its build: see ``site``).
    pytest.mark.xdist_group("docs_site"),
]


def _hook_module(name: str) -> ModuleType:
    """One of the hook's generator modules, loaded from docs/_hooks/ (they are not a package)."""
    spec = importlib.util.spec_from_file_location(f"flowplex_docs_{name}", HOOKS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site, built with ``mkdocs build --strict`` from this checkout (once per session).

    Under ``pytest -n`` the workers share one build: the first to need it builds it into the
    session's temporary directory (which they all share), the others wait for it and read it.
    """
    if os.environ.get("PYTEST_XDIST_WORKER") is None:
        out = tmp_path_factory.mktemp("site")
        returncode, stderr = _build(out)
    else:
        shared = tmp_path_factory.getbasetemp().parent  # the session's, above each worker's own
        out, done = shared / "docs-site", shared / "docs-site.json"
        with (shared / "docs-site.lock").open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
            if not done.exists():
                returncode, stderr = _build(out)
                done.write_text(json.dumps([returncode, stderr]), encoding="utf-8")
            returncode, stderr = json.loads(done.read_text(encoding="utf-8"))
    if returncode != 0:
        pytest.fail(f"mkdocs build --strict failed (exit {returncode}):\n{stderr[-4000:]}")
    return out


def _build(out: Path) -> tuple[int, str]:
    """``mkdocs build --strict`` of this checkout into ``out``: its exit status and stderr."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLOWPLEX_")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["NO_MKDOCS_2_WARNING"] = "1"
    env["MPLBACKEND"] = "Agg"
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(ROOT / "mkdocs.yml"),
         "--site-dir", str(out)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S, check=False,
    )
    return result.returncode, result.stderr[-4000:]


# -- the build ----------------------------------------------------------------------------------


def test_strict_build_makes_every_page_and_chart(site: Path) -> None:
    for page in ("index.html", "migrating.html", "benchmarks.html", "agent-terminal.html", "testing.html",
                 "concepts/packets.html", "concepts/timestamps.html", "concepts/input-policies.html",
                 "concepts/backpressure.html", "concepts/executors.html", "reference/yaml.html",
                 "reference/kernels.html", "reference/api/index.html", "reference/api/testing.html"):
        assert (site / page).is_file(), page
    charts = sorted((site / "benchmarks").glob("*.png"))
    assert [c.name for c in charts] == ["vs_lmflow-advantage.png", "vs_lmflow-costs.png", "vs_lmflow-rates.png"]
    for chart in charts:
        assert chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", chart.name
    # The screenshots the agent terminal page shows are copied, and the page links them.
    assert (site / "screenshots" / "agents-160x50.png").is_file()
    assert 'src="screenshots/agents-160x50.png"' in (site / "agent-terminal.html").read_text(encoding="utf-8")


def test_the_benchmark_page_has_every_row_of_the_committed_results(site: Path) -> None:
    results = json.loads((ROOT / "docs" / "benchmarks" / "vs_lmflow.json").read_text(encoding="utf-8"))
    html = (site / "benchmarks.html").read_text(encoding="utf-8")
    assert "<!-- bench:" not in html
    assert results["date"] in html and results["machine"]["cpu"] in html
    for row in results["rows"]:
        assert row["workload"].replace("&", "&amp;") in html, row["workload"]


def test_every_public_name_of_flowplex_and_its_testing_helpers_is_on_the_api_pages(site: Path) -> None:
    import flowplex
    import flowplex.testing

    for module, page in ((flowplex, "index.html"), (flowplex.testing, "testing.html")):
        html = (site / "reference" / "api" / page).read_text(encoding="utf-8")
        missing = [name for name in module.__all__ if f'id="{module.__name__}.{name}"' not in html]
        assert missing == [], f"{page}: no entry for {missing}"


def test_every_public_name_of_flowplex_and_its_testing_helpers_has_a_docstring() -> None:
    package = griffe.load("flowplex", search_paths=[str(ROOT / "src")], resolve_aliases=False, allow_inspection=False)
    undocumented = []
    for module in ("flowplex", "flowplex.testing"):
        obj = package if module == "flowplex" else package[module.removeprefix("flowplex.")]
        names = obj.exports
        assert names, module
        for name in names:
            target = obj[name]
            target = target.final_target if target.is_alias else target
            if target.docstring is None or not target.docstring.value.strip():
                undocumented.append(f"{module}.{name}")
    assert undocumented == []


def test_every_registered_kernel_is_on_the_kernels_page(site: Path) -> None:
    html = (site / "reference" / "kernels.html").read_text(encoding="utf-8")
    # Asked of a fresh interpreter: this one holds the kernels other tests registered.
    code = "import flowplex, flowplex.testing; print('\\n'.join(flowplex.registered_kernels()))"
    listed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    names = listed.stdout.split()
    assert {"ScaleKernel", "TerminalSink", "ScriptedSource"} <= set(names)
    missing = [n for n in names if f'id="kernel-{n.lower()}"' not in html]
    assert missing == []
    # The contract is read from get_contract, not from the prose: Mux declares its selector I64.
    mux = html.split('id="kernel-muxkernel"', 1)[1].split('id="kernel-', 1)[0]
    assert "input 0: I64; output 0: any type." in mux


def test_every_key_of_the_yaml_format_is_on_the_yaml_page(site: Path) -> None:
    from flowplex.config import json_schema

    schema = json_schema()
    html = (site / "reference" / "yaml.html").read_text(encoding="utf-8")
    objects = [schema, *schema["$defs"].values()]
    missing = [key for obj in objects for key in obj["properties"] if f"<code>{key}</code>" not in html]
    assert missing == []
    published = json.loads((site / "reference" / "flowplex-graph.schema.json").read_text(encoding="utf-8"))
    assert published == schema


# -- the generators on their own ----------------------------------------------------------------


def test_a_public_name_without_a_docstring_is_reported(tmp_path: Path) -> None:
    gen_api = _hook_module("gen_api")
    pkg = tmp_path / "flowplex"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text('"""Top."""\nfrom .sub import thing as thing\n__all__ = ["thing", "bare", "K"]\n'
                                     'def bare():\n    pass\nK = 1\n"""A documented constant."""\n')
    (pkg / "sub" / "__init__.py").write_text('"""Sub."""\n__all__ = ["thing"]\ndef thing():\n    """Documented."""\n')
    (pkg / "_private.py").write_text('__all__ = ["hidden"]\n')
    assert gen_api.public_modules(tmp_path) == ["flowplex", "flowplex.sub"]
    package = gen_api.load(tmp_path)
    assert gen_api.undocumented(package, gen_api.public_modules(tmp_path)) == ["flowplex.bare"]


def test_a_kernel_whose_module_cannot_be_imported_is_listed_with_the_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    from flowplex.kernels import _registry

    gen_kernels = _hook_module("gen_kernels")
    monkeypatch.setitem(_registry._PROVIDERS, "DocsMissingExtraSource", "flowplex_docs_no_such_module")
    page = gen_kernels.render()
    section = page.split('### `DocsMissingExtraSource` { #kernel-docsmissingextrasource }', 1)[1]
    assert "No module named 'flowplex_docs_no_such_module'" in section.split("###", 1)[0]
    assert "| [`DocsMissingExtraSource`](#kernel-docsmissingextrasource) | (not importable here) |" in page


def test_a_contract_the_recorder_cannot_read_is_noted_on_the_page(monkeypatch: pytest.MonkeyPatch) -> None:
    import flowplex
    from flowplex.kernels import _registry

    class Future(flowplex.Kernel):
        """Declares its ports with a method the recorder does not have."""

        @staticmethod
        def get_contract(c: object) -> None:
            c.input_set_shape(0, (3, 4))  # type: ignore[attr-defined]

    gen_kernels = _hook_module("gen_kernels")
    monkeypatch.setitem(_registry._registry, "DocsFutureKernel", Future)  # removed again after the test
    page = gen_kernels.render()
    section = page.split("{ #kernel-docsfuturekernel }", 1)[1].split("###", 1)[0]
    assert "Declares its ports with a method the recorder does not have." in section
    assert ("**Contract:** could not be read where this site was built (AttributeError: "
            "'_Recorder' object has no attribute 'input_set_shape')") in section


def test_docstring_sections_become_lists_and_labels_become_bold() -> None:
    gen_kernels = _hook_module("gen_kernels")
    doc = ("Does a thing.\n\nPorts: input 0 I64.\nOptions: none.\n\nOptions:\n    factor: How much\n"
           "        (default 1).\n    mode: ``a`` or ``b``.\n\nSee :class:`~flowplex.agents._restart.RestartPolicy`.")
    assert gen_kernels.docstring_to_markdown(doc) == (
        "Does a thing.\n\n**Ports:** input 0 I64.\n\n**Options:** none.\n\n**Options:**\n\n"
        "- `factor`: How much (default 1).\n- `mode`: ``a`` or ``b``.\n\nSee `RestartPolicy`.\n")


# -- the pages in a browser ---------------------------------------------------------------------


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def served(site: Path) -> Iterator[str]:
    """The built site over HTTP on an ephemeral localhost port."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_QuietHandler, directory=str(site)))
    thread = threading.Thread(target=server.serve_forever, name="docs-http", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def test_home_and_api_pages_render_with_no_console_error_and_no_outside_request(
    served: str, tmp_path: Path
) -> None:
    if not CHROMIUM.exists():
        if os.environ.get("FLOWPLEX_REQUIRE_EXTRAS") == "1":
            pytest.fail(f"{CHROMIUM} is missing and FLOWPLEX_REQUIRE_EXTRAS=1")
        pytest.skip(f"no {CHROMIUM} to open the site in (apt-get install chromium)")
    _require("playwright", f"playwright drives headless Chromium; {_INSTALL}")
    from playwright.sync_api import sync_playwright

    problems: list[str] = []

    def only_localhost(route: Any) -> None:
        url = route.request.url
        if url.startswith((served + "/", "data:")):
            route.continue_()
        else:
            problems.append(f"outside request: {url}")
            route.abort()

    def visit(context: Any, *paths: str) -> list[Any]:
        """Fresh pages at ``paths``, loaded side by side until the network of each is idle; their
        problems are recorded."""
        pages = []
        for path in paths:
            page = context.new_page()
            seen: list[str] = []
            page.on("console",
                    lambda m, path=path, seen=seen: seen.append(f"{path}: console {m.type}: {m.text}")
                    if m.type == "error" else None)
            page.on("pageerror", lambda e, path=path, seen=seen: seen.append(f"{path}: page error: {e}"))
            page.on("requestfailed",
                    lambda r, path=path, seen=seen: seen.append(f"{path}: request failed: {r.url} ({r.failure})"))
            page.goto(f"{served}/{path}", wait_until="commit")  # the pages load at once: see below
            pages.append((page, seen))
        for page, seen in pages:
            page.wait_for_load_state("networkidle")  # as goto(wait_until="networkidle") waits
            problems.extend(seen)  # recorded before the page closes: closing may abort what is left
        return [page for page, _ in pages]

    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=str(CHROMIUM), headless=True,
            args=["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"],
        )
        try:
            context = browser.new_context()
            context.route("**/*", only_localhost)
            home, api = visit(context, "index.html", "reference/api/index.html")
            assert home.title().startswith("flowplex")
            assert home.locator("h1").first.inner_text().rstrip("¶") == "flowplex"
            assert home.locator("nav").count() > 0
            home.close()
            assert api.locator('[id="flowplex.Graph"]').count() == 1
            assert api.locator('[id="flowplex.Graph.from_yaml"]').count() == 1
            assert api.locator('[id="flowplex.kernel"]').count() == 1
            api.close()
        finally:
            browser.close()
    assert problems == []
