"""The Ray executor's former import path: ``flowplex.executors.ray`` is its home now.

Kept so that code written for flowplex 0.2 (``from flowplex.cluster import RayExecutor``) keeps
working; new code imports from ``flowplex.executors.ray``. Importing it does not import Ray.
"""

from .executors.ray import ADDRESS_ENV as ADDRESS_ENV
from .executors.ray import INSTALL_HINT as INSTALL_HINT
from .executors.ray import RayExecutor as RayExecutor
from .executors.ray import describe_cluster as describe_cluster
from .executors.ray import ray_installed as ray_installed

__all__ = ["ADDRESS_ENV", "INSTALL_HINT", "RayExecutor", "describe_cluster", "ray_installed"]
