"""``CollectSink``: a sink kernel that records what it receives, for in-process executors.

Its records live in the process that runs the kernel. On a process pool (or Ray) that is a
worker, so read a graph's results through its output ports there (``run_graph`` does).
"""

from __future__ import annotations

import threading
from typing import ClassVar, NamedTuple, final

from ..kernels import Context, Kernel, kernel
from ..packets._values import decode_packet

__all__ = ["CollectSink", "Record"]


class Record(NamedTuple):
    """One packet a ``CollectSink`` received: the input port's edge name, timestamp and value."""

    port: str
    ts: int
    value: object


@final
@kernel("CollectSink")
class CollectSink(Kernel):
    """Records ``(port, ts, value)`` of every packet on any of its inputs, under ``options.key``.

    Ports: inputs 0..N-1 (any type); no outputs.
    Options: ``key`` (str, default ``"default"``): the name its records are kept under.
    Behaviour: values are decoded as ``run_graph`` decodes them (arrays copied); ``open``
    clears the key's records, so each run starts empty. Read them with
    ``CollectSink.records(key)`` after the run. In-process executors only (inline, threads,
    delegating, loopback): on a process pool the records stay in the worker.
    """

    _lock: ClassVar = threading.Lock()
    _records: ClassVar[dict[str, list[Record]]] = {}

    def __init__(self) -> None:
        self._key = "default"

    @classmethod
    def records(cls, key: str = "default") -> list[Record]:
        """A copy of the records kept under ``key`` (``[]`` when none)."""
        with cls._lock:
            return list(cls._records.get(key, ()))

    @classmethod
    def clear(cls, key: str | None = None) -> None:
        """Forget the records of ``key`` (of every key with None)."""
        with cls._lock:
            if key is None:
                cls._records.clear()
            else:
                cls._records.pop(key, None)

    def open(self, cc: Context) -> None:
        self._key = cc.option_str("key", "default")
        with self._lock:
            self._records[self._key] = []

    def process(self, cc: Context) -> None:
        got = [Record(cc.input_name(i), cc.input(i).timestamp, decode_packet(cc.input(i)))
               for i in range(cc.num_inputs) if not cc.input_is_empty(i)]
        with self._lock:
            self._records.setdefault(self._key, []).extend(got)
