"""A graph's control endpoint through the Python API: opting in, taps that count every packet,
stop that drains, and what a stalled client costs (nothing: its packets are dropped and counted)."""

from __future__ import annotations

import socket
import time
import zlib
from pathlib import Path

import numpy as np
import pytest

import flowplex
from flowplex.control import connect, live_graphs
from flowplex.errors import ControlError, UsageError

CHAIN = """
input_ports: [x]
nodes:
  - { name: p1, kernel: PassThroughKernel, input_ports: [x], output_ports: [b] }
  - { name: p2, kernel: PassThroughKernel, input_ports: [b], output_ports: [y] }
output_ports: [y]
"""


def _names() -> list[str]:
    return sorted(i["name"] for i in live_graphs())


def test_control_is_opt_in_by_keyword_or_yaml_key(tmp_path: Path, runtime: Path) -> None:
    g = flowplex.Graph.from_yaml(CHAIN)
    g.start()
    assert g.control_name is None and _names() == []
    g.close()
    with flowplex.Graph.from_yaml(CHAIN) as g:
        g.start(control="cam")
        assert g.control_name == "cam" and _names() == ["cam"]
    assert _names() == []  # close() removed it
    (tmp_path / "front door.yaml").write_text("control: true\n" + CHAIN)
    (tmp_path / "named.yaml").write_text("control: lobby\n" + CHAIN)
    with flowplex.Graph.from_yaml_file(tmp_path / "front door.yaml") as a, \
            flowplex.Graph.from_yaml_file(tmp_path / "front door.yaml") as b, \
            flowplex.Graph.from_yaml_file(tmp_path / "named.yaml") as c:
        a.start()
        b.start()
        c.start()
        assert (a.control_name, b.control_name, c.control_name) == ("front-door", "front-door-2", "lobby")
        d = flowplex.Graph.from_yaml_file(tmp_path / "named.yaml")
        with pytest.raises(ControlError, match="a live graph is already named 'lobby'"):
            d.start()
        d.close()
        e = flowplex.Graph.from_yaml_file(tmp_path / "named.yaml")
        e.start(control=False)  # the keyword wins over the YAML key
        assert e.control_name is None
        e.close()
    with pytest.raises(UsageError, match=r"start\(control=\.\.\.\) takes a name, True or False, not int"):
        flowplex.Graph.from_yaml(CHAIN).start(control=3)  # type: ignore[arg-type]
    with pytest.raises(flowplex.ConfigError, match="control"):
        flowplex.Graph.from_yaml("control: 'no spaces'\n" + CHAIN)


def test_echo_sees_every_packet_in_order_when_it_keeps_up(runtime: Path) -> None:
    with flowplex.Graph.from_yaml(CHAIN) as g:
        g.add_poller("y")
        g.start(control="t")
        with connect("t") as c:
            assert c.request("echo", stream="b", n=300) == {"ok": True, "stream": "b"}
            for i in range(300):
                g.send("x", i, ts=i)
                if i % 50 == 0:
                    time.sleep(0.03)  # a stream the client keeps up with
            frames = list(c.events())
        packets = [f for f in frames if isinstance(f, dict) and f.get("ev") == "packet"]
        assert [p["value"] for p in packets] == list(range(300)) and [p["ts"] for p in packets] == list(range(300))
        assert frames[-1] == {"ev": "end", "reason": "count", "sent": 300, "dropped": 0}


def test_a_stalled_client_costs_nothing_and_every_packet_is_sent_or_counted(runtime: Path) -> None:
    total = 30_000
    g = flowplex.Graph.from_yaml(CHAIN)
    g.start(control="t")
    c = connect("t", timeout=30)
    c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    c.request("echo", stream="b")
    for i in range(total):
        g.send("x", i, ts=i)
    g.close_all_inputs()
    g.wait_done(timeout=60)  # the stalled client held nothing up
    frames = list(c.events())  # now read what was kept for it
    c.close()
    g.close()
    received = [f["value"] for f in frames if isinstance(f, dict) and f.get("ev") == "packet"]
    end = frames[-1]
    assert end["ev"] == "end" and end["reason"] == "closed" and end["sent"] == len(received)
    assert len(received) + end["dropped"] == total  # none lost uncounted
    assert end["dropped"] > 0
    assert received == sorted(set(received))  # in order, no duplicates


