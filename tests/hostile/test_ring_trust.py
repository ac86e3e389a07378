"""Only private segments are attached: an impostor's segment under the expected name is refused.

Anyone can create ``/dev/shm/<name>``; a consumer attached to an impostor's segment would show
forged messages and a producer would hand every message over.  ``Ring.attach`` opens a segment
only if the calling user owns it and no other user may read or write it, unless the caller
passes ``trust_foreign=True``; ``Ring.create`` makes segments exclusively, mode 0600, under an
unguessable name unless one is given.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterator

import pytest

from flowplex.errors import UsageError
from flowplex.transport import Ring


@pytest.fixture
def ring() -> Iterator[Ring]:
    with Ring.create(capacity=4) as ring:
        yield ring


def test_a_generated_name_is_unguessable_and_the_segment_private(ring: Ring) -> None:
    assert re.fullmatch(rf"flowplex-ring-{os.getpid()}-[0-9a-f]{{12}}", ring.name)
    st = os.stat(f"/dev/shm/{ring.name}")
    assert stat.S_IMODE(st.st_mode) == 0o600
    assert st.st_uid == os.geteuid()
    with Ring.create(capacity=4) as other:
        assert other.name != ring.name


@pytest.mark.parametrize("mode", [0o666, 0o644, 0o660, 0o602])
def test_attach_refuses_a_segment_open_to_other_users(ring: Ring, mode: int) -> None:
    os.chmod(f"/dev/shm/{ring.name}", mode)
    with pytest.raises(UsageError, match=rf"refusing /dev/shm/{ring.name}: its mode {mode:04o} lets other users "
                                         r"read or write it \(flowplex creates 0600\); pass trust_foreign=True"):
        Ring.attach(ring.name)
    with Ring.attach(ring.name, trust_foreign=True) as other:  # the documented opt-in
        with other.producer() as p:
            p.send(b"shared on purpose")
        assert ring.consumer().recv(timeout=1).data == b"shared on purpose"


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")
def test_attach_refuses_a_segment_of_another_user(ring: Ring) -> None:
    os.chown(f"/dev/shm/{ring.name}", 65534, 65534)
    with pytest.raises(UsageError, match=r"it belongs to uid 65534, not to you \(uid 0\); pass trust_foreign=True"):
        Ring.attach(ring.name)
    Ring.attach(ring.name, trust_foreign=True).close()


def test_attach_refuses_a_symlink_planted_under_the_name(ring: Ring) -> None:
    link = "/dev/shm/fpx-hostile-link"
    os.symlink(f"/dev/shm/{ring.name}", link)
    try:
        with pytest.raises(UsageError, match=r"Ring.attach\(name='fpx-hostile-link'\): cannot open "):
            Ring.attach("fpx-hostile-link")
    finally:
        os.unlink(link)


def test_attach_rejects_a_non_bool_trust_option(ring: Ring) -> None:
    with pytest.raises(UsageError, match=r"Ring.attach\(trust_foreign='yes'\): expected True or False"):
        Ring.attach(ring.name, trust_foreign="yes")  # type: ignore[arg-type]


def test_create_over_an_existing_name_does_not_suggest_attaching_to_it() -> None:
    path = "/dev/shm/fpx-hostile-taken"
    fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)  # an impostor got there first
    os.close(fd)
    os.chmod(path, 0o666)  # (past the umask)
    try:
        with pytest.raises(UsageError) as info:
            Ring.create(capacity=4, name="fpx-hostile-taken")
        text = str(info.value)
        assert "exists already; pass another name, or none for a unique one" in text
        assert "attach" not in text.lower()
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o666  # create never opened or changed it
    finally:
        os.unlink(path)


def test_named_creation_is_exclusive_and_private() -> None:
    with Ring.create(capacity=4, name="fpx-hostile-named") as ring:
        assert stat.S_IMODE(os.stat("/dev/shm/fpx-hostile-named").st_mode) == 0o600
        with Ring.attach(ring.name) as other:
            assert other.capacity == 4
