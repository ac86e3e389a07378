"""Graphs: the runtime engine and the public ``Graph`` facade (specs and plans: ``flowplex.spec``)."""

from .._state import GraphState as GraphState
from ._graph import Graph as Graph
from ._io import Input as Input
from ._io import Poller as Poller

__all__ = ["AsyncOutputEvents", "Graph", "GraphState", "Input", "Poller"]


def __getattr__(name: str) -> object:
    # asyncio costs ~50 ms to import: load the async part only when it is used.
    if name == "AsyncOutputEvents":
        from ._async import AsyncOutputEvents

        return AsyncOutputEvents
    msg = f"module {__name__!r} has no attribute {name!r}"
    raise AttributeError(msg)
