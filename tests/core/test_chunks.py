"""OpenAI stream chunks (gateway.core.chunks): one read out of an SSE event, a complete answer replayed as chunks."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from gateway.core.chunks import MalformedEvent, read_chunk, replay
from gateway.core.nesting import MAX_JSON_DEPTH
from gateway.core.sse import DONE, parse_event


def event(data: bytes, name: bytes | None = None) -> Any:
    """The event of one `data:` line, named `name` when given."""
    return parse_event((b"event: " + name + b"\n" if name else b"") + b"data: " + data)


def test_a_chunk_is_its_json_and_no_error() -> None:
    assert read_chunk(event(b'{"id": "c", "choices": []}')) == ({"id": "c", "choices": []}, None)


def test_done_and_events_without_data_are_nothing() -> None:
    assert read_chunk(event(DONE)) == (None, None)
    assert read_chunk(parse_event(b": a comment")) == (None, None)


@pytest.mark.parametrize(
    ("raw", "name", "error"),
    [
        (b'{"error": {"message": "overloaded", "type": "server_error"}}', None, {"message": "overloaded", "type": "server_error"}),
        (b'{"error": "overloaded"}', None, {"message": "overloaded"}),
        (b'{"message": "overloaded"}', b"error", {"message": "overloaded"}),
        (b'{"error": {"message": "overloaded"}}', b"error", {"message": "overloaded"}),
        (b'["overloaded"]', b"error", {"message": "['overloaded']"}),
        (b"overloaded, retry later", b"error", {"message": "overloaded, retry later"}),
    ],
)
def test_an_in_band_error_is_read_in_each_of_its_spellings(raw: bytes, name: bytes | None, error: dict[str, Any]) -> None:
    assert read_chunk(event(raw, name))[1] == error


def test_an_event_that_is_not_json_nor_an_error_is_malformed() -> None:
    with pytest.raises(MalformedEvent, match="not JSON"):
        read_chunk(event(b"{half"))


def test_an_event_nested_too_deep_is_malformed() -> None:
    deep = b'{"a": ' + b"[" * MAX_JSON_DEPTH + b"]" * MAX_JSON_DEPTH + b"}"
    with pytest.raises(MalformedEvent, match=f"deeper than {MAX_JSON_DEPTH}"):
        read_chunk(event(deep))


CHAT = {
    "id": "c1",
    "created": 7,
    "model": "m",
    "choices": [
        {
            "index": 0,
            "message": {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "t", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
            },
            "finish_reason": "tool_calls",
        }
    ],
    "usage": {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3},
}


def payloads(events: list[Any]) -> list[Any]:
    return [None if e.data == DONE else orjson.loads(e.data) for e in events]


def test_a_chat_completion_is_replayed_as_a_delta_a_finish_usage_and_done() -> None:
    events = replay(CHAT, endpoint="chat/completions", include_usage=True)
    assert events is not None
    delta, finish, usage, done = payloads(events)
    assert delta["object"] == "chat.completion.chunk" and (delta["id"], delta["created"], delta["model"]) == ("c1", 7, "m")
    assert delta["choices"] == [
        {
            "index": 0,
            "delta": {"role": "assistant", "tool_calls": [{**CHAT["choices"][0]["message"]["tool_calls"][0], "index": 0}]},
            "logprobs": None,
            "finish_reason": None,
        }
    ]
    assert finish["choices"] == [{"index": 0, "finish_reason": "tool_calls", "delta": {}}]
    assert usage["choices"] == [] and usage["usage"] == CHAT["usage"]
    assert done is None


def test_usage_is_replayed_only_when_asked() -> None:
    events = replay(CHAT, endpoint="chat/completions", include_usage=False)
    assert events is not None and len(events) == 3


def test_a_text_completion_is_replayed_with_its_text() -> None:
    answer = {"id": "t1", "choices": [{"index": 0, "text": "hello", "logprobs": None}]}
    events = replay(answer, endpoint="completions", include_usage=True)
    assert events is not None
    text, finish, done = payloads(events)
    assert text["object"] == "text_completion" and text["choices"][0]["text"] == "hello"
    assert finish["choices"] == [{"index": 0, "finish_reason": "stop", "text": ""}]
    assert done is None


@pytest.mark.parametrize(
    "answer",
    [
        None,
        {"choices": []},
        {"choices": ["x"]},
        {"choices": [{"message": "hi"}]},
        {"object": "list", "data": []},
    ],
)
def test_what_is_not_a_complete_answer_is_not_replayed(answer: Any) -> None:
    assert replay(answer, endpoint="chat/completions", include_usage=True) is None


def test_a_text_answer_without_text_is_not_replayed() -> None:
    assert replay({"choices": [{"index": 0}]}, endpoint="completions", include_usage=False) is None
