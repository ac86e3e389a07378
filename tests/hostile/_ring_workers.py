"""Processes for the hostile ring tests: a victim (producer and consumer) and a scribbler.

Run as ``python -m tests.hostile._ring_workers ROLE ...``.  The victim creates a ring, prints
its name, then streams messages through it from a producer thread to its consumer (the
renderer's part) for the given seconds, and prints one JSON line of counts and its peak RSS.
The scribbler maps the same segment and attacks it: it flips slot ``len`` words between 200
and 0x7FFFFFFF (the issue's segfault), writes random 64-bit words into the headers and the
slots, random bytes into slots, and truncates the file and grows it back.

The victim lets through only what a hostile segment may cause, ``BrokenError`` (a lost or
forged word), ``Timeout`` and ``EndOfStream`` (a forged registry); any other exception ends it
with a traceback and exit status 1, and a signal death shows as a negative return code.
"""

from __future__ import annotations

import json
import mmap
import os
import random
import resource
import struct
import sys
import threading
import time

from flowplex.errors import BrokenError, EndOfStream, Timeout, WouldBlock
from flowplex.transport import Ring, _accel
from flowplex.transport import _layout as lay

PHASES = ("len", "words", "bytes", "truncate")
"""The scribbler's attacks, in order; each gets an equal share of the time."""


