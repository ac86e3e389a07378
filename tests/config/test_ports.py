"""Port declarations: ``name``, ``TAG:name``, ``TAG:index:name`` and automatic indices."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from flowplex.config._ports import PortDeclError, format_port_decl, parse_port_decl, port_specs
from flowplex.spec import PortSpec


@pytest.mark.parametrize(
    ("decl", "expected"),
    [
        ("frame", ("", None, "frame")),
        ("IMG:frame", ("IMG", None, "frame")),
        ("IMG:2:frame", ("IMG", 2, "frame")),
        (":frame", ("", None, "frame")),
        ("T:+1:x", ("T", 1, "x")),
        ("T:01:x", ("T", 1, "x")),
        (" T:x", (" T", None, "x")),
    ],
)
def test_parse(decl: str, expected: tuple[str, int | None, str]) -> None:
    assert parse_port_decl(decl) == expected


@pytest.mark.parametrize(
    ("decl", "message"),
    [
        (
            "a:1:b:c",
            (
                "port declaration `a:1:b:c` has an invalid number of segments (expected name / TAG:name "
                "/ TAG:index:name)"
            ),
        ),
        ("a:x:b", "port declaration `a:x:b`: index `x` is not a non-negative integer"),
        ("a:-1:b", "port declaration `a:-1:b`: index `-1` is not a non-negative integer"),
        ("T::b", "port declaration `T::b`: index `` is not a non-negative integer"),
        ("T: 1 :b", "port declaration `T: 1 :b`: index ` 1 ` is not a non-negative integer"),
        ("a:", "port declaration `a:` has an empty name"),
        ("", "port declaration `` has an empty name"),
    ],
)
def test_parse_errors(decl: str, message: str) -> None:
    with pytest.raises(PortDeclError) as info:
        parse_port_decl(decl)
    assert str(info.value) == message


def test_automatic_indices_count_automatic_ports_per_tag() -> None:
    assert port_specs(["T:1:a", "T:b"]) == (PortSpec("a", "T", 1), PortSpec("b", "T", 0))
    assert port_specs(["i", "T:0:j", "k"]) == (
        PortSpec("i", "", 0),
        PortSpec("j", "T", 0),
        PortSpec("k", "", 1),
    )


def test_rename_keeps_tags() -> None:
    assert port_specs(["X:0:a"], lambda n: f"d/{n}") == (PortSpec("d/a", "X", 0),)


def test_on_error_builds_the_exception() -> None:
    with pytest.raises(KeyError) as info:
        port_specs(["ok", "a:b:c:d"], None, lambda i, m: KeyError(i, m))
    assert info.value.args[0] == 1


segment = st.text(st.characters(blacklist_characters=":", blacklist_categories=("Cs",)), max_size=6)


@given(segment, st.none() | st.integers(min_value=0, max_value=10**6), segment.filter(bool))
def test_format_parse_round_trip(tag: str, index: int | None, name: str) -> None:
    assert parse_port_decl(format_port_decl(tag, index, name)) == (tag, index, name)


@given(st.lists(segment, min_size=1, max_size=5))
def test_parse_accepts_exactly_the_documented_shapes(parts: list[str]) -> None:
    decl = ":".join(parts)
    valid = (
        len(parts) <= 3
        and parts[-1] != ""
        and (
            len(parts) < 3
            or (
                parts[1].lstrip("+").isascii()
                and parts[1].lstrip("+").isdigit()
                and not parts[1].startswith("++")
            )
        )
    )
    try:
        tag, index, name = parse_port_decl(decl)
    except PortDeclError:
        assert not valid
    else:
        assert valid
        assert name == parts[-1]
        assert tag == (parts[0] if len(parts) > 1 else "")
        assert index == (int(parts[1]) if len(parts) == 3 else None)
