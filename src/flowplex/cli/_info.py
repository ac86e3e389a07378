"""``flowplex info``: the version, and which compiled speed-ups and cluster this install uses."""

from __future__ import annotations

import sys

import typer

from ._app import app


@app.command()
def info() -> None:
    """Print the version, Python and which compiled speed-ups this install uses."""
    import platform

    import flowplex
    from flowplex import _native
    from flowplex.transport import _accel

    typer.echo(f"flowplex {flowplex.__version__} on Python {platform.python_version()} ({sys.platform})")
    typer.echo(f"scheduler: {_native.mode}")
    transport = "compiled (C)" if _accel.fast is not None else "source (pure Python)"
    typer.echo(f"ring transport: {transport}")
    from flowplex.cluster import INSTALL_HINT, describe_cluster, ray_installed

    if ray_installed():
        from importlib.metadata import PackageNotFoundError, version

        try:
            ray_version = version("ray")
        except PackageNotFoundError:
            ray_version = "(version unknown)"
        typer.echo(f"ray: {ray_version} installed; RayExecutor uses {describe_cluster()}")
    else:
        typer.echo(f"ray: not installed (RayExecutor needs it: {INSTALL_HINT})")
