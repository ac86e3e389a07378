"""``RingSink`` and ``RingSource``: carry text or bytes packets from a graph in one process to a
graph in another, through a shared-memory ring.

The receiving graph's ``RingSource`` usually creates the ring (``create: true``) and unlinks it
when it closes; each sending graph's ``RingSink`` attaches by name.  A packet's timestamp travels
in the slot's ``timestamp_ns`` field, so the source re-emits it with the same timestamp (kept
strictly increasing when several sinks feed one source).

Importing this module registers both kernels; ``flowplex.transport`` does not import it, so the
transport stays usable without the engine.
"""

from __future__ import annotations

from typing import final

from ..errors import EndOfStream, Timeout, UsageError
from ..kernels import Context, Contract, Kernel, kernel
from ..packets import Packet
from ._consumer import Consumer
from ._format import AgentType
from ._producer import Producer
from ._ring import Ring

__all__ = ["RingSink", "RingSource"]


def _agent_type(cc: Context, value: object) -> int:
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 8:
        return value
    if isinstance(value, str) and value.upper() in AgentType.__members__:
        return int(AgentType[value.upper()])
    msg = (
        f"node {cc.node_name!r}: option agent_type={value!r}: expected an AgentType name "
        "(system, user, assistant, error, warning, info, debug, trace) or 0..7"
    )
    raise UsageError(msg)


@final
@kernel("RingSink")
class RingSink(Kernel):
    """Sends every input packet (``str`` or ``bytes``) into a shared-memory ring.

    Ports: input 0 (any type; str or bytes packets) → no outputs.
    Options: ``ring`` (str, required: the ring name), ``stream_id`` (int, default 0),
    ``agent_type`` (name or 0..7, default ``assistant``), ``timeout_s`` (float, default 10:
    the most a send waits under the ``block`` policy).  Packet metadata ``stream_id`` and
    ``agent_type`` override the options per packet.
    Lifecycle: ``open`` attaches to the ring and registers a producer; ``process`` sends (on the
    node's executor thread; the producer belongs to this node); ``close`` closes the producer,
    which the other side sees as the end of this sink's stream.  Emits nothing.  A packet of
    another type, or a ring that refuses the message (full under ``reject``), is an error.
    """

    @staticmethod
    def get_contract(c: Contract) -> None:
        c.input_set_any(0)

    def __init__(self) -> None:
        self._ring: Ring | None = None
        self._producer: Producer | None = None
        self._stream_id = 0
        self._agent = int(AgentType.ASSISTANT)
        self._timeout = 10.0

    def open(self, cc: Context) -> None:
        self._ring = Ring.attach(cc.require_option_str("ring"))
        self._producer = self._ring.producer()
        self._stream_id = cc.option_int("stream_id", 0)
        self._agent = _agent_type(cc, cc.option_str("agent_type", "assistant"))
        self._timeout = cc.option_float("timeout_s", 10.0)

    def process(self, cc: Context) -> None:
        if cc.input_is_empty(0) or self._producer is None:
            return
        packet = cc.input(0)
        value: str | bytes | None = packet.as_str()
        if value is None:
            value = packet.as_bytes()
        if value is None:
            msg = f"node {cc.node_name!r}: RingSink sends str or bytes packets, got {packet.type_name}"
            raise UsageError(msg)
        sid = packet.metadata("stream_id")
        agent = packet.metadata("agent_type")
        ts = packet.timestamp
        if ts < 0:
            msg = f"node {cc.node_name!r}: RingSink needs timestamps >= 0, got {ts}"
            raise UsageError(msg)
        sent = self._producer.send(
            value,
            stream_id=sid if isinstance(sid, int) else self._stream_id,
            agent_type=self._agent if agent is None else _agent_type(cc, agent),
            timestamp_ns=ts,
            timeout=self._timeout,
        )
        if not sent:
            msg = (
                f"node {cc.node_name!r}: {self._producer!r} is full (policy reject); the packet at ts {ts} was refused"
            )
            raise UsageError(msg)

    def close(self, cc: Context) -> None:
        if self._producer is not None:
            self._producer.close()
        if self._ring is not None:
            self._ring.close()
        self._producer = self._ring = None


@final
@kernel("RingSource")
class RingSource(Kernel):
    """Emits the messages of a shared-memory ring as packets (``str`` if sent as text, else bytes).

    Ports: no inputs → output 0 (any type).
    Options: ``ring`` (str, required), ``create`` (bool, default true: create the ring, and
    unlink it at close; false attaches to an existing one), ``capacity`` (int, default 4096),
    ``full_policy`` (default ``block``), ``max_producers`` (int, default 16),
    ``expect_producers`` (int, default 1: the stream ends only after this many producers came
    and went), ``poll_s`` (float, default 0.05: the longest one invocation waits).
    Lifecycle: ``open`` creates or attaches and registers as the consumer; each ``process``
    emits at most one message, stamped with its timestamp (raised to one more than the last
    if needed, so timestamps keep increasing) and carrying the metadata ``stream_id``,
    ``agent_type`` (int 0..7) and ``producer_id`` (the sender's lane) — the agent-stream
    convention, so a ``TerminalSink`` downstream tells the streams apart and a ``RingSink``
    forwards them unchanged —, yields when nothing arrived within ``poll_s``,
    and calls ``source_done`` at the end of the stream; ``close`` closes (and unlinks) the ring.
    A producer process that dies raises ``BrokenError`` from ``process``.
    """

    @staticmethod
    def get_contract(c: Contract) -> None:
        c.output_set_any(0)

    def __init__(self) -> None:
        self._ring: Ring | None = None
        self._consumer: Consumer | None = None
        self._owner = False
        self._poll = 0.05
        self._last_ts = -1

    def open(self, cc: Context) -> None:
        name = cc.require_option_str("ring")
        self._owner = cc.option_bool("create", True)
        if self._owner:
            self._ring = Ring.create(
                cc.option_int("capacity", 4096),
                name=name,
                full_policy=cc.option_str("full_policy", "block"),
                max_producers=cc.option_int("max_producers", 16),
            )
        else:
            self._ring = Ring.attach(name)
        self._consumer = self._ring.consumer(expect_producers=cc.option_int("expect_producers", 1))
        self._poll = cc.option_float("poll_s", 0.05)
        self._last_ts = -1

    def process(self, cc: Context) -> None:
        if self._consumer is None:
            cc.source_done()
            return
        try:
            m = self._consumer.recv(timeout=self._poll)
        except Timeout:
            cc.source_yield(0.0)
            return
        except EndOfStream:
            cc.source_done()
            return
        ts = max(m.timestamp_ns, self._last_ts + 1)
        self._last_ts = ts
        packet = Packet.from_str(m.text, ts) if m.is_text else Packet.from_bytes(m.data, ts)
        packet.set_metadata("stream_id", m.stream_id)
        packet.set_metadata("agent_type", int(m.agent_type))
        packet.set_metadata("producer_id", m.producer_id)
        cc.emit(0, packet)

    def close(self, cc: Context) -> None:
        if self._consumer is not None:
            self._consumer.close()
        if self._ring is not None:
            self._ring.close()
            if self._owner:
                self._ring.unlink()
        self._consumer = self._ring = None
