"""The MCAP container's constants (https://mcap.dev/spec): the magic bytes and the record
opcodes, shared by our writer and our reader."""

from __future__ import annotations

from typing import Final

MAGIC: Final = b"\x89MCAP0\r\n"
"""The bytes a file starts and ends with."""
OP_HEADER: Final = 0x01
OP_FOOTER: Final = 0x02
OP_SCHEMA: Final = 0x03
OP_CHANNEL: Final = 0x04
OP_MESSAGE: Final = 0x05
OP_CHUNK: Final = 0x06
OP_MESSAGE_INDEX: Final = 0x07
OP_CHUNK_INDEX: Final = 0x08
OP_ATTACHMENT_INDEX: Final = 0x0A
OP_STATISTICS: Final = 0x0B
OP_METADATA: Final = 0x0C
OP_METADATA_INDEX: Final = 0x0D
OP_SUMMARY_OFFSET: Final = 0x0E
OP_DATA_END: Final = 0x0F
