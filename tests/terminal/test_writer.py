"""The single Writer: whole frames, partial writes retried, a vanished reader is no error."""

from __future__ import annotations

import io
import os
import threading

from flowplex.terminal import Writer


def test_large_frames_arrive_whole_through_a_pipe() -> None:
    r, w = os.pipe()
    os.set_blocking(w, False)  # short writes and EAGAIN, as on a slow terminal
    received = bytearray()

    def read() -> None:
        while chunk := os.read(r, 7000):
            received.extend(chunk)

    reader = threading.Thread(target=read)
    reader.start()
    writer = Writer(w)
    frames = [bytes([65 + i]) * 300_000 for i in range(4)]
    threads = [threading.Thread(target=writer.write, args=(f,)) for f in frames]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    os.close(w)
    reader.join()
    os.close(r)
    assert len(received) == 4 * 300_000
    # Frames from different threads never interleave: each is one contiguous run.
    runs = [received[i * 300_000 : (i + 1) * 300_000] for i in range(4)]
    assert sorted(bytes(run[:1]) for run in runs) == [b"A", b"B", b"C", b"D"]
    assert all(run == run[:1] * 300_000 for run in runs)
    assert writer.writes == 4 and writer.bytes_written == 1_200_000


def test_broken_pipe_turns_the_writer_off_quietly() -> None:
    r, w = os.pipe()
    os.close(r)
    writer = Writer(w)
    assert writer.write(b"frame") is False
    assert writer.broken
    assert writer.write(b"again") is False
    os.close(w)


def test_file_objects_and_closed_files() -> None:
    out = io.BytesIO()
    writer = Writer(out)
    assert writer.write(b"abc") and out.getvalue() == b"abc"
    assert writer.write(b"") is True and writer.writes == 1
    out.close()
    assert writer.write(b"x") is False and writer.broken
