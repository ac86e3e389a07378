"""``flowplex agents --record FILE.mcap [--record-input]``: real sessions of real commands in PTYs,
and their recordings read back with ``recording.open``."""

from __future__ import annotations

import itertools
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from flowplex import recording

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PTYs: Linux")

PY = sys.executable
AGENT = os.path.basename(PY)
"""What ``flowplex agents`` names a ``python`` command after."""


@pytest.fixture
def runtime(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A runtime directory of the test's own (short: socket paths are limited), for subprocesses too."""
    path = Path(tempfile.mkdtemp(prefix="fpr-", dir="/tmp")) / "rt"
    monkeypatch.setenv("FLOWPLEX_RUNTIME_DIR", str(path))
    yield path
    shutil.rmtree(path.parent, ignore_errors=True)


def flowplex(*args: str, cwd: Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PY, "-m", "flowplex", *args], capture_output=True, text=True, cwd=cwd, timeout=timeout,
                          stdin=subprocess.DEVNULL, check=False, env=env())


def env() -> dict[str, str]:
    """The environment now (the runtime directory the test set included)."""
    return {**os.environ, "PYTHONUNBUFFERED": "1"}


def messages(path: Path) -> list[recording.Record]:
    """Every packet of the finished recording, checked: each stream's timestamps strictly increase."""
    with recording.open(path) as rec:
        assert rec.complete, rec.problem
        got = list(rec.messages())
    by_stream: dict[str, list[int]] = {}
    for m in got:
        by_stream.setdefault(m.stream, []).append(m.ts)
    for stream, stamps in by_stream.items():
        assert all(a < b for a, b in itertools.pairwise(stamps)), stream
    return got


def text(got: list[recording.Record], stream: str) -> str:
    return "".join(str(m.value) for m in got if m.stream == stream and m.metadata and m.metadata["kind"] == "text")


def send(name: str, agent: str, keys: str, cwd: Path, seconds: float = 20) -> None:
    """``agents send``, again until the agent runs (the session may still be starting)."""
    deadline = time.monotonic() + seconds
    while True:
        done = flowplex("agents", "send", name, agent, keys, cwd=cwd)
        if done.returncode == 0:
            return
        assert time.monotonic() < deadline, done.stderr
        time.sleep(0.1)


def test_the_recording_holds_each_agents_output(tmp_path: Path, runtime: Path) -> None:
    out = tmp_path / "agents.mcap"
    done = flowplex("agents", "--mode", "log", "--record", "agents.mcap", "--",
                    PY, "-c", "print('hi')", "--", PY, "-c", "print('there'); raise SystemExit(3)", cwd=tmp_path)
    assert done.returncode == 3, done.stderr
    assert f"flowplex agents: recorded 4 packet(s) from 2 stream(s) into {out}" in done.stderr.splitlines()
    got = messages(out)
    with recording.open(out) as rec:
        assert rec.streams == [AGENT, f"{AGENT}#2"]  # one channel per agent, named after it
    assert text(got, AGENT) == "hi\r\n" and text(got, f"{AGENT}#2") == "there\r\n"  # as the PTY gave it
    ends = {m.stream: m for m in got if m.metadata and m.metadata["kind"] == "end"}
    assert ends[AGENT].value == "exit 0" and ends[AGENT].metadata["exit_code"] == 0
    assert ends[f"{AGENT}#2"].metadata == {"agent": f"{AGENT}#2", "agent_type": 5, "exit_code": 3, "kind": "end",
                                           "ok": False, "stream_id": 2}
    assert all(m.kind == "str" for m in got)  # the agent-stream packets: Str chunks with their metadata
    assert {m.metadata["stream_id"] for m in got if m.metadata} == {1, 2}


def test_record_input_holds_what_was_typed_in_the_clock_of_the_output(tmp_path: Path, runtime: Path) -> None:
    out = tmp_path / "typed.mcap"
    session = subprocess.Popen(
        [PY, "-m", "flowplex", "agents", "--mode", "log", "--name", "typed", "--record", str(out), "--record-input",
         "--", PY, "-c", "print('ready'); print('got', input())"],
        cwd=tmp_path, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env())
    try:
        send("typed", "1", r"hello\n", tmp_path)
        _, err = session.communicate(timeout=30)
    finally:
        session.kill()
        session.communicate(timeout=30)
    assert session.returncode == 0, err
    assert err.splitlines()[-1] == (f"flowplex agents: recorded 3 packet(s) from 1 stream(s) and 1 input(s) "
                                    f"into {out}")
    got = messages(out)
    typed = [m for m in got if m.stream == f"{AGENT}.input"]
    assert [(m.kind, m.value, m.metadata) for m in typed] == [
        ("bytes", b"hello\r", {"agent": AGENT, "stream_id": 1})]  # Enter is a carriage return, as on a terminal
    answer = next(m for m in got if m.stream == AGENT and "got hello" in str(m.value))
    assert typed[0].ts < answer.ts  # the same clock: the key comes before what it caused
    assert "hello" in text(got, AGENT)  # echoed by the PTY


def test_a_detached_session_records_until_stopped(tmp_path: Path, runtime: Path) -> None:
    done = flowplex("agents", "-d", "--name", "crew", "--record", "crew.mcap", "--record-input", "--",
                    "sh", "-c", "echo hello; exec cat", cwd=tmp_path)
    assert done.returncode == 0 and done.stdout.strip() == "crew", done.stderr
    try:
        send("crew", "1", r"abc\n", tmp_path)
        time.sleep(0.5)  # cat echoes it back
    finally:
        stop = flowplex("stop", "crew", cwd=tmp_path)
    assert stop.returncode == 0, stop.stderr
    log = flowplex("logs", "crew", cwd=tmp_path).stdout
    assert re.search(r"flowplex agents: crew: recorded \d+ packet\(s\) from 1 stream\(s\) and 1 input\(s\) into "
                     + re.escape(str(tmp_path / "crew.mcap")), log), log
    got = messages(tmp_path / "crew.mcap")  # a relative path: the server, elsewhere, wrote it here
    assert [m.value for m in got if m.stream == "sh.input"] == [b"abc\r"]
    assert "hello" in text(got, "sh") and text(got, "sh").count("abc") >= 2  # the PTY's echo, then cat's


def test_record_usage_errors(tmp_path: Path, runtime: Path) -> None:
    (tmp_path / "adir").mkdir()
    cases = [
        (["--record-input"], "agents: --record-input goes with --record FILE.mcap"),
        (["--record", "nowhere/x.mcap"], f"agents: --record nowhere/x.mcap: no such directory {tmp_path}/nowhere"),
        (["--record", "adir"], "agents: --record adir: is a directory (give a file, e.g. adir/agents.mcap)"),
    ]
    for args, message in cases:
        done = flowplex("agents", "--mode", "log", *args, "--", "true", cwd=tmp_path)
        assert done.returncode == 2, (args, done.stderr)
        assert done.stderr == f"flowplex: error: {message}\n"
