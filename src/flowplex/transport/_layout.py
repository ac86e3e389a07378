"""Byte layout of a ring segment: the global header, the producer lanes and the 256-byte slots.

Everything that two processes must agree on lives here, so the layout can be read in one
place. All integers are little-endian; every word that is read or written concurrently is a
naturally aligned 64-bit word (see ``_ordering``).

::

    segment
    +--------------------------------------------------------------+  offset 0
    | global header (4096 B): magic, version, geometry, policy,     |
    |   registry generation, consumer registration, totals          |
    +--------------------------------------------------------------+  LANES_OFFSET
    | lane 0: lane header (256 B) | capacity x 256-byte slots        |
    | lane 1: ...                                                  |
    | ... max_producers lanes                                       |
    +--------------------------------------------------------------+

    lane header (256 B, four 64-byte lines)
      line 0, producer-written and hot:  tail (published slot count)
      line 1, producer-written and cold: state, pid, start time, counters
      line 2, consumer-written and hot:  head (released slot count)
      line 3, consumer-written and cold: counters

    slot (256 B)                                   payload at offset 32 (16-byte aligned)
      0  seq           u64   absolute slot position in the lane
      8  len           u32   payload bytes used in this slot (0..224)
      12 flags         u16   FIRST, CONTINUES, TRUNCATED (never set), TEXT
      14 agent_type    u8    0..7, see AgentType
      15 producer_id   u8    the producer's lane (Perdix's reserved byte)
      16 stream_id     u32
      20 msg_id        u32   per-producer message counter (wraps at 2**32)
      24 timestamp_ns  u64
      32 payload       224 bytes
"""

from __future__ import annotations

import struct
from typing import Final

import numpy as np

MAGIC: Final = b"FPXRING1"
VERSION: Final = 1

SLOT_SIZE: Final = 256
"""Bytes per ring slot, header included; longer messages take several slots."""
SLOT_HEADER_SIZE: Final = 32
PAYLOAD_SIZE: Final = SLOT_SIZE - SLOT_HEADER_SIZE
"""Message bytes one slot carries (``SLOT_SIZE`` less its header)."""
SLOT_SHIFT: Final = 8  # log2(SLOT_SIZE)

GLOBAL_HEADER_SIZE: Final = 4096
LANE_HEADER_SIZE: Final = 256
LANES_OFFSET: Final = GLOBAL_HEADER_SIZE

MAX_CAPACITY: Final = 1 << 20
MAX_PRODUCERS: Final = 256

# Slot flags.  FIRST marks the first slot of a message, CONTINUES that more fragments follow,
# TEXT that the producer sent a ``str`` (so the receiving side can give one back).  TRUNCATED
# exists for layout compatibility with the Perdix spec and is never set: nothing is truncated.
FLAG_CONTINUES: Final = 0x1
"""Slot flag: more fragments of this message follow."""
FLAG_FIRST: Final = 0x2
"""Slot flag: the first slot of a message."""
FLAG_TRUNCATED: Final = 0x4
"""Slot flag kept for layout compatibility with the Perdix spec; never set (nothing is truncated)."""
FLAG_TEXT: Final = 0x8
"""Slot flag: the producer sent a ``str``, so the receiver gives one back."""

# Lane states (lane header, line 1).
LANE_FREE: Final = 0
LANE_ACTIVE: Final = 1
LANE_CLOSED: Final = 2

# Consumer states (global header).
CONSUMER_NONE: Final = 0
CONSUMER_ATTACHED: Final = 1
CONSUMER_CLOSED: Final = 2

FULL_POLICY_CODES: Final = {"reject": 0, "block": 1, "drop_oldest": 2}

# Marker stored in a slot's seq word while a drop_oldest producer rewrites the slot.
SEQ_BUSY: Final = (1 << 64) - 1

SLOT_STRUCT: Final = struct.Struct("<QIHBBIIQ224s")
"""Packs a whole slot (header and zero-padded payload) in one call."""

SLOT_HEADER_STRUCT: Final = struct.Struct("<QIHBxIIQ")
"""Unpacks a slot header: seq, len, flags, agent_type, stream_id, msg_id, timestamp_ns."""

GLOBAL_HEADER_STRUCT: Final = struct.Struct("<8sIIIIII")
"""magic, version, slot_size, capacity, max_producers, full_policy, creator_pid."""

SLOT_DTYPE: Final = np.dtype(
    {
        "names": ["seq", "len", "flags", "agent_type", "producer_id", "stream_id", "msg_id", "timestamp_ns", "payload"],
        "formats": ["<u8", "<u4", "<u2", "u1", "u1", "<u4", "<u4", "<u8", ("u1", (PAYLOAD_SIZE,))],
        "offsets": [0, 8, 12, 14, 15, 16, 20, 24, 32],
        "itemsize": SLOT_SIZE,
    }
)
"""NumPy view of one slot; ``send_many`` takes and ``recv_many`` returns arrays of it.

``producer_id`` is the producer's lane.  In the rows ``recv_many`` returns, payload bytes past
the longest ``len`` of the batch are zero.
"""

HEADER_DTYPE: Final = np.dtype(
    {
        "names": ["seq", "len", "flags", "agent_type", "producer_id", "stream_id", "msg_id", "timestamp_ns"],
        "formats": ["<u8", "<u4", "<u2", "u1", "u1", "<u4", "<u4", "<u8"],
        "offsets": [0, 8, 12, 14, 15, 16, 20, 24],
        "itemsize": SLOT_HEADER_SIZE,
    }
)
"""The 32-byte slot header alone (``SLOT_DTYPE`` without the payload)."""

# -- 64-bit word indices (offset // 8) in the global header ---------------------------------
W_REGISTRY_GEN: Final = 8  # bumped whenever a lane changes state
W_PRODUCERS_EVER: Final = 9  # number of producer registrations since creation
W_CONSUMER_STATE: Final = 16  # line at offset 128
W_CONSUMER_PID: Final = 17
W_CONSUMER_START: Final = 18
W_DEAD_PRODUCERS: Final = 19

# -- word indices relative to the start of a lane header ------------------------------------
L_TAIL: Final = 0  # line 0
L_STATE: Final = 8  # line 1
L_PID: Final = 9
L_START: Final = 10
L_EXTRA_SLOTS: Final = 11  # slots beyond the first of fragmented messages; produced = tail - this
L_FRAGMENTED: Final = 12
L_REJECTED: Final = 13
L_PRODUCER_HWM: Final = 14
L_HEAD: Final = 16  # line 2
L_CONSUMER_EXTRA: Final = 24  # line 3; consumed = head - consumer extra - skipped slots
L_REASSEMBLED: Final = 25
L_DROPPED: Final = 26
L_SKIPPED_SLOTS: Final = 27
L_CONSUMER_HWM: Final = 28


def lane_size(capacity: int) -> int:
    """Bytes taken by one lane: its header plus ``capacity`` slots."""
    return LANE_HEADER_SIZE + capacity * SLOT_SIZE


def lane_offset(capacity: int, lane: int) -> int:
    """Byte offset of lane ``lane``'s header inside the segment."""
    return LANES_OFFSET + lane * lane_size(capacity)


def segment_size(capacity: int, max_producers: int) -> int:
    """Total bytes of a segment; a multiple of the 4 KiB page size because slots are 256 B."""
    size = LANES_OFFSET + max_producers * lane_size(capacity)
    return (size + 4095) & ~4095
