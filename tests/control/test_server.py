"""The control socket itself: its directory and modes, the peer check, the bounded protocol, and
what hostile clients cost (nothing beyond their bounded buffers)."""

from __future__ import annotations

import os
import shutil
import socket
import stat
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flowplex.control import Client, ControlServer, Session, live_graphs
from flowplex.control._server import MAX_CLIENTS, OUTBOX_LIMIT
from flowplex.control._wire import MAX_REQUEST, PROTOCOL, FrameReader, ProtocolError, encode
from flowplex.errors import ControlError


def _server(name: str = "t", **handlers: Any) -> ControlServer:
    return ControlServer(name, handlers, lambda: {"state": "RUNNING"}, exact=True)


def _raw(server: ControlServer) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(5)
    sock.connect(str(server.path))
    return sock


def _answers(sock: socket.socket) -> list[dict[str, Any] | bytes]:
    """Everything the server sends until it closes the connection."""
    reader = FrameReader(1 << 24)
    frames: list[dict[str, Any] | bytes] = []
    while True:
        data = sock.recv(65536)
        if not data:
            return frames
        frames.extend(reader.feed(data))


def _wait(predicate: Any, seconds: float = 5) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return False


def test_the_directory_is_private_and_the_socket_owner_only(runtime: Path) -> None:
    with _server() as server:
        assert stat.S_IMODE(runtime.stat().st_mode) == 0o700
        assert stat.S_IMODE(server.path.stat().st_mode) == 0o600
        assert stat.S_ISSOCK(server.path.stat().st_mode)
        with Client(server.path) as c:
            info = c.request("info")
        assert info["name"] == "t" and info["pid"] == os.getpid() and info["protocol"] == PROTOCOL
        assert info["state"] == "RUNNING"
    assert not server.path.exists()  # close() removed it


