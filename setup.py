"""Build hook for the optional compiled parts; every other setting is in pyproject.toml.

Two optional speed-ups, each with a complete pure-Python equivalent that is always installed:

- ``flowplex.transport._fastring``: the ring transport's hot paths, written in C.
- The scheduler's per-packet path (``flowplex._native.COMPILED``), compiled from its own typed
  Python sources by mypyc: the same code, about twice as fast per packet.

Where no C compiler or Python headers are available, or mypyc cannot be imported, the build
prints a warning and installs the package without them. ``FLOWPLEX_PURE_PYTHON=1`` at build
time skips the mypyc step; at run time it makes flowplex load the Python sources instead.
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE / "src" / "flowplex"))
import _native  # noqa: E402  (the list of compiled modules, shared with the run-time check)

sys.path.pop(0)


def _source(module: str) -> Path:
    return Path(_native.source_path(module, str(HERE / "src" / "flowplex")))


def _mypyc_extensions() -> list[Extension]:
    if os.environ.get("FLOWPLEX_PURE_PYTHON", "") not in ("", "0"):
        return []
    try:
        from mypyc.build import mypycify
    except ImportError:
        print("flowplex: mypyc is not available; installing the scheduler as pure Python", file=sys.stderr)
        return []
    # The type check that compiling needs, made independent of the environment: an isolated
    # build env has no numpy or pydantic (their types become `Any`, which still compiles), so
    # neither the project's strict settings nor a developer's .mypy_cache may take part.
    # Errors in the modules that are only imported, not compiled, are not the build's business.
    work = Path(tempfile.mkdtemp(prefix="flowplex-mypyc-"))
    atexit.register(shutil.rmtree, work, ignore_errors=True)
    config = work / "mypy.ini"
    config.write_text("[mypy]\nignore_missing_imports = True\nfollow_imports = silent\n")
    flags = ["--config-file", str(config), "--cache-dir", str(work / "cache")]
    sources = [str(_source(m).relative_to(HERE)) for m in _native.COMPILED]  # relative, as mypycify wants
    try:
        return list(mypycify([*flags, *sources], opt_level="3", group_name=_native.GROUP))
    except (Exception, SystemExit) as exc:  # mypyc exits on a type error (say, a newer mypy's)
        print(f"flowplex: mypyc cannot compile the scheduler ({exc!r}); installing it as pure Python",
              file=sys.stderr)
        return []


class BuildExt(build_ext):
    """``build_ext`` that treats the mypyc group as optional, all or nothing.

    Its modules share one runtime library, so a partly built group would not import: on any
    compile error the whole group is dropped (with a warning) and the sources are used. After a
    successful build it records a hash of each compiled module's source, so that a source
    edited later (an editable install) is loaded instead of its stale compiled twin.
    """

    def run(self) -> None:
        everything = list(self.extensions)
        native = [e for e in everything if _is_native(e)]
        compiler = self.compiler  # run() replaces the name with an object; a second run needs the name
        try:
            self.extensions = [e for e in everything if not _is_native(e)]
            super().run()
            if native:
                self.compiler = compiler
                self._run_native(native)
        finally:
            self.extensions = everything

    def _run_native(self, native: list[Extension]) -> None:
        self.extensions = native
        try:
            super().run()
        except Exception as exc:  # a compiler failure of any kind: fall back to the sources
            print(f"flowplex: could not compile the scheduler ({exc}); installing it as pure Python",
                  file=sys.stderr)
            for ext in native:
                Path(self.get_ext_fullpath(ext.name)).unlink(missing_ok=True)
            return
        package = Path(self.get_ext_fullpath(_native.COMPILED[0])).parents[1]
        _native.write_stamp(str(package), {m: str(_source(m)) for m in _native.COMPILED})


def _is_native(ext: Extension) -> bool:
    return ext.name in _native.COMPILED or ext.name.endswith("__mypyc")


setup(
    ext_modules=[
        Extension(
            "flowplex.transport._fastring",
            sources=["src/flowplex/transport/_fastring.c"],
            extra_compile_args=["-O2"],
            optional=True,
        ),
        *_mypyc_extensions(),
    ],
    cmdclass={"build_ext": BuildExt},
)
