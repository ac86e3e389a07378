"""Recordings: streams of packets, with their timestamps and bounds, in MCAP files.

``Recorder`` writes one channel per stream into a chunked, indexed, optionally compressed MCAP
file (the container ROS 2 bags and Foxglove use); ``open`` reads one back, as ``(stream, ts,
value)`` tuples or :class:`Record` objects, with numpy arrays as read-only views of the file. The
byte layout (format ``flowplex.v1``) is described in ``flowplex.recording._codec``.

>>> import os, tempfile
>>> import flowplex.recording as recording
>>> from flowplex import Packet
>>> path = os.path.join(tempfile.mkdtemp(), "demo.mcap")
>>> with recording.Recorder(path) as rec:
...     _ = rec.add_stream("n", kind="i64")
...     rec.write("n", Packet.from_int(7, ts=1))
...     rec.write_bound("n", 5)
>>> packets = list(recording.open(path))
>>> packets
[('n', 1, 7)]
>>> kinds = [r.kind for r in recording.open(path).messages(bounds=True)]
>>> kinds
['i64', 'bound']
"""

from __future__ import annotations

from ._capture import Capture, record
from ._codec import RecordingError
from ._diff import Comparison, Divergence, compare, diff
from ._reader import Record, Recording, RecordingSummary, StreamSummary
from ._reader import open_recording as open  # flowplex.recording.open(path), as the issue names it
from ._writer import COMPRESSIONS, Recorder

__all__ = [
    "COMPRESSIONS",
    "Capture",
    "Comparison",
    "Divergence",
    "Record",
    "Recorder",
    "Recording",
    "RecordingError",
    "RecordingSummary",
    "StreamSummary",
    "compare",
    "diff",
    "open",
    "record",
]
