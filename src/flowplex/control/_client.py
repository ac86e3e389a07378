"""The client side: connect to a live graph by name, ask, and read its streams; list live graphs."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, final

from .._suggest import did_you_mean
from ..errors import ControlError
from ._paths import check_name, runtime_dir
from ._server import is_live
from ._wire import MAX_REPLY, PROTOCOL, FrameReader, encode

__all__ = ["Client", "connect", "live_graphs"]


@final
class Client:
    """One connection to a control socket. ``request`` for an answer, ``events`` for a stream."""

    def __init__(self, path: Path, timeout: float | None = 5.0) -> None:
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self._reader = FrameReader(MAX_REPLY)
        self._frames: list[dict[str, Any] | bytes] = []
        try:
            self.sock.connect(str(path))
        except OSError as exc:
            self.sock.close()
            msg = f"cannot connect to {path}: {exc.strerror or exc}"
            raise ControlError(msg) from None

    def send(self, op: str, **args: Any) -> None:
        """Send request ``op`` without waiting for its answer."""
        try:
            self.sock.sendall(encode({"v": PROTOCOL, "op": op, **args}))
        except OSError as exc:
            msg = f"the graph at {self.path} went away ({exc.strerror or exc})"
            raise ControlError(msg) from None

    def request(self, op: str, **args: Any) -> dict[str, Any]:
        """Send ``op`` and return its answer; ``ControlError`` with the graph's text when it failed."""
        try:
            self.send(op, **args)
        except ControlError:
            # Refused at once (another user, too many clients): the refusal may be waiting to be read.
            try:
                early = self.next_frame()
            except ControlError:
                early = None
            if isinstance(early, dict):
                check_answer(early)
            raise
        answer = self.next_frame()
        if not isinstance(answer, dict):
            msg = f"op {op!r}: a bytes frame where an answer was due"
            raise ControlError(msg)
        return check_answer(answer)

    def next_frame(self) -> dict[str, Any] | bytes:
        """The next frame from the graph; ``ControlError`` when it closed the connection."""
        while not self._frames:
            try:
                data = self.sock.recv(1 << 20)
            except TimeoutError:
                msg = f"the graph at {self.path} did not answer in time"
                raise ControlError(msg) from None
            except OSError as exc:
                msg = f"the graph at {self.path} went away ({exc.strerror or exc})"
                raise ControlError(msg) from None
            if not data:
                msg = f"the graph at {self.path} closed the connection"
                raise ControlError(msg)
            self._frames.extend(self._reader.feed(data))
        return self._frames.pop(0)

    def events(self) -> Iterator[dict[str, Any] | bytes]:
        """Stream frames until ``{"ev": "end"}`` (yielded too) or the graph closes the connection."""
        while True:
            try:
                frame = self.next_frame()
            except ControlError:
                return
            if isinstance(frame, dict) and "ok" in frame:
                check_answer(frame)
            yield frame
            if isinstance(frame, dict) and frame.get("ev") == "end":
                return

    def close(self) -> None:
        """Close the connection."""
        self.sock.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def check_answer(answer: dict[str, Any]) -> dict[str, Any]:
    """``answer`` when it says ok; ``ControlError`` carrying the graph's error text otherwise."""
    if answer.get("ok") is False:
        raise ControlError(str(answer.get("error", "the graph refused the request")))
    return answer


def connect(name: str, timeout: float | None = 5.0, directory: Path | None = None) -> Client:
    """A connection to live graph ``name``; ``ControlError`` naming the live ones when there is none."""
    directory = directory or runtime_dir()
    path = directory / f"{check_name(name)}.sock"
    if not path.exists() or not is_live(path):
        live = sorted(p.stem for p in directory.glob("*.sock") if is_live(p))
        hint = did_you_mean(name, live) or (f" (live: {', '.join(live)})" if live else " (none is live: flowplex ps)")
        msg = f"no live graph named {name!r}{hint}"
        raise ControlError(msg)
    return Client(path, timeout)


def live_graphs(directory: Path | None = None, timeout: float = 1.0) -> list[dict[str, Any]]:
    """The ``info`` of every live graph of this user, by name; stale sockets are removed on the way."""
    directory = directory or runtime_dir()
    paths = sorted(directory.glob("*.sock"))
    if not paths:
        return []
    with ThreadPoolExecutor(max_workers=min(16, len(paths))) as pool:
        infos = list(pool.map(lambda p: _info(p, timeout), paths))
    return sorted((info for info in infos if info is not None), key=lambda i: str(i.get("name", "")))


def _info(path: Path, timeout: float) -> dict[str, Any] | None:
    try:
        with Client(path, timeout) as client:
            return client.request("info")
    except ControlError:
        if not is_live(path):  # a dead graph's socket (kill -9): nobody will remove it but us
            with contextlib.suppress(OSError):
                path.unlink()
        return None
