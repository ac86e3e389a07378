"""Interleaved best-of rounds, shared by the benchmarks that compare cases in one process run."""

from __future__ import annotations

from collections.abc import Callable


def interleaved(cases: dict[str, Callable[[], float]], repeats: int) -> dict[str, float]:
    """The fewest seconds each case took in one round, over ``repeats`` rounds after a warm-up.

    The cases take turns round by round (in a rotated order), so that a burst of load from
    elsewhere on the machine falls on all of them alike, and their ratios hold.
    """
    best = dict.fromkeys(cases, float("inf"))
    names = list(cases)
    for r in range(repeats + 1):
        for name in names[r % len(names):] + names[:r % len(names)]:
            dt = cases[name]()
            if r:
                best[name] = min(best[name], dt)
    return best
