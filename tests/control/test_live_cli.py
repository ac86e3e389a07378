"""The live-graph commands end to end: real ``flowplex`` subprocesses, a graph detached with
``run -d``, its control socket, and what ``ps``, ``top``, ``echo``, ``hz``, ``dot``, ``stop``,
``kill`` and ``logs`` print."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import time
from pathlib import Path

import pytest

from .conftest import SLOW_SOURCE, flowplex, gone


def _detach(tmp_path: Path, *args: str, yaml: str = SLOW_SOURCE, file: str = "cam.yaml") -> tuple[str, int]:
    graph = tmp_path / file
    graph.write_text(yaml)
    done = flowplex("run", "-d", *args, str(graph), cwd=tmp_path, check=True)
    name = done.stdout.strip()
    info = json.loads(flowplex("ps", "--json", cwd=tmp_path, check=True).stdout)
    pids = {i["name"]: i["pid"] for i in info}
    assert name in pids, (name, info)
    return name, pids[name]


def _kill(pid: int) -> None:
    """Leave no graph behind, whatever failed."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def test_a_detached_graph_is_listed_watched_tapped_and_stopped(tmp_path: Path, runtime: Path) -> None:
    name, pid = _detach(tmp_path)
    try:
        assert name == "cam"
        assert os.getsid(pid) == pid  # its own session: no terminal's SIGHUP reaches it
        os.kill(pid, signal.SIGHUP)  # and a stray one is ignored
        ps = flowplex("ps", cwd=tmp_path, check=True).stdout.splitlines()
        assert ps[0].split() == ["NAME", "KIND", "PID", "STATE", "UPTIME", "NODES", "IN/S", "OUT/S", "ERRORS"]
        assert ps[1].split()[:6] == ["cam", "graph", str(pid), "RUNNING", ps[1].split()[4], "3"]

        top = json.loads(flowplex("top", name, "--once", "--json", cwd=tmp_path, check=True).stdout)
        assert [r["node"] for r in top["rows"]] == ["src", "double", "sink"]
        assert {r["executor"] for r in top["rows"]} == {"default"}
        assert all(r["worker"] == f"pid {pid}" for r in top["rows"])
        text = flowplex("top", name, "--once", cwd=tmp_path, check=True).stdout
        assert re.match(r"cam  RUNNING  nodes 3  in \S+/s  out \S+/s", text), text
        assert text.splitlines()[1].split() == ["NODE", "IN/S", "OUT/S", "QUEUE", "P50", "P99", "CPU", "EXECUTOR",
                                                "WORKER", "STATE", "DROPS"]

        echo = flowplex("echo", name, "b", "-n", "5", cwd=tmp_path, check=True)
        lines = echo.stdout.splitlines()
        values = [int(line.split("\t")[2]) for line in lines]
        assert len(values) == 5 and all(v % 2 == 0 for v in values)  # `double`'s output
        assert [int(line.split("\t")[0].removeprefix("ts=")) for line in lines] == [v // 2 for v in values]
        assert all(line.split("\t")[1] == "I64" for line in lines)
        assert values == list(range(values[0], values[0] + 10, 2))  # consecutive: none dropped at 200/s
        assert echo.stderr.strip() == "flowplex: 5 packet(s) from b; 0 dropped by this client"
        first = json.loads(flowplex("echo", name, "a", "-n", "1", "--json", cwd=tmp_path, check=True).stdout)
        assert first["type"] == "I64" and first["ts"] == first["value"]

        hz = json.loads(flowplex("hz", name, "b", "-n", "1", "--period", "1", "--json", cwd=tmp_path,
                                 check=True).stdout)
        assert 120 < hz["rate_hz"] < 280, hz  # the source's `rate: 200`
        assert hz["count"] >= 100 and hz["min_s"] <= hz["mean_s"] <= hz["max_s"]

        as_json = json.loads(flowplex("dot", name, "--json", cwd=tmp_path, check=True).stdout)
        assert as_json["dot"].startswith("digraph")
        dot = flowplex("dot", name, cwd=tmp_path, check=True).stdout
        assert dot.startswith("digraph") and 'label="double\\n(ScaleKernel' in dot and "/s" in dot  # live rates

        stop = flowplex("stop", name, cwd=tmp_path, check=True)
        assert stop.stderr.strip() == "flowplex: cam stopped"
        assert gone(pid)
        assert json.loads(flowplex("ps", "--json", cwd=tmp_path, check=True).stdout) == []
        assert not (runtime / "cam.sock").exists()
        log = flowplex("logs", name, cwd=tmp_path, check=True).stdout
        assert log.strip() == "flowplex: 0 packet(s) from 0 output(s)"  # drained and exited 0
        record = json.loads(flowplex("logs", name, "--json", cwd=tmp_path, check=True).stdout)
        assert record == {"name": "cam", "path": str(runtime / "cam.log"), "live": False, "log": log}
    finally:
        _kill(pid)


def test_stop_drains_what_is_in_flight_and_the_output_is_complete(tmp_path: Path, runtime: Path) -> None:
    yaml = SLOW_SOURCE.replace("  - { name: sink, kernel: SinkKernel, input_ports: [b] }\n", "") + "output_ports: [b]\n"
    name, pid = _detach(tmp_path, yaml=yaml)
    time.sleep(0.3)
    flowplex("stop", name, cwd=tmp_path, check=True)
    assert gone(pid)
    lines = flowplex("logs", name, cwd=tmp_path, check=True).stdout.splitlines()
    printed = [int(line.split("\t")[2]) for line in lines if line.startswith("b\t")]
    assert printed and printed == [2 * i for i in range(len(printed))]  # every packet, in order, none lost
    assert lines[-1] == f"flowplex: {len(printed)} packet(s) from 1 output(s)"


def test_names_count_up_an_explicit_name_must_be_free_and_kill_leaves_nothing(tmp_path: Path, runtime: Path) -> None:
    first, pid1 = _detach(tmp_path)
    second, pid2 = _detach(tmp_path)
    try:
        assert (first, second) == ("cam", "cam-2")
        taken = flowplex("run", "--name", "cam", str(tmp_path / "cam.yaml"), cwd=tmp_path)
        assert taken.returncode == 2
        assert re.fullmatch(r"flowplex: error: .*cam\.yaml: a live graph is already named 'cam'; choose another name "
                            r"\(--name\) or stop it \(flowplex stop cam\)\n", taken.stderr), taken.stderr
        killed = flowplex("kill", second, "--json", cwd=tmp_path, check=True)
        assert json.loads(killed.stdout) == {"name": "cam-2", "pid": pid2, "killed": True, "ended": True}
        assert gone(pid2)
        assert [i["name"] for i in json.loads(flowplex("ps", "--json", cwd=tmp_path, check=True).stdout)] == ["cam"]
        os.kill(pid1, signal.SIGKILL)  # kill -9 behind flowplex's back: the socket stays until the next ps
        assert gone(pid1)
        assert (runtime / "cam.sock").exists()
        assert flowplex("ps", "--json", cwd=tmp_path, check=True).stdout.strip() == "[]"
        assert not (runtime / "cam.sock").exists()
    finally:
        _kill(pid1)
        _kill(pid2)


def test_stop_now_cancels(tmp_path: Path, runtime: Path) -> None:
    name, pid = _detach(tmp_path, "--name", "fast")
    assert name == "fast"
    stopped = flowplex("stop", name, "--now", "--json", cwd=tmp_path, check=True)
    assert json.loads(stopped.stdout) == {"name": "fast", "pid": pid, "stopping": "cancel", "ended": True}
    assert gone(pid)
    assert "cancelled" in flowplex("logs", name, cwd=tmp_path, check=True).stdout


def test_mistakes_are_one_line(tmp_path: Path, runtime: Path) -> None:
    graph = tmp_path / "g.yaml"
    graph.write_text(SLOW_SOURCE)
    for args, code, pattern in [
        (("top", "nope", "--once"), 1, r"flowplex: error: no live graph named 'nope' \(none is live: flowplex ps\)"),
        (("stop", "nope"), 1, r"flowplex: error: no live graph named 'nope' \(none is live: flowplex ps\)"),
        (("logs", "nope"), 1, r"flowplex: error: no log for 'nope' \(flowplex run -d writes one; .*\)"),
        (("run", "--name", "bad name", str(graph)), 2, r"flowplex: error: --name: bad graph name 'bad name': .*"),
        (("run", "-d", "--no-control", str(graph)), 2, r"flowplex: error: --detach needs the control socket.*"),
        (("dot", "no/such.yaml"), 2, r"flowplex: error: no/such\.yaml is not a file: give a graph's YAML file or "
                                     r"the name of a live graph \(flowplex ps\)"),
    ]:
        done = flowplex(*args, cwd=tmp_path)
        assert done.returncode == code, (args, done.stderr)
        assert re.fullmatch(pattern + r"\n", done.stderr), (args, done.stderr)
    name, pid = _detach(tmp_path, file="g.yaml")
    try:
        wrong = flowplex("echo", name, "bb", "-n", "1", cwd=tmp_path)
        assert wrong.returncode == 1
        assert wrong.stderr.startswith("flowplex: error: g: no stream named 'bb'; did you mean `b`?"), wrong.stderr
        near = flowplex("top", "gg", "--once", cwd=tmp_path)
        assert near.stderr == "flowplex: error: no live graph named 'gg'; did you mean `g`?\n"
    finally:
        flowplex("kill", name, cwd=tmp_path)
        assert gone(pid)


def test_a_graph_that_fails_to_start_is_reported_by_run_d(tmp_path: Path, runtime: Path) -> None:
    graph = tmp_path / "bad.yaml"
    graph.write_text("nodes:\n  - { name: x, kernel: NoSuchKernel }\n")
    done = flowplex("run", "-d", str(graph), cwd=tmp_path)
    assert done.returncode == 2
    assert "kernel `NoSuchKernel` not registered" in done.stderr
    assert done.stdout == ""
    assert not list(runtime.glob("*.log")) and not list(runtime.glob(".starting-*"))


FAST = """
import sys
from flowplex._launch import main
sys.argv = ["flowplex", *sys.argv[1:]]
try:
    main()
except SystemExit as exc:
    print("exit", exc.code, "typer" in sys.modules, file=sys.stderr)
"""


def test_ps_and_top_once_skip_the_cli_framework_and_print_what_it_prints(tmp_path: Path, runtime: Path) -> None:
    import subprocess
    import sys

    name, pid = _detach(tmp_path)
    try:
        for args in (["ps"], ["ps", "--json"], ["top", name, "--once"], ["top", "--json", name, "--once"]):
            fast = subprocess.run([sys.executable, "-c", FAST, *args], capture_output=True, text=True, timeout=30,
                                  check=False)
            assert fast.stderr.strip() == "exit 0 False", (args, fast.stderr)  # answered without typer
            slow = subprocess.run([sys.executable, "-c", "from flowplex.cli import main; main()", *args],
                                  capture_output=True, text=True, timeout=30, check=False)
            assert slow.returncode == 0, slow.stderr
            if "--json" in args:
                a, b = json.loads(fast.stdout), json.loads(slow.stdout)
                assert _shape(a) == _shape(b), args
            else:
                width = 2 if args[0] == "ps" else 1  # (the figures after them move between two calls)
                assert [line.split()[:width] for line in fast.stdout.splitlines()] == \
                    [line.split()[:width] for line in slow.stdout.splitlines()], args
        unknown = subprocess.run([sys.executable, "-c", FAST, "top", "nope", "--once"], capture_output=True,
                                 text=True, timeout=30, check=False)
        assert unknown.stderr.splitlines() == ["flowplex: error: no live graph named 'nope' (live: cam)",
                                               "exit 1 False"]
        other = subprocess.run([sys.executable, "-c", FAST, "ps", "--help"], capture_output=True, text=True,
                               timeout=30, check=False)
        assert "Usage: " in other.stdout and other.stderr.strip() == "exit 0 True"  # the CLI's own forms
    finally:
        _kill(pid)


def _shape(value: object) -> object:
    """Keys and nesting, without the figures that move between two calls."""
    if isinstance(value, dict):
        return {k: _shape(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_shape(v) for v in value]
    return "number" if value is None or isinstance(value, (int, float)) else type(value).__name__  # None: not timed yet


def test_top_refreshes_on_a_terminal_and_q_quits(tmp_path: Path, runtime: Path) -> None:
    import fcntl
    import pty
    import select
    import struct
    import subprocess
    import sys
    import termios

    import pyte

    name, pid = _detach(tmp_path)
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 110, 0, 0))
    proc = subprocess.Popen([sys.executable, "-m", "flowplex", "top", name, "--interval", "0.2"], stdin=slave,
                            stdout=slave, stderr=slave, cwd=tmp_path, start_new_session=True)
    os.close(slave)
    screen = pyte.Screen(110, 24)
    stream = pyte.ByteStream(screen)

    def read_until(predicate: object, seconds: float = 15) -> str:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if select.select([master], [], [], 0.1)[0]:
                with contextlib.suppress(OSError):
                    stream.feed(os.read(master, 65536))
            text = "\n".join(screen.display)
            if predicate(text):  # type: ignore[operator]
                return text
        pytest.fail("the screen never showed it:\n" + "\n".join(screen.display))

    try:
        shown = read_until(lambda t: "NODE" in t and "double" in t)
        assert re.search(r"^cam  RUNNING  nodes 3", shown, re.M), shown
        assert re.search(r"^double +\S+ +\S+ +\S+ +\S+ +\S+ +\S+ +default +pid \d+ ", shown, re.M), shown
        # It refreshes: `double`'s rate (the source's 200/s) shows once a sample interval passed.
        read_until(lambda t: re.search(r"^double +(1[5-9]\d|2[0-4]\d) ", t, re.M) is not None)
        os.write(master, b"q")
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
        _kill(pid)


