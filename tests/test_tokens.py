"""Token counting stays bounded: long texts in pieces, nothing encoded past the cap."""

from __future__ import annotations

from typing import Any

from gateway.tokens import EXACT_CHARS, PIECE_CHARS, count_message, count_text, get_encoding

O200K = get_encoding("o200k_base")


class CountingEncoding:
    """o200k_base, tallying how many characters were handed to encode."""

    def __init__(self) -> None:
        self.encoded = 0

    def encode(self, text: str, *, disallowed_special: Any = ()) -> list[int]:
        self.encoded += len(text)
        return O200K.encode(text, disallowed_special=disallowed_special)


def test_texts_up_to_the_exact_limit_are_counted_exactly() -> None:
    text = "The gateway routes every request. " * (EXACT_CHARS // 34)
    assert len(text) <= EXACT_CHARS
    assert count_text(O200K, text) == len(O200K.encode(text))


def test_a_long_text_is_counted_in_pieces_within_a_token_each() -> None:
    text = "Routes, weights and fallbacks; 42 naïve tokens. " * 8000
    exact = len(O200K.encode(text))
    pieces = -(-len(text) // PIECE_CHARS)
    assert exact <= count_text(O200K, text) <= exact + pieces


def test_past_the_cap_nothing_more_is_encoded() -> None:
    """A 10 MB message and a window of 1,000 tokens: a few pieces are encoded, not 10 MB."""
    counting = CountingEncoding()
    tokens = count_text(counting, "a" * 10_000_000, cap=1000)  # type: ignore[arg-type]
    assert tokens > 1000
    assert counting.encoded <= 2 * PIECE_CHARS
    counting.encoded = 0
    message = {"role": "user", "content": [{"type": "text", "text": "b " * 5_000_000}]}
    assert count_message(message, counting, cap=1000) > 1000  # type: ignore[arg-type]
    assert counting.encoded <= 2 * PIECE_CHARS + 10


def test_a_message_of_many_parts_stops_counting_past_the_cap() -> None:
    counting = CountingEncoding()
    message = {"role": "user", "content": [{"type": "text", "text": "word " * 12_000} for _ in range(150)]}
    assert count_message(message, counting, cap=1000) > 1000  # type: ignore[arg-type]
    assert counting.encoded <= 2 * 60_000  # a part or two, not 150 of them
