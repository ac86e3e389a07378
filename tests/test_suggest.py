"""Did-you-mean suggestions: lm-flow's distance limits and tie-break."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from flowplex._suggest import did_you_mean, edit_distance, suggest


@pytest.mark.parametrize(
    ("word", "candidates", "expected"),
    [
        ("kernal", ["kernel", "name", "type"], "kernel"),
        ("synk", ["sync", "immediate", "fixed_size", "sync_set", "batch"], "sync"),
        ("cpx", ["cpu", "gpu0"], "cpu"),
        ("abd", ["abc"], "abc"),
        ("Prep", ["Prepp"], "Prepp"),
        ("ThreadPolExecutor", ["ThreadPoolExecutor", "DelegatingExecutor"], "ThreadPoolExecutor"),
        ("whatever", ["sync", "batch"], None),
        ("zzz", ["abc"], None),
        ("x", [], None),
    ],
)
def test_examples(word: str, candidates: list[str], expected: str | None) -> None:
    assert suggest(word, candidates) == expected


def test_short_strings_allow_one_edit_only() -> None:
    assert suggest("abcd", ["abxy"]) is None  # distance 2, both <= 4 chars
    assert suggest("abcd", ["abxd"]) == "abxd"


def test_longer_strings_allow_two_edits() -> None:
    assert suggest("abcde", ["abxye"]) == "abxye"
    assert suggest("abcde", ["axyze"]) is None  # distance 3


def test_one_short_one_long_uses_the_long_limit() -> None:
    assert suggest("abcd", ["abcdef"]) == "abcdef"


def test_ties_go_to_the_alphabetically_first_candidate() -> None:
    assert suggest("ab", ["ac", "aa", "ad"]) == "aa"


def test_the_rejected_word_itself_is_never_suggested() -> None:
    assert suggest("sync", ["sync"]) is None
    assert suggest("sync", ["sync", "synk"]) == "synk"


def test_did_you_mean_formats_the_hint() -> None:
    assert did_you_mean("kernal", ["kernel"]) == "; did you mean `kernel`?"
    assert did_you_mean("zzzzzz", ["kernel"]) == ""


words = st.text(alphabet="abcde", max_size=8)


@given(words, words)
def test_edit_distance_is_symmetric_and_bounded(a: str, b: str) -> None:
    d = edit_distance(a, b)
    assert d == edit_distance(b, a)
    assert abs(len(a) - len(b)) <= d <= max(len(a), len(b))
    assert (d == 0) == (a == b)


@given(words, words, words)
def test_edit_distance_triangle_inequality(a: str, b: str, c: str) -> None:
    assert edit_distance(a, c) <= edit_distance(a, b) + edit_distance(b, c)


@given(words, words)
def test_suggestion_is_symmetric(a: str, b: str) -> None:
    assert (suggest(a, [b]) is None) == (suggest(b, [a]) is None)


@given(words, st.lists(words, max_size=6))
def test_suggestion_respects_the_limit_and_is_the_best(word: str, candidates: list[str]) -> None:
    hint = suggest(word, candidates)
    eligible = [
        c
        for c in candidates
        if c != word and edit_distance(word, c) <= (1 if len(word) <= 4 and len(c) <= 4 else 2)
    ]
    if not eligible:
        assert hint is None
        return
    assert hint == min(eligible, key=lambda c: (edit_distance(word, c), c))