FRAMES = """import numpy as np, flowplex

@flowplex.kernel("TestFrames")
class Frames(flowplex.Kernel):
    def __init__(self):
        self.n = 0

    def process(self, cc):
        cc.emit(0, flowplex.Packet.from_numpy(np.full((4, 6), self.n, dtype=np.uint8), self.n))
        self.n += 1
"""


def test_echo_shows_frames_and_writes_their_bytes_with_raw(tmp_path: Path, runtime: Path) -> None:
    import zlib

    import numpy as np

    (tmp_path / "frames.py").write_text(FRAMES)
    yaml = ("imports: [frames.py]\nnodes:\n  - { name: cam, kernel: TestFrames, output_ports: [f], rate: 100 }\n"
            "  - { name: sink, kernel: SinkKernel, input_ports: [f] }\n")
    name, pid = _detach(tmp_path, yaml=yaml, file="frames.yaml")
    try:
        out = tmp_path / "raw"
        done = flowplex("echo", name, "f", "-n", "3", "--raw", str(out), cwd=tmp_path, check=True)
        lines = done.stdout.splitlines()
        assert len(lines) == 3
        files = sorted(out.iterdir())
        assert len(files) == 3
        for line, file in zip(lines, files, strict=True):
            ts = int(line.split("\t")[0].removeprefix("ts="))
            data = np.full((4, 6), ts, dtype=np.uint8).tobytes()
            assert line == f"ts={ts}\tBuffer\tuint8[4x6] 24 B crc32={zlib.crc32(data):08x}"
            assert file.name.endswith(f"-{ts}.bin") and file.read_bytes() == data
    finally:
        _kill(pid)


