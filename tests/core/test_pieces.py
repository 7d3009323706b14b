"""TextPieces: a text arriving in many small pieces comes out whole and in order."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from gateway.core.pieces import JOIN_EVERY, TextPieces


@given(st.text(max_size=5), st.lists(st.text(max_size=3), max_size=3 * JOIN_EVERY))
def test_the_text_is_the_start_then_every_piece_in_order(start: str, pieces: list[str]) -> None:
    text = TextPieces(start)
    for piece in pieces:
        text.add(piece)
    assert text.text() == start + "".join(pieces)
    assert text.text() == start + "".join(pieces)  # asking again changes nothing


def test_pieces_added_after_the_text_was_read_follow_it() -> None:
    text = TextPieces()
    for _ in range(JOIN_EVERY + 1):
        text.add("ab")
    assert text.text() == "ab" * (JOIN_EVERY + 1)
    text.add("\U0001f600")  # past U+FFFF: held as it is, not widened
    assert text.text() == "ab" * (JOIN_EVERY + 1) + "\U0001f600"


def test_an_empty_text_is_empty() -> None:
    assert TextPieces().text() == ""
    assert TextPieces("").text() == ""
