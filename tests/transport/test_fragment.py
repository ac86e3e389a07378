"""Where long messages are cut: never inside a UTF-8 code point or a short escape sequence."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from flowplex.transport._fragment import cut_points

ESCAPES = ["\x1b[0m", "\x1b[38;5;196m", "\x1b[2K", "\x1b]0;title\x07", "\x1b(B", "\x1b7"]
text_pieces = st.one_of(st.text(min_size=1, max_size=40), st.sampled_from(ESCAPES))


def chunks(data: bytes, limit: int) -> list[bytes]:
    out, start = [], 0
    for end in cut_points(data, limit):
        out.append(data[start:end])
        start = end
    return out


@given(st.binary(max_size=2000), st.integers(8, 300))
def test_fragments_are_nonempty_bounded_and_rejoin_exactly(data: bytes, limit: int) -> None:
    parts = chunks(data, limit)
    assert b"".join(parts) == data
    assert all(len(p) <= limit for p in parts)
    assert all(parts) or data == b""
    assert cut_points(data, limit)[-1] == len(data)


@given(st.lists(text_pieces, max_size=80), st.integers(16, 240))
def test_text_fragments_each_decode_and_keep_escapes_whole(pieces: list[str], limit: int) -> None:
    text = "".join(pieces)
    data = text.encode()
    parts = chunks(data, limit)
    for part in parts:
        part.decode()  # never a split code point
    cuts = set(cut_points(data, limit)[:-1])
    pos = 0
    for piece in pieces:
        n = len(piece.encode())
        if piece in ESCAPES:
            assert not any(pos < c < pos + n for c in cuts), (piece, pos, cuts)
        pos += n


def test_short_message_is_one_fragment() -> None:
    assert cut_points(b"x" * 224) == [224]
    assert cut_points(b"x" * 225) == [224, 225]
    assert cut_points(b"") == [0]


def test_four_byte_code_points_are_kept_whole() -> None:
    data = ("a" + "😀" * 100).encode()
    parts = chunks(data, 224)
    assert [len(p) for p in parts] == [221, 180]
    assert "".join(p.decode() for p in parts) == "a" + "😀" * 100


def test_invalid_utf8_still_fragments_at_the_limit() -> None:
    data = b"\x80" * 1000
    assert cut_points(data, 224) == [224, 448, 672, 896, 1000]
