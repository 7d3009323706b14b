"""A streamed reply assembled for memory: what it holds is proportional to the reply's size.

Measured with tracemalloc (every allocation Python makes, deterministic), never with a clock.
Each chunk is parsed from its bytes as the relay parses it, so what a chunk leaves behind counts.
"""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable, Iterator
from typing import Any

import orjson
import pytest

from gateway.memory.replies import CALL_BYTES, ReplyAssembler, ReplyTooLarge

LIMIT = 32 * 1024 * 1024


def content(text: str) -> bytes:
    return orjson.dumps(
        {"id": "c", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": text}}]}
    )


def arguments(text: str, index: int) -> bytes:
    fragment = {"index": index, "function": {"arguments": text}}
    return orjson.dumps({"choices": [{"index": 0, "delta": {"tool_calls": [fragment]}}]})


def opening(index: int, name: str) -> bytes:
    fragment = {
        "index": index,
        "id": f"call_{index}",
        "type": "function",
        "function": {"name": name, "arguments": ""},
    }
    return orjson.dumps({"choices": [{"index": 0, "delta": {"role": "assistant", "tool_calls": [fragment]}}]})


FINISH = orjson.dumps({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})


def assembled_peak(chunks: Callable[[], Iterator[bytes]], *, max_bytes: int = LIMIT) -> tuple[int, Any]:
    """(the most memory traced while the chunks are fed and the message made, the message or the error raised)."""
    tracemalloc.start()
    try:
        assembler = ReplyAssembler(max_bytes=max_bytes)
        tracemalloc.reset_peak()
        before = tracemalloc.get_traced_memory()[0]
        for raw in chunks():
            assembler.feed(orjson.loads(raw))
        assembler.feed(orjson.loads(FINISH))
        try:
            outcome: Any = assembler.message()
        except ReplyTooLarge as exc:
            outcome = exc
        return tracemalloc.get_traced_memory()[1] - before, outcome
    finally:
        tracemalloc.stop()


DELTAS = 400_000  # of two characters: 800 kB of reply


def test_content_of_tiny_deltas_is_held_in_memory_proportional_to_its_size() -> None:
    piece = content("ab")
    peak, message = assembled_peak(lambda: (piece for _ in range(DELTAS)))
    size = 2 * DELTAS
    assert message == {"role": "assistant", "content": "ab" * DELTAS}
    assert peak <= 3 * size, f"{peak / size:.1f} bytes held a byte of reply"


def test_non_ascii_content_is_held_in_memory_proportional_to_its_utf8_size() -> None:
    piece = content("日本")  # 6 bytes of UTF-8, 2 characters of 2 bytes in a Python string
    peak, message = assembled_peak(lambda: (piece for _ in range(DELTAS)))
    assert message["content"] == "日本" * DELTAS
    size = 6 * DELTAS
    assert peak <= 3 * size, f"{peak / size:.1f} bytes held a byte of reply"


def test_tool_call_arguments_of_tiny_deltas_are_held_in_memory_proportional_to_their_size() -> None:
    """Two calls whose argument deltas alternate (a `+=` on a string held in a dict copied it whole each time)."""
    pieces = [arguments("{a", 0), arguments("[b", 1)]

    def chunks() -> Iterator[bytes]:
        yield opening(0, "lookup")
        yield opening(1, "fetch")
        for i in range(DELTAS):
            yield pieces[i % 2]

    peak, message = assembled_peak(chunks)
    calls = message["tool_calls"]
    assert [call["function"]["name"] for call in calls] == ["lookup", "fetch"]
    assert calls[0]["function"]["arguments"] == "{a" * (DELTAS // 2)
    assert calls[1]["function"]["arguments"] == "[b" * (DELTAS // 2)
    size = 2 * DELTAS
    assert peak <= 3 * size, f"{peak / size:.1f} bytes held a byte of reply"


def test_content_and_tool_calls_in_one_reply_keep_their_order_and_text() -> None:
    def chunks() -> Iterator[bytes]:
        for i in range(3000):
            yield content(str(i % 10))
        yield opening(1, "second")
        yield opening(0, "first")
        for i in range(3000):
            yield arguments("x", i % 2)

    _, message = assembled_peak(chunks)
    assert message["content"] == "0123456789" * 300
    assert [(c["id"], c["function"]["name"], c["function"]["arguments"]) for c in message["tool_calls"]] == [
        ("call_0", "first", "x" * 1500),
        ("call_1", "second", "x" * 1500),
    ]


@pytest.mark.parametrize("numbered", [True, False], ids=["new-index", "no-index"])
def test_calls_opened_without_text_count_against_the_limit(numbered: bool) -> None:
    """An upstream opening call after call, each with nothing in it: the limit is reached, the memory stays bounded."""
    limit = 256 * 1024
    calls = 100_000
    assert calls * CALL_BYTES > limit

    def chunks() -> Iterator[bytes]:
        for i in range(calls):
            fragment = {"index": i} if numbered else {"type": "function"}
            yield orjson.dumps({"choices": [{"index": 0, "delta": {"tool_calls": [fragment]}}]})

    peak, outcome = assembled_peak(chunks, max_bytes=limit)
    assert isinstance(outcome, ReplyTooLarge)
    assert peak <= 3 * limit, f"{peak / limit:.1f} bytes held a byte of the limit"


def test_a_reply_within_the_limit_is_kept_and_one_past_it_refused() -> None:
    limit = 1000
    _, kept = assembled_peak(lambda: (content("a" * 10) for _ in range(100)), max_bytes=limit)
    assert kept["content"] == "a" * 1000
    _, refused = assembled_peak(lambda: (content("a" * 10) for _ in range(101)), max_bytes=limit)
    assert isinstance(refused, ReplyTooLarge)
    assert "server.maxResponseBytes (1000 bytes)" in str(refused)


def test_a_streamed_reply_is_measured_in_utf8_bytes() -> None:
    assembler = ReplyAssembler(max_bytes=100)
    assembler.feed({"choices": [{"index": 0, "delta": {"content": "語" * 40}, "finish_reason": "stop"}]})
    with pytest.raises(ReplyTooLarge):  # 40 characters, 120 bytes
        assembler.message()
