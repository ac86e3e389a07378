"""Which Ray cluster a ``RayExecutor`` uses: connect to one, or start (and later stop) a local one.

Ray is imported here, and only when a graph that names ``RayExecutor`` starts: ``import
flowplex`` never loads it. A driver process talks to one Ray cluster at a time, so every Ray
executor of this process shares the connection; a local instance that flowplex started is shut
down when the last executor that uses it closes. One that was running already (``ray.init``
called by the program, or a cluster reached by address) is left running.
"""

from __future__ import annotations

import concurrent.futures
import importlib.util
import logging
import os
import queue
import socket
import threading
from collections.abc import Callable
from types import ModuleType
from typing import Final

from ...errors import BrokenError, ConfigError

__all__ = ["ADDRESS_ENV", "INSTALL_HINT", "connect", "describe_cluster", "disconnect", "ray_installed", "ray_module",
           "resolved_address"]

log = logging.getLogger(__name__)

INSTALL_HINT: Final = "pip install 'flowplex[ray]'"
"""The line that error messages give when Ray is not installed."""
CONNECT_TIMEOUT_S: Final = 30.0
"""How long ``connect`` waits for Ray to answer before failing ``Graph.start``."""
PROBE_TIMEOUT_S: Final = 5.0
"""How long the TCP probe of an ``IP:port`` or ``ray://`` address waits."""

_lock = threading.Lock()
_users = 0
"""Ray executors of this process connected now."""
_started_here = False
"""flowplex started the local instance they use (so the last one to close shuts it down)."""


def ray_installed() -> bool:
    """Whether ``import ray`` would find Ray (without importing it)."""
    return importlib.util.find_spec("ray") is not None


def ray_module(executor: str) -> ModuleType:
    """``ray``, imported now.

    Raises:
        ConfigError: Ray is not installed; the message gives the ``pip install`` line.
    """
    try:
        import ray
    except ImportError as exc:
        msg = (f"executor `{executor}` is a RayExecutor, but Ray cannot be imported ({exc}); install it "
               f"with: {INSTALL_HINT}")
        raise ConfigError(msg) from None
    module: ModuleType = ray
    return module


ADDRESS_ENV: Final = "FLOWPLEX_RAY_ADDRESS"
"""An address that overrides every ``RayExecutor``'s own (``flowplex run --ray-address``)."""


def resolved_address(address: str | None) -> str | None:
    """The address a Ray executor uses: ``FLOWPLEX_RAY_ADDRESS`` when set, else its own."""
    return os.environ.get(ADDRESS_ENV) or address or None


def describe_cluster(address: str | None = None) -> str:
    """Which cluster a Ray executor with ``address`` would use, in words (``flowplex info``)."""
    chosen = resolved_address(address)
    source = f" (from {ADDRESS_ENV})" if os.environ.get(ADDRESS_ENV) else ""
    if chosen is None:
        return "a new local Ray instance per process (none is named: set FLOWPLEX_RAY_ADDRESS or `address:`)"
    if chosen == "auto":
        return f"the cluster running on this machine (`auto`){source}"
    return f"the cluster at `{chosen}`{source}"


def connect(executor: str, address: str | None, num_cpus: float) -> ModuleType:
    """Join the Ray cluster at ``address`` (``resolved_address``; None: the Ray instance this
    process uses already, else a new local one with at least ``num_cpus`` CPUs to schedule
    on) and count this executor in.

    Raises:
        BrokenError: The cluster cannot be reached within ``CONNECT_TIMEOUT_S``; the message
            names the address and gives Ray's reason.
    """
    global _users, _started_here
    ray = ray_module(executor)
    address = resolved_address(address)
    with _lock:
        if ray.is_initialized():
            _users += 1
            return ray
        if address:
            _probe(executor, address)
        kwargs: dict[str, object] = {"address": address or "local", "include_dashboard": False,
                                     "logging_level": logging.WARNING, "configure_logging": False}
        if not address:
            kwargs["num_cpus"] = max(float(os.cpu_count() or 1), num_cpus)
        where = f"at `{address}`" if address else "(a new local instance)"
        future = _ray_thread().run(lambda: ray.init(**kwargs))
        try:
            future.result(CONNECT_TIMEOUT_S)
        except concurrent.futures.TimeoutError:
            msg = (f"executor `{executor}`: Ray {where} did not answer within {CONNECT_TIMEOUT_S:.0f} s; "
                   "check the address and that the cluster is up (`ray status`)")
            raise BrokenError(msg) from None
        except Exception as exc:
            msg = f"executor `{executor}`: cannot connect to Ray {where}: {type(exc).__name__}: {exc}"
            raise BrokenError(msg) from None
        _started_here = not address
        _users += 1
        log.info("ray.connected executor=%r address=%r started_here=%s", executor, address, _started_here)
        return ray


def disconnect() -> None:
    """Count one executor out; the last one shuts down a local instance flowplex started."""
    global _users, _started_here
    with _lock:
        _users = max(0, _users - 1)
        if _users or not _started_here:
            return
        _started_here = False
        import ray

        _ray_thread().run(ray.shutdown).result()


class _RayThread:
    """The one thread that starts and stops Ray in this process, alive as long as the process.

    Ray's local processes (its GCS, raylet, object store) are told to exit when the *thread*
    that started them ends (the parent-death signal follows the thread), so starting Ray on a
    short-lived thread, or on a caller's, would kill the instance with that thread.
    """

    def __init__(self) -> None:
        self._calls: queue.SimpleQueue[tuple[Callable[[], object], concurrent.futures.Future[object]]] = (
            queue.SimpleQueue())
        threading.Thread(target=self._serve, name="flowplex-ray", daemon=True).start()

    def run(self, fn: Callable[[], object]) -> concurrent.futures.Future[object]:
        future: concurrent.futures.Future[object] = concurrent.futures.Future()
        self._calls.put((fn, future))
        return future

    def _serve(self) -> None:
        while True:
            fn, future = self._calls.get()
            try:
                future.set_result(fn())
            except BaseException as exc:
                future.set_exception(exc)


_thread: _RayThread | None = None


def _ray_thread() -> _RayThread:
    global _thread
    if _thread is None:
        _thread = _RayThread()
    return _thread


def _probe(executor: str, address: str) -> None:
    """Fail fast when nothing listens at an ``IP:port`` or ``ray://host:port`` address (Ray
    itself retries for a long while). ``auto`` and a bare host are left to Ray."""
    rest = address.removeprefix("ray://")
    host, sep, port = rest.rpartition(":")
    if not sep or not port.isdigit():
        return
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=PROBE_TIMEOUT_S):
            pass
    except OSError as exc:
        msg = (f"executor `{executor}`: cannot reach Ray at `{address}`: {exc.strerror or exc}; check the "
               "address and that the cluster is up (`ray status`)")
        raise BrokenError(msg) from None
