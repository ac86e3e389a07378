"""``flowplex schema``: the JSON Schema of the YAML graph format."""

from __future__ import annotations

import json

import typer

from ._app import app


@app.command()
def schema() -> None:
    """Print the JSON Schema of the YAML graph format (for editors)."""
    from flowplex.config import json_schema

    typer.echo(json.dumps(json_schema(), indent=2))
