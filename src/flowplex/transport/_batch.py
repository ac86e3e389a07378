"""Building and unpacking ``SLOT_DTYPE`` batches for ``send_many`` and ``recv_many``."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from ..errors import UsageError
from . import _layout as lay
from ._format import AGENT_TYPES, AgentType
from ._fragment import cut_points
from ._message import Message

if TYPE_CHECKING:
    from numpy.typing import NDArray

_new = tuple.__new__


def make_batch(
    payloads: Sequence[bytes | str],
    *,
    stream_id: int = 0,
    agent_type: int = AgentType.ASSISTANT,
    timestamp_ns: int | None = None,
) -> NDArray[np.void]:
    """Build ``SLOT_DTYPE`` rows for ``Producer.send_many``: one row per short payload.

    A payload longer than 224 bytes becomes several rows (fragments, cut like ``send`` cuts
    them).  Build a batch once and send it many times, or fill the fields of
    ``np.zeros(n, SLOT_DTYPE)`` directly; either way ``send_many`` costs one bulk copy.

    Args:
        payloads: ``bytes`` or ``str`` (encoded as UTF-8 and flagged as text).
        stream_id: Written into every row.
        agent_type: Written into every row.
        timestamp_ns: Written into every row; ``time.time_ns()`` now if omitted.

    Raises:
        UsageError: a payload has another type.

    >>> make_batch([b"a", "b", b"c" * 300])["len"].tolist()
    [1, 1, 224, 76]
    """
    encoded: list[tuple[bytes, int]] = []
    for j, item in enumerate(payloads):
        if isinstance(item, str):
            encoded.append((item.encode(), lay.FLAG_TEXT))
        elif isinstance(item, bytes | bytearray | memoryview):
            encoded.append((bytes(item), 0))
        else:
            msg = f"make_batch(payloads[{j}]={item!r:.40}): expected bytes or str"
            raise UsageError(msg)
    rows: list[tuple[bytes, int, int, int]] = []  # (data, start, end, flags)
    for data, text in encoded:
        ends = [len(data)] if len(data) <= lay.PAYLOAD_SIZE else cut_points(data)
        start = 0
        for i, end in enumerate(ends):
            flags = text | (lay.FLAG_FIRST if i == 0 else 0) | (lay.FLAG_CONTINUES if i < len(ends) - 1 else 0)
            rows.append((data, start, end, flags))
            start = end
    out = np.zeros(len(rows), dtype=lay.SLOT_DTYPE)
    payload = out["payload"]
    for j, (data, start, end, _flags) in enumerate(rows):
        payload[j, : end - start] = np.frombuffer(data, dtype=np.uint8, count=end - start, offset=start)
    out["len"] = [end - start for _d, start, end, _f in rows]
    out["flags"] = [flags for *_rest, flags in rows]
    out["stream_id"] = stream_id
    out["agent_type"] = agent_type
    out["timestamp_ns"] = time.time_ns() if timestamp_ns is None else timestamp_ns
    return out


def messages_from_rows(rows: NDArray[np.void]) -> list[Message]:
    """Turn ``recv_many`` rows back into messages, joining the fragments of long ones.

    Raises:
        UsageError: ``rows`` is not a ``SLOT_DTYPE`` array, or a message's fragments are cut off.
    """
    if not isinstance(rows, np.ndarray) or rows.dtype != lay.SLOT_DTYPE:
        msg = "messages_from_rows(rows=...): expected a SLOT_DTYPE array from recv_many"
        raise UsageError(msg)
    lens = rows["len"].tolist()
    flags = rows["flags"].tolist()
    payload = rows["payload"]
    out: list[Message] = []
    parts: list[bytes] = []
    first = 0
    for j, (n, f) in enumerate(zip(lens, flags, strict=True)):
        if f & lay.FLAG_FIRST:
            first = j
            parts = []
        parts.append(payload[j, :n].tobytes())
        if not f & lay.FLAG_CONTINUES:
            r = rows[first]
            data = parts[0] if len(parts) == 1 else b"".join(parts)
            out.append(
                _new(
                    Message,
                    (
                        data,
                        int(r["seq"]),
                        int(r["stream_id"]),
                        AGENT_TYPES[int(r["agent_type"])],
                        int(r["timestamp_ns"]),
                        int(r["producer_id"]),
                        int(r["flags"]),
                    ),
                )
            )
            parts = []
    if parts:
        msg = "messages_from_rows(rows=...): the last message's fragments are incomplete"
        raise UsageError(msg)
    return out


def rows_from_messages(messages: list[Message]) -> NDArray[np.void]:
    """Lay messages out as ``SLOT_DTYPE`` rows, fragmenting the long ones like a producer does."""
    rows: list[tuple[Message, int, int, int]] = []
    for m in messages:
        ends = cut_points(m.data)
        start = 0
        for i, end in enumerate(ends):
            rows.append((m, i, start, end))
            start = end
    out = np.zeros(len(rows), dtype=lay.SLOT_DTYPE)
    for j, (m, i, start, end) in enumerate(rows):
        flags = (m.flags & lay.FLAG_TEXT) | (lay.FLAG_FIRST if i == 0 else 0)
        if end < len(m.data):
            flags |= lay.FLAG_CONTINUES
        out["seq"][j] = m.seq + i
        out["len"][j] = end - start
        out["flags"][j] = flags
        out["agent_type"][j] = int(m.agent_type)
        out["producer_id"][j] = m.producer_id
        out["stream_id"][j] = m.stream_id
        out["timestamp_ns"][j] = m.timestamp_ns
        out["payload"][j, : end - start] = np.frombuffer(m.data, dtype=np.uint8, count=end - start, offset=start)
    return out
