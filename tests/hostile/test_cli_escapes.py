"""No untrusted text reaches the terminal raw: every CLI path that prints text it did not write
(packet values, servers' error messages, node names, agent names) shows control characters as
``\\x1b`` escapes, in a pipe and on a terminal alike."""

from __future__ import annotations

import json
import os
import re
import select
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from flowplex.terminal._sanitize import visible_controls

from .._cli import flowplex_commands_bytes as cli_commands_bytes
from ..agents.test_openai import Server, error
from .conftest import CLI

# OSC 52 (write the clipboard), OSC 0 (the window title), CSI (clear, move), BEL, a lone CR,
# an 8-bit CSI as UTF-8 and a bidi override: each would act on a terminal.
HOSTILE = "a\x1b]52;c;cHduZWQ=\x07b\x1b]0;PWNED\x07c\x1b[2J\x1b[Hd\x07e\rf\u009b31mg\u202eh"
_RAW = re.compile(rb"[\x00-\x08\x0b-\x1f\x7f]|\xc2[\x80-\x9f]|\xe2\x80[\xaa-\xae]")


def assert_clean(data: bytes, where: str) -> None:
    """No C0 control but newline and tab, no DEL, no C1 control, no bidi override, raw."""
    found = _RAW.search(data)
    assert found is None, f"{where}: raw control {found.group()!r} in {data[max(0, found.start() - 40):][:120]!r}"


def flowplex(*args: str, cwd: Path) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([*CLI, *args], capture_output=True, cwd=cwd, timeout=60, check=False,
                          stdin=subprocess.DEVNULL)


def printf_graph(tmp_path: Path) -> Path:
    octal = "".join(f"\\{b:03o}" if b < 0x20 or b >= 0x80 else chr(b) for b in HOSTILE.encode())
    spec = {"nodes": [{"name": "evil", "kernel": "CommandSource", "output_ports": ["out"],
                       "options": {"argv": ["printf", octal.replace("%", "%%")]}}], "output_ports": ["out"]}
    path = tmp_path / "evil.yaml"
    path.write_text(json.dumps(spec))
    return path


@pytest.fixture
def server() -> Iterator[Server]:
    s = Server()
    try:
        yield s
    finally:
        s.close()