def test_echo_describes_frames_and_writes_their_bytes(runtime: Path) -> None:
    with flowplex.Graph.from_yaml(CHAIN) as g:
        g.start(control="t")
        frame = np.arange(24, dtype=np.uint16).reshape(2, 3, 4)
        with connect("t") as c:
            c.request("echo", stream="x", n=1, raw=True)
            packet = flowplex.Packet.from_numpy(frame, 7)
            packet.set_metadata("camera", "left")
            g.send("x", packet)
            event, data, end = list(c.events())
    assert isinstance(event, dict) and event["value"] == {"shape": [2, 3, 4], "dtype": "uint16", "nbytes": 48,
                                                          "crc32": f"{zlib.crc32(frame.tobytes()):08x}"}
    assert event["ts"] == 7 and event["type"] == "Buffer" and event["metadata"] == {"camera": "left"}
    assert event["raw"] == 48 and data == frame.tobytes()
    assert end == {"ev": "end", "reason": "count", "sent": 1, "dropped": 0}


def test_hz_counts_every_packet_whatever_its_size(runtime: Path) -> None:
    with flowplex.Graph.from_yaml(CHAIN) as g:
        g.start(control="t")
        with connect("t") as c:
            c.request("hz", stream="y", period_s=0.05)
            big = np.zeros(1 << 20, dtype=np.uint8)
            for i in range(200):
                g.send("x", big if i % 2 else i, ts=i)
            g.close_all_inputs()
            g.wait_done(timeout=30)
            reports = [f for f in c.events() if isinstance(f, dict)]
    assert reports[-1] == {"ev": "end", "reason": "closed", "count": 200}
    last = [r for r in reports if r.get("ev") == "hz"][-1]
    assert last["count"] == 200 and last["window"] == 200 and last["rate_hz"] > 0


def test_stop_drains_a_graph_fed_by_its_host_and_sources(runtime: Path) -> None:
    yaml = """
nodes:
  - { name: src, kernel: RangeSourceKernel, output_ports: [a], options: { count: 1000000000 }, rate: 500 }
  - { name: p, kernel: PassThroughKernel, input_ports: [a], output_ports: [y] }
output_ports: [y]
"""
    with flowplex.Graph.from_yaml(yaml) as g:
        poller = g.add_poller("y")
        g.start(control="t")
        time.sleep(0.1)
        with connect("t") as c:
            assert c.request("stop") == {"ok": True, "stopping": "drain"}
        g.wait_done(timeout=10)
        values = []
        while (p := poller.try_next()) is not None:
            values.append(p.as_int())
        assert values and values == list(range(len(values)))
        assert g.state == flowplex.GraphState.TERMINATED


def test_top_reports_rates_timings_and_states(runtime: Path) -> None:
    with flowplex.Graph.from_yaml(CHAIN) as g:
        g.add_poller("y", capacity=4, overflow="block")
        g.start(control="t")
        with connect("t") as c:
            first = c.request("top")
            assert [r["node"] for r in first["rows"]] == ["p1", "p2"]
            assert {r["state"] for r in first["rows"]} == {"waiting on input x", "waiting on input b"}
            for i in range(2000):
                g.send("x", i, ts=i, timeout=5) if i < 4 else g.try_send("x", i, ts=i)
            time.sleep(1.1)  # one sample interval
            rows = {r["node"]: r for r in c.request("top")["rows"]}
        assert rows["p1"]["p50_us"] is not None  # top switched timing on
        assert rows["p2"]["state"] == "blocked on output y"  # the poller of `y` is full and blocks
        assert rows["p1"]["queued"] == 0 or rows["p1"]["state"] == "blocked on output b"
