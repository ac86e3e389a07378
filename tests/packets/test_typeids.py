"""Type ids: FNV-1a pins, built-in names, the descriptor registry and validation."""

from __future__ import annotations

import threading

import pytest

from flowplex.packets import (
    TypeId,
    _typeids,
    register_type_descriptor,
    type_align,
    type_id,
    type_name,
    type_size,
    validate_type_id,
)


def test_type_id_pins_match_lm_flow() -> None:
    assert type_id("lmflow.test.Stable") == 0xBFB531B283179309
    assert type_id("lmflow.test.Unknown") == 2386862953124328900
    # C++ default ids hash typeid(T).name(): Itanium "i", MSVC "int".
    assert type_id("i") == 12638195996648667684
    assert type_id("int") == 3143511548502526014
    # UTF-8 bytes are hashed (checked side by side against lmflow 0.3.3).
    assert type_id("ünïcode.名前") == 11386624239926333122


def test_type_id_rejects_empty_and_non_str() -> None:
    with pytest.raises(ValueError, match="must not be empty"):
        type_id("")
    with pytest.raises(TypeError, match="must be a str, got bytes"):
        type_id(b"x")  # type: ignore[arg-type]


def test_small_hashes_are_shifted_out_of_the_builtin_range(monkeypatch: pytest.MonkeyPatch) -> None:
    # Choose an offset basis for which FNV-1a("a") == 5, to exercise the "< 16 -> + 16" rule.
    inverse = pow(_typeids._FNV_PRIME, -1, 2**64)
    monkeypatch.setattr(_typeids, "_FNV_OFFSET_BASIS", ((5 * inverse) % 2**64) ^ ord("a"))
    assert type_id("a") == 21


def test_type_id_enum_values() -> None:
    assert [int(m) for m in TypeId] == list(range(8))
    assert int(TypeId.BUFFER) == 6
    assert TypeId.HOST_OBJECT.name == "HOST_OBJECT"


@pytest.mark.parametrize(
    ("tid", "name"),
    [
        (0, "any/undeclared"),
        (1, "Bytes"),
        (2, "I64"),
        (3, "F64"),
        (4, "Bool"),
        (5, "Str"),
        (6, "Buffer"),
        (7, "HostObject"),
        (9, "type#9"),
        (123456789, "type#123456789"),
    ],
)
def test_type_name(tid: int, name: str) -> None:
    assert type_name(tid) == name


def test_register_then_query() -> None:
    name = "flowplex.test.Registered"
    tid = type_id(name)
    assert type_size(tid) == 0
    assert type_align(tid) == 0
    register_type_descriptor(tid, name, 24, 8)
    assert type_name(tid) == name
    assert type_size(tid) == 24
    assert type_align(tid) == 8
    validate_type_id(tid)


def test_identical_repeat_is_a_no_op() -> None:
    name = "flowplex.test.Repeat"
    register_type_descriptor(type_id(name), name, 4, 4)
    register_type_descriptor(type_id(name), name, 4, 4)
    assert type_size(type_id(name)) == 4


@pytest.mark.parametrize(("size", "align"), [(8, 4), (4, 8)])
def test_conflicting_registration_is_rejected(size: int, align: int) -> None:
    name = f"flowplex.test.Conflict{size}{align}"
    register_type_descriptor(type_id(name), name, 4, 4)
    with pytest.raises(
        ValueError, match=r"already registered as \(name='flowplex\.test\.Conflict.*size=4, align=4\)"
    ):
        register_type_descriptor(type_id(name), name, size, align)
    assert (type_size(type_id(name)), type_align(type_id(name))) == (4, 4)


@pytest.mark.parametrize(
    ("args", "error", "pattern"),
    [
        ((5, "x", 1, 1), ValueError, r"type id 5 is built-in or reserved"),
        ((15, "x", 1, 1), ValueError, r"type id 15 is built-in or reserved"),
        ((type_id("a.B"), "a.C", 1, 1), ValueError, r"does not match type_id\('a\.C'\)"),
        ((type_id("a.B"), "", 1, 1), ValueError, r"name must be a non-empty str"),
        ((type_id("a.B"), "a.B", 0, 1), ValueError, r"size must be an int > 0, got 0"),
        ((type_id("a.B"), "a.B", 4, 3), ValueError, r"align must be a power of two, got 3"),
        ((type_id("a.B"), "a.B", 4, 0), ValueError, r"align must be a power of two, got 0"),
        ((-1, "a.B", 4, 4), ValueError, r"must be in 0\.\.2\*\*64-1, got -1"),
        (("7", "a.B", 4, 4), TypeError, r"type_id must be an int, got str"),
    ],
)
def test_register_rejects_bad_arguments(
    args: tuple[object, ...], error: type[Exception], pattern: str
) -> None:
    with pytest.raises(error, match=pattern):
        register_type_descriptor(*args)  # type: ignore[arg-type]


def test_registration_is_thread_safe_for_repeats() -> None:
    name = "flowplex.test.Concurrent"
    errors: list[BaseException] = []
    barrier = threading.Barrier(8)

    def worker() -> None:
        barrier.wait()
        try:
            register_type_descriptor(type_id(name), name, 16, 8)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert type_size(type_id(name)) == 16


def test_concurrent_conflicting_registrations_have_exactly_one_winner() -> None:
    name = "flowplex.test.Race"
    barrier = threading.Barrier(8)
    outcomes: list[int | None] = []

    def worker(size: int) -> None:
        barrier.wait()
        try:
            register_type_descriptor(type_id(name), name, size, 8)
            outcomes.append(size)
        except ValueError:
            outcomes.append(None)

    threads = [threading.Thread(target=worker, args=(size,)) for size in range(1, 9)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    winners = [size for size in outcomes if size is not None]
    assert len(winners) == 1
    assert type_size(type_id(name)) == winners[0]


@pytest.mark.parametrize("tid", range(7))
def test_validate_accepts_builtins(tid: int) -> None:
    validate_type_id(tid)


@pytest.mark.parametrize(
    ("tid", "error", "pattern"),
    [
        (
            7,
            ValueError,
            r"type id 7 \(HostObject\) is not supported: .*send a Buffer \(numpy array\) or a Str",
        ),
        (8, ValueError, r"type id 8 is reserved for future built-in types"),
        (15, ValueError, r"type id 15 is reserved"),
        (
            type_id("flowplex.test.NeverRegistered"),
            ValueError,
            r"is not registered; call register_type_descriptor",
        ),
        (-3, ValueError, r"type id must be in 0\.\.2\*\*64-1, got -3"),
        (2**64, ValueError, r"type id must be in 0\.\.2\*\*64-1"),
        (1.0, TypeError, r"type id must be an int, got float"),
        (True, TypeError, r"type id must be an int, got bool"),
    ],
)
def test_validate_rejects(tid: object, error: type[Exception], pattern: str) -> None:
    with pytest.raises(error, match=pattern):
        validate_type_id(tid)  # type: ignore[arg-type]
