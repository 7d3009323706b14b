"""gateway.tokens: counts as the OpenAI cookbook makes them, bounded (long texts in pieces, nothing past the cap), offline."""

from __future__ import annotations

import logging
import os
from typing import Any

import pytest

from gateway.tokens import (
    EXACT_CHARS,
    PIECE_CHARS,
    bundled_tokenizer_dir,
    count_message,
    count_messages,
    count_text,
    encoding_name,
    get_encoding,
    text_size,
    use_offline_encodings,
)

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


COOKBOOK = [
    {"role": "system", "content": "You are a helpful, pattern-following assistant that translates corporate jargon into plain English."},
    {"role": "system", "name": "example_user", "content": "New synergies will help drive top-line growth."},
    {"role": "system", "name": "example_assistant", "content": "Things working well together will increase revenue."},
    {"role": "system", "name": "example_user", "content": "Let's circle back when we have more bandwidth to touch base on opportunities for increased leverage."},
    {"role": "system", "name": "example_assistant", "content": "Let's talk later when we're less busy about how to do better."},
    {"role": "user", "content": "This late pivot means we don't have time to boil the ocean for the client deliverable."},
]


@pytest.mark.parametrize(("model", "expected"), [("gpt-3.5-turbo", 129), ("gpt-4", 129), ("gpt-4o", 124), ("gpt-4o-mini", 124)])
def test_token_counts_match_the_cookbook(model: str, expected: int) -> None:
    assert count_messages(COOKBOOK, get_encoding(encoding_name(model))) == expected


@pytest.mark.parametrize(
    ("model", "encoding"),
    [("gpt-4o", "o200k_base"), ("gpt-4.1-mini", "o200k_base"), ("gpt-5", "o200k_base"), ("o3-mini", "o200k_base"),
     ("o1", "o200k_base"), ("gpt-4", "cl100k_base"), ("gpt-4-turbo", "cl100k_base"), ("gpt-3.5-turbo", "cl100k_base"),
     ("llama-3-70b", "o200k_base"), (None, "o200k_base"), ("openai/gpt-4", "cl100k_base")],
)
def test_encoding_by_model(model: str | None, encoding: str) -> None:
    assert encoding_name(model) == encoding


def test_tool_calls_are_counted() -> None:
    plain = {"role": "assistant", "content": ""}
    with_call = {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]}
    assert count_message(with_call, O200K) - count_message(plain, O200K) == len(O200K.encode("get_weather")) + len(O200K.encode('{"city": "Paris"}'))


def test_the_size_of_a_message_is_the_characters_its_count_would_encode() -> None:
    assert text_size({"role": "user", "content": "hello"}) == 9
    parts = {"role": "user", "content": [{"type": "text", "text": "abc"}, {"type": "image_url", "image_url": {"url": "x" * 99}}]}
    assert text_size(parts) == len("user") + len("abc")
    called = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}},
    ]}  # fmt: skip
    assert text_size(called) == len("assistant") + len("get_weather") + len('{"city": "Paris"}')


def test_encodings_come_from_the_bundled_folder_unless_the_user_chose_one(monkeypatch: pytest.MonkeyPatch) -> None:
    bundled = bundled_tokenizer_dir()
    assert bundled is not None and any(bundled.iterdir())  # litellm ships them
    monkeypatch.delenv("TIKTOKEN_CACHE_DIR", raising=False)
    use_offline_encodings()
    assert os.environ["TIKTOKEN_CACHE_DIR"] == str(bundled)
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", "/srv/my-encodings")
    use_offline_encodings()
    assert os.environ["TIKTOKEN_CACHE_DIR"] == "/srv/my-encodings"


def test_an_encoding_that_cannot_be_loaded_counts_four_characters_a_token(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="gateway.memory"):
        approximate = get_encoding("no_such_encoding_base")
    assert len(approximate.encode("a" * 9)) == 3 and count_text(approximate, "") == 0
    [warning] = [record.getMessage() for record in caplog.records]
    assert warning.startswith("tiktoken encoding no_such_encoding_base unavailable (")
    assert warning.endswith("; counting ~4 characters a token")
