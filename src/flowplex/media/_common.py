"""What the media kernels share: importing the extra, reading their options, pacing by timestamps."""

from __future__ import annotations

import json
import math
import os
import re
import stat
import time
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING, Final

from .._log import LogLevel
from .._suggest import suggest
from ..errors import ConfigError
from ..kernels import Context

if TYPE_CHECKING:
    from ..packets import Packet

__all__ = ["INSTALL_HINT", "Options", "Pacer", "import_av", "import_soundfile", "option_error", "refuse_special_file",
           "shown_path", "step_source", "warn"]

INSTALL_HINT: Final = "pip install 'flowplex[media]'"
"""The line that installs the media extra (PyAV and soundfile)."""


def option_error(cc: Context, key: str, problem: str) -> ConfigError:
    """``node 'x' (Kernel): options.key: problem`` -- the form every option error takes."""
    return ConfigError(f"node '{cc.node_name}' ({cc.kernel_name}): options.{key}: {problem}")


def warn(cc: Context, msg: str) -> None:
    """A warning on the node's log channel (``[node] msg``): ``flowplex run`` prints it, a
    process-pool worker forwards it, ``set_log_callback`` receives it."""
    cc.log(LogLevel.WARN, msg)


_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]+:")
"""A URL or an FFmpeg protocol (``rtsp://``, ``pipe:``): two letters at least, so a path is not one."""
_USERINFO = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*://)[^/?#]*@")


def shown_path(path: str) -> str:
    """``path`` fit for a message: a URL's user and password (``rtsp://admin:pw@cam/``, common
    for IP cameras) become ``***``.

    >>> shown_path("rtsp://admin:pw@10.0.0.7/stream"), shown_path("clip.mp4")
    ('rtsp://***@10.0.0.7/stream', 'clip.mp4')
    """
    return _USERINFO.sub(r"\1***@", path)


_SPECIAL_KINDS: Final = ((stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISSOCK, "a socket"),
                         (stat.S_ISDIR, "a directory"), (stat.S_ISCHR, "a character device"),
                         (stat.S_ISBLK, "a block device"))


def refuse_special_file(cc: Context, path: str, *, device_format: str | None = None, writing: bool = False) -> None:
    """Refuse a local ``path`` that is not a regular file, before anything opens it.

    Opening a FIFO blocks until a peer opens its other end, in the kernel, where no timeout
    reaches (the include loader and the agents file refuse them for the same reason); a
    directory or a socket is a mistake. A capture device is fine when ``device_format`` names
    its input format (``v4l2`` for ``/dev/video0``), and a sink may write to a character device
    (``/dev/null``). URLs and FFmpeg protocols are not files;
    a path that does not exist is left to the opener's own message. ``stat`` never blocks.

    Raises:
        ConfigError: ``options.path`` names a FIFO, socket, directory or (without a format) device.
    """
    local = path.removeprefix("file:")
    if local == path and _URL.match(path):
        return
    try:
        mode = os.stat(local).st_mode
    except (OSError, ValueError):  # missing, or a name the OS refuses: the opener says so
        return
    if stat.S_ISREG(mode) or (device_format and (stat.S_ISCHR(mode) or stat.S_ISBLK(mode))):
        return
    if writing and stat.S_ISCHR(mode):  # /dev/null: a sink whose output is not wanted
        return
    kind = next((name for test, name in _SPECIAL_KINDS if test(mode)), "not a regular file")
    files = f"{cc.kernel_name} {'writes' if writing else 'reads'} regular files"
    if stat.S_ISDIR(mode):
        hint = "name a file in it"
    elif (stat.S_ISCHR(mode) or stat.S_ISBLK(mode)) and not writing and cc.kernel_name.startswith("Video"):
        hint = "a capture device needs its input format: set format (v4l2 for /dev/video0)"
    elif stat.S_ISFIFO(mode):
        instead = "write a file and copy it" if writing else "save the stream to a file"
        if not writing and cc.kernel_name.startswith("Video"):
            instead += ", or serve it as a URL"
        hint = f"opening it would wait for a {'reader' if writing else 'writer'} without end; {instead}"
    else:
        hint = files
    raise option_error(cc, "path", f"{shown_path(path)!r} is {kind}, not a regular file; {hint}")


def _missing_extra(cc: Context, package: str, exc: Exception) -> ConfigError:
    return ConfigError(f"node '{cc.node_name}' ({cc.kernel_name}) needs {package}, which cannot be imported "
                       f"({exc}); install the media extra with: {INSTALL_HINT}")


def import_av(cc: Context) -> ModuleType:
    """PyAV, imported now (the video kernels call it in ``open``).

    Raises:
        ConfigError: PyAV is not installed; the message gives the ``pip install`` line.
    """
    try:
        import av
    except ImportError as exc:
        raise _missing_extra(cc, "PyAV", exc) from None
    module: ModuleType = av
    return module


def import_soundfile(cc: Context) -> ModuleType:
    """soundfile, imported now (the audio kernels call it in ``open``).

    Raises:
        ConfigError: soundfile (or its libsndfile) is missing; the message gives the ``pip
            install`` line.
    """
    try:
        import soundfile  # type: ignore[import-untyped]  # ships no type information
    except (ImportError, OSError) as exc:  # OSError: the package is there but libsndfile is not
        raise _missing_extra(cc, "soundfile", exc) from None
    module: ModuleType = soundfile
    return module


