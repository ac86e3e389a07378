"""``python -m flowplex`` runs the same command line as the ``flowplex`` script."""

from __future__ import annotations

import subprocess
import sys


def test_python_m_flowplex_runs_the_cli() -> None:
    result = subprocess.run([sys.executable, "-m", "flowplex", "check", "--help"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "Usage: python -m flowplex check" in result.stdout


def test_python_m_flowplex_reports_a_bad_command() -> None:
    result = subprocess.run([sys.executable, "-m", "flowplex", "chek"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert "No such command 'chek'" in result.stderr
