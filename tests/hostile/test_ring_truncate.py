"""A producer whose ring segment was truncated under it raises ``BrokenError``, as the consumer does.

After ``truncate(0)`` every page of the mapping is gone; the C fault guard gives each faulting
page a private zero page, so the producer's stores succeed and reach nobody.  ``send`` used to
return True for them (every policy, both hot paths, ``send_many`` too); now the write that
faulted, and every one after it, raises ``BrokenError`` naming the lost pages.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from flowplex.errors import BrokenError
from flowplex.transport import Ring, _accel, make_batch

LOST = r"ring 'flowplex-ring-[0-9a-f-]+': the shared-memory segment lost pages under its mapping"


@pytest.fixture(params=["c", "python"])
def impl(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Both hot paths, in this process (the guard is the C extension's in either)."""
    if _accel.guard is None:
        if os.environ.get("FLOWPLEX_REQUIRE_EXTRAS") == "1":
            pytest.fail("the C extension (with its SIGBUS guard) is not built")
        pytest.skip("without the C extension's SIGBUS guard a truncated segment kills the process")
    if request.param == "python":
        monkeypatch.setattr(_accel, "fast", None)
    elif _accel.fast is None:
        pytest.skip("the C extension flowplex.transport._fastring is not built")
    return str(request.param)


@pytest.mark.parametrize("policy", ["reject", "block", "drop_oldest"])
@pytest.mark.parametrize("data", [b"one slot", "a long message " * 40], ids=["short", "fragmented"])
def test_send_after_truncation_to_zero_raises(impl: str, policy: str, data: bytes | str) -> None:
    with Ring.create(capacity=8, full_policy=policy) as ring:
        p = ring.producer()
        assert p.send(b"before") is True
        os.truncate(f"/dev/shm/{ring.name}", 0)
        for _ in range(3):  # the send whose stores faulted, and every later one
            with pytest.raises(BrokenError, match=LOST):
                p.send(data, timeout=1.0)


@pytest.mark.parametrize("policy", ["reject", "drop_oldest"])
def test_send_many_after_truncation_to_zero_raises(impl: str, policy: str) -> None:
    with Ring.create(capacity=8, full_policy=policy) as ring:
        p = ring.producer()
        assert p.send_many(make_batch([b"a", b"b"])) == 2
        os.truncate(f"/dev/shm/{ring.name}", 0)
        with pytest.raises(BrokenError, match=LOST):
            p.send_many(make_batch([b"c", b"d"]))
        with pytest.raises(BrokenError, match=LOST):
            p.send_many([b"e"])


def test_the_consumer_in_the_same_process_sees_it_too(impl: str) -> None:
    with Ring.create(capacity=8) as ring:
        p, c = ring.producer(), ring.consumer()
        p.send(b"one")
        os.truncate(f"/dev/shm/{ring.name}", 0)
        with pytest.raises(BrokenError, match=LOST):
            p.send(b"two")
        with pytest.raises(BrokenError, match=LOST):
            c.recv(timeout=0.5)
        assert not np.any(np.frombuffer(ring._core.mm, np.uint8)[:4096])  # a zero page, not the data


def test_the_guard_stays_in_front_of_a_handler_installed_after_it(impl: str) -> None:
    """faulthandler (or any library) installing its own SIGBUS handler later must not bypass the guard."""
    import faulthandler

    was_enabled = faulthandler.is_enabled()
    with Ring.create(capacity=8) as first:
        first.producer()  # the guard is installed now
        faulthandler.enable()  # replaces the process's SIGBUS handler
        with Ring.create(capacity=8) as ring:
            p = ring.producer()
            assert p.send(b"before") is True
            os.truncate(f"/dev/shm/{ring.name}", 0)
            with pytest.raises(BrokenError, match=LOST):
                p.send(b"after", timeout=1.0)
    if not was_enabled:
        faulthandler.disable()
