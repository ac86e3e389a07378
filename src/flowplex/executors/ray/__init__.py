"""The Ray executor: a graph's nodes in Ray actors, on this machine or a cluster (``RayExecutor``).

Importing this package does not import Ray; connecting (``Graph.start``) does.
"""

from ._connect import ADDRESS_ENV as ADDRESS_ENV
from ._connect import INSTALL_HINT as INSTALL_HINT
from ._connect import describe_cluster as describe_cluster
from ._connect import ray_installed as ray_installed
from ._executor import RayExecutor as RayExecutor

__all__ = ["ADDRESS_ENV", "INSTALL_HINT", "RayExecutor", "describe_cluster", "ray_installed"]