def test_the_yaml_control_key_names_or_silences_a_run(tmp_path: Path, runtime: Path) -> None:
    name, pid = _detach(tmp_path, yaml="control: lobby\n" + SLOW_SOURCE)
    try:
        assert name == "lobby"
        wrong = flowplex("top", name, "--once", cwd=tmp_path, check=True)
        assert "lobby  RUNNING" in wrong.stdout
    finally:
        _kill(pid)
    quiet = tmp_path / "quiet.yaml"
    quiet.write_text("control: false\nnodes:\n  - { name: src, kernel: RangeSourceKernel, output_ports: [a], "
                     "options: { count: 3 } }\noutput_ports: [a]\n")
    done = flowplex("run", str(quiet), cwd=tmp_path, check=True)
    assert done.stdout.count("a\t") == 3
    name, pid = _detach(tmp_path, yaml="control: false\n" + SLOW_SOURCE, file="quiet-slow.yaml")
    try:  # a detached graph is reached by its name: -d serves it all the same, and says so in its log
        assert name == "quiet-slow"
        log = flowplex("logs", name, cwd=tmp_path, check=True).stdout
        assert "run -d serves the control socket despite `control: false`" in log
    finally:
        _kill(pid)


def test_an_agents_session_is_not_asked_for_a_graphs_ops_by_mistake(tmp_path: Path, runtime: Path) -> None:
    from flowplex.control import ControlServer

    with ControlServer("crew", {"agents": lambda s, r: {}}, dict, kind="agents") as server:
        del server
        done = flowplex("top", "crew", "--once", cwd=tmp_path)
        assert done.returncode == 1
        assert done.stderr == "flowplex: error: crew: crew is an agents: it has no op 'top' (its ops: agents, info)\n"