class Options:
    """A node's options read strictly: a value of the wrong type is an error, not the default.

    A key the kernel does not take (``known``) is an error too, with a did-you-mean.

    The ``Context`` getters fall back to the default on a type mismatch (lm-flow's rule); a
    media option given as ``loop: yes`` or ``fps: "30"`` is more likely a mistake than a wish for
    the default, so these kernels say so.
    """

    __slots__ = ("_cc", "_values")

    def __init__(self, cc: Context, known: tuple[str, ...]) -> None:
        self._cc = cc
        values = json.loads(cc.options_json())
        self._values: dict[str, object] = values if isinstance(values, dict) else {}
        for key in self._values:
            if key not in known:
                hint = suggest(key, known)
                did_you_mean = f"did you mean `{hint}`? " if hint else ""
                problem = f"unknown option; {did_you_mean}{cc.kernel_name} takes {', '.join(known)}"
                raise option_error(cc, key, problem)

    def raw(self, key: str) -> object:
        """The value of ``key`` as parsed from YAML (None when not given)."""
        return self._values.get(key)

    def has(self, key: str) -> bool:
        """Whether ``key`` is given (and not null)."""
        return self._values.get(key) is not None

    def string(self, key: str, default: str = "", *, required: str = "") -> str:
        """A string option; ``required`` (the hint) makes a missing one an error."""
        value = self._values.get(key)
        if value is None:
            if required:
                raise option_error(self._cc, key, f"missing; {required}")
            return default
        if not isinstance(value, str) or (required and not value):
            raise option_error(self._cc, key, f"expected a non-empty string, got {value!r}")
        return value

    def choice(self, key: str, default: str, choices: tuple[str, ...]) -> str:
        """A string option that must be one of ``choices``."""
        value = self.string(key, default)
        if value not in choices:
            raise option_error(self._cc, key, f"{value!r} is not one of {', '.join(choices)}")
        return value

    def boolean(self, key: str, default: bool) -> bool:
        """A YAML boolean."""
        value = self._values.get(key)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise option_error(self._cc, key, f"expected true or false, got {value!r}")
        return value

    def number(self, key: str, *, minimum: float = -math.inf, above: float | None = None) -> float | None:
        """A finite number (int or float), or None when not given."""
        value = self._values.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise option_error(self._cc, key, f"expected a number, got {value!r}")
        if value < minimum:
            raise option_error(self._cc, key, f"must be >= {minimum:g}, got {value!r}")
        if above is not None and value <= above:
            raise option_error(self._cc, key, f"must be > {above:g}, got {value!r}")
        return float(value)

    def integer(self, key: str, default: int, *, minimum: int) -> int:
        """An integer option of at least ``minimum``."""
        value = self._values.get(key)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int):
            raise option_error(self._cc, key, f"expected an integer, got {value!r}")
        if value < minimum:
            raise option_error(self._cc, key, f"must be >= {minimum}, got {value}")
        return value

    def mapping(self, key: str) -> dict[str, str]:
        """A mapping of names to scalars, as strings (FFmpeg's option dictionaries)."""
        value = self._values.get(key)
        if value is None:
            return {}
        if not isinstance(value, dict) or not all(isinstance(v, str | int | float) for v in value.values()):
            raise option_error(self._cc, key, f"expected a mapping of names to strings or numbers, got {value!r}")
        return {str(k): v if isinstance(v, str) else json.dumps(v) for k, v in value.items()}


class Pacer:
    """Releases timestamped packets no sooner than their timestamps say (``realtime: true``).

    The first packet goes at once; each later one ``(ts - first_ts)`` microseconds after it, on
    the monotonic clock. A source that is behind (slow downstream) does not sleep to catch up.
    """

    __slots__ = ("_t0", "_ts0")

    def __init__(self) -> None:
        self._t0 = 0.0
        self._ts0: int | None = None

    def wait_s(self, ts: int) -> float:
        """Seconds until ``ts`` is due (0 when it is due now)."""
        now = time.monotonic()
        if self._ts0 is None:
            self._t0, self._ts0 = now, ts
            return 0.0
        return max(0.0, self._t0 + (ts - self._ts0) / 1e6 - now)


def step_source(cc: Context, pending: tuple[Packet, int] | None,
                next_item: Callable[[Context], tuple[Packet, int] | None],
                pacer: Pacer | None) -> tuple[Packet, int] | None:
    """One ``process`` call of a file source: emit the next item once its time is due.

    Returns the item still waiting for its time (``realtime``), else ``None``; the source is
    done when ``next_item`` has nothing more.
    """
    if pending is None:
        pending = next_item(cc)
        if pending is None:
            cc.source_done()
            return None
    packet, ts = pending
    if pacer is not None:
        wait = pacer.wait_s(ts)
        if wait > 0:
            cc.source_yield(wait)
            return pending
    cc.emit(0, packet, ts)
    cc.source_yield(0.0)
    return None
