"""Packets back to Python values: for tests (``flowplex.testing``) and for ``flowplex run``'s output.

``decode_packet`` keeps everything (bytes stay bytes, a CPU buffer becomes a numpy copy);
``packet_value`` is its JSON-friendly form (bytes as hex, arrays summarised as shape and dtype).
"""

from __future__ import annotations

from ._packet import Packet

__all__ = ["decode_packet", "packet_value"]


_NO_SCALAR = object()


def _scalar(packet: Packet) -> object:
    """The scalar a packet carries (None when empty), or ``_NO_SCALAR`` for a buffer."""
    if packet.is_empty:
        return None
    for reader in (packet.as_bool, packet.as_int, packet.as_float, packet.as_str, packet.as_bytes):
        value = reader()
        if value is not None:
            return value
    return _NO_SCALAR


def decode_packet(packet: Packet) -> object:
    """The value a packet carries: None when empty; bool, int, float, str or bytes; a numpy copy
    of a CPU buffer (so it outlives the packet); the packet's ``repr`` for other memory."""
    value = _scalar(packet)
    if value is not _NO_SCALAR:
        return value
    try:
        return packet.as_numpy().copy()
    except ValueError:
        return repr(packet)


def packet_value(packet: Packet) -> object:
    """A JSON-friendly value for a packet (arrays summarised, bytes as hex); copies nothing."""
    value = _scalar(packet)
    if isinstance(value, bytes):
        return value.hex()
    if value is not _NO_SCALAR:
        return value
    try:
        arr = packet.as_numpy()
    except ValueError:
        return repr(packet)
    return {"shape": list(arr.shape), "dtype": str(arr.dtype)}
