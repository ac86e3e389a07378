"""The control protocol's frames: small, versioned and bounded.

A frame is a 4-byte big-endian length, then that many bytes: one kind byte (``J``: a JSON
object in UTF-8; ``B``: raw bytes that belong to the JSON frame before it) and the payload.
A client's frames are at most ``MAX_REQUEST`` bytes, the server's ``MAX_REPLY``: a length past
the bound is an error at once, before anything is buffered. Every request is a JSON object with
``v`` (``PROTOCOL``) and ``op``; the answer is ``{"ok": true, ...}`` or ``{"ok": false,
"error": "..."}``, and a streaming op answers with ``{"ev": ...}`` events until ``{"ev": "end"}``.
"""

from __future__ import annotations

import json
import struct
from typing import Any, Final, final

from ..errors import ControlError

__all__ = ["MAX_REPLY", "MAX_REQUEST", "PROTOCOL", "FrameReader", "ProtocolError", "encode", "encode_bytes"]

PROTOCOL: Final = 1
"""The protocol version both sides speak; a request with another ``v`` is answered with an error."""
MAX_REQUEST: Final = 64 * 1024
"""The largest frame a client may send: requests are small JSON objects (text typed into an agent too)."""
MAX_REPLY: Final = 16 * 1024 * 1024
"""The largest frame the server sends (a raw frame tapped with ``echo --raw`` goes in pieces of this)."""

_HEAD: Final = struct.Struct(">I")
JSON_KIND: Final = b"J"
BYTES_KIND: Final = b"B"


class ProtocolError(ControlError):
    """The peer broke the protocol: an oversized or unknown frame, a payload that is not a JSON object."""


def encode(obj: dict[str, Any]) -> bytes:
    """One JSON frame."""
    body = json.dumps(obj, separators=(",", ":"), default=str).encode()
    return _HEAD.pack(len(body) + 1) + JSON_KIND + body


def encode_bytes(data: bytes | memoryview) -> bytes:
    """One bytes frame."""
    return _HEAD.pack(len(data) + 1) + BYTES_KIND + bytes(data)


@final
class FrameReader:
    """Incremental decoder: ``feed`` what arrived, get back the whole frames in it (dicts or bytes).

    It never holds more than one partial frame of at most ``limit`` bytes besides what it was fed.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._buf = bytearray()

    def feed(self, data: bytes) -> list[dict[str, Any] | bytes]:
        """The frames completed by ``data``; ``ProtocolError`` on the first broken one."""
        buf = self._buf
        buf += data
        frames: list[dict[str, Any] | bytes] = []
        pos = 0
        while len(buf) - pos >= 4:
            (size,) = _HEAD.unpack_from(buf, pos)
            if size == 0 or size > self.limit:
                msg = f"frame of {size} bytes (1 to {self.limit} allowed)"
                raise ProtocolError(msg)
            if len(buf) - pos - 4 < size:
                break
            kind = bytes(buf[pos + 4:pos + 5])
            payload = bytes(buf[pos + 5:pos + 4 + size])
            pos += 4 + size
            frames.append(_decode(kind, payload))
        del buf[:pos]
        return frames

    @property
    def pending(self) -> int:
        """Bytes of a partial frame held."""
        return len(self._buf)


def _decode(kind: bytes, payload: bytes) -> dict[str, Any] | bytes:
    if kind == BYTES_KIND:
        return payload
    if kind != JSON_KIND:
        msg = f"unknown frame kind {kind!r} (b'J' or b'B')"
        raise ProtocolError(msg)
    try:
        obj = json.loads(payload)
    except (UnicodeDecodeError, ValueError):
        msg = "a JSON frame that is not JSON"
        raise ProtocolError(msg) from None
    if not isinstance(obj, dict):
        msg = f"a JSON frame holding {type(obj).__name__}, not an object"
        raise ProtocolError(msg)
    return obj
