"""Diagnostics: stats snapshots, tracing hooks, DOT export and the check-config report."""

from ._check import CheckReport as CheckReport
from ._check import check_config as check_config
from ._check import describe_predicate as describe_predicate

__all__ = ["CheckReport", "check_config", "describe_predicate"]
