"""The benchmark charts and tables, drawn by matplotlib from the benchmarks' ``--json`` output.

``docs/benchmarks/<name>.json`` is what ``python benchmarks/<name>.py --json PATH`` wrote on a
real run (the machine and the date are in it). At build time each file becomes a table and PNG
charts, placed where the page ``benchmarks.md`` has the marker ``<!-- bench:<name> -->``.
"""

from __future__ import annotations

import io
import json
import math
from pathlib import Path
from typing import Any

_RATE_UNITS = ("pkt/s", "frames/s")


def load(directory: Path) -> dict[str, dict[str, Any]]:
    """Every results file under ``directory``, by benchmark name (the file's stem)."""
    return {p.stem: json.loads(p.read_text(encoding="utf-8")) for p in sorted(directory.glob("*.json"))}


def charts(name: str, result: dict[str, Any]) -> dict[str, bytes]:
    """PNG charts for one results file, as ``{file name: bytes}``."""
    import matplotlib

    matplotlib.use("Agg")  # no display: render to memory
    rows = result["rows"]
    out: dict[str, bytes] = {}
    rates = [r for r in rows if r["unit"] in _RATE_UNITS]
    costs = [r for r in rows if r["unit"] not in _RATE_UNITS]
    if rates:
        out[f"{name}-rates.png"] = _bars(rates, "higher is better (log scale)", "rate")
    if costs:
        out[f"{name}-costs.png"] = _bars(costs, "lower is better (log scale)", "cost")
    out[f"{name}-advantage.png"] = _advantage(rows)
    return out


def markdown(name: str, result: dict[str, Any], chart_names: list[str]) -> str:
    """The table of every row and the charts, for the page's ``<!-- bench:name -->`` marker."""
    m = result["machine"]
    v = result["versions"]
    engines = [k for k in v if k != "flowplex"]
    baseline = engines[0] if engines else "baseline"
    lines = [
        f"Measured on {result['date']} with `{result['benchmark']}`"
        f"{' --quick' if result.get('quick') else ''}: {m['cpus']} CPUs ({m['cpu']}), {m['system']} "
        f"{m['arch']}, Python {m['python']}; flowplex {v['flowplex']} (scheduler: "
        f"{result.get('flowplex_scheduler', '?')}), {baseline} {v.get(baseline, '?')}. "
        f"Raw figures: [`{name}.json`](benchmarks/{name}.json).",
        "",
    ]
    lines += [f"![{c.removesuffix('.png')}](benchmarks/{c})\n" for c in chart_names]
    lines += [f"| workload | flowplex | {baseline} | unit | flowplex / {baseline} |", "|---|--:|--:|---|--:|"]
    for r in rows_of(result):
        verdict = "faster" if r["higher_is_better"] else "the cost"
        lines.append(f"| {r['workload']} | {_num(r['flowplex'])} | {_num(r[baseline])} | {r['unit']} | "
                     f"{r['ratio']:.2f}x {verdict} |")
    return "\n".join(lines) + "\n"


def rows_of(result: dict[str, Any]) -> list[dict[str, Any]]:
    """The rows of a results file, as printed."""
    rows: list[dict[str, Any]] = result["rows"]
    return rows


def _num(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.1f}"


def _bars(rows: list[dict[str, Any]], subtitle: str, what: str) -> bytes:
    import matplotlib.pyplot as plt

    labels = [f"{r['workload']} [{r['unit']}]" for r in rows]
    fig, ax = plt.subplots(figsize=(10, 0.42 * len(rows) + 1.4), dpi=100)
    ys = range(len(rows))
    ax.barh([y - 0.2 for y in ys], [r["flowplex"] for r in rows], height=0.4, label="flowplex", color="#3f51b5")
    ax.barh([y + 0.2 for y in ys], [r["lm-lmflow"] for r in rows], height=0.4, label="lm-lmflow", color="#bdbdbd")
    ax.set_yticks(list(ys), labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_title(f"flowplex and lm-lmflow, per workload: {what}, {subtitle}", fontsize=10)
    ax.legend(loc="lower right", fontsize=8)
    ax.grid(axis="x", alpha=0.3)
    return _png(fig)


def _advantage(rows: list[dict[str, Any]]) -> bytes:
    """How many times better flowplex is per row (rates: its ratio; costs: the inverse)."""
    import matplotlib.pyplot as plt

    factors = [r["ratio"] if r["higher_is_better"] else (1 / r["ratio"] if r["ratio"] else math.inf) for r in rows]
    fig, ax = plt.subplots(figsize=(10, 0.32 * len(rows) + 1.4), dpi=100)
    colours = ["#3f51b5" if f >= 1 else "#e57373" for f in factors]
    ax.barh(range(len(rows)), factors, color=colours)
    ax.set_yticks(range(len(rows)), [r["workload"] for r in rows], fontsize=8)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.set_title("flowplex's advantage per workload (times better; right of the line: flowplex wins)", fontsize=10)
    ax.grid(axis="x", alpha=0.3)
    return _png(fig)


def _png(fig: Any) -> bytes:
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    height = fig.get_figheight()  # inches: fixed margins, room for the workload names (tight_layout costs a second)
    fig.subplots_adjust(left=0.42, right=0.98, top=1 - 0.4 / height, bottom=0.45 / height)
    fig.savefig(buf, format="png", metadata={"Software": None})  # no version stamp: same bytes each build
    plt.close(fig)
    return buf.getvalue()
