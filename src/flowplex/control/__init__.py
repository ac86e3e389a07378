"""Live graphs: a running graph's control socket, and the client that ``flowplex ps/top/echo/...`` use.

Every graph run by ``flowplex run`` (and any graph started with ``control=``) serves a Unix
socket in the user's runtime directory (``_paths``): small versioned frames (``_wire``) served by
one non-blocking thread (``_server``); the graph's ops (``_graph``) read its snapshots and tap
its edges (``_taps``) without slowing it; ``_client`` connects by name and lists what is live.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._client import Client as Client
from ._client import connect as connect
from ._client import live_graphs as live_graphs
from ._paths import runtime_dir as runtime_dir
from ._server import ControlServer as ControlServer
from ._server import Session as Session

if TYPE_CHECKING:
    from ._graph import GraphControl as GraphControl

__all__ = ["Client", "ControlServer", "GraphControl", "Session", "connect", "live_graphs", "runtime_dir"]


def __getattr__(name: str) -> Any:
    # The graph side loads packets (and numpy): a client (`flowplex ps`) does without it.
    if name == "GraphControl":
        from ._graph import GraphControl

        return GraphControl
    raise AttributeError(name)
