"""Diagnostics: stats snapshots, tracing hooks, DOT export and the check-config report."""

from ._check import CheckReport as CheckReport
from ._check import check_config as check_config
from ._check import describe_predicate as describe_predicate
from ._dot import graphviz_available as graphviz_available
from ._dot import render_svg as render_svg
from ._dot_view import DotView as DotView
from ._metrics import GraphCollector as GraphCollector
from ._metrics import MetricsServer as MetricsServer
from ._metrics import serve_metrics as serve_metrics
from ._stats import EdgeStats as EdgeStats
from ._stats import ExecutorStats as ExecutorStats
from ._stats import GraphStats as GraphStats
from ._stats import NodeStats as NodeStats
from ._stats import PollerStats as PollerStats
from ._stats import PortStats as PortStats
from ._trace import Tracer as Tracer

__all__ = [
    "CheckReport",
    "DotView",
    "EdgeStats",
    "ExecutorStats",
    "GraphCollector",
    "GraphStats",
    "MetricsServer",
    "NodeStats",
    "PollerStats",
    "PortStats",
    "Tracer",
    "check_config",
    "describe_predicate",
    "graphviz_available",
    "render_svg",
    "serve_metrics",
]
