"""Control answers as text: the tables ``flowplex ps`` and ``flowplex top`` print.

Pure functions of the answers' dicts, apart from the CLI (so that ``flowplex._launch`` can print
``ps`` and ``top --once`` without loading the command-line framework).
"""

from __future__ import annotations

from typing import Any

__all__ = ["ps_text", "top_text"]

PS_HEADER = ["NAME", "KIND", "PID", "STATE", "UPTIME", "NODES", "IN/S", "OUT/S", "ERRORS"]
TOP_HEADER = ["NODE", "IN/S", "OUT/S", "QUEUE", "P50", "P99", "CPU", "EXECUTOR", "WORKER", "STATE", "DROPS"]


def uptime(seconds: float) -> str:
    """``3m07s``, ``2h05m``, ``1d04h``."""
    s = int(seconds)
    if s >= 86400:
        return f"{s // 86400}d{s % 86400 // 3600:02d}h"
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


def rate(value: float | None) -> str:
    """A packets-per-second figure in a few characters: ``950``, ``12.3k``, ``1.2M``."""
    if value is None:
        return "-"
    return f"{value / 1e6:.1f}M" if value >= 1e6 else f"{value / 1e3:.1f}k" if value >= 1e4 else f"{value:.0f}"


def micros(value: int | None) -> str:
    """A duration in µs as ``850µs``, ``1.2ms``, ``3.0s`` (``-`` when not measured)."""
    if value is None:
        return "-"
    return f"{value / 1e6:.1f}s" if value >= 1e6 else f"{value / 1e3:.1f}ms" if value >= 1e3 else f"{value}µs"


def table(header: list[str], rows: list[list[str]]) -> str:
    """Left-aligned columns two spaces apart, a header first."""
    widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(header)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in [header, *rows]]
    return "\n".join(lines) + "\n"


def ps_text(infos: list[dict[str, Any]]) -> str:
    """``ps``'s table: one line per live graph (or agents server)."""
    rows = [[str(i["name"]), str(i.get("kind", "")), str(i["pid"]), str(i.get("state", "")),
             uptime(float(i.get("uptime_s", 0))), str(i.get("nodes", "")), rate(i.get("in_per_s")),
             rate(i.get("out_per_s")), str(i.get("errors", 0))] for i in infos]
    return table(PS_HEADER, rows)


def top_text(name: str, answer: dict[str, Any]) -> str:
    """``top``'s table: a summary line, then one line per node."""
    s = answer["summary"]
    head = (f"{name}  {s['state']}  nodes {s['nodes']}  in {rate(s['in_per_s'])}/s  out {rate(s['out_per_s'])}/s  "
            f"queued {answer['queued']}" + (f"/{answer['queue_limit']}" if answer["queue_limit"] else "")
            + f"  errors {s['errors']}\n")
    rows = [[r["node"], rate(r["in_per_s"]), rate(r["out_per_s"]),
             f"{r['queued']}/{r['bound']}" if r["bound"] else str(r["queued"]),
             micros(r["p50_us"]), micros(r["p99_us"]), "-" if r["core"] is None else f"{100 * r['core']:.0f}%",
             r["executor"], r["worker"], r["state"], str(r["drops"])] for r in answer["rows"]]
    timeouts = [r.get("timeouts") for r in answer["rows"]]
    if any(t is not None for t in timeouts):  # a column only where some input has a timeout_ms
        return head + table([*TOP_HEADER, "TIMEOUTS"],
                            [[*row, "-" if t is None else str(t)] for row, t in zip(rows, timeouts, strict=True)])
    return head + table(TOP_HEADER, rows)
