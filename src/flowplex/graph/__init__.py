"""Graphs: specs, planning, the runtime engine and the public ``Graph`` facade."""

from ._async import AsyncOutputEvents as AsyncOutputEvents
from ._graph import Graph as Graph
from ._graph import GraphState as GraphState
from ._io import Input as Input
from ._io import Poller as Poller

__all__ = ["AsyncOutputEvents", "Graph", "GraphState", "Input", "Poller"]