def test_a_runtime_directory_of_another_user_is_refused(runtime: Path, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    if os.getuid() != 0:
        pytest.skip("needs root to give a directory to another user")
    other = Path("/tmp") / f"fpx-other-{os.getpid()}"
    other.mkdir(mode=0o700, exist_ok=True)
    os.chown(other, 65534, 65534)
    monkeypatch.setenv("FLOWPLEX_RUNTIME_DIR", str(other))
    try:
        with pytest.raises(ControlError, match=r"belongs to uid 65534, not to you \(uid 0\); set FLOWPLEX_RUNTIME_DIR"):
            _server()
    finally:
        other.rmdir()


NOBODY_CLIENT = """
import os, socket, sys
os.setgid(65534); os.setuid(65534)
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(5)
try:
    s.connect(sys.argv[1])
except PermissionError:
    print("EACCES"); sys.exit(0)
try:
    s.sendall(sys.stdin.buffer.read())
except OSError:
    pass  # refused at once: the answer may already be waiting
data = b""
try:
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
except OSError:
    pass
print(data[5:].decode())
"""


def test_a_client_of_another_user_is_refused(runtime: Path) -> None:
    if os.getuid() != 0:
        pytest.skip("needs root to run a client as `nobody` (uid 65534)")
    with _server() as server:
        request = encode({"v": PROTOCOL, "op": "info"})
        # As deployed: the 0700 directory keeps `nobody` from reaching the socket at all.
        done = subprocess.run([sys.executable, "-c", NOBODY_CLIENT, str(server.path)], input=request,
                              capture_output=True, timeout=30, check=True)
        assert done.stdout.decode().strip() == "EACCES"
        # With the directory and socket opened up, the peer check (SO_PEERCRED) still refuses it.
        os.chmod(runtime.parent, 0o711)
        os.chmod(runtime, 0o711)
        os.chmod(server.path, 0o666)
        done = subprocess.run([sys.executable, "-c", NOBODY_CLIENT, str(server.path)], input=request,
                              capture_output=True, timeout=30, check=True)
        assert '"refused: uid 65534 is not the graph\'s owner (uid 0)"' in done.stdout.decode(), done
        with Client(server.path) as c:  # the owner still gets its answers
            assert c.request("info")["name"] == "t"


def test_errors_are_answers_and_the_connection_stays(runtime: Path) -> None:
    with _server() as server, Client(server.path) as c:
        with pytest.raises(ControlError, match=r"^unknown op 'inf'; did you mean `info`\?$"):
            c.request("inf")
        c.sock.sendall(encode({"v": 99, "op": "info"}))
        assert c.next_frame() == {"ok": False, "error": "protocol version 99 is not spoken here (this graph speaks 1)"}
        assert c.request("info")["ok"] is True


@pytest.mark.parametrize(("payload", "error"), [
    (struct.pack(">I", MAX_REQUEST + 1), f"frame of {MAX_REQUEST + 1} bytes (1 to {MAX_REQUEST} allowed)"),
    (struct.pack(">I", 0), "frame of 0 bytes"),
    (struct.pack(">I", 3) + b"Xab", "unknown frame kind b'X'"),
    (struct.pack(">I", 4) + b"J{x}", "a JSON frame that is not JSON"),
    (struct.pack(">I", 3) + b"J[]", "a JSON frame holding list, not an object"),
])
def test_a_broken_frame_is_named_and_ends_the_connection(runtime: Path, payload: bytes, error: str) -> None:
    with _server() as server:
        sock = _raw(server)
        sock.sendall(payload)
        frames = _answers(sock)  # the server closes it after one answer
        sock.close()
        assert len(frames) == 1 and isinstance(frames[0], dict)
        assert frames[0]["ok"] is False and frames[0]["error"].startswith(f"protocol error: {error}")
        assert _wait(lambda: server.clients == 0)


def test_a_half_closed_client_still_gets_its_answer(runtime: Path) -> None:
    with _server() as server:
        sock = _raw(server)
        sock.sendall(encode({"v": PROTOCOL, "op": "info"}))
        sock.shutdown(socket.SHUT_WR)
        frames = _answers(sock)
        sock.close()
        assert [f["name"] for f in frames if isinstance(f, dict)] == ["t"]
        assert _wait(lambda: server.clients == 0)


def test_many_clients_at_once(runtime: Path) -> None:
    with _server() as server:
        clients = [Client(server.path) for _ in range(40)]
        try:
            assert [c.request("info")["name"] for c in clients] == ["t"] * 40
            assert server.clients == 40
        finally:
            for c in clients:
                c.close()
        extra = [Client(server.path) for _ in range(MAX_CLIENTS)]
        try:
            assert _wait(lambda: server.clients == MAX_CLIENTS)
            with Client(server.path) as late, \
                    pytest.raises(ControlError, match=rf"^refused: {MAX_CLIENTS} clients are connected already"):
                late.request("info")
        finally:
            for c in extra:
                c.close()


def test_a_flood_of_requests_from_a_client_that_never_reads_is_bounded(runtime: Path) -> None:
    with _server() as server:
        sock = _raw(server)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            assert _wait(lambda: server.clients == 1)
            session = next(iter(server._sessions.values()))
            sock.setblocking(False)
            request = encode({"v": PROTOCOL, "op": "info"})
            deadline = time.monotonic() + 3
            while time.monotonic() < deadline:  # until the server stops reading: our send buffer fills
                try:
                    sock.send(request * 64)
                except BlockingIOError:
                    break
            assert _wait(lambda: session.queued > 0)
            time.sleep(0.2)
            assert session.queued <= OUTBOX_LIMIT  # what it costs the server stays bounded
            with Client(server.path) as other:  # and others are served meanwhile
                assert other.request("info")["name"] == "t"
        finally:
            sock.close()
        assert _wait(lambda: server.clients == 0)


def test_a_name_taken_by_a_live_server_is_an_error_and_default_names_count_up(runtime: Path) -> None:
    with _server("cam") as first:
        with pytest.raises(ControlError, match=r"^a live graph is already named 'cam'; choose another name \(--name\)"):
            _server("cam")
        second = ControlServer("cam", {}, dict, exact=False)
        third = ControlServer("cam", {}, dict, exact=False)
        try:
            assert (first.name, second.name, third.name) == ("cam", "cam-2", "cam-3")
            assert sorted(i["name"] for i in live_graphs()) == ["cam", "cam-2", "cam-3"]
        finally:
            second.close()
            third.close()


def test_a_dead_process_socket_is_removed_by_the_next_listing(runtime: Path) -> None:
    script = ("import os, sys, time; from flowplex.control import ControlServer; "
              "s = ControlServer('doomed', {}, dict); print('up', flush=True); time.sleep(60)")
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline() == "up\n"
    assert [i["name"] for i in live_graphs()] == ["doomed"]
    proc.kill()
    proc.wait()
    proc.stdout.close()
    assert (runtime / "doomed.sock").exists()  # kill -9: nobody removed it
    assert live_graphs() == []
    assert not (runtime / "doomed.sock").exists()


def test_a_handler_may_stream_and_its_close_hook_runs(runtime: Path) -> None:
    closed: list[str] = []

    def count(session: Session, request: dict[str, Any]) -> None:
        left = [int(request["n"])]
        session.on_close.append(lambda: closed.append("closed"))
        session.send({"ok": True})

        def pump() -> bool:
            session.send({"ev": "n", "left": left[0]})
            left[0] -= 1
            if left[0] == 0:
                session.send({"ev": "end"})
                return False
            return True

        session.pumps.append(pump)

    with _server(count=count) as server:
        with Client(server.path) as c:
            c.send("count", n=3)
            frames = list(c.events())
        assert frames == [{"ok": True}, {"ev": "n", "left": 3}, {"ev": "n", "left": 2}, {"ev": "n", "left": 1},
                          {"ev": "end"}]
        assert _wait(lambda: closed == ["closed"])


@settings(max_examples=40, deadline=None)
@given(chunks=st.lists(st.binary(min_size=1, max_size=300), min_size=1, max_size=8))
def test_fuzzed_bytes_never_crash_or_stall_the_server(fuzz_server: ControlServer, chunks: list[bytes]) -> None:
    sock = _raw(fuzz_server)
    try:
        for chunk in chunks:
            sock.sendall(chunk)
        sock.shutdown(socket.SHUT_WR)
        _answers(sock)  # whatever it answers, it ends the connection in bounded time
    except (ConnectionResetError, BrokenPipeError):
        pass
    finally:
        sock.close()
    with Client(fuzz_server.path) as c:
        assert c.request("info")["name"] == "fuzz"
    assert _wait(lambda: fuzz_server.clients == 0)
    assert fuzz_server._thread.is_alive()


@pytest.fixture(scope="module")
def fuzz_server() -> Any:
    import tempfile

    directory = Path(tempfile.mkdtemp(prefix="fpz-", dir="/tmp"))
    server = ControlServer("fuzz", {}, dict, directory=directory)
    yield server
    server.close()
    shutil.rmtree(directory, ignore_errors=True)


def test_the_frame_reader_keeps_only_one_partial_frame() -> None:
    reader = FrameReader(100)
    frame = encode({"a": 1})
    assert reader.feed(frame[:3]) == [] and reader.pending == 3
    assert reader.feed(frame[3:] + frame) == [{"a": 1}, {"a": 1}] and reader.pending == 0
    with pytest.raises(ProtocolError):
        reader.feed(struct.pack(">I", 101))
