"""Small helpers that run a media graph and keep the packets (metadata included)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import flowplex

from .conftest import WAIT_S


def source_yaml(kernel: str, port: str = "out", **options: Any) -> str:
    """A graph of one source node whose output is the graph output ``port``."""
    return (f"nodes:\n  - {{ name: src, kernel: {kernel}, output_ports: [{port}], options: {json.dumps(options)} }}\n"
            f"output_ports: [{port}]\n")


def collect(yaml: str, port: str = "out") -> list[flowplex.Packet]:
    """Run ``yaml`` to the end; every packet that reached ``port``."""
    with flowplex.Graph.from_yaml(yaml) as g:
        poller = g.add_poller(port)
        g.start()
        packets = []
        while (p := poller.next(timeout=WAIT_S)) is not None:
            packets.append(p)
        g.wait_done(timeout=WAIT_S)
    return packets


def frames(path: Path | str, **options: Any) -> list[flowplex.Packet]:
    """The packets a ``VideoFileSource`` on ``path`` emits."""
    return collect(source_yaml("VideoFileSource", path=str(path), **options))


def start_error(yaml: str) -> str:
    """The one-line error the graph fails with (at start or while it runs)."""
    with flowplex.Graph.from_yaml(yaml) as g:
        try:
            g.start()
            g.wait_done(timeout=WAIT_S)
        except flowplex.KernelError as exc:
            assert "\n" not in str(exc)
            return str(exc)
    raise AssertionError("the graph did not fail")
