"""Did-you-mean suggestions for misspelt names.

lm-flow's rule, kept so that the same typo gets the same hint: the edit distance must be at most 1
when both strings are at most 4 characters long, else at most 2; ties go to the alphabetically
first candidate.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["did_you_mean", "edit_distance", "suggest"]


def edit_distance(a: str, b: str) -> int:
    """The Levenshtein distance between ``a`` and ``b`` (insert, delete, substitute; cost 1 each)."""
    if len(a) < len(b):
        a, b = b, a
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, start=1):
        current = [i]
        for j, cb in enumerate(b, start=1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb)))
        previous = current
    return previous[-1]


def _max_distance(a: str, b: str) -> int:
    return 1 if len(a) <= 4 and len(b) <= 4 else 2


def suggest(word: str, candidates: Iterable[str]) -> str | None:
    """The candidate closest to ``word`` within lm-flow's distance limit, or ``None``.

    ``word`` itself is never suggested (it is what was rejected).

    >>> suggest("kernal", ["kernel", "name", "type"])
    'kernel'
    >>> suggest("whatever", ["sync", "batch"]) is None
    True
    """
    best: tuple[int, str] | None = None
    for candidate in candidates:
        if candidate == word or abs(len(candidate) - len(word)) > 2:
            continue
        distance = edit_distance(word, candidate)
        if distance > _max_distance(word, candidate):
            continue
        key = (distance, candidate)
        if best is None or key < best:
            best = key
    return None if best is None else best[1]


def did_you_mean(word: str, candidates: Iterable[str]) -> str:
    """``"; did you mean `x`?"`` for the best suggestion, or ``""`` when there is none."""
    hint = suggest(word, candidates)
    return "" if hint is None else f"; did you mean `{hint}`?"