def _peak_rss_kib() -> int:
    """This process's peak resident memory (VmHWM: of this program, unlike ``ru_maxrss``,
    which keeps the peak of the process that forked us across the exec)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def victim(policy: str, seconds: float) -> None:
    """Stream through a ring of our own while someone else writes into it."""
    ring = Ring.create(capacity=64, max_producers=2, full_policy=policy)
    sys.stdout.write(ring.name + "\n")
    sys.stdout.flush()
    sys.stdin.readline()  # the scribbler has the segment mapped: go
    counts = dict.fromkeys(("received", "broken", "timeouts", "ends", "sent", "refused", "send_broken"), 0)
    stop = threading.Event()
    failure: list[BaseException] = []

    def produce() -> None:
        rng = random.Random(1)
        try:
            with ring.producer() as p:
                while not stop.is_set():
                    data = bytes(rng.randrange(256) for _ in range(rng.choice((8, 100, 224, 500))))
                    try:
                        if p.send(data, timeout=0.01):
                            counts["sent"] += 1
                        else:
                            counts["refused"] += 1
                    except (BrokenError, Timeout):
                        counts["send_broken"] += 1
                        time.sleep(0.001)
        except BaseException as exc:
            failure.append(exc)

    consumer = ring.consumer()
    producer = threading.Thread(target=produce)
    producer.start()
    deadline = time.monotonic() + seconds
    try:
        while time.monotonic() < deadline and not failure:
            try:
                if counts["received"] % 7 == 6:
                    counts["received"] += len(consumer.recv_many(16, timeout=0.01))
                else:
                    consumer.recv(timeout=0.01)
                    counts["received"] += 1
            except BrokenError:
                counts["broken"] += 1
            except (Timeout, WouldBlock):
                counts["timeouts"] += 1
            except EndOfStream:
                counts["ends"] += 1
                time.sleep(0.001)
            if (counts["broken"] + counts["received"]) % 100 == 0:
                ring.stats()  # reads every lane's words: forged ones must not break it either
    finally:
        stop.set()
        producer.join(10)
    if failure:
        raise failure[0]
    counts["maxrss_kib"] = _peak_rss_kib()
    counts["guarded"] = int(getattr(_accel, "guard", None) is not None)
    counts["c_path"] = int(_accel.fast is not None)
    ring.close()
    ring.unlink()
    sys.stdout.write(json.dumps(counts) + "\n")


def scribble(name: str, seconds: float, seed: int, phases: str) -> None:
    """Attack the segment ``name`` for ``seconds``, one phase after the other."""
    rng = random.Random(seed)
    path = f"/dev/shm/{name}"
    fd = os.open(path, os.O_RDWR)
    size = os.fstat(fd).st_size
    mm = mmap.mmap(fd, size)
    _, _, _, capacity, producers, _, _ = lay.GLOBAL_HEADER_STRUCT.unpack_from(mm, 0)
    slots = [
        lay.lane_offset(capacity, lane) + lay.LANE_HEADER_SIZE + i * lay.SLOT_SIZE
        for lane in range(producers)
        for i in range(capacity)
    ]
    headers = [0, *(lay.lane_offset(capacity, lane) for lane in range(producers))]
    specials = (0, 1, 200, 0x7FFFFFFF, 1 << 62, 1 << 63, (1 << 64) - 1)
    chosen = phases.split(",")
    share = seconds / len(chosen)
    start = time.monotonic()
    writes = truncations = 0
    for k, phase in enumerate(chosen):
        until = start + (k + 1) * share
        while time.monotonic() < until:
            if phase == "len":
                # The slot the consumer reads next (lane 0's head), where the race is won.
                head_w = lay.lane_offset(capacity, 0) + 8 * lay.L_HEAD
                head = struct.unpack_from("<Q", mm, head_w)[0]
                off = slots[(head + rng.randrange(2)) % capacity] + 8
                for value in (200, 0x7FFFFFFF) * 50:
                    struct.pack_into("<I", mm, off, value)
            elif phase == "words":
                base = rng.choice(headers) if rng.random() < 0.5 else rng.choice(slots)
                span = lay.GLOBAL_HEADER_SIZE if base == 0 else lay.LANE_HEADER_SIZE
                value = rng.choice(specials) if rng.random() < 0.5 else rng.getrandbits(64)
                struct.pack_into("<Q", mm, base + 8 * rng.randrange(span // 8), value)
            elif phase == "bytes":
                off = rng.choice(slots)
                mm[off : off + 32] = rng.randbytes(32)
            elif phase == "truncate":
                # Never touch the mapping while the file is short: this process would get the SIGBUS.
                os.ftruncate(fd, rng.randrange(0, size, 4096))
                time.sleep(0.002)
                os.ftruncate(fd, size)
                truncations += 1
                time.sleep(0.01)
                continue
            writes += 1
            if writes % 64 == 0:
                time.sleep(0)  # let the victim run on a shared core
    mm.close()
    os.close(fd)
    sys.stdout.write(json.dumps({"writes": writes, "truncations": truncations}) + "\n")


def truncate_under_consumer() -> None:
    """Deterministic: truncate a ring with a published message, then receive from it."""
    ring = Ring.create(capacity=8)
    p, c = ring.producer(), ring.consumer()
    p.send(b"one")
    p.send(b"two")
    os.truncate(f"/dev/shm/{ring.name}", 0)
    outcome = "no error"
    try:
        for _ in range(4):
            c.recv(timeout=0.2)
    except BrokenError as exc:
        outcome = f"BrokenError: {exc}"
    except Timeout as exc:
        outcome = f"Timeout: {exc}"
    try:
        p.send(b"three")  # the producer's page is gone too
        outcome += " | sent"
    except BrokenError as exc:
        outcome += f" | BrokenError: {exc}"
    ring.close()
    ring.unlink()
    sys.stdout.write(outcome + "\n")


def create_then_hang() -> None:
    """Create a ring (the resource tracker starts with it), print its name, wait to be killed."""
    ring = Ring.create(capacity=8)
    sys.stdout.write(ring.name + "\n")
    sys.stdout.flush()
    time.sleep(600)


def consume_then_hang() -> None:
    """Attach to the ring named on stdin as its consumer, say so, wait to be killed."""
    ring = Ring.attach(sys.stdin.readline().strip())
    ring.consumer()
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    time.sleep(600)


if __name__ == "__main__":
    role, *args = sys.argv[1:]
    if role == "victim":
        victim(args[0], float(args[1]))
    elif role == "scribble":
        scribble(args[0], float(args[1]), int(args[2]), args[3])
    elif role == "truncate":
        truncate_under_consumer()
    elif role == "create":
        create_then_hang()
    elif role == "consume":
        consume_then_hang()
    else:
        sys.exit(f"unknown role {role!r}")
