"""Importing the user's kernel code: a module by name or a ``.py`` file by path.

``--import X`` on the command line and a graph's ``imports: [X, ...]`` both end here. Importing
a kernel module registers its ``@kernel`` classes as a side effect; this module only makes that
import happen once, and turns its failures into one ``ConfigError`` line that says where the
import was asked for (``g.yaml:3: imports[0]`` or ``--import mypkg``), with the cause chained.

A target is a **file** when it ends in ``.py`` or contains a path separator, else a **module
name** (``mypkg.kernels``) imported from ``sys.path`` as ``import`` would. A file is executed
once per real path, as a module named ``flowplex_import_<stem>_<hash>`` registered in
``sys.modules`` (so dataclasses and pickling work); its directory is *not* put on ``sys.path``,
so a file cannot shadow an installed module. A file that is already imported under another name
(it is on ``sys.path`` and was imported by module name) is not executed a second time, nor is a
module imported by name after its file was imported by path (the name then aliases that module).
"""

from __future__ import annotations

import errno
import hashlib
import importlib
import importlib.util
import os
import re
import stat
import sys
import threading
from pathlib import Path
from typing import Final

from ..errors import ConfigError

__all__ = ["describe_exception", "file_module_name", "import_target", "imports_so_far", "is_file_target",
           "record_import"]

_FILE_PREFIX: Final = "flowplex_import_"
_lock: Final = threading.RLock()  # re-entrant: a kernel file may itself load a graph with imports
_history: Final[dict[tuple[str, str], None]] = {}
"""What this process loaded for kernels, in order (an ordered set): see ``imports_so_far``."""


def is_file_target(target: str) -> bool:
    """Whether ``target`` names a ``.py`` file rather than a module.

    >>> is_file_target("mypkg.kernels"), is_file_target("../kernels/mine.py"), is_file_target("k/x")
    (False, True, True)
    """
    return target.endswith(".py") or "/" in target or os.sep in target


def import_target(target: str, *, base: Path, where: str) -> str:
    """Import a module name or a ``.py`` file (once), so that its kernels register.

    Args:
        target: ``mypkg.kernels`` or ``path/to/kernels.py``.
        base: The directory a relative file path is resolved against.
        where: Where the import was asked for, the prefix of every message
            (``g.yaml:3: imports[0]``, ``--import mypkg``).

    Returns:
        The target in a form that imports the same code from anywhere: the module name, or the
        file's absolute path.

    Raises:
        ConfigError: The module or file cannot be found, or running it raised (chained), any
            ``BaseException`` included (``SystemExit``: a module may not end the program).
        KeyboardInterrupt: On the main thread, where it may be the user's Ctrl-C; it carries
            ``{where}: cannot import ...`` as a note.
    """
    if is_file_target(target):
        path = Path(os.path.abspath(base / os.path.expanduser(target)))
        _import_file(path, target, where)
        record_import("file", str(path))
        return str(path)
    if not all(part.isidentifier() for part in target.split(".")):
        msg = (
            f"{where}: `{target}` is neither a module name (like `mypkg.kernels`) "
            "nor a path to a `.py` file"
        )
        raise ConfigError(msg)
    try:
        if target not in sys.modules:
            _alias_loaded_file(target)
        importlib.import_module(target)
    except BaseException as exc:  # SystemExit too: a module's exit is a failed import
        _let_interrupt_through(exc, f"{where}: cannot import module `{target}`")
        msg = f"{where}: cannot import module `{target}`: {describe_exception(exc)}"
        raise ConfigError(msg) from exc
    record_import("module", target)
    return target


def record_import(kind: str, value: str) -> None:
    """Note that this process loaded kernel code: a ``module`` by name, a ``file`` by absolute
    path, the ``entry_point`` of a kernel name, or the ``class`` of a ``module:Class`` kernel
    name (``imports_so_far`` lists them)."""
    with _lock:
        _history[(kind, value)] = None


