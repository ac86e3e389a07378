"""Which shared-memory segments in ``/dev/shm`` a test may call its own.

The suite runs on several pytest-xdist workers at once, so a check that compares ``/dev/shm``
before and after a test also sees the segments of the tests running beside it. A generated name
(``flowplex-ring-PID-HEX``, ``flowplex-arena-PID-HEX``) says who made it: a segment is this
test's when its creator is this process or one of its descendants, or is dead (nobody is left
to unlink it: a leak, whoever made it). A dead creator's segment gets a moment to go, since
another worker may be about to unlink the segment its own child left.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterable

_GENERATED = re.compile(r"^flowplex-(?:ring|arena)-(\d+)-[0-9a-f]+$")
GRACE_S = 2.0


def _parent(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            stat = f.read()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[1])


def _alive(pid: int) -> bool:
    return os.path.exists(f"/proc/{pid}")


def _descends_from_me(pid: int) -> bool:
    me = os.getpid()
    while pid > 1:
        if pid == me:
            return True
        parent = _parent(pid)
        if parent is None:
            return False
        pid = parent
    return False


def ours(names: Iterable[str]) -> set[str]:
    """Those of ``names`` (new since the test began) that are this test's to answer for."""
    mine: set[str] = set()
    orphans: set[str] = set()
    for name in names:
        match = _GENERATED.match(name)
        if match is None:
            mine.add(name)  # a fixed name: only this test's group makes those
            continue
        creator = int(match.group(1))
        if not _alive(creator):
            orphans.add(name)
        elif _descends_from_me(creator):
            mine.add(name)
    deadline = time.monotonic() + GRACE_S
    while orphans and time.monotonic() < deadline:
        orphans = {name for name in orphans if os.path.exists(f"/dev/shm/{name}")}
        if orphans:
            time.sleep(0.05)
    return mine | orphans