def test_run_prints_packet_values_with_their_escapes_shown(tmp_path: Path) -> None:
    proc = flowplex("run", str(printf_graph(tmp_path)), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert_clean(proc.stdout, "stdout")
    assert_clean(proc.stderr, "stderr")
    out = proc.stdout.decode()
    assert "a\\x1b]52;c;cHduZWQ=\\x07b\\x1b]0;PWNED\\x07c\\x1b[2J\\x1b[Hd\\x07e\\rf\\x9b31mg\\u202eh" in out


def test_a_servers_error_message_is_shown_not_obeyed(tmp_path: Path, server: Server) -> None:
    server.behaviour = error(400, f"bad model {HOSTILE}")
    spec = {"nodes": [{"name": "llm", "kernel": "OpenAIStreamSource", "output_ports": ["out"],
                       "options": {"base_url": server.base_url, "model": "m", "prompt": "p", "retries": 0}}],
            "output_ports": ["out"]}
    graph = tmp_path / "llm.yaml"
    graph.write_text(json.dumps(spec))
    proc = flowplex("run", str(graph), cwd=tmp_path)
    assert_clean(proc.stdout, "stdout")
    assert_clean(proc.stderr, "stderr")
    assert "HTTP 400 Bad Request: bad model a\\x1b]52;c;" in proc.stdout.decode()
    warning = [line for line in proc.stderr.decode().splitlines() if line.startswith("flowplex: warning:")]
    assert warning and "bad model a\\x1b]52;c;cHduZWQ=\\x07b\\x1b]0;PWNED" in warning[0], proc.stderr


def test_check_and_run_show_escapes_in_node_names(tmp_path: Path) -> None:
    good = {"nodes": [{"name": f"n{HOSTILE}", "kernel": "RangeSourceKernel", "output_ports": [f"o{HOSTILE}"],
                       "options": {"count": 1}}], "output_ports": [f"o{HOSTILE}"]}
    bad = {"nodes": [{"name": f"n{HOSTILE}", "kernel": f"Nope{HOSTILE}", "output_ports": ["o"]}]}
    (tmp_path / "good.yaml").write_text(json.dumps(good))
    (tmp_path / "bad.yaml").write_text(json.dumps(bad))
    commands = (["check", "good.yaml"], ["check", "bad.yaml"], ["run", "bad.yaml"], ["run", "good.yaml", "--stats"],
                ["dot", "good.yaml"])
    for args, proc in zip(commands, cli_commands_bytes(*commands, cwd=tmp_path), strict=True):
        assert_clean(proc.stdout, f"{args} stdout")
        assert_clean(proc.stderr, f"{args} stderr")
        assert b"\\x1b]0;PWNED" in proc.stdout + proc.stderr, (args, proc.stdout, proc.stderr)


def test_agents_show_escapes_in_output_and_errors(tmp_path: Path) -> None:
    proc = flowplex("agents", "--mode", "log", "--", "sh", "-c", f"printf '%s' '{HOSTILE}'; exit 3", cwd=tmp_path)
    assert proc.returncode == 3, proc.stderr
    assert_clean(proc.stdout, "stdout")
    assert_clean(proc.stderr, "stderr")
    assert b"failed: 1 sh (exit 3)" in proc.stderr
    # A name with escapes is refused by the agents file's check; the refusal itself is clean.
    agents = {"agents": [{"name": f"evil{HOSTILE}", "cmd": ["true"]}]}
    (tmp_path / "agents.yaml").write_text(json.dumps(agents))
    proc = flowplex("agents", "--mode", "log", "-f", "agents.yaml", cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert_clean(proc.stderr, "stderr of a bad agents file")
    assert b"evila\\x1b]52;c;" in proc.stderr and proc.stderr.count(b"\n") == 1


def test_on_a_terminal_the_title_and_screen_stay_ours(tmp_path: Path) -> None:
    pyte = pytest.importorskip("pyte", reason="pyte renders the pseudo-terminal")
    ptyprocess = pytest.importorskip("ptyprocess", reason="ptyprocess provides the pseudo-terminal")
    env = dict(os.environ, TERM="xterm-256color")
    proc = ptyprocess.PtyProcess.spawn([*CLI, "run", "--no-live", str(printf_graph(tmp_path))], cwd=str(tmp_path),
                                       dimensions=(24, 200), env=env)
    screen = pyte.Screen(200, 24)
    stream = pyte.ByteStream(screen)
    raw = b""
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([proc.fd], [], [], 0.1)
            if ready:
                try:
                    data = proc.read(65536)
                except EOFError:
                    break
                raw += data
                stream.feed(data)
            elif not proc.isalive():
                break
        proc.wait()
    finally:
        if proc.isalive():
            proc.terminate(force=True)
    assert proc.exitstatus == 0, raw
    assert screen.title == ""  # OSC 0 did not retitle the terminal
    assert_clean(raw.replace(b"\r\n", b"\n"), "the terminal's bytes")
    text = "\n".join(screen.display)
    assert "a\\x1b]52;c;cHduZWQ=\\x07b\\x1b]0;PWNED" in text


@given(st.text())
def test_visible_controls_leaves_nothing_raw_and_keeps_plain_text(text: str) -> None:
    shown = visible_controls(text)
    assert_clean(shown.encode("utf-8"), "visible_controls")  # encodable too: no lone surrogate left
    if _RAW.search(text.encode("utf-8", "surrogatepass")) is None and not any("\ud800" <= c <= "\udfff" for c in text):
        assert shown == text
