"""Graphs: specs, planning, the runtime engine and the public ``Graph`` facade."""

from ._graph import Graph as Graph
from ._graph import GraphState as GraphState
from ._io import Input as Input
from ._io import Poller as Poller

__all__ = ["Graph", "GraphState", "Input", "Poller"]
