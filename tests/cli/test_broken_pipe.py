"""A reader that leaves stdout early (``flowplex ... | head -1``) ends any command quietly, exit 0.

Each command runs as its own ``python -m flowplex`` process writing into a real pipe whose read
end this test closes: after the first line (as ``head -1`` does), or before the command writes
anything. What it may not do: print an error or a traceback, exit non-zero, or go on running.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from flowplex.recording import Recorder
from flowplex.recording import open as open_recording

ROOT = Path(__file__).resolve().parents[2]
HELLO = ROOT / "examples" / "hello_world.yaml"
ENDLESS = ["--set", "count.count=1000000000"]  # hours of packets: only the closed pipe can end the run


def closed_pipe(*args: str | Path, lines: int, cwd: Path = ROOT, timeout_s: float = 60) -> tuple[int, str, float]:
    """Run ``flowplex ARGS`` into a pipe whose reader reads ``lines`` lines and leaves; return
    the exit code, what the command wrote on stderr, and the seconds it ran after the reader left."""
    read_end, write_end = os.pipe()
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen([sys.executable, "-m", "flowplex", *map(str, args)], stdout=write_end, stderr=err,
                                stdin=subprocess.DEVNULL, cwd=cwd)
        os.close(write_end)
        with os.fdopen(read_end, "rb") as reader:
            for _ in range(lines):
                assert reader.readline(), "the command ended before writing its lines"
        left = time.monotonic()  # the reader has gone, as `head -1` exits
        try:
            code = proc.wait(timeout=timeout_s)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        err.seek(0)
        return code, err.read().decode(errors="replace"), time.monotonic() - left


@pytest.fixture(scope="module")
def long_recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("pipe") / "long.mcap"
    with Recorder(path, compression="none") as rec:
        rec.add_stream("n", kind="i64")
        rec.add_stream("s", kind="str")
        for i in range(50_000):  # about 1.5 MB of lines: far more than a pipe holds
            rec.write_value("n", i, i)
            rec.write_value("s", i, "x" * 10)
    return path


def test_run_stops_its_graph_when_the_reader_leaves(tmp_path: Path) -> None:
    code, err, after = closed_pipe("run", HELLO, *ENDLESS, "--no-control", "--record", tmp_path / "r.mcap", lines=1)
    assert (code, err) == (0, ""), err
    assert after < 20  # stopped (the graph closes in at most about 5 s), not run to its end
    with open_recording(tmp_path / "r.mcap") as rec:  # the run ended in order: the recording is whole
        assert rec.complete and rec.problem is None
        assert rec.summary().streams["tripled"].count >= 1


def test_run_whose_reader_left_before_the_first_line(tmp_path: Path) -> None:
    code, err, after = closed_pipe("run", HELLO, *ENDLESS, "--no-control", lines=0)
    assert (code, err) == (0, ""), err
    assert after < 30


def test_a_short_run_that_outlives_its_reader(tmp_path: Path) -> None:
    code, err, _ = closed_pipe("run", HELLO, "--no-control", lines=0)  # all of it fits the pipe's buffer...
    assert (code, err) == (0, ""), err  # ...but the reader is gone when the output is flushed


@pytest.mark.parametrize("lines", [0, 1])
def test_replay_exits_quietly(long_recording: Path, lines: int) -> None:
    code, err, _ = closed_pipe("replay", long_recording, lines=lines)
    assert (code, err) == (0, ""), err


@pytest.mark.parametrize("args", [
    ["--help"], ["run", "--help"], ["schema"], ["inspect", "{rec}"], ["inspect", "{rec}", "--json"],
    ["replay", "{rec}", "--json", "-n", "3"], ["dot", str(HELLO)], ["ps"], ["ps", "--json"],
], ids=lambda a: " ".join(a).replace("{rec}", "REC"))
def test_every_command_exits_quietly_when_nobody_reads(long_recording: Path, args: list[str]) -> None:
    argv = [a.replace("{rec}", str(long_recording)) for a in args]
    code, err, _ = closed_pipe(*argv, lines=0)
    assert (code, err) == (0, ""), err


def test_logs_writes_bytes_and_exits_quietly(tmp_path: Path) -> None:
    runtime = Path(os.environ["FLOWPLEX_RUNTIME_DIR"])
    log = runtime / "pipe-test-logs.log"
    log.write_bytes(b"a line of the log\n" * 100_000)
    try:
        code, err, _ = closed_pipe("logs", "pipe-test-logs", lines=1)
    finally:
        log.unlink()
    assert (code, err) == (0, ""), err


def test_a_reader_that_stays_sees_everything(long_recording: Path) -> None:
    """The pipe's handling changes nothing while somebody reads."""
    done = subprocess.run([sys.executable, "-m", "flowplex", "replay", str(long_recording), "-n", "70000"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert len(done.stdout.splitlines()) == 70_000
    assert done.stderr.startswith("flowplex: 70000 packet(s)")