def imports_so_far() -> tuple[tuple[str, str], ...]:
    """Every ``(kind, value)`` that ``record_import`` noted, in the order first noted.

    A worker process replays them before it builds kernels, so that it loads the graph's
    ``imports:``, ``--import`` targets, ``flowplex.kernels`` entry points and ``module:Class``
    kernels as this process did.
    """
    with _lock:
        return tuple(_history)


def _import_file(path: Path, shown: str, where: str) -> None:
    what = _not_a_file(path)
    if what:
        msg = f"{where}: cannot import file `{shown}`: {what} ({path})"
        raise ConfigError(msg)
    real = os.path.realpath(path)
    name = _module_name(real)
    with _lock:
        if name in sys.modules or _loaded_as_module(real):
            return
        spec = importlib.util.spec_from_file_location(name, real)
        if spec is None or spec.loader is None:  # a path given without the `.py` suffix
            msg = f"{where}: cannot import file `{shown}`: not a Python source file (name it `.py`) ({path})"
            raise ConfigError(msg)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # before running it: dataclasses and pickle look it up there
        try:
            spec.loader.exec_module(module)
        except BaseException as exc:  # SystemExit too: a file's exit is a failed import
            del sys.modules[name]
            _let_interrupt_through(exc, f"{where}: cannot import file `{shown}`")
            msg = f"{where}: cannot import file `{shown}`: {describe_exception(exc)}"
            raise ConfigError(msg) from exc


def _let_interrupt_through(exc: BaseException, where: str) -> None:
    """Re-raise ``exc`` when it may be the user's Ctrl-C: a ``KeyboardInterrupt`` on the main
    thread (signals arrive there; anything else, ``SystemExit`` included, is the module's own
    failure). It carries ``where`` as a note, for a caller that knows no signal came (the CLI)."""
    if isinstance(exc, KeyboardInterrupt) and threading.current_thread() is threading.main_thread():
        exc.add_note(where)
        raise exc


def _not_a_file(path: Path) -> str:
    """Why ``path`` cannot be imported as a file ("" when it is a regular file), without opening
    it: a FIFO would block the open until a writer came."""
    try:
        mode = path.stat().st_mode
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "a symlink loop"
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            return "no such file"
        return f"cannot read it: {exc.strerror or exc}"
    if stat.S_ISREG(mode):
        return ""
    if stat.S_ISDIR(mode):
        return "is a directory, not a `.py` file"
    if stat.S_ISFIFO(mode):
        return "not a regular file: a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "not a regular file: a device"
    if stat.S_ISSOCK(mode):
        return "not a regular file: a socket"
    return "not a regular file"


def _alias_loaded_file(target: str) -> None:
    """If module ``target`` is a file already imported by path, make ``target`` name that module.

    Importing it afresh would run the file a second time and register its kernels twice.
    """
    with _lock:
        if not any(name.startswith(_FILE_PREFIX) for name in sys.modules):
            return
        spec = importlib.util.find_spec(target)
        if spec is None or not spec.has_location or spec.origin is None:
            return
        loaded = sys.modules.get(_module_name(os.path.realpath(spec.origin)))
        if loaded is not None:
            sys.modules[target] = loaded


def file_module_name(path: str) -> str:
    """The name in ``sys.modules`` of the ``.py`` file ``path`` once ``import_target`` ran it."""
    return _module_name(os.path.realpath(path))


def _module_name(real: str) -> str:
    """``flowplex_import_<stem>_<hash of the real path>``: unique, stable, and a valid identifier."""
    stem = re.sub(r"\W", "_", Path(real).stem)
    digest = hashlib.sha256(real.encode("utf-8", "surrogateescape")).hexdigest()[:10]
    return f"{_FILE_PREFIX}{stem}_{digest}"


def _loaded_as_module(real: str) -> bool:
    """Whether some imported module was loaded from the file ``real`` (by its module name)."""
    base = os.path.basename(real)
    for module in list(sys.modules.values()):
        file = getattr(module, "__file__", None)
        if isinstance(file, str) and os.path.basename(file) == base and os.path.realpath(file) == real:
            return True
    return False


def describe_exception(exc: BaseException) -> str:
    """``ModuleNotFoundError: No module named 'x'`` -- the first line of the cause."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__
