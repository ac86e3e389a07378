"""``flowplex agents ls NAME`` and ``flowplex agents send NAME AGENT TEXT``: a detached server's
agents from a script, and what ``flowplex attach`` shares with them (finding the server, naming
an agent by number or name, the keys a text stands for)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Final

from .._suggest import did_you_mean
from ..control import Client, connect
from ..errors import ControlError
from ._sanitize import visible_controls

__all__ = ["INPUT_PIECE", "AgentNotFound", "agents_ls", "agents_send", "find_agent", "open_agents", "text_keys"]

INPUT_PIECE: Final = 8 * 1024
"""Bytes per ``input`` request: as JSON escapes (six bytes for a control key) well under the
64 KiB a client's frame may hold."""
ENTER: Final = b"\r"
"""What Enter sends in typing mode (a terminal in raw mode): the PTY's line discipline makes it
the newline a reading program sees, and a program in raw mode sees the key it expects."""


class AgentNotFound(ControlError):
    """No agent of a detached server has that number or name."""


def open_agents(name: str, timeout: float | None = 5.0) -> tuple[Client, dict[str, Any]]:
    """A connection to the detached agents server ``name`` and its ``info``; ``ControlError``
    when there is none, or when ``name`` is a graph rather than agents."""
    client = connect(name, timeout=timeout)
    try:
        info = client.request("info")
    except ControlError:
        client.close()
        raise
    if info.get("kind") != "agents":
        client.close()
        msg = (f"{name!r} is a live {info.get('kind', 'graph')}, not agents started with `flowplex agents -d` "
               f"(see flowplex ps)")
        raise ControlError(msg)
    return client, info


def find_agent(agent: str, rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The row of ``agent``: its number as the view shows it (1-based), or its name."""
    for row in rows:
        if row["name"] == agent:
            return row
    if agent.isdigit():
        for row in rows:
            if row["number"] == int(agent):
                return row
    listed = ", ".join(f"{r['number']} {r['name']}" for r in rows) or "none"
    msg = f"no agent {agent!r}{did_you_mean(agent, [r['name'] for r in rows])} (agents: {listed})"
    raise AgentNotFound(msg)


def text_keys(text: str) -> bytes:
    r"""The keys ``agents send`` types for ``text``: ``\n`` (the two characters, or a newline) is
    Enter, ``\\`` a backslash; the rest as UTF-8.

    >>> text_keys(r"ls -l\n") + text_keys("a\\\\n")
    b'ls -l\ra\\n'
    """
    out = bytearray()
    i = 0
    while i < len(text):
        pair = text[i:i + 2]
        if pair == "\\n":
            out += ENTER
            i += 2
        elif pair == "\\\\":
            out += b"\\"
            i += 2
        else:
            out += ENTER if text[i] == "\n" else text[i].encode()
            i += 1
    return bytes(out)


def agents_ls(name: str, *, as_json: bool) -> int:
    """Print the agents of server ``name``: number, name, state, pid, exit code. Exit code."""
    import typer  # (on first use: `flowplex attach` starts without the CLI framework)

    try:
        client, info = open_agents(name)
        with client:
            rows = client.request("agents")["agents"]
    except ControlError as exc:
        _say(f"flowplex agents ls: {exc}")
        return 1
    if as_json:
        typer.echo(json.dumps({"name": info.get("name", name), "pid": info.get("pid"), "agents": rows}))
        return 0
    table = [("#", "NAME", "STATE", "PID", "EXIT")]
    table += [(str(r["number"]), r["name"], r["state"], str(r["pid"]) if r["pid"] is not None else "-",
               str(r["exit_code"]) if r["exit_code"] is not None else "-") for r in rows]
    widths = [max(len(row[c]) for row in table) for c in range(len(table[0]))]
    for row in table:
        typer.echo(visible_controls("  ".join(cell.rjust(w) if c in (0, 3, 4) else cell.ljust(w)
                                              for c, (cell, w) in enumerate(zip(row, widths, strict=True))).rstrip()))
    return 0


def agents_send(name: str, agent: str, text: str, *, as_json: bool) -> int:
    """Type ``text`` (see :func:`text_keys`) into ``agent`` of server ``name``. Exit code: 0, 2
    for an agent that is not there, 1 for anything else (no server, an agent that does not run)."""
    import typer  # (on first use: `flowplex attach` starts without the CLI framework)

    keys = text_keys(text)
    try:
        client, info = open_agents(name)
        with client:
            row = find_agent(agent, client.request("agents")["agents"])
            if not row["controllable"]:
                msg = f"agent {row['number']} {row['name']} is not a command: it takes no keys"
                raise ControlError(msg)
            if row["finished"] or not row["started"]:
                msg = f"agent {row['number']} {row['name']} does not run ({row['state']}): nothing typed"
                raise ControlError(msg)
            for i in range(0, len(keys), INPUT_PIECE):
                client.request("input", agent=row["sid"], data=keys[i:i + INPUT_PIECE].decode("latin-1"))
    except AgentNotFound as exc:
        _say(f"flowplex agents send: {exc}")
        return 2
    except ControlError as exc:
        _say(f"flowplex agents send: {exc}")
        return 1
    if as_json:
        typer.echo(json.dumps({"name": info.get("name", name), "agent": {k: row[k] for k in ("number", "name", "sid")},
                               "bytes": len(keys)}))
    return 0


def _say(text: str) -> None:
    import typer  # (on first use: `flowplex attach` starts without the CLI framework)

    typer.echo(visible_controls(text), err=True)
